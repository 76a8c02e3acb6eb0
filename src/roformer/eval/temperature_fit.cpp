// DroPE's evaluation temperature, fitted on held-out data (see temperature_fit.h).
#include "roformer/eval/temperature_fit.h"

#include <algorithm>
#include <cmath>

#include "roformer/common/errors.h"
#include "roformer/common/log.h"
#include "roformer/common/strings.h"

namespace roformer::eval {
namespace {

constexpr double kLowest = 0.0, kHighest = 2.0;  // DroPE's fits: 0.412 from scratch, 0.103 for SmolLM
constexpr int kGoldenSteps = 12;                 // the bracket shrinks to 2 x 0.618^12 = 0.006
constexpr const char* kFitSplit = "valid";

std::string list(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

}  // namespace

std::vector<std::string> temperature_overrides(double c) {
  return {"model.attention_scale=drope", "model.attention_scale_factor=" + shortest_double(c)};
}

TemperatureFit fit_temperature(const std::string& dir, const std::vector<std::string>& overrides,
                               const config::Config& cfg, const CorpusLoss& mean_loss) {
  if (cfg.data.task.name != config::TaskKind::none)
    throw UserError("eval.fit_temperature fits DroPE's c on the corpus's loss; '" + dir +
                    "' is a task checkpoint: set model.attention_scale=drope and attention_scale_factor yourself");
  const int64_t trained = cfg.model.attention_scale_length > 0 ? cfg.model.attention_scale_length : cfg.data.seq_len;
  TemperatureFit fit;
  for (int64_t L : cfg.eval.lengths)
    if (L > trained) fit.lengths.push_back(L);
  if (fit.lengths.empty())
    throw UserError("eval.fit_temperature fits DroPE's c at lengths past the training length " +
                    std::to_string(trained) + ", and --lengths has none; add one (e.g. --lengths " +
                    std::to_string(2 * trained) + "," + std::to_string(4 * trained) + ")");
  fit.tokens = cfg.eval.fit_tokens;
  fit.split = kFitSplit;
  if (cfg.eval.split == kFitSplit)
    log::warn(
        "eval.fit_temperature fits c on the valid split, which this evaluation also scores; "
        "set eval.split=test for results the fit has not seen");
  log::info("DroPE temperature: fitting c in [", kLowest, ", ", kHighest, "] on ", kFitSplit, " at lengths ",
            list(fit.lengths), " (", fit.tokens, " tokens each)");
  auto loss_at = [&](double c) {
    std::vector<std::string> o = overrides;
    for (const std::string& s : temperature_overrides(c)) o.push_back(s);
    o.insert(o.end(), {"eval.split=" + std::string(kFitSplit), "eval.max_tokens=" + std::to_string(fit.tokens),
                       "eval.lengths=[" + list(fit.lengths) + "]", "eval.fit_temperature=false"});
    const double loss = mean_loss(o);
    fit.trials.emplace_back(c, loss);
    log::debug("DroPE temperature: c ", c, " -> loss ", loss);
    return loss;
  };
  loss_at(0.0);  // no temperature: the baseline every fit is compared with
  const double ratio = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = kLowest, b = kHighest, x1 = b - ratio * (b - a), x2 = a + ratio * (b - a);
  double f1 = loss_at(x1), f2 = loss_at(x2);
  for (int step = 0; step < kGoldenSteps; ++step) {
    if (f1 <= f2) {
      b = x2, x2 = x1, f2 = f1, x1 = b - ratio * (b - a), f1 = loss_at(x1);
    } else {
      a = x1, x1 = x2, f1 = f2, x2 = a + ratio * (b - a), f2 = loss_at(x2);
    }
  }
  const auto best = std::min_element(fit.trials.begin(), fit.trials.end(),
                                     [](const auto& p, const auto& q) { return p.second < q.second; });
  fit.c = best->first;
  log::info("DroPE temperature: c = ", fit.c, " (", kFitSplit, " loss ", best->second, "; without it ",
            fit.trials.front().second, ")");
  return fit;
}

}  // namespace roformer::eval
