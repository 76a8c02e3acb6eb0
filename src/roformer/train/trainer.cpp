// The training loop (see trainer.h) as a Trainer of named phases: check_inputs, setup_device,
// build, restore, open_run_dir, then per step: step, stop_on_nonfinite, log_step, evaluate,
// checkpoint. Everything a step consumes is a pure function of the step number (batches,
// masks) or restored from the checkpoint (weights, AdamW moments, RNG), so a resumed run is
// bitwise identical to an uninterrupted one.
#include "roformer/train/trainer.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>
#include <thread>

#include "roformer/common/build_info.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/large_block_cache.h"
#include "roformer/common/log.h"
#include "roformer/common/progress.h"
#include "roformer/common/strings.h"
#include "roformer/data/batches.h"
#include "roformer/data/counter_rng.h"
#include "roformer/data/prefetcher.h"
#include "roformer/data/task_batches.h"
#include "roformer/distributed/process_group.h"
#include "roformer/distributed/reducer.h"
#include "roformer/eval/evaluate.h"
#include "roformer/io/checkpoint.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/run/device_setup.h"
#include "roformer/run/metrics.h"
#include "roformer/run/mfu.h"
#include "roformer/run/run_directory.h"
#include "roformer/run/run_lifecycle.h"
#include "roformer/run/signals.h"
#include "roformer/runtime/device.h"
#include "roformer/runtime/memory_estimate.h"
#include "roformer/train/cuda_graph_step.h"
#include "roformer/train/init_from.h"
#include "roformer/train/lr_schedule.h"
#include "roformer/train/profiler.h"
#include "roformer/train/step.h"

namespace roformer::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Sums an evaluation's counts over ranks (each rank scored its own windows).
void reduce_eval(dist::Communicator& comm, const torch::Device& device, eval::EvalResult& r) {
  std::vector<double> v{r.loss_sum, static_cast<double>(r.tokens), static_cast<double>(r.correct),
                        static_cast<double>(r.sequences), static_cast<double>(r.exact)};
  v.insert(v.end(), r.bucket_loss_sum.begin(), r.bucket_loss_sum.end());
  for (int64_t n : r.bucket_tokens) v.push_back(static_cast<double>(n));
  torch::Tensor t = torch::tensor(v, torch::kFloat64).to(device);
  comm.allreduce_sum_now(t);
  t = t.cpu();
  const auto* d = t.data_ptr<double>();
  r.loss_sum = d[0];
  r.tokens = static_cast<int64_t>(d[1]);
  r.correct = static_cast<int64_t>(d[2]);
  r.sequences = static_cast<int64_t>(d[3]);
  r.exact = static_cast<int64_t>(d[4]);
  const size_t nb = r.bucket_loss_sum.size();
  for (size_t i = 0; i < nb; ++i) r.bucket_loss_sum[i] = d[5 + i];
  for (size_t i = 0; i < nb; ++i) r.bucket_tokens[i] = static_cast<int64_t>(d[5 + nb + i]);
}

// The CUDA-graph step when train.cuda_graphs allows it (auto: on for a single-process CUDA
// run), else nullptr (eager steps); a requested graph that cannot be used is logged with why.
std::unique_ptr<GraphedStep> graphed_step_for(const config::Config& cfg, model::EncoderModel& model,
                                              FusedAdamW& optimizer, const torch::Device& device, bool autocast,
                                              bool distributed, bool uncapturable) {
  const config::TrainConfig& t = cfg.train;
  const bool asked = t.cuda_graphs == config::CudaGraphs::on;
  const bool task_run = cfg.data.task.name != config::TaskKind::none;
  if (t.cuda_graphs == config::CudaGraphs::off || (!asked && !device.is_cuda())) return nullptr;
  std::string why;
  std::unique_ptr<GraphedStep> step;
  const char* refusal = config::cuda_graph_refusal(cfg);
  if (distributed) {
    why = "data parallel: the gradient reducer's collectives run outside a graph";
  } else if (refusal != nullptr) {
    why = refusal;
  } else {
    GraphStepOptions o;
    o.grad_accum = t.grad_accum;
    o.grad_clip = t.grad_clip;
    o.autocast = autocast;
    o.uncapturable = uncapturable;
    o.capacity = scored_capacity(t.batch_size / t.grad_accum * cfg.data.seq_len,
                                 cfg.model.objective == config::Objective::mlm && !task_run, cfg.data.mask_prob);
    step = make_graphed_step(model, optimizer, device, o, &why);
  }
  if (step) {
    log::info("CUDA graphs: the whole step is captured once and replayed (train.cuda_graphs=off for eager steps)");
  } else if (asked) {
    log::warn("train.cuda_graphs=on but the step runs eagerly: ", why);
  } else {
    log::info("CUDA graphs off (", why, "); eager steps");
  }
  return step;
}

