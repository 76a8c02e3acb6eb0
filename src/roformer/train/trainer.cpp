// The training loop (see trainer.h). Everything a step consumes is a pure function of the step
// number (batches, masks) or is restored from the checkpoint (weights, AdamW moments, RNG), so
// a resumed run is bitwise identical to an uninterrupted one on CPU.
#include "roformer/train/trainer.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "roformer/common/build_info.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/log.h"
#include "roformer/common/progress.h"
#include "roformer/common/strings.h"
#include "roformer/data/batches.h"
#include "roformer/data/counter_rng.h"
#include "roformer/data/prefetcher.h"
#include "roformer/dist/process_group.h"
#include "roformer/dist/reducer.h"
#include "roformer/eval/evaluate.h"
#include "roformer/model/encoder.h"
#include "roformer/train/checkpoint.h"
#include "roformer/train/cuda_graph_step.h"
#include "roformer/train/device_setup.h"
#include "roformer/train/lr_schedule.h"
#include "roformer/train/mfu.h"
#include "roformer/train/signals.h"
#include "roformer/train/step.h"

namespace roformer::train {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// metrics.jsonl: one JSON object per line. On resume, records past the checkpoint's step
// (written before a crash) are dropped so the file matches an uninterrupted run.
class MetricsWriter {
 public:
  MetricsWriter() = default;  // disabled (ranks other than 0)
  MetricsWriter(const std::string& path, int64_t keep_up_to_step) : path_(path) {
    std::string kept;
    if (path_exists(path)) {
      std::istringstream in(read_text_file(path));
      std::string line;
      while (std::getline(in, line)) {
        try {
          if (!line.empty() && json::parse(line).value("step", int64_t{-1}) <= keep_up_to_step) kept += line + "\n";
        } catch (const std::exception&) {  // a line cut by a crash
        }
      }
    }
    write_file_atomic(path, kept);
    out_.open(path, std::ios::app);
    if (!out_) throw UserError("cannot append to " + path);
  }
  void write(const json& record) {
    if (!out_.is_open()) return;
    out_ << record.dump() << "\n";
    out_.flush();
  }

 private:
  std::string path_;
  std::ofstream out_;
};

// Non-finite steps, counted on the device so the step never waits for the host:
// [count, first such step, whether that step's loss (1) or only its norm (0) was non-finite].
class NonFiniteWatch {
 public:
  explicit NonFiniteWatch(const torch::Device& device)
      : state_(torch::tensor({0.0, -1.0, 0.0}, torch::kFloat64).to(device)) {}
  void record(const StepResult& r, int64_t step) {
    const torch::Tensor bad = r.found_inf.to(torch::kFloat64);
    const torch::Tensor first = (state_[1] < 0).to(torch::kFloat64) * bad;  // 1 at the first bad step only
    const torch::Tensor loss_bad = torch::logical_not(torch::isfinite(r.loss)).to(torch::kFloat64);
    state_ = state_ + torch::stack({bad, first * static_cast<double>(step + 1), first * loss_bad});
  }
  struct Seen {
    int64_t count = 0, first_step = -1;
    bool first_was_loss = false;
  };
  Seen read() const {  // a host sync: called at log, evaluation and checkpoint steps only
    const torch::Tensor h = state_.cpu();
    const double* d = h.data_ptr<double>();
    return {static_cast<int64_t>(d[0]), static_cast<int64_t>(d[1]), d[2] > 0};
  }

