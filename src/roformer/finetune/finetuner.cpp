// The fine-tuning loop (see finetuner.h) as a Finetuner of named phases, like the pretraining
// Trainer: check_inputs, setup_device, build, restore, open_run_dir, then per step: step,
// log, and at each epoch's end evaluate and checkpoint. Step s of the run trains on the
// examples [b*B, (b+1)*B) of epoch e's permutation (e = s / steps_per_epoch, b = s mod it),
// a pure function of (seed, e), so a resumed run is identical to an uninterrupted one.
#include "roformer/finetune/finetuner.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "roformer/common/autocast.h"
#include "roformer/common/build_info.h"
#include "roformer/common/checked_math.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/log.h"
#include "roformer/common/progress.h"
#include "roformer/common/strings.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/position_families.h"
#include "roformer/data/counter_rng.h"
#include "roformer/data/dataset_meta.h"
#include "roformer/data/hf_tokenizer.h"
#include "roformer/data/tokenizer_process.h"
#include "roformer/distributed/process_group.h"
#include "roformer/distributed/reducer.h"
#include "roformer/finetune/task_eval.h"
#include "roformer/io/checkpoint.h"
#include "roformer/run/device_setup.h"
#include "roformer/run/metrics.h"
#include "roformer/run/run_directory.h"
#include "roformer/run/run_lifecycle.h"
#include "roformer/run/signals.h"
#include "roformer/runtime/device.h"
#include "roformer/runtime/memory_estimate.h"
#include "roformer/train/lr_schedule.h"
#include "roformer/train/step.h"
#include "roformer/train/trainer.h"

namespace roformer::finetune {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The tokenizer the checkpoint was pretrained with: finetune.tokenizer, or (auto) the one its
// dataset's meta.json names. A SentencePiece model runs in a roformer-prepare-data process
// (SentencePiece and LibTorch must not share one: see data/tokenizer_process.h), a Hugging Face
// tokenizer.json in Python's `tokenizers` (data/hf_tokenizer.h).
std::unique_ptr<data::Tokenizer> task_tokenizer(const config::Config& cfg, const std::string& checkpoint) {
  std::unique_ptr<data::Tokenizer> tok;
  const std::string& path = cfg.data.path;
  if (cfg.finetune.tokenizer == "byte") {
    // A dataset that is still there may say otherwise: then the ids would mean other things.
    if (!path.empty() && path_exists(path + "/meta.json")) {
      const std::string used = data::read_dataset_meta(path, /*verify_checksums=*/false).tokenizer;
      if (used != "byte")
        throw UserError("finetune.tokenizer=byte, but '" + checkpoint + "' was pretrained on '" + path +
                        "', tokenised with " + used + "; set finetune.tokenizer=auto");
    }
    tok = std::make_unique<data::ByteTokenizer>();
  } else {
    if (path.empty() || !path_exists(path + "/meta.json"))
      throw UserError(
          "finetune.tokenizer=auto reads the tokenizer from the pretraining dataset, but the checkpoint's "
          "data.path '" +
          path + "' has no meta.json here; set finetune.tokenizer=byte if '" + checkpoint +
          "' was pretrained on byte-tokenised data, or --set data.path=DIR to its dataset");
    const data::DatasetMeta meta = data::read_dataset_meta(path, /*verify_checksums=*/false);
    if (meta.tokenizer == "byte")
      tok = std::make_unique<data::ByteTokenizer>();
    else if (meta.tokenizer == "hf")
      tok = data::make_hf_tokenizer(path + "/" + meta.tokenizer_model, meta.special_ids);
    else
      tok = std::make_unique<data::ProcessTokenizer>(sibling_executable("roformer-prepare-data"),
                                                     path + "/" + meta.tokenizer_model);
  }
  if (tok->vocab_size() > cfg.model.vocab_size)
    throw UserError("the " + tok->name() + " tokenizer has " + std::to_string(tok->vocab_size()) +
                    " ids but the checkpoint's model.vocab_size is " + std::to_string(cfg.model.vocab_size) +
                    ": it was not pretrained with this tokenizer; set finetune.tokenizer (or data.path) to its own");
  return tok;
}

// Examples of epoch `epoch` in training order: a permutation drawn from (seed, epoch).
std::vector<size_t> epoch_order(size_t n, uint64_t seed, int64_t epoch) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(data::hash_counters(seed, {0xF17EULL, static_cast<uint64_t>(epoch)}));
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);  // Fisher-Yates, portable
  return order;
}