class Trainer {
 public:
  Trainer(const config::LoadedConfig& loaded, const TrainOptions& opts)
      : cfg_(loaded.config), t_(cfg_.train), opts_(opts), env_(opts.env), life_(cfg_, env_, opts.run_dir, "training") {}
  TrainResult run();

 private:
  void check_inputs();
  void check_task();
  void build_data();
  void set_packing(const data::TokenStore& store);
  void setup_device();
  void build();
  void restore();
  run::StepResult step(const data::Batch& batch, double lr);
  void log_step(const run::StepResult& sr, double lr);
  void evaluate(int64_t step);
  bool learned_now(int64_t step);
  void checkpoint();
  TrainResult finish(int exit_code);

  config::Config cfg_;  // a copy: a resume fills in train.init_from from the checkpoint
  const config::TrainConfig& t_;
  const TrainOptions& opts_;
  const dist::DistEnv& env_;
  run::RunLifecycle life_;
  TrainResult result_;
  int64_t local_batch_ = 0;
  data::DatasetMeta meta_;
  InitSource init_;  // train.init_from on a fresh start: the checkpoint whose weights begin the run
  // The checkpoint the weights came from, or the Hugging Face folder converted into it (the same
  // on every rank, unlike each rank's converted copy).
  std::string init_label() const { return opts_.init_weights.empty() ? init_.dir : t_.init_from; }
  torch::Device device_{torch::kCPU};  // life_'s, once set up
  bool autocast_ = false;
  dist::ProcessGroup* group_ = nullptr;  // life_'s, with several ranks
  dist::Communicator* comm_ = nullptr;
  std::unique_ptr<data::TrainBatcher> batcher_;      // the corpus, or
  std::unique_ptr<data::TaskBatcher> task_batcher_;  // a synthetic task (data.task)
  std::unique_ptr<data::EvalWindows> valid_;
  std::unique_ptr<data::TaskEvalSet> task_valid_;
  std::shared_ptr<const data::TaskGenerator> task_;
  std::vector<int64_t> train_lengths_;  // the task's training lengths, drawn uniformly (the longest validates)
  model::EncoderModel model_{nullptr};
  std::unique_ptr<FusedAdamW> optimizer_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  DataParallel dp_;
  std::unique_ptr<GraphedStep> graphed_;
  std::unique_ptr<Progress> progress_;  // rank 0 on a terminal
  int64_t first_step_ = 0;
  double last_exact_match_ = 0;  // the last validation's (a task run)
  io::TrainerState state_;
  double flops_per_token_ = 0, peak_ = 0;
  // Timing of this session: throughput windows between log steps.
  Clock::time_point session_start_, window_start_;
  double elapsed_before_ = 0;
  int64_t window_tokens_ = 0;
};