 private:
  torch::Tensor state_;  // float64 [3] on the training device
};

// The CUDA-graph step when train.cuda_graphs asks for it and the run allows it, else nullptr
// (eager steps) with a one-line log naming why.
std::unique_ptr<GraphedStep> graphed_step_for(const config::Config& cfg, model::EncoderModel& model,
                                              FusedAdamW& optimizer, const torch::Device& device, bool autocast,
                                              bool distributed) {
  const config::TrainConfig& t = cfg.train;
  if (t.cuda_graphs == config::CudaGraphs::off) return nullptr;
  if (t.cuda_graphs == config::CudaGraphs::auto_) {
    if (device.is_cuda())
      log::info("train.cuda_graphs=auto: eager steps (graphs are opt-in until verified on a GPU: train.cuda_graphs=on)");
    return nullptr;
  }
  std::string why;
  std::unique_ptr<GraphedStep> step;
  if (distributed) {
    why = "data parallel: the gradient reducer's collectives run outside a graph";
  } else {
    GraphStepOptions o;
    o.grad_accum = t.grad_accum;
    o.grad_clip = t.grad_clip;
    o.autocast = autocast;
    o.capacity = scored_capacity(t.batch_size / t.grad_accum * cfg.data.seq_len,
                                 cfg.model.objective == config::Objective::mlm, cfg.data.mask_prob);
    step = make_graphed_step(model, optimizer, device, o, &why);
  }
  if (!step) log::warn("train.cuda_graphs=on but the step runs eagerly: ", why);
  return step;
}

// Sums an evaluation's counts over ranks (each rank scored its own windows).
void reduce_eval(dist::Communicator& comm, const torch::Device& device, eval::EvalResult& r) {
  std::vector<double> v{r.loss_sum, static_cast<double>(r.tokens), static_cast<double>(r.correct)};
  v.insert(v.end(), r.bucket_loss_sum.begin(), r.bucket_loss_sum.end());
  for (int64_t n : r.bucket_tokens) v.push_back(static_cast<double>(n));
  torch::Tensor t = torch::tensor(v, torch::kFloat64).to(device);
  comm.allreduce_sum_now(t);
  t = t.cpu();
  const auto* d = t.data_ptr<double>();
  r.loss_sum = d[0];
  r.tokens = static_cast<int64_t>(d[1]);
  r.correct = static_cast<int64_t>(d[2]);
  const size_t nb = r.bucket_loss_sum.size();
  for (size_t i = 0; i < nb; ++i) r.bucket_loss_sum[i] = d[3 + i];
  for (size_t i = 0; i < nb; ++i) r.bucket_tokens[i] = static_cast<int64_t>(d[3 + nb + i]);
}

std::string resolve_run_dir(const config::LoadedConfig& c, const TrainOptions& o) {
  return o.run_dir.empty() ? "runs/" + c.config.name : o.run_dir;
}

// Fails before any training if the run directory cannot be created or written.
void check_writable(const std::string& dir) {
  make_directories(dir);
  const std::string probe = dir + "/.write_probe." + std::to_string(::getpid());
  write_file_atomic(probe, "ok");
  ::unlink(probe.c_str());
}

}  // namespace

