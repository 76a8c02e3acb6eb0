// Prompt scoring (see prompt_eval.h).
#include "roformer/eval/prompt_eval.h"

#include <torch/torch.h>

#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "roformer/common/autocast.h"
#include "roformer/common/log.h"
#include "roformer/config/position_families.h"

namespace roformer::eval {
namespace {

// One prompt, teacher-forced: the ids but the last in, the answer's positions scored.
PromptScore score_one(model::EncoderModel& model, const Prompt& p, const torch::Device& device, bool bf16) {
  const auto n = static_cast<int64_t>(p.ids.size());
  const torch::Tensor ids = torch::tensor(p.ids, torch::kLong);
  const torch::Tensor input = ids.slice(0, 0, n - 1).unsqueeze(0).to(device);
  // The last layer computes the answer's rows alone: rows [answer_start - 1, n - 1) of the input.
  const torch::Tensor scored = torch::arange(0, n - p.answer_start, torch::kLong).to(device);
  const torch::Tensor gold = ids.slice(0, p.answer_start, n).to(device);
  torch::Tensor logits;
  {
    const AutocastGuard autocast(bf16, device.type());
    logits = model->scored_logits(model->forward({input}, p.answer_start - 1), scored).to(torch::kFloat64);
  }
  const torch::Tensor predicted = logits.argmax(-1).cpu();
  PromptScore s;
  s.length = p.length;
  s.depth = p.depth;
  s.tokens = n;
  s.answer_tokens = n - p.answer_start;
  s.right = (predicted == gold.cpu()).sum().item<int64_t>();
  s.loss = model::token_cross_entropy(logits, gold).mean().item<double>();
  const auto a = predicted.accessor<int64_t, 1>();
  for (int64_t i = 0; i < a.size(0); ++i) s.predicted.push_back(a[i]);
  return s;
}

struct Cell {
  int64_t prompts = 0, exact = 0, answer_tokens = 0, right = 0;
  void add(const PromptScore& s) {
    ++prompts;
    exact += s.exact() ? 1 : 0;
    answer_tokens += s.answer_tokens;
    right += s.right;
  }
  double exact_match() const { return prompts ? static_cast<double>(exact) / static_cast<double>(prompts) : 0; }
  double accuracy() const {
    return answer_tokens ? static_cast<double>(right) / static_cast<double>(answer_tokens) : 0;
  }
};

}  // namespace

PromptReport score_prompts(LoadedCheckpoint& loaded, const PromptSet& set, const std::string& checkpoint) {
  PromptReport r;
  r.checkpoint = checkpoint;
  r.task = set.task;
  r.haystack = set.haystack;
  r.position = config::position_kind_names().name(loaded.config.model.position.kind);
  r.methods = applied_methods(loaded.config.model);
  r.train_length = loaded.config.data.seq_len;
  const bool bf16 = eval_uses_bf16(loaded.config.eval.precision, loaded.device);
  r.precision = bf16 ? "bf16" : "fp32";
  const bool was_training = loaded.model->is_training();
  loaded.model->eval();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < set.prompts.size(); ++i) {
    r.prompts.push_back(score_one(loaded.model, set.prompts[i], loaded.device, bf16));
    const PromptScore& s = r.prompts.back();
    log::info("prompt ", i + 1, " of ", set.prompts.size(), " (length ", s.length, ", depth ", s.depth, "): ", s.right,
              " of ", s.answer_tokens, " answer tokens", s.exact() ? ", exact" : "");
  }
  if (was_training) loaded.model->train();
  return r;
}

std::string prompt_report_table(const PromptReport& r) {
  std::map<int64_t, Cell> by_length;
  std::map<int64_t, std::map<double, Cell>> by_depth;
  for (const PromptScore& s : r.prompts) {
    by_length[s.length].add(s);
    by_depth[s.length][s.depth].add(s);
  }
  std::ostringstream os;
  os << r.position << " (methods: " << r.methods << "), " << r.task << " prompts (" << r.haystack
     << " haystack), trained at length " << r.train_length << ", " << r.precision << "\n"
     << "  exact match: every answer token the top prediction (what greedy decoding writes first)\n"
     << "  length  prompts  exact match  token acc   by depth:";
  const auto& depths = by_depth.begin()->second;
  for (const auto& [d, c] : depths) os << std::setw(7) << d;
  os << "\n";
  for (const auto& [L, c] : by_length) {
    os << std::setw(8) << L << std::setw(9) << c.prompts << std::fixed << std::setprecision(4) << std::setw(13)
       << c.exact_match() << std::setw(11) << c.accuracy() << "            ";
    for (const auto& [d, cell] : by_depth[L]) os << std::setprecision(2) << std::setw(7) << cell.exact_match();
    os << "\n";
  }
  return os.str();
}

std::string prompt_report_json(const PromptReport& r) {
  std::map<int64_t, Cell> by_length;
  for (const PromptScore& s : r.prompts) by_length[s.length].add(s);
  nlohmann::json j = {{"checkpoint", r.checkpoint},
                      {"task", r.task},
                      {"haystack", r.haystack},
                      {"position", r.position},
                      {"methods", r.methods},
                      {"precision", r.precision},
                      {"train_length", r.train_length},
                      {"lengths", nlohmann::json::array()},
                      {"prompts", nlohmann::json::array()}};
  for (const auto& [L, c] : by_length)
    j["lengths"].push_back(
        {{"length", L}, {"prompts", c.prompts}, {"exact_match", c.exact_match()}, {"accuracy", c.accuracy()}});
  for (const PromptScore& s : r.prompts)
    j["prompts"].push_back({{"length", s.length},
                            {"depth", s.depth},
                            {"tokens", s.tokens},
                            {"answer_tokens", s.answer_tokens},
                            {"right", s.right},
                            {"exact", s.exact()},
                            {"loss", s.loss},
                            {"predicted", s.predicted}});
  return j.dump(2) + "\n";
}

}  // namespace roformer::eval
