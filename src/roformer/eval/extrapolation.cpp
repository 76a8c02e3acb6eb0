// Checkpoint evaluation across lengths (see extrapolation.h).
#include "roformer/eval/extrapolation.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "roformer/common/errors.h"
#include "roformer/common/log.h"
#include "roformer/common/strings.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/layer_layout.h"
#include "roformer/config/position_families.h"
#include "roformer/data/batches.h"
#include "roformer/data/task_batches.h"
#include "roformer/io/checkpoint.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/runtime/device.h"
#include "roformer/runtime/memory_estimate.h"

namespace roformer::eval {

LoadedCheckpoint load_for_eval(const std::string& dir, const std::vector<std::string>& overrides) {
  const config::Config saved = io::checkpoint_config(dir);
  config::LoadedConfig loaded;
  loaded.config = saved;
  config::apply_overrides(loaded, overrides);
  io::check_same_architecture(saved, loaded.config, dir);
  LoadedCheckpoint c;
  c.config = loaded.config;
  runtime::apply_threads(c.config.train.threads, 1, /*strict=*/false);
  c.device = runtime::pick_device(c.config.train.device, 0, /*strict=*/false);
  const auto& lengths = c.config.eval.lengths;
  const int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  runtime::check_fits_device(runtime::estimate_memory(c.config.model, c.config.eval.batch_size, longest, false,
                                                      eval_uses_bf16(c.config.eval.precision, c.device)),
                             c.device, "evaluating this checkpoint at length " + std::to_string(longest),
                             "eval.lengths (--lengths) or eval.batch_size");
  c.model = model::build_model_to_load(c.config.model);
  io::load_model_weights(dir, *c.model);  // every parameter and buffer, or an error
  c.model->to(c.device);
  return c;
}

namespace {

using Scorer = std::function<EvalResult(int64_t length)>;

// The corpus's split at each length under eval.protocol.
Scorer corpus_scorer(const config::Config& cfg, model::EncoderModel& model, const torch::Device& device, bool bf16) {
  const data::DatasetMeta meta = data::read_dataset_meta(cfg.data.path);
  data::check_dataset_fits_model(meta, cfg.data.path, cfg.model.vocab_size);
  auto store = std::make_shared<const data::TokenStore>(cfg.data.path, meta, cfg.eval.split, false);
  const data::MaskingRule rule = data::MaskingRule::from(meta, cfg.data);
  return [&cfg, &model, device, bf16, store, rule](int64_t L) {
    const data::EvalWindows windows(store, cfg.model.objective, L, cfg.eval.protocol,
                                    cfg.eval.protocol == config::EvalProtocol::sliding ? cfg.eval.stride : 0,
                                    cfg.eval.max_tokens, cfg.eval.batch_size, 0, 1,
                                    static_cast<uint64_t>(cfg.eval.mask_seed), rule);
    return evaluate(model, windows, device, cfg.eval.per_token ? L : 8, 0, bf16);
  };
}

// The training stream's examples are counted against the evaluation's up to this many.
constexpr int64_t kMaxCountedTrainingExamples = int64_t{1} << 20;

// The identities of the examples the checkpoint's own `steps` trained on (not those of a run it
// started from), or none when the steps are unknown (-1) or give more than kMaxCountedTrainingExamples.
std::shared_ptr<const std::unordered_set<uint64_t>> training_examples(const config::Config& cfg,
                                                                      std::shared_ptr<const data::TaskGenerator> g,
                                                                      int64_t steps) {
  if (steps < 0 || steps * cfg.train.batch_size > kMaxCountedTrainingExamples) return nullptr;
  data::TaskBatcher stream(g, data::training_lengths(*g, cfg.data.task, cfg.data.seq_len), cfg.train.batch_size, 0,
                           static_cast<uint64_t>(cfg.train.seed), cfg.data.task.holdout);
  stream.grow_reach_over(cfg.data.task.reach_steps);
  return std::make_shared<const std::unordered_set<uint64_t>>(data::training_identities(stream, steps));
}

// data.task.eval_examples examples of the checkpoint's task at each length, with the floors and
// how many of them the run trained on.
Scorer task_scorer(const config::Config& cfg, model::EncoderModel& model, const torch::Device& device, bool bf16,
                   int64_t trained_steps, const std::vector<int64_t>& lengths) {
  const config::TaskConfig& task = cfg.data.task;
  std::shared_ptr<const data::TaskGenerator> generator =
      data::make_task_generator(task, cfg.model.objective == config::Objective::causal_lm);
  for (int64_t L : lengths) data::check_task_fits(*generator, task, L, cfg.model.vocab_size, "evaluation length");
  const auto seen = training_examples(cfg, generator, trained_steps);
  return [&cfg, &model, device, bf16, generator, seen](int64_t L) {
    const data::TaskEvalSet examples(generator, L, cfg.data.task.eval_examples, cfg.eval.batch_size, 0, 1,
                                     static_cast<uint64_t>(cfg.eval.mask_seed), cfg.data.task.holdout);
    EvalResult r = evaluate(model, examples, device, cfg.eval.per_token ? L : 8, bf16);
    const std::vector<data::TaskFloor> floors = generator->floors();
    const std::vector<data::TaskEvalSet::FloorScore> scores = examples.floor_scores(floors);
    for (size_t f = 0; f < floors.size(); ++f)
      r.floors.push_back({floors[f].name, scores[f].exact_match, scores[f].accuracy});
    if (seen) r.seen_in_training = examples.count_seen(*seen);
    return r;
  };
}

}  // namespace

// Every method this evaluation applies on top of the trained family, e.g. "yarn x8, log-n past
// training"; "none" when there is none. A RoPE method on a family it cannot change is named as
// such and warned about, so a header never claims a method that did nothing.
std::string plain_number(double v) {
  return v == std::floor(v) && std::abs(v) < 1e15 ? std::to_string(static_cast<int64_t>(v)) : shortest_double(v);
}

std::string applied_methods(const config::ModelConfig& m) {
  std::vector<std::string> methods;
  const config::PositionTraits traits = config::position_family(m.position.kind).traits;
  const std::string family = config::position_kind_names().name(m.position.kind);
  const config::RopeScalingConfig& s = m.position.rope.scaling;
  if (s.kind != config::RopeScalingKind::none) {
    std::string name = config::rope_scaling_kind_names().name(s.kind) + " x" + plain_number(s.factor);
    if (!traits.context_extension) {
      log::warn("model.position.rope.scaling.kind=", config::rope_scaling_kind_names().name(s.kind),
                " does nothing for position kind ", family, ": the results are the checkpoint's own");
      name += " (no effect on " + family + ")";
    }
    methods.push_back(name);
  }
  const config::RopeConfig& rope = m.position.rope;
  if (rope.mode == config::RopeMode::rerope) {
    std::string name = "rerope window " + std::to_string(rope.rerope.window);
    if (rope.rerope.leak > 0) name += " leak " + plain_number(rope.rerope.leak);
    methods.push_back(name);
  }
  if (rope.mode == config::RopeMode::string)
    methods.push_back("string S = " + plain_number(rope.string.shift_fraction) + " x length, W " +
                      std::to_string(rope.string.local));
  if (rope.mode == config::RopeMode::self_extend)
    methods.push_back("self-extend group " + std::to_string(rope.self_extend.group) + " window " +
                      std::to_string(rope.self_extend.window));
  if (rope.mode == config::RopeMode::dual_chunk)
    methods.push_back("dual-chunk chunk " + std::to_string(rope.dual_chunk.chunk_size) + " local window " +
                      std::to_string(rope.dual_chunk.local_window));
  if (m.attention_scale == config::AttentionScale::logn)
    methods.push_back("log-n (L = " + std::to_string(m.attention_scale_length) + ")");
  if (m.attention_scale == config::AttentionScale::llama4)
    methods.push_back("llama4 temperature (floor " + plain_number(m.attention_scale_floor) + ", factor " +
                      plain_number(m.attention_scale_factor) + ")");
  if (m.attention_scale == config::AttentionScale::ssmax) methods.push_back("ssmax");
  if (m.attention_scale == config::AttentionScale::drope)
    methods.push_back("drope temperature c " + plain_number(m.attention_scale_factor) + " past " +
                      std::to_string(m.attention_scale_length));
  if (config::has_layout(m)) methods.push_back("layout " + config::describe_layout(m));
  if (m.attention_scale == config::AttentionScale::logn_past_training)
    methods.push_back("log-n past " + std::to_string(m.attention_scale_length));
  return methods.empty() ? "none" : join(methods, ", ");
}

double mean_corpus_loss(const std::string& dir, const std::vector<std::string>& overrides) {
  LoadedCheckpoint loaded = load_for_eval(dir, overrides);
  const config::Config& cfg = loaded.config;
  const Scorer score =
      corpus_scorer(cfg, loaded.model, loaded.device, eval_uses_bf16(cfg.eval.precision, loaded.device));
  double sum = 0;
  for (int64_t L : cfg.eval.lengths) sum += score(L).loss();
  return sum / static_cast<double>(cfg.eval.lengths.size());
}

ExtrapolationReport evaluate_checkpoint(const std::string& dir, const std::vector<std::string>& requested) {
  std::vector<std::string> overrides = requested;
  std::optional<TemperatureFit> temperature;
  config::LoadedConfig asked;
  asked.config = io::checkpoint_config(dir);
  config::apply_overrides(asked, overrides);
  if (asked.config.eval.fit_temperature) {
    temperature = fit_temperature(dir, overrides, asked.config,
                                  [&](const std::vector<std::string>& o) { return mean_corpus_loss(dir, o); });
    for (const std::string& o : temperature_overrides(temperature->c)) overrides.push_back(o);
  }
  LoadedCheckpoint loaded = load_for_eval(dir, overrides);
  const config::Config& cfg = loaded.config;
  model::EncoderModel& model = loaded.model;
  const torch::Device device = loaded.device;
  const bool task = cfg.data.task.name != config::TaskKind::none;

  ExtrapolationReport report;
  report.temperature = temperature;
  report.checkpoint = dir;
  report.split = cfg.eval.split;
  report.protocol = config::eval_protocol_names().name(cfg.eval.protocol);
  const bool bf16 = eval_uses_bf16(cfg.eval.precision, device);
  report.step = io::checkpoint_step(dir).value_or(-1);
  const std::vector<int64_t> sizes = task ? cfg.eval.task_size_list() : std::vector<int64_t>{};
  if (!sizes.empty()) report.task_sizes = cfg.eval.task_sizes;
  const std::vector<int64_t> lengths =
      sizes.empty() ? cfg.eval.lengths
                    : data::size_lengths(*data::make_task_generator(cfg.data.task, true), cfg.data.task, sizes);
  const Scorer score =
      task ? task_scorer(cfg, model, device, bf16, report.step, lengths) : corpus_scorer(cfg, model, device, bf16);
  if (task) report.task = config::task_kind_names().name(cfg.data.task.name);
  report.holdout = cfg.data.task.holdout;
  report.precision = bf16 ? "bf16" : "fp32";
  report.scaling = config::rope_scaling_kind_names().name(cfg.model.position.rope.scaling.kind);
  if (cfg.model.position.rope.scaling.kind != config::RopeScalingKind::none)
    report.scaling += "x" + std::to_string(static_cast<int64_t>(cfg.model.position.rope.scaling.factor));
  report.methods = applied_methods(cfg.model);
  report.stride = cfg.eval.stride;
  report.per_token = cfg.eval.per_token;
  report.train_length = cfg.data.seq_len;
  report.position = config::position_kind_names().name(cfg.model.position.kind);
  const int64_t limit = config::position_length_limit(cfg.model);
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t L = lengths[i];
    LengthResult lr;
    lr.length = L;
    if (!sizes.empty()) lr.size = sizes[i];
    if (limit > 0 && L > limit) {
      lr.applicable = false;
      lr.reason = "learned positions stop at " + std::to_string(limit);
      report.lengths.push_back(lr);
      continue;
    }
    runtime::reset_peak_memory(device);
    const auto start = std::chrono::steady_clock::now();
    {
      model::AttentionKernelProbe probe;
      lr.result = score(L);  // ends with a host read: the device is done
      lr.attention = probe.summary();
    }
    lr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // A non-finite loss or perplexity is never reported as a result (xPos with a tiny
    // scale_base, say, overflows past some length): the run stops and says what to check.
    if (!std::isfinite(lr.result.loss()) || !std::isfinite(lr.result.perplexity()))
      throw UserError("evaluating '" + dir + "' at length " + std::to_string(L) + " gave loss " +
                      std::to_string(lr.result.loss()) + ", perplexity " + std::to_string(lr.result.perplexity()) +
                      ": not a result. The model overflows at this length (position " + report.position + ", scaling " +
                      report.scaling + "): check model.position.* and the --set overrides " +
                      "(e.g. xpos.scale_base, rope.scaling.*), shorter --lengths, or the checkpoint's weights");
    lr.peak_mem_gib = runtime::peak_memory_gib(device);
    log::info("length ", L, lr.size > 0 ? " (size " + std::to_string(lr.size) + ")" : std::string(), ": loss ",
              lr.result.loss(),
              task ? ", exact match " + std::to_string(lr.result.exact_match()) + " of " +
                         std::to_string(lr.result.sequences) + " examples"
                   : ", ppl " + std::to_string(lr.result.perplexity()),
              " over ", lr.result.tokens, " tokens in ", lr.seconds, " s",
              device.is_cuda() ? ", peak " + std::to_string(lr.peak_mem_gib) + " GiB" : "", ", attention ",
              lr.attention);
    report.lengths.push_back(lr);
  }
  return report;
}