// Inputs first: nothing is written until the config, data and resume target check out.
void Trainer::check_inputs() {
  const int world = env_.world_size;
  if (t_.batch_size % world != 0 || (t_.batch_size / world) % t_.grad_accum != 0)
    throw UserError("train.batch_size=" + std::to_string(t_.batch_size) +
                    " is the global batch: it must split evenly " + "over " + std::to_string(world) +
                    " rank(s) x train.grad_accum=" + std::to_string(t_.grad_accum) +
                    " micro-batches; choose a multiple of " + std::to_string(world * t_.grad_accum));
  local_batch_ = t_.batch_size / world;
  if (cfg_.data.task.name != config::TaskKind::none) {
    check_task();
  } else {
    if (cfg_.data.path.empty())
      throw UserError("data.path is empty: point it at a prepared dataset (roformer prepare-data) or set data.task");
    meta_ = data::read_dataset_meta(cfg_.data.path, /*verify_checksums=*/true);
    data::check_dataset_fits_model(meta_, cfg_.data.path, cfg_.model.vocab_size);
  }
  life_.claim_run_directory(opts_.resume);
  if (const std::string& resume = life_.resume_dir(); !resume.empty()) {
    const config::Config saved = io::checkpoint_config(resume);
    io::check_same_architecture(saved, cfg_, resume);
    // --init-from and --resume exclude each other, so config.yaml keeps what started the run.
    if (t_.init_from.empty()) cfg_.train.init_from = saved.train.init_from;
    if (!t_.init_from.empty()) log::info("train.init_from (", t_.init_from, ") started this run; resuming it instead");
    return;
  }
  if (t_.init_from.empty()) {
    if (t_.init_protocol == config::InitProtocol::drope)
      throw UserError("train.init_protocol drope starts from a RoPE checkpoint: name it with --init-from");
    return;
  }
  init_ = resolve_init_source(opts_.init_weights.empty() ? t_.init_from : opts_.init_weights);
  check_init_compatible(io::checkpoint_config(init_.dir), cfg_, init_);
}

// A synthetic task: its generator, and the shortest and longest training lengths and every evaluation
// length hold an example.
void Trainer::check_task() {
  const config::TaskConfig& task = cfg_.data.task;
  task_ = data::make_task_generator(task, cfg_.model.objective == config::Objective::causal_lm);
  train_lengths_ = data::training_lengths(*task_, task, cfg_.data.seq_len);
  const char* shortest = !task.sizes.empty()   ? "data.task.sizes"
                         : task.min_length > 0 ? "data.task.min_length"
                                               : "data.seq_len";
  data::check_task_fits(*task_, task, train_lengths_.front(), cfg_.model.vocab_size, shortest);
  data::check_task_fits(*task_, task, train_lengths_.back(), cfg_.model.vocab_size,
                        task.sizes.empty() ? "data.seq_len" : "data.task.sizes");
  // `roformer eval` of this run scores these: refused now, not then.
  const std::vector<int64_t> sizes = cfg_.eval.task_size_list();
  const bool by_size = !sizes.empty();
  for (const int64_t length : by_size ? data::size_lengths(*task_, task, sizes) : cfg_.eval.lengths)
    data::check_task_fits(*task_, task, length, cfg_.model.vocab_size,
                          by_size ? "eval.task_sizes length" : "eval.lengths entry");
}

// Threads, device, CUDA switches; data parallel rendezvous before anything is written.
void Trainer::setup_device() {
  life_.setup_device("local batch " + std::to_string(local_batch_) + " of global " + std::to_string(t_.batch_size));
  device_ = life_.device();
  autocast_ = life_.autocast();
  group_ = life_.group();
  if (group_) comm_ = &group_->comm();
  flops_per_token_ = run::training_flops_per_token(cfg_.model, cfg_.data);
  peak_ = run::peak_tflops(t_, device_, autocast_);
  log::info("model FLOPs per token ", shortest_double(std::round(flops_per_token_ / 1e3) / 1e3),
            " M (6N + attention); ",
            peak_ > 0 ? "peak " + shortest_double(peak_) + " TFLOP/s for MFU"
                      : "no peak known: set train.peak_tflops for MFU");
}