TrainResult run_training(const config::LoadedConfig& loaded, const TrainOptions& opts) {
  const config::Config& cfg = loaded.config;
  const config::TrainConfig& t = cfg.train;
  TrainResult result;
  result.run_dir = resolve_run_dir(loaded, opts);
  const std::string& run_dir = result.run_dir;
  const dist::DistEnv& env = opts.env;
  const int world = env.world_size;
  const bool rank0 = env.rank == 0;
  if (t.batch_size % world != 0 || (t.batch_size / world) % t.grad_accum != 0)
    throw UserError("train.batch_size=" + std::to_string(t.batch_size) + " is the global batch: it must split evenly " +
                    "over " + std::to_string(world) + " rank(s) x train.grad_accum=" + std::to_string(t.grad_accum) +
                    " micro-batches; choose a multiple of " + std::to_string(world * t.grad_accum));
  const int64_t local_batch = t.batch_size / world;

  // ---- inputs first: nothing is written until the config, data and resume target check out
  if (cfg.data.path.empty()) throw UserError("data.path is empty: point it at a prepared dataset (roformer prepare-data)");
  const data::DatasetMeta meta = data::read_dataset_meta(cfg.data.path, /*verify_checksums=*/true);
  if (meta.vocab_size > cfg.model.vocab_size)
    throw UserError("dataset '" + cfg.data.path + "' has a vocabulary of " + std::to_string(meta.vocab_size) +
                    " but model.vocab_size is " + std::to_string(cfg.model.vocab_size) +
                    "; set model.vocab_size >= " + std::to_string(meta.vocab_size));
  std::string resume_dir;
  if (opts.resume == "auto") {
    if (auto latest = latest_checkpoint(run_dir)) resume_dir = latest->dir;
  } else if (!opts.resume.empty()) {
    resume_dir = opts.resume;
  } else if (!list_checkpoints(run_dir).empty()) {
    throw UserError("run directory '" + run_dir + "' already has checkpoints; pass --resume auto to continue it or "
                    "--run-dir NEW to start another run");
  }
  if (!resume_dir.empty()) {
    if (!is_complete_checkpoint(resume_dir))
      throw UserError("'" + resume_dir + "' is not a complete checkpoint (missing model.safetensors, trainer.pt, "
                      "config.yaml or meta.json); pass --resume auto to take the newest complete one");
    check_same_architecture(checkpoint_config(resume_dir), cfg, resume_dir);
  }

  const int64_t hw_threads = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t threads = t.threads > 0 ? t.threads : std::max<int64_t>(1, hw_threads / env.local_world_size);
  at::set_num_threads(static_cast<int>(threads));
  const torch::Device device = pick_device(t, env);
  const bool autocast = device.is_cuda() && t.precision != config::Precision::fp32;
  const std::string cuda_switches = apply_cuda_switches(t, device);

  // ---- data parallel: rendezvous before anything is written, so a failed start changes nothing
  std::unique_ptr<dist::ProcessGroup> group;
  if (env.distributed()) {
    dist::ProcessGroupOptions po;
    po.engine = pick_engine(cfg.dist, device);
    po.timeout = std::chrono::seconds(cfg.dist.timeout_s);
    po.cuda_device = device.is_cuda() ? device.index() : 0;
    log::info("data parallel: ", env.describe(), ", ", po.engine == dist::Engine::nccl ? "NCCL" : "Gloo",
              ", local batch ", local_batch, " of global ", t.batch_size);
    group = std::make_unique<dist::ProcessGroup>(env, po);
    // Every rank must resume from the same checkpoint: rank 0's choice wins, and it must exist here too.
    resume_dir = group->share_from_rank0("resume_dir", resume_dir);
    if (!resume_dir.empty() && !path_exists(resume_dir + "/model.safetensors"))
      throw UserError("rank " + std::to_string(env.rank) + " cannot see checkpoint '" + resume_dir +
                      "' chosen by rank 0; multi-node runs need the run directory on a shared filesystem");
  }
  dist::Communicator* comm = group ? &group->comm() : nullptr;

  log::info("device ", device.str(), device.is_cuda() ? " (" + device_name(device) + ")" : "", ", ", threads,
            " intra-op threads, ", autocast ? "bf16 autocast" : "fp32", cuda_switches.empty() ? "" : ", " + cuda_switches);
  const double flops_per_token = training_flops_per_token(cfg.model, cfg.data);
  const double peak = peak_tflops(t, device, autocast);
  log::info("model FLOPs per token ", shortest_double(std::round(flops_per_token / 1e3) / 1e3), " M (6N + attention); ",
            peak > 0 ? "peak " + shortest_double(peak) + " TFLOP/s for MFU" : "no peak known: set train.peak_tflops for MFU");

  // ---- data
  auto train_store = std::make_shared<const data::TokenStore>(cfg.data.path, meta, "train");
  auto valid_store = std::make_shared<const data::TokenStore>(cfg.data.path, meta, "valid");
  const data::MaskingRule rule = data::MaskingRule::from(meta, cfg.data);
  const data::TrainBatcher batcher(train_store, cfg.model.objective, cfg.data.seq_len, local_batch, env.rank, world,
                                   static_cast<uint64_t>(t.seed), cfg.data.sampling, rule);
  const data::EvalWindows valid(valid_store, cfg.model.objective, cfg.data.seq_len, config::EvalProtocol::chunks, 0,
                                t.eval_batches * t.batch_size * cfg.data.seq_len, local_batch, env.rank, world,
                                static_cast<uint64_t>(cfg.eval.mask_seed), rule);

  // ---- model and optimizer (no weight decay on biases and LayerNorm: the 1-D parameters)
  model::EncoderModel model = model::build_model(cfg.model, static_cast<uint64_t>(t.seed));
  model->to(device);
  const std::unique_ptr<FusedAdamW> adamw = make_optimizer(model, t);
  FusedAdamW& optimizer = *adamw;
  log::info("model: ", config::position_kind_names().name(cfg.model.position.kind), ", ",
            model::count_parameters(*model), " parameters");

  TrainerState state;
  torch::manual_seed(static_cast<uint64_t>(t.seed) + 1);  // dropout stream, distinct from initialisation
  if (!resume_dir.empty()) {
    state = load_checkpoint(resume_dir, *model, optimizer);
    log::info("resumed from ", resume_dir, " at step ", state.step);
  }
  std::unique_ptr<dist::GradientReducer> reducer;
  train::DataParallel dp;
  if (group) {
    // Same model and config everywhere (checked before any gradient collective), then rank 0's weights.
    group->check_same_fingerprint("model and config",
                                  dist::model_fingerprint(*model, {"world_size " + std::to_string(world),
                                                                   "resume " + resume_dir, config::dump_yaml(cfg)}));
    dist::broadcast_module(*comm, *model);
    dist::ReducerOptions ro;
    ro.first_bucket_bytes = static_cast<int64_t>(cfg.dist.first_bucket_mb * 1024 * 1024);
    ro.bucket_bytes = static_cast<int64_t>(cfg.dist.bucket_mb * 1024 * 1024);
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (auto& p : model->named_parameters()) named.emplace_back(p.key(), p.value());
    reducer = std::make_unique<dist::GradientReducer>(std::move(named), *comm, ro);
    dp = {reducer.get(), comm};
    log::info("gradient buckets: ", reducer->buckets().size(), " (first ", cfg.dist.first_bucket_mb, " MiB, then ",
              cfg.dist.bucket_mb, " MiB)");
  }
  // Every input has been read and checked; only now is the run directory touched.
  const std::string git_rev = build_info().git_revision;
  if (rank0) {
    check_writable(run_dir);
    log::add_file(run_dir + "/train.log");
    write_file_atomic(run_dir + "/config.yaml", "# git revision: " + git_rev + "\n" + config::dump_yaml(cfg));
    log::info("resolved config (", run_dir, "/config.yaml):\n", config::dump_yaml(cfg));
  }
  MetricsWriter metrics = rank0 ? MetricsWriter(run_dir + "/metrics.jsonl", resume_dir.empty() ? -1 : state.step)
                                : MetricsWriter();
  if (state.step >= t.steps) {
    log::info("the run is already complete at step ", state.step, " (train.steps = ", t.steps, ")");
    result.step = state.step;
    log::close_file();
    return result;
  }

  auto run_eval = [&](int64_t step) {
    eval::EvalResult r = eval::evaluate(model, valid, device);
    if (comm) reduce_eval(*comm, device, r);
    metrics.write({{"type", "eval"}, {"step", step}, {"loss", r.loss()}, {"ppl", r.perplexity()},
                   {"accuracy", r.accuracy()}, {"tokens", r.tokens}});
    log::info("eval step ", step, ": loss ", r.loss(), ", ppl ", r.perplexity(), ", accuracy ", r.accuracy());
    result.valid_loss = r.loss();
  };
  auto save = [&] {
    if (rank0) {
      try {
        save_checkpoint(run_dir, *model, optimizer, state, cfg, git_rev, t.keep_checkpoints);
      } catch (const UserError& e) {
        const auto previous = latest_checkpoint(run_dir);
        throw UserError(std::string(e.what()) + "\ntraining stopped at step " + std::to_string(state.step) + "; " +
                        (previous ? "the previous checkpoint " + previous->dir + " is intact" : "no checkpoint was written yet") +
                        "; free space (or fix permissions) and continue with --resume auto");
      }
    }
    if (group) group->store_barrier("checkpoint");  // nobody runs ahead of a checkpoint being written
  };

  install_stop_handlers();
  const char* nan_env = std::getenv("ROFORMER_FAULT_NAN_STEP");  // fault injection for the non-finite guard test
  const int64_t nan_step = nan_env ? std::stoll(nan_env) : -1;
  if (state.step == 0) run_eval(0);
  model->train();
  data::Prefetcher<data::Batch> batches([&](int64_t s) { return batcher.batch(s); }, state.step, t.steps);
  const int64_t first_step = state.step;
  const double elapsed_before = state.elapsed_s;
  Progress progress("train (from step " + std::to_string(first_step) + ")", static_cast<double>(t.steps - first_step), "steps");
  const bool tty = rank0 && Progress::stderr_is_terminal();
  const auto session_start = Clock::now();
  auto window_start = Clock::now();
  int64_t window_tokens = 0, skipped = 0;

  const std::unique_ptr<GraphedStep> graphed = graphed_step_for(cfg, model, optimizer, device, autocast, group != nullptr);
  NonFiniteWatch watch(device);
  int64_t reported_nonfinite = 0;
  // The one host read between log points: did a step since the last read go non-finite? Those
  // steps changed nothing (the optimizer skipped them on the device); true means stop now.
  auto nonfinite_stop = [&]() {
    const NonFiniteWatch::Seen seen = watch.read();
    if (seen.count == reported_nonfinite) return false;
    if (reported_nonfinite == 0)
      log::error("non-finite ", seen.first_was_loss ? "loss" : "gradient norm", " at step ", seen.first_step,
                 "; that update was skipped");
    if (seen.count > 1) log::error(seen.count, " non-finite steps so far");
    skipped += seen.count - reported_nonfinite;
    reported_nonfinite = seen.count;
    if (t.on_nonfinite == config::NonFinitePolicy::skip) return false;
    log::error("stopping; the last good checkpoint is intact (train.on_nonfinite=skip skips such batches)");
    result.exit_code = kNonFiniteExitCode;
    result.step = state.step;
    log::close_file();
    return true;
  };

  while (state.step < t.steps) {
    const double lr = learning_rate(t, state.step);
    set_learning_rate(optimizer, lr);
    const data::Batch batch = batches.next();
    // Data parallel: each rank's dropout stream is a function of (seed, rank, step), so resumed
    // ranks draw what they would have drawn without a checkpoint RNG state per rank.
    if (group)
      torch::manual_seed(data::hash_counters(static_cast<uint64_t>(t.seed) + 1,
                                             {static_cast<uint64_t>(env.rank), static_cast<uint64_t>(state.step)}));
    dp.stop_requested = stop_requested();
    const StepResult sr = graphed ? graphed->run(batch, lr, state.step == nan_step)
                                  : train_step(model, optimizer, batch, t.grad_accum, t.grad_clip, device, autocast,
                                               state.step == nan_step, group ? &dp : nullptr);
    watch.record(sr, state.step);
    ++state.step;
    const int64_t tokens = t.batch_size * cfg.data.seq_len;
    state.tokens_seen += tokens;
    window_tokens += tokens;
    const bool stopping = group ? sr.any_stop : stop_requested();
    const bool log_now = state.step % t.log_every == 0 || state.step == t.steps;
    const bool eval_now = state.step % t.eval_every == 0 && state.step != t.steps;
    const bool checkpoint_now = state.step % t.checkpoint_every == 0 || state.step == t.steps || stopping;
    if ((log_now || eval_now || checkpoint_now) && nonfinite_stop()) return result;
    if (log_now) {
      const double loss_value = sr.loss_value(), grad_norm = sr.grad_norm_value();  // the step has finished
      const double session_s = std::chrono::duration<double>(Clock::now() - session_start).count();
      const double window_s = std::chrono::duration<double>(Clock::now() - window_start).count();
      const double tps = window_s > 0 ? static_cast<double>(window_tokens) / window_s : 0;
      const double tflops = tps * flops_per_token / 1e12;
      json record{{"type", "train"}, {"step", state.step}, {"loss", loss_value}, {"lr", lr}, {"grad_norm", grad_norm},
                  {"tokens_per_s", tps}, {"tflops", tflops}, {"elapsed_s", elapsed_before + session_s},
                  {"tokens", state.tokens_seen}};
      if (peak > 0) record["mfu"] = tflops / peak;
      if (device.is_cuda()) record["peak_mem_gib"] = peak_memory_gib(device);
      metrics.write(record);
      std::string line = "step " + std::to_string(state.step) + "/" + std::to_string(t.steps) + " | loss " +
                         shortest_double(std::round(loss_value * 1e4) / 1e4) + " | lr " + shortest_double(lr) +
                         " | grad " + shortest_double(std::round(grad_norm * 1e3) / 1e3) + " | " +
                         std::to_string(static_cast<int64_t>(tps)) + " tok/s | " +
                         shortest_double(std::round(tflops * 100) / 100) + " TFLOP/s";
      if (peak > 0) line += " | MFU " + shortest_double(std::round(tflops / peak * 1000) / 10) + "%";
      if (tty) {
        log::debug(line);
        progress.update(static_cast<double>(state.step - first_step), "loss " + shortest_double(std::round(loss_value * 1e3) / 1e3));
      } else {
        log::info(line);
      }
      window_start = Clock::now();
      window_tokens = 0;
    }
    if (eval_now) run_eval(state.step);
    if (checkpoint_now) {
      state.elapsed_s = elapsed_before + std::chrono::duration<double>(Clock::now() - session_start).count();
      save();
    }
    if (stopping) {
      const int sig = stop_signal() ? stop_signal() : SIGTERM;  // a peer's signal stops this rank too
      log::warn("stopped by signal ", sig, " after step ", state.step, "; checkpoint saved; continue with --resume auto");
      result.exit_code = 128 + sig;
      result.step = state.step;
      log::close_file();
      return result;
    }
  }
  run_eval(state.step);
  if (tty) progress.finish();
  if (skipped) log::warn(skipped, " batches skipped for non-finite values");
  log::info("done: ", state.step, " steps, validation loss ", result.valid_loss, "; run directory ", run_dir);
  result.step = state.step;
  log::close_file();
  return result;
}

}  // namespace roformer::train