double mean_size_accuracy(const ExtrapolationReport& r) {
  if (r.task_sizes.empty()) return -1;
  double sum = 0;
  int64_t count = 0;
  for (const auto& l : r.lengths)
    if (l.applicable) {
      sum += l.result.accuracy();
      ++count;
    }
  return count > 0 ? sum / static_cast<double>(count) : -1;
}

std::string report_json(const ExtrapolationReport& r) {
  nlohmann::json j = {{"checkpoint", r.checkpoint},
                      {"split", r.split},
                      {"protocol", r.protocol},
                      {"stride", r.stride},
                      {"precision", r.precision},
                      {"scaling", r.scaling},
                      {"methods", r.methods},
                      {"train_length", r.train_length},
                      {"position", r.position},
                      {"task", r.task},
                      {"results", nlohmann::json::array()}};
  if (r.step >= 0) j["step"] = r.step;
  if (!r.task.empty()) j["holdout"] = r.holdout;
  if (r.temperature)
    j["temperature_fit"] = {{"c", r.temperature->c},
                            {"split", r.temperature->split},
                            {"lengths", r.temperature->lengths},
                            {"tokens", r.temperature->tokens},
                            {"trials", r.temperature->trials}};
  for (const auto& l : r.lengths) {
    nlohmann::json e = {{"length", l.length}, {"applicable", l.applicable}};
    if (l.size > 0) e["size"] = l.size;
    if (!l.applicable) {
      e["reason"] = l.reason;
    } else {
      std::vector<double> by_pos, cumulative;
      double sum = 0;
      int64_t count = 0;
      for (size_t k = 0; k < l.result.bucket_tokens.size(); ++k) {
        by_pos.push_back(l.result.bucket_tokens[k] ? l.result.bucket_loss_sum[k] / l.result.bucket_tokens[k] : 0.0);
        sum += l.result.bucket_loss_sum[k];
        count += l.result.bucket_tokens[k];
        cumulative.push_back(count ? sum / static_cast<double>(count) : 0.0);
      }
      e.update({{"loss", l.result.loss()},
                {"ppl", l.result.perplexity()},
                {"accuracy", l.result.accuracy()},
                {"tokens", l.result.tokens},
                {"seconds", l.seconds},
                {"peak_mem_gib", l.peak_mem_gib},
                {"attention", l.attention},
                {"loss_by_position", by_pos}});
      if (r.per_token) e["cumulative_loss"] = cumulative;
      if (!r.task.empty()) e.update({{"exact_match", l.result.exact_match()}, {"examples", l.result.sequences}});
      if (!l.result.floors.empty()) {
        nlohmann::json floors = nlohmann::json::object(), floors_accuracy = nlohmann::json::object();
        for (const auto& f : l.result.floors) {
          floors[f.name] = f.exact_match;
          floors_accuracy[f.name] = f.accuracy;
        }
        e["floors"] = floors;                    // the trivial strategies' exact match on the same examples
        e["floors_accuracy"] = floors_accuracy;  // and their token accuracy (flip-flop's per read)
      }
      if (l.result.seen_in_training >= 0) e["seen_in_training"] = l.result.seen_in_training;
    }
    j["results"].push_back(e);
  }
  if (!r.task_sizes.empty()) {
    j["task_sizes"] = r.task_sizes;
    j["mean_accuracy"] = mean_size_accuracy(r);  // Ruoss et al.'s score
  }
  return j.dump(2) + "\n";
}