// The training batches and the validation set: the corpus's, or the task's.
void Trainer::build_data() {
  const int world = env_.world_size;
  const auto seed = static_cast<uint64_t>(t_.seed);
  const bool random_positions = t_.positions == config::PositionSampling::random;
  if (task_) {
    const config::TaskConfig& task = cfg_.data.task;
    task_batcher_ =
        std::make_unique<data::TaskBatcher>(task_, train_lengths_, local_batch_, env_.rank, seed, task.holdout);
    if (random_positions) task_batcher_->randomize_positions(t_.random_positions_max);
    task_batcher_->grow_reach_over(task.reach_steps);
    task_valid_ =
        std::make_unique<data::TaskEvalSet>(task_, train_lengths_.back(), task.eval_examples, local_batch_, env_.rank,
                                            world, static_cast<uint64_t>(cfg_.eval.mask_seed), task.holdout);
    const std::string sizes = task.sizes.empty() ? std::string()
                                                 : " (instance sizes " + std::to_string(task.sizes[0]) + ".." +
                                                       std::to_string(task.sizes[1]) + ")";
    log::info("task ", config::task_kind_names().name(task.name), ": lengths ", train_lengths_.front(),
              train_lengths_.size() > 1 ? ".." + std::to_string(train_lengths_.back()) : std::string(), sizes,
              ", vocabulary ", task_->vocab_size(), ", validation on ", task.eval_examples, " examples",
              task.holdout > 0 ? " held out from training (1 in " + std::to_string(task.holdout) + ")" : "",
              task.reach_steps > 0 ? "; needles within reach of the query growing over the first " +
                                         std::to_string(task.reach_steps) + " steps"
                                   : "");
  } else {
    const bool documents = cfg_.data.packing != config::DataPacking::stream;  // stream reads no document index
    auto train_store = std::make_shared<const data::TokenStore>(cfg_.data.path, meta_, "train", documents);
    auto valid_store = std::make_shared<const data::TokenStore>(cfg_.data.path, meta_, "valid", false);
    const data::MaskingRule rule = data::MaskingRule::from(meta_, cfg_.data);
    batcher_ = std::make_unique<data::TrainBatcher>(train_store, cfg_.model.objective, cfg_.data.seq_len, local_batch_,
                                                    env_.rank, world, seed, cfg_.data.sampling, rule);
    if (random_positions) batcher_->randomize_positions(t_.random_positions_max);
    set_packing(*train_store);
    valid_ = std::make_unique<data::EvalWindows>(valid_store, cfg_.model.objective, cfg_.data.seq_len,
                                                 config::EvalProtocol::chunks, 0,
                                                 t_.eval_batches * t_.batch_size * cfg_.data.seq_len, local_batch_,
                                                 env_.rank, world, static_cast<uint64_t>(cfg_.eval.mask_seed), rule);
  }
  if (random_positions)
    log::info("training positions: per sequence S sorted distinct draws from [0, ", t_.random_positions_max,
              "); evaluation uses 0..S-1");
}

// data.packing on the training batches: documents and none need the split's document starts.
void Trainer::set_packing(const data::TokenStore& store) {
  const config::DataPacking packing = cfg_.data.packing;
  if (packing == config::DataPacking::stream) return;
  const std::string name = packing == config::DataPacking::documents ? "documents" : "none";
  const std::vector<int64_t>& docs = store.document_starts();
  if (docs.empty())
    throw UserError("data.packing " + name + " needs the documents' boundaries, but " + cfg_.data.path +
                    " records none for its train split (it was prepared without --document-separator); prepare it "
                    "again with `roformer prepare-data --document-separator TEXT` (a line equal to TEXT ends a "
                    "document) or set data.packing=stream");
  batcher_->set_packing(packing, std::max<int64_t>(meta_.pad_id(), 0));
  const double mean = double(store.size()) / double(docs.size());
  log::info("data.packing ", name, ": ", docs.size(), " documents in the train split, ",
            shortest_double(std::round(mean * 10) / 10), " tokens each on average; ",
            packing == config::DataPacking::documents
                ? "each token attends inside its document and positions restart at its start"
                : "one document per row from its start, cut at " + std::to_string(cfg_.data.seq_len) + " and padded",
            "; validation stays on the token stream");
}

// Data, model and optimizer (no weight decay on biases and LayerNorm: the 1-D parameters).
void Trainer::build() {
  build_data();
  runtime::check_fits_device(
      runtime::estimate_memory(cfg_.model, local_batch_ / t_.grad_accum, cfg_.data.seq_len, true, autocast_,
                               config::checkpoint_every(t_)),
      device_, "training this model",
      "model.hidden_size, model.num_layers, model.ffn_size or model.vocab_size, or train.batch_size (raise "
      "train.grad_accum to keep the global batch) or data.seq_len");
  model_ = model::build_model(cfg_.model, static_cast<uint64_t>(t_.seed), config::checkpoint_every(t_));
  model_->to(device_);
  optimizer_ = make_optimizer(model_, t_);
  log::info("model: ", config::position_kind_names().name(cfg_.model.position.kind), ", ",
            model::count_parameters(*model_), " parameters");
}