std::string significant(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string metric_line(const std::map<std::string, double>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k + " " + shortest_double(std::round(v * 1e4) / 1e4);
  return s;
}

// A resumed fine-tuning run trains the same head on the same task: the keys that decide them
// (besides model.*, which check_same_architecture compares) must match the checkpoint's.
void check_same_task(const config::Config& saved, const config::Config& now, const std::string& dir) {
  const auto a = config::flatten(saved), b = config::flatten(now);
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const std::string& key = a[i].first;
    if (key != "finetune.task" && key != "finetune.glue_task" && key != "finetune.triplet_encoder") continue;
    if (a[i].second != b[i].second)
      throw UserError("the checkpoint " + dir + " was fine-tuned with " + key + " = " + a[i].second +
                      " but this run has " + b[i].second + "; --resume continues the same task, so use " + key + "=" +
                      a[i].second + " or a new --run-dir");
  }
}

class Finetuner {
 public:
  Finetuner(const config::LoadedConfig& loaded, const FinetuneOptions& o)
      : cfg_(loaded.config), f_(cfg_.finetune), opts_(o), env_(o.env), life_(cfg_, env_, o.run_dir, "fine-tuning") {}
  FinetuneResult run();

 private:
  // The task's step, logging, evaluation and outputs.
  run::StepResult step(double lr);
  void log_step(const run::StepResult& r, double lr);
  std::string eta() const;
  void evaluate_epoch(int64_t epoch, double train_loss);
  void write_predictions();
  void write_results();
  // Its parts of the lifecycle's phases (run/run_lifecycle.h).
  void check_inputs();
  void build();
  void restore();
  void checkpoint();
  FinetuneResult finish(int code);

  config::Config cfg_;  // a copy: train.steps and warmup_steps are derived here
  const config::FinetuneConfig& f_;
  const FinetuneOptions& opts_;
  const dist::DistEnv& env_;
  run::RunLifecycle life_;  // after cfg_, whose derived steps its config.yaml and checkpoints save
  FinetuneResult result_;
  TaskSpec spec_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  int64_t pad_id_ = 0, steps_per_epoch_ = 0;
  TaskSplit train_, dev_, test_;
  std::vector<size_t> order_;  // the training order of epoch order_epoch_
  int64_t order_epoch_ = -1;
  bool has_test_ = false;
  std::unique_ptr<dist::GradientReducer> reducer_;
  TaskModel model_{nullptr};
  std::unique_ptr<train::FusedAdamW> optimizer_;
  io::TrainerState state_;
  std::unique_ptr<Progress> progress_;
  Clock::time_point window_start_, session_start_;
  int64_t first_step_ = 0;
  int64_t window_tokens_ = 0;
  torch::Tensor epoch_loss_;  // float64 [] on the device: the sum of this epoch's step losses (this session)
  int64_t epoch_steps_ = 0;
  TaskScores last_dev_;  // the latest dev evaluation, reused for the predictions file at the end
  int64_t last_dev_step_ = -1;
  bool stopping_ = false;
};