std::string report_csv(const ExtrapolationReport& r) {
  std::ostringstream os;
  os << "position,scaling,protocol,length,applicable,loss,ppl,accuracy,tokens,seconds,peak_mem_gib,task,exact_match,"
        "size\n";
  for (const auto& l : r.lengths) {
    os << r.position << "," << r.scaling << "," << r.protocol << "," << l.length << "," << (l.applicable ? 1 : 0)
       << ",";
    if (l.applicable) {
      os << std::setprecision(10) << l.result.loss() << "," << l.result.perplexity() << "," << l.result.accuracy()
         << "," << l.result.tokens << "," << l.seconds << "," << l.peak_mem_gib << "," << r.task << ",";
      if (!r.task.empty()) os << l.result.exact_match();
    } else {
      os << ",,,,,," << r.task << ",";
    }
    os << ",";
    if (l.size > 0) os << l.size;
    os << "\n";
  }
  return os.str();
}

namespace {

// Under a task's table: each trivial strategy's exact match at every length (the floor its
// numbers are read against).
void print_floors(std::ostream& os, const ExtrapolationReport& r) {
  const auto first = std::find_if(r.lengths.begin(), r.lengths.end(),
                                  [](const LengthResult& l) { return l.applicable && !l.result.floors.empty(); });
  if (first == r.lengths.end()) return;
  os << "  floors (exact match of a trivial strategy on the same examples, by length):\n";
  for (size_t f = 0; f < first->result.floors.size(); ++f) {
    os << "    " << std::left << std::setw(24) << first->result.floors[f].name << std::right;
    for (const auto& l : r.lengths)
      if (l.applicable && f < l.result.floors.size())
        os << std::fixed << std::setprecision(4) << std::setw(8) << l.result.floors[f].exact_match;
    os << "\n";
  }
}

// Under a task's table: how many of each length's examples the run also trained on.
void print_seen(std::ostream& os, const ExtrapolationReport& r) {
  if (r.task.empty()) return;
  os << "  examples also seen in training ("
     << (r.holdout > 0 ? "held out: 1 in " + std::to_string(r.holdout) : std::string("data.task.holdout 0: no split"))
     << "):";
  for (const auto& l : r.lengths) {
    if (!l.applicable) continue;
    os << " "
       << (l.result.seen_in_training >= 0
               ? std::to_string(l.result.seen_in_training) + "/" + std::to_string(l.result.sequences)
               : std::string("not counted"))
       << " at " << l.length << ";";
  }
  os << "\n";
}

}  // namespace