// The checkpoint to continue from, then (data parallel) the same model on every rank.
void Trainer::restore() {
  torch::manual_seed(static_cast<uint64_t>(t_.seed) + 1);  // dropout stream, distinct from initialisation
  const std::string& resume = life_.resume_dir();
  if (!resume.empty()) {
    state_ = io::load_checkpoint(resume, *model_, *optimizer_, !opts_.faults.skip_rng_restore);
    log::info("resumed from ", resume, " at step ", state_.step);
  } else if (!init_.dir.empty()) {
    io::load_model_weights(init_.dir, *model_, weights_new_in_this_run(io::checkpoint_config(init_.dir), cfg_));
    log::info("initialised from ", init_label(), " (step ", init_.step,
              " of its run): its weights, a fresh optimizer, schedule and step count",
              t_.init_protocol == config::InitProtocol::drope ? "; DroPE: its position encoding dropped" : "");
  }
  if (!group_) return;
  // Same model and config everywhere (checked before any gradient collective), then rank 0's weights.
  group_->check_same_fingerprint(
      "model and config",
      dist::model_fingerprint(*model_, {"world_size " + std::to_string(env_.world_size), "resume " + resume,
                                        "init " + init_label(), config::dump_yaml(cfg_)}));
  dist::broadcast_module(*comm_, *model_);
  reducer_ = run::make_reducer(*model_, *comm_, cfg_.dist);
  dp_ = {reducer_.get(), comm_};
  log::info("gradient buckets: ", reducer_->buckets().size(), " (first ", cfg_.dist.first_bucket_mb, " MiB, then ",
            cfg_.dist.bucket_mb, " MiB)");
}

run::StepResult Trainer::step(const data::Batch& batch, double lr) {
  set_learning_rate(*optimizer_, lr);
  // Data parallel: each rank's dropout stream is a function of (seed, rank, step), so resumed
  // ranks draw what they would have drawn without a checkpoint RNG state per rank.
  if (group_)
    torch::manual_seed(data::hash_counters(static_cast<uint64_t>(t_.seed) + 1,
                                           {static_cast<uint64_t>(env_.rank), static_cast<uint64_t>(state_.step)}));
  dp_.stop_requested = run::stop_requested();
  const bool poison = state_.step == opts_.faults.nan_step;
  if (graphed_) return graphed_->run(batch, lr, poison);
  return train_step(model_, *optimizer_, batch, t_.grad_accum, t_.grad_clip, device_, autocast_, poison,
                    group_ ? &dp_ : nullptr);
}

void Trainer::log_step(const run::StepResult& sr, double lr) {
  run::StepRecord r;
  r.step = state_.step;
  r.steps = t_.steps;
  r.tokens = state_.tokens_seen;
  r.loss = sr.loss_value();  // waits for the step: the one sync of this window
  r.grad_norm = sr.grad_norm_value();
  r.lr = lr;
  const double window_s = seconds_since(window_start_);
  r.tokens_per_s = window_s > 0 ? static_cast<double>(window_tokens_) / window_s : 0;
  r.tflops = r.tokens_per_s * flops_per_token_ / 1e12;
  r.elapsed_s = elapsed_before_ + seconds_since(session_start_);
  if (peak_ > 0) r.mfu = r.tflops / peak_;
  if (device_.is_cuda()) r.peak_mem_gib = runtime::peak_memory_gib(device_);
  life_.metrics().write(r.to_json());
  if (progress_) {  // a terminal: the bar, and the line in the log file only
    log::debug(r.line());
    progress_->update(static_cast<double>(state_.step - first_step_),
                      "loss " + shortest_double(std::round(r.loss * 1e3) / 1e3));
  } else {
    log::info(r.line());
  }
  window_start_ = Clock::now();
  window_tokens_ = 0;
}