void Finetuner::check_inputs() {
  const config::TrainConfig& t = cfg_.train;
  const int world = env_.world_size;
  if (t.batch_size % (world * t.grad_accum) != 0)
    throw UserError("train.batch_size=" + std::to_string(t.batch_size) + " must split evenly over " +
                    std::to_string(world) + " rank(s) x train.grad_accum=" + std::to_string(t.grad_accum) +
                    "; choose a multiple of " + std::to_string(world * t.grad_accum));
  spec_ = task_spec(f_);
  const int64_t limit = config::position_length_limit(cfg_.model);
  if (limit > 0 && f_.max_length > limit)
    throw UserError("finetune.max_length=" + std::to_string(f_.max_length) + " exceeds the learned position table (" +
                    "model.position.max_positions=" + std::to_string(cfg_.model.position.max_positions) +
                    " in the checkpoint); a learned absolute encoding has no position beyond it: lower "
                    "finetune.max_length");
  tokenizer_ = task_tokenizer(cfg_, opts_.checkpoint);
  pad_id_ = tokenizer_->special_ids().at("[PAD]");
  train_ = load_split(f_, split_path(f_, "train", true), *tokenizer_, f_.max_train_examples);
  dev_ = load_split(f_, split_path(f_, "dev", true), *tokenizer_);
  const std::string test_path = f_.task == config::FinetuneTask::triplets ? split_path(f_, "test", false) : "";
  if (!test_path.empty()) {
    test_ = load_split(f_, test_path, *tokenizer_);
    has_test_ = true;
  }
  // Data parallel needs whole global batches on every step; one process keeps the short last batch.
  const auto n = static_cast<int64_t>(train_.examples.size());
  steps_per_epoch_ = world > 1 ? n / t.batch_size : (n + t.batch_size - 1) / t.batch_size;
  if (steps_per_epoch_ == 0)
    throw UserError("the training split has " + std::to_string(n) + " examples, fewer than one global batch of " +
                    std::to_string(t.batch_size) + " over " + std::to_string(world) + " ranks; lower train.batch_size");
  cfg_.train.steps =
      checked_mul(steps_per_epoch_, f_.epochs, "the fine-tuning steps (steps per epoch x finetune.epochs)");
  cfg_.train.warmup_steps = static_cast<int64_t>(std::llround(f_.warmup_ratio * static_cast<double>(cfg_.train.steps)));
  life_.claim_run_directory(opts_.resume);
  const std::string& resume = life_.resume_dir();
  if (resume.empty()) return;
  const config::Config saved = io::checkpoint_config(resume);
  io::check_same_architecture(saved, cfg_, resume);
  check_same_task(saved, cfg_, resume);
}

void Finetuner::build() {
  const config::TrainConfig& t = cfg_.train;
  const int64_t rows = t.batch_size / env_.world_size / t.grad_accum *
                       (spec_.head != HeadKind::triplet ? 1
                        : spec_.bi_encoder              ? 3
                                                        : 2);
  runtime::check_fits_device(
      runtime::estimate_memory(cfg_.model, rows, f_.max_length, true, life_.autocast(), config::checkpoint_every(t)),
      life_.device(), "fine-tuning this model", "train.batch_size (raise train.grad_accum) or finetune.max_length");
  model_ =
      TaskModel(cfg_.model, spec_, f_.classifier_dropout, static_cast<uint64_t>(t.seed), config::checkpoint_every(t));
  if (life_.resume_dir().empty()) io::load_model_weights(opts_.checkpoint, *model_->roformer);
  model_->to(life_.device());
  optimizer_ = train::make_optimizer(*model_, t);
  log::info("task ", spec_.name, " (", tokenizer_->name(), " tokenizer): ", train_.examples.size(),
            " training examples (", train_.truncated, " inputs truncated to ", f_.max_length, " tokens), ",
            dev_.examples.size(), " dev",
            has_test_ ? ", " + std::to_string(test_.examples.size()) + " test" : std::string(), "; ", steps_per_epoch_,
            " steps per epoch x ", f_.epochs, " epochs = ", t.steps, " steps");
}

void Finetuner::restore() {
  torch::manual_seed(static_cast<uint64_t>(cfg_.train.seed) + 1);  // dropout stream
  if (const std::string& resume = life_.resume_dir(); !resume.empty()) {
    state_ = io::load_checkpoint(resume, *model_, *optimizer_);
    log::info("resumed from ", resume, " at step ", state_.step);
  } else {
    log::info("encoder weights from ", opts_.checkpoint);
  }
  dist::ProcessGroup* group = life_.group();
  if (!group) return;
  group->check_same_fingerprint("model and config", dist::model_fingerprint(*model_, {config::dump_yaml(cfg_)}));
  dist::broadcast_module(group->comm(), *model_);
  reducer_ = run::make_reducer(*model_, group->comm(), cfg_.dist);  // frozen parameters are skipped
}