std::string report_table(const ExtrapolationReport& r) {
  std::ostringstream os;
  const bool task = !r.task.empty();
  os << r.position << " (methods: " << r.methods << "), ";
  if (task)
    os << "task " << r.task;
  else
    os << r.protocol << " protocol, split " << r.split;
  os << ", trained at length " << r.train_length << ", " << r.precision << "\n";
  if (task)
    os << "  length" << (r.task_sizes.empty() ? "" : "  size")
       << "      loss  token acc  exact match  examples   seconds  peak GiB  attention\n";
  else
    os << "  length      loss       ppl   accuracy    tokens   seconds  peak GiB  attention\n";
  for (const auto& l : r.lengths) {
    os << std::setw(8) << l.length;
    if (!r.task_sizes.empty()) os << std::setw(6) << l.size;
    if (!l.applicable) {
      os << "       n/a  (" << l.reason << ")\n";
      continue;
    }
    os << std::fixed << std::setprecision(4) << std::setw(10) << l.result.loss();
    if (task)
      os << std::setw(11) << l.result.accuracy() << std::setw(13) << l.result.exact_match() << std::setw(10)
         << l.result.sequences;
    else
      os << std::setprecision(2) << std::setw(10) << l.result.perplexity() << std::setprecision(4) << std::setw(11)
         << l.result.accuracy() << std::setw(10) << l.result.tokens;
    os << std::setprecision(2) << std::setw(10) << l.seconds;
    if (l.peak_mem_gib > 0)
      os << std::setw(10) << l.peak_mem_gib;
    else
      os << std::setw(10) << "-";  // the CPU: no device memory to report
    os << "  " << l.attention << "\n";
  }
  print_floors(os, r);
  print_seen(os, r);
  if (!r.task_sizes.empty() && !r.lengths.empty())
    os << "  mean token accuracy over instance sizes " << r.lengths.front().size << ".." << r.lengths.back().size
       << " (" << r.lengths.size() << " sizes, Ruoss et al.'s score): " << std::setprecision(4) << mean_size_accuracy(r)
       << "\n";
  return os.str();
}

}  // namespace roformer::eval