void Trainer::evaluate(int64_t step) {
  eval::EvalResult r =
      task_valid_ ? eval::evaluate(model_, *task_valid_, device_) : eval::evaluate(model_, *valid_, device_);
  if (comm_) reduce_eval(*comm_, device_, r);
  nlohmann::json record{{"type", "eval"},           {"step", step},      {"loss", r.loss()}, {"ppl", r.perplexity()},
                        {"accuracy", r.accuracy()}, {"tokens", r.tokens}};
  if (task_valid_) record["exact_match"] = r.exact_match();
  life_.metrics().write(record);
  last_exact_match_ = task_valid_ ? r.exact_match() : 0.0;
  log::info("eval step ", step, ": loss ", r.loss(), task_valid_ ? "" : ", ppl " + shortest_double(r.perplexity()),
            ", accuracy ", r.accuracy(),
            task_valid_ ? ", exact match " + shortest_double(r.exact_match()) + " of " + std::to_string(r.sequences)
                        : std::string());
  result_.valid_loss = r.loss();
}

// train.until_learned: whether the validation just run at `step` reached the threshold; if so the
// step is recorded (metrics and the next checkpoint) and the run ends there.
bool Trainer::learned_now(int64_t step) {
  if (!t_.until_learned || last_exact_match_ < t_.learned_exact_match) return false;
  state_.learned_step = step;
  life_.metrics().write(
      {{"type", "learned"}, {"step", step}, {"exact_match", last_exact_match_}, {"threshold", t_.learned_exact_match}});
  log::info("learned at step ", step, ": validation exact match ", shortest_double(last_exact_match_),
            " reached train.learned_exact_match ", shortest_double(t_.learned_exact_match));
  return true;
}

void Trainer::checkpoint() {
  state_.elapsed_s = elapsed_before_ + seconds_since(session_start_);
  life_.save_checkpoint(
      *model_, *optimizer_, state_,
      {opts_.faults.kill_in_checkpoint_step, opts_.faults.fail_checkpoint_step, opts_.faults.fail_checkpoint_file});
}

TrainResult Trainer::finish(int exit_code) {
  static_cast<run::RunEnd&>(result_) = life_.finish(exit_code, state_.step);
  return result_;
}

TrainResult Trainer::run() {
  check_inputs();
  setup_device();
  build();
  restore();
  life_.open_run_directory("", state_.step);  // every input has been read and checked: only now is it touched
  if (life_.rank0() && !init_.dir.empty())
    life_.metrics().write({{"type", "init"}, {"step", 0}, {"init_from", init_label()}, {"source_step", init_.step}});
  if (state_.step >= t_.steps) {
    log::info("the run is already complete at step ", state_.step, " (train.steps = ", t_.steps, ")");
    return finish(0);
  }
  if (t_.until_learned && state_.learned_step >= 0) {
    log::info("the run is already complete: it learned its task at step ", state_.learned_step,
              " (train.until_learned)");
    return finish(0);
  }
  life_.begin_steps();
  if (state_.step == 0) evaluate(0);
  model_->train();
  graphed_ = graphed_step_for(cfg_, model_, *optimizer_, device_, autocast_, group_ != nullptr,
                              opts_.faults.uncapturable_step);
  data::Prefetcher<data::Batch> batches(
      [&](int64_t s) { return task_batcher_ ? task_batcher_->batch(s) : batcher_->batch(s); }, state_.step, t_.steps);
  elapsed_before_ = state_.elapsed_s;
  first_step_ = state_.step;
  if (life_.rank0() && Progress::stderr_is_terminal())
    progress_ = std::make_unique<Progress>("train (from step " + std::to_string(first_step_) + ")",
                                           static_cast<double>(t_.steps - first_step_), "steps");
  // Steps past the end of the run are not profiled (the trace is written after the last one).
  const int64_t profiled = std::max<int64_t>(0, std::min(t_.profile_steps, t_.steps - t_.profile_start));
  StepProfiler profiler(t_.profile_start, life_.rank0() ? profiled : 0, life_.run_dir(), device_);
  session_start_ = window_start_ = Clock::now();
  const ReuseLargeBlocks reuse;  // steps allocate the same large blocks again and again
  while (state_.step < t_.steps) {
    const double lr = learning_rate(t_, state_.step);
    profiler.before_step(state_.step);
    std::optional<model::AttentionKernelProbe> probe;  // the first step says which attention kernel runs
    if (state_.step == first_step_) probe.emplace();
    if (env_.rank == opts_.faults.kill_rank && state_.step == opts_.faults.kill_rank_step) std::raise(SIGKILL);
    const data::Batch batch = batches.next();
    const int64_t tokens = t_.batch_size * batch.input_ids.size(1);
    const run::StepResult sr = step(batch, lr);
    if (probe) log::info("attention kernel: ", probe->summary());
    profiler.after_step(state_.step);
    life_.record(sr, state_.step);
    ++state_.step;
    state_.tokens_seen += tokens;
    window_tokens_ += tokens;
    const bool stopping = life_.stopping(sr);
    const bool log_now = state_.step % t_.log_every == 0 || state_.step == t_.steps;
    const bool eval_now = state_.step % t_.eval_every == 0 && state_.step != t_.steps;
    const bool checkpoint_now = state_.step % t_.checkpoint_every == 0 || state_.step == t_.steps || stopping;
    if ((log_now || eval_now || checkpoint_now) && life_.stop_on_nonfinite()) return finish(run::kNonFiniteExitCode);
    if (log_now) log_step(sr, lr);
    if (eval_now) evaluate(state_.step);
    const bool learned = eval_now && learned_now(state_.step);
    if (checkpoint_now || learned) checkpoint();
    if (learned) {
      if (progress_) progress_->finish();
      log::info("done: learned at step ", state_.step, " of at most ", t_.steps, "; run directory ", life_.run_dir());
      return finish(0);
    }
    if (stopping) return finish(life_.stopped(state_.step));
  }
  evaluate(state_.step);
  learned_now(state_.step);  // recorded only: the final checkpoint is saved, and steps end the run anyway
  if (progress_) progress_->finish();
  log::info("done: ", state_.step, " steps, validation loss ", result_.valid_loss, "; run directory ", life_.run_dir());
  return finish(0);
}

}  // namespace