// This rank's examples of the current step: every world-th example of the global batch.
run::StepResult Finetuner::step(double lr) {
  const config::TrainConfig& t = cfg_.train;
  const int64_t epoch = state_.step / steps_per_epoch_, b = state_.step % steps_per_epoch_;
  if (order_epoch_ != epoch) {  // drawn once per epoch, not per step (QQP has 364k examples)
    order_ = epoch_order(train_.examples.size(), static_cast<uint64_t>(t.seed), epoch);
    order_epoch_ = epoch;
  }
  const std::vector<size_t>& order = order_;
  const size_t begin = static_cast<size_t>(b * t.batch_size);
  const size_t end = std::min(order.size(), begin + static_cast<size_t>(t.batch_size));
  std::vector<const TaskExample*> local;
  for (size_t i = begin + static_cast<size_t>(env_.rank); i < end; i += static_cast<size_t>(env_.world_size))
    local.push_back(&train_.examples[order[i]]);
  train::set_learning_rate(*optimizer_, lr);
  optimizer_->zero_grad();
  if (life_.group())
    torch::manual_seed(data::hash_counters(static_cast<uint64_t>(t.seed) + 1,
                                           {static_cast<uint64_t>(env_.rank), static_cast<uint64_t>(state_.step)}));
  const double global_n = static_cast<double>(end - begin), world = env_.world_size;
  const size_t per_micro = (local.size() + static_cast<size_t>(t.grad_accum) - 1) / static_cast<size_t>(t.grad_accum);
  run::StepResult r;
  r.loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(life_.device()));
  for (size_t m = 0; m * per_micro < local.size(); ++m) {
    const std::vector<const TaskExample*> micro(
        local.begin() + static_cast<std::ptrdiff_t>(m * per_micro),
        local.begin() + static_cast<std::ptrdiff_t>(std::min(local.size(), (m + 1) * per_micro)));
    const bool last = (m + 1) * per_micro >= local.size();
    torch::Tensor loss;
    {
      AutocastGuard guard(life_.autocast());
      const TaskInputs in = collate_examples(micro, pad_id_, life_.device());
      for (const auto* e : micro)
        for (const auto& input : e->inputs) window_tokens_ += static_cast<int64_t>(input.ids.size());
      loss = model_->loss(in, targets_of(micro, life_.device()), f_) * (static_cast<double>(micro.size()) / global_n);
    }
    r.loss.add_(loss.detach().to(torch::kFloat64));
    if (!reducer_) {
      loss.backward();
    } else if (last) {  // the reducer averages over ranks: scaling by the world size gives the global mean
      reducer_->prepare_for_backward();
      (loss * world).backward();
      reducer_->finish();
    } else {
      auto no_sync = reducer_->no_sync();
      (loss * world).backward();
    }
  }
  if (life_.group()) {  // the global loss and whether any rank was asked to stop, in one reduction
    torch::Tensor l = torch::stack({r.loss, torch::full({}, run::stop_requested() ? 1.0 : 0.0, r.loss.options())});
    life_.group()->comm().allreduce_sum_now(l);
    r.loss = l[0];
    r.any_stop = l[1].item<double>() > 0;
  }
  return train::update_from_gradients(*model_, *optimizer_, std::move(r), t.grad_clip);
}

// Remaining steps at this session's pace (evaluations included).
std::string Finetuner::eta() const {
  const double done = static_cast<double>(state_.step - first_step_);
  const double spent = std::chrono::duration<double>(Clock::now() - session_start_).count();
  return Progress::format_duration(spent / std::max(1.0, done) * static_cast<double>(cfg_.train.steps - state_.step));
}

void Finetuner::log_step(const run::StepResult& r, double lr) {
  const double window_s = std::chrono::duration<double>(Clock::now() - window_start_).count();
  const double tps = window_s > 0 ? static_cast<double>(window_tokens_) / window_s : 0;
  const double loss = r.loss_value(), grad = r.grad_norm_value();
  const int64_t epoch = (state_.step - 1) / steps_per_epoch_ + 1;
  life_.metrics().write({{"type", "train"},
                         {"step", state_.step},
                         {"epoch", epoch},
                         {"loss", loss},
                         {"grad_norm", grad},
                         {"lr", lr},
                         {"tokens_per_s", tps}});
  const std::string line = "step " + std::to_string(state_.step) + "/" + std::to_string(cfg_.train.steps) +
                           " | epoch " + std::to_string(epoch) + "/" + std::to_string(f_.epochs) + " | loss " +
                           shortest_double(std::round(loss * 1e4) / 1e4) + " | lr " + significant(lr) + " | grad " +
                           shortest_double(std::round(grad * 1e3) / 1e3) + " | " + std::to_string(std::llround(tps)) +
                           " tok/s | ETA " + eta();
  if (progress_) {
    log::debug(line);
    progress_->update(static_cast<double>(state_.step), "loss " + shortest_double(std::round(loss * 1e3) / 1e3));
  } else if (life_.rank0()) {
    log::info(line);
  }
  window_start_ = Clock::now();
  window_tokens_ = 0;
}

