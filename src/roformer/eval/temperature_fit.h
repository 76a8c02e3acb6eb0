// DroPE's evaluation temperature (Gelberg et al. 2025): on a pass of S tokens past the training
// length L every logit is multiplied by 1 + c ln(S / L) (model.attention_scale drope, c =
// model.attention_scale_factor), with c fitted on held-out data. `roformer eval
// --fit-temperature` fits c here: the mean loss on the valid split over the evaluation lengths
// past L, minimised over c in [0, 2] by golden-section search (c = 0, no temperature, is always
// among the trials), then the evaluation runs with the best c tried.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "roformer/config/config.h"

namespace roformer::eval {

struct TemperatureFit {
  double c = 0;                                   // the best c tried
  std::vector<int64_t> lengths;                   // the lengths it was fitted at (past the training length)
  int64_t tokens = 0;                             // tokens per length and trial
  std::string split;                              // the split it was fitted on
  std::vector<std::pair<double, double>> trials;  // (c, mean loss), in the order tried
};

// The mean corpus loss of the checkpoint being fitted with `overrides` applied (the evaluation's
// own scorer, eval::mean_corpus_loss, passed in so the fit sits below it).
using CorpusLoss = std::function<double(const std::vector<std::string>& overrides)>;

// Fits c for the checkpoint at `dir` under `overrides` (its resolved config: `cfg`), scoring each
// trial with `mean_loss`. UserError when no evaluation length passes the training length, or for
// a task checkpoint.
TemperatureFit fit_temperature(const std::string& dir, const std::vector<std::string>& overrides,
                               const config::Config& cfg, const CorpusLoss& mean_loss);

// The overrides that evaluate with DroPE's temperature at `c`.
std::vector<std::string> temperature_overrides(double c);

}  // namespace roformer::eval