FaultInjection FaultInjection::from_environment() {
  FaultInjection f;
  auto step_from = [](const char* name) -> int64_t {
    const char* v = std::getenv(name);
    if (!v || !*v) return -1;
    try {
      return std::stoll(v);
    } catch (const std::exception&) {
      throw UserError(std::string(name) + "='" + v +
                      "' is not a step number; unset it (it is for fault-injection tests)");
    }
  };
  f.nan_step = step_from("ROFORMER_FAULT_NAN_STEP");
  f.kill_in_checkpoint_step = step_from("ROFORMER_FAULT_KILL_IN_CHECKPOINT");
  if (const char* v = std::getenv("ROFORMER_FAULT_FULL_DISK_AT"); v && *v) {  // STEP:FILE
    const std::string spec = v;
    const size_t colon = spec.find(':');
    try {
      f.fail_checkpoint_step = std::stoll(spec.substr(0, colon));
    } catch (const std::exception&) {
      f.fail_checkpoint_step = -1;  // refused below
    }
    if (colon == std::string::npos || f.fail_checkpoint_step < 0)
      throw UserError("ROFORMER_FAULT_FULL_DISK_AT='" + spec +
                      "' is not STEP:FILE; unset it (it is for fault-injection tests)");
    f.fail_checkpoint_file = spec.substr(colon + 1);
  }
  if (const char* v = std::getenv("ROFORMER_FAULT_KILL_RANK"); v && *v) {  // RANK:STEP
    const std::string spec = v;
    const size_t colon = spec.find(':');
    try {
      f.kill_rank = std::stoi(spec.substr(0, colon));
      f.kill_rank_step = colon == std::string::npos ? -1 : std::stoll(spec.substr(colon + 1));
    } catch (const std::exception&) {
      f.kill_rank_step = -1;
    }
    if (f.kill_rank < 0 || f.kill_rank_step < 0)
      throw UserError("ROFORMER_FAULT_KILL_RANK='" + spec +
                      "' is not RANK:STEP; unset it (it is for fault-injection tests)");
  }
  f.skip_rng_restore = std::getenv("ROFORMER_FAULT_SKIP_RNG_RESTORE") != nullptr;
  f.uncapturable_step = std::getenv("ROFORMER_FAULT_UNCAPTURABLE_STEP") != nullptr;
  return f;
}

TrainResult run_training(const config::LoadedConfig& loaded, const TrainOptions& options) {
  return Trainer(loaded, options).run();
}

}  // namespace roformer::train