// Every rank evaluates the whole dev split (the same weights give the same numbers); rank 0 writes.
void Finetuner::evaluate_epoch(int64_t epoch, double train_loss) {
  last_dev_ = evaluate_split(model_, dev_, f_, pad_id_, life_.device(), life_.autocast());
  last_dev_step_ = state_.step;
  const TaskScores& s = last_dev_;
  EpochScores e{epoch, state_.step, train_loss, s.loss, s.metrics};
  result_.epochs.push_back(e);
  json m = s.metrics;
  life_.metrics().write({{"type", "eval"},
                         {"split", "dev"},
                         {"epoch", epoch},
                         {"step", state_.step},
                         {"loss", s.loss},
                         {"train_loss", train_loss},
                         {"metrics", m}});
  log::info("epoch ", epoch, " dev: ", metric_line(s.metrics), " (loss ", s.loss, ", train loss ", train_loss, ")");
}

void Finetuner::checkpoint() {
  state_.tokens_seen = state_.step * cfg_.train.batch_size;  // examples seen
  state_.epoch_loss_sum = epoch_loss_.item<double>();
  state_.epoch_steps = epoch_steps_;
  life_.save_checkpoint(*model_, *optimizer_, state_);
}

// The final model's outputs on dev (and test): dev_predictions.jsonl, test_predictions.jsonl.
void Finetuner::write_predictions() {
  std::vector<std::pair<std::string, const TaskSplit*>> splits{{"dev", &dev_}};
  if (has_test_) splits.emplace_back("test", &test_);
  for (const auto& [name, split] : splits) {
    const TaskScores s = name == "dev" && last_dev_step_ == state_.step
                             ? last_dev_
                             : evaluate_split(model_, *split, f_, pad_id_, life_.device(), life_.autocast());
    if (name == "test") {
      result_.test = s.metrics;
      life_.metrics().write({{"type", "eval"}, {"split", "test"}, {"step", state_.step}, {"metrics", json(s.metrics)}});
      log::info("test (final model): ", metric_line(s.metrics));
    }
    if (life_.rank0())
      write_file_atomic(life_.run_dir() + "/" + name + "_predictions.jsonl", predictions_jsonl(spec_, s, *split));
  }
}

// results.json and results.md from every dev evaluation in metrics.jsonl (earlier sessions too).
void Finetuner::write_results() {
  json epochs = json::array();
  std::ifstream in(life_.run_dir() + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("type", "") == "eval" && j.value("split", "") == "dev") epochs.push_back(j);
  }
  json out{{"task", spec_.name},
           {"checkpoint", opts_.checkpoint},
           {"max_length", f_.max_length},
           {"train_examples", train_.examples.size()},
           {"train_truncated_inputs", train_.truncated},
           {"dev_examples", dev_.examples.size()},
           {"seed", cfg_.train.seed},
           {"dev", epochs}};
  if (has_test_) out["test"] = result_.test;
  write_file_atomic(life_.run_dir() + "/results.json", out.dump(2) + "\n");
  std::string md = "# " + cfg_.name + ": " + spec_.name + " from " + opts_.checkpoint +
                   "\n\n| epoch | step | train loss | dev loss |";
  for (const std::string& k : spec_.metrics) md += " dev " + k + " |";
  md += "\n|---|---|---|---|";
  for (size_t i = 0; i < spec_.metrics.size(); ++i) md += "---|";
  md += "\n";
  auto cell = [](double v) { return shortest_double(std::round(v * 1e4) / 1e4); };
  for (const json& e : epochs) {
    md += "| " + std::to_string(e.value("epoch", 0)) + " | " + std::to_string(e.value("step", 0)) + " | " +
          cell(e.value("train_loss", 0.0)) + " | " + cell(e.value("loss", 0.0)) + " |";
    for (const std::string& k : spec_.metrics) md += " " + cell(e["metrics"].value(k, 0.0)) + " |";
    md += "\n";
  }
  if (has_test_)
    md += "\nTest (" + std::to_string(test_.examples.size()) + " examples, final model): " + metric_line(result_.test) +
          "\n";
  write_file_atomic(life_.run_dir() + "/results.md", md);
}

FinetuneResult Finetuner::finish(int code) {
  static_cast<run::RunEnd&>(result_) = life_.finish(code, state_.step);
  return result_;
}

FinetuneResult Finetuner::run() {
  check_inputs();
  life_.setup_device("");
  build();
  restore();
  life_.open_run_directory("# pretrained encoder: " + opts_.checkpoint + "\n", state_.step);
  const int64_t steps = cfg_.train.steps;
  life_.begin_steps();
  model_->train();
  // The epoch in progress when the checkpoint was saved (nothing on a fresh run).
  epoch_loss_ =
      torch::full({}, state_.epoch_loss_sum, torch::TensorOptions().dtype(torch::kFloat64).device(life_.device()));
  epoch_steps_ = state_.epoch_steps;
  if (life_.rank0() && Progress::stderr_is_terminal() && state_.step < steps)
    progress_ = std::make_unique<Progress>("finetune", static_cast<double>(steps), "steps");
  window_start_ = session_start_ = Clock::now();
  first_step_ = state_.step;
  while (state_.step < steps) {
    const double lr = train::learning_rate(cfg_.train, state_.step);
    const run::StepResult r = step(lr);
    life_.record(r, state_.step);
    epoch_loss_.add_(r.loss);
    ++epoch_steps_;
    ++state_.step;
    const bool epoch_end = state_.step % steps_per_epoch_ == 0;
    const bool stopping = life_.stopping(r);
    const bool log_now = state_.step % cfg_.train.log_every == 0 || epoch_end;
    if ((log_now || epoch_end || stopping) && life_.stop_on_nonfinite()) return finish(run::kNonFiniteExitCode);
    if (log_now) log_step(r, lr);
    if (epoch_end) {
      evaluate_epoch(state_.step / steps_per_epoch_, epoch_loss_.item<double>() / static_cast<double>(epoch_steps_));
      epoch_loss_.zero_();
      epoch_steps_ = 0;
    }
    if (epoch_end || stopping || state_.step % cfg_.train.checkpoint_every == 0) checkpoint();
    if (stopping) return finish(life_.stopped(state_.step));
  }
  if (progress_) progress_->finish();
  write_predictions();

  if (life_.rank0()) write_results();
  log::info("done: ", state_.step, " steps; results in ", life_.run_dir(), "/results.md");
  return finish(0);
}

}  // namespace

config::LoadedConfig finetune_config(const std::string& checkpoint, const std::string& task_file,
                                     const std::vector<std::string>& overrides) {
  if (!path_exists(checkpoint + "/config.yaml") || !path_exists(checkpoint + "/model.safetensors"))
    throw UserError("'" + checkpoint +
                    "' is not a checkpoint directory (it needs config.yaml and model.safetensors): " +
                    "name a step_N directory of a pretraining run, or a model converted with `roformer convert`");
  config::LoadedConfig loaded = config::load_config(checkpoint + "/config.yaml");
  const config::Config pretrained = loaded.config;
  if (!path_exists(task_file))
    throw UserError("task file '" + task_file + "' does not exist; see configs/finetune/ for examples");
  config::apply_config_file(loaded, task_file);
  config::apply_overrides(loaded, overrides);
  io::check_same_architecture(pretrained, loaded.config, "'" + checkpoint + "'");
  if (loaded.config.finetune.task == config::FinetuneTask::none)
    throw UserError(task_file + ": finetune.task is not set; set it to glue or triplets");
  return loaded;
}

FinetuneResult run_finetune(const config::LoadedConfig& loaded, const FinetuneOptions& options) {
  return Finetuner(loaded, options).run();
}

}  // namespace roformer::finetune
