// FIRE (Li et al., ICLR 2024, "Functional Interpolation for Relative Positions Improves Long
// Context Transformers"): a learned bias of the query's distance to a key, progressively
// interpolated by the query's position so every input of the MLP lies in [0, 1]:
//   b(i, j) = f(psi(|i - j|) / (psi(max(L, i)) + eps)),  psi(x) = log(|c x| + 1),
// f an MLP 1 -> mlp_width -> heads (ReLU), c (init 0.1) and L = |L_multiplier * l_init| learned
// (L_multiplier init 1), eps = 1e-6; one FIRE for all layers by default (fire.shared_layers).
// The paper defines causal attention. Bidirectional attention (MLM) is our extension: keys at
// or before the query use that MLP as written; keys after it use a second MLP, normalised by
// the farthest key on that side, psi(max(L, p_last - i)); so each side is causal FIRE read in
// its own direction and every input stays in [0, 1].
// The bias depends on the query position, not only on the offset, so it is a score term built
// per block of query rows (position_encoding.h): memory grows with S at long lengths.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include <utility>
#include <vector>

#include "roformer/model/position/position_encoding.h"

namespace roformer::model {

// f: Linear(1, width), ReLU, Linear(width, heads).
class FireMlpImpl : public torch::nn::Module {
 public:
  FireMlpImpl(int64_t width, int64_t num_heads);
  // x [...] -> [..., heads]
  torch::Tensor forward(const torch::Tensor& x);
  // The same function heads first, x [...] -> [heads, ...], with forward's values and gradients
  // (to rounding): with one input the MLP is linear between its hidden units' kinks -b/w, so
  // each x takes its segment's slope and intercept per head (two gathers) instead of a
  // width-wide hidden layer per pair.
  torch::Tensor by_head(const torch::Tensor& x);
  // That piecewise-linear form: the kinks [W] ascending (no gradient), and per head the slope
  // and intercept of each segment [H, W + 1] (differentiable), in dtype dt.
  struct Piecewise {
    torch::Tensor kinks, slope, intercept;
  };
  Piecewise piecewise(torch::ScalarType dt);
  torch::nn::Linear hidden{nullptr}, out{nullptr};
};
TORCH_MODULE(FireMlp);

// One FIRE: c, L_multiplier and the MLP of each attended side.
class FireFunctionImpl : public torch::nn::Module {
 public:
  FireFunctionImpl(const config::FireConfig& config, int64_t num_heads, bool bidirectional);
  torch::Tensor c;             // scalar, psi's scale
  torch::Tensor L_multiplier;  // scalar, L = |L_multiplier * l_init|
  FireMlp past{nullptr};       // keys at or before the query (the paper's f)
  FireMlp future{nullptr};     // keys after the query (bidirectional only)
};
TORCH_MODULE(FireFunction);

// The position of the last token of each token's document, [S] or [B, S] like `positions`:
// positions restart at each packed document (data.packing documents), so a document ends where
// the next position does not grow, or at the row's end (contiguous and randomized positions).
torch::Tensor last_in_document(const torch::Tensor& positions);

// The MLP inputs for query rows [begin, end) of `positions` ([S] or [B, S]) and the keys
// [0, keys) (-1: all S): for keys at or before the query, and (bidirectional) for keys after
// it; each [C, keys] or [B, C, keys] in the dtype of c. `threshold` is L.
std::pair<torch::Tensor, torch::Tensor> fire_inputs(const torch::Tensor& positions, const torch::Tensor& c,
                                                    const torch::Tensor& threshold, int64_t begin, int64_t end,
                                                    bool bidirectional, int64_t keys = -1);

class FireImpl : public PositionEncodingImpl {
 public:
  FireImpl(const config::FireConfig& config, int64_t num_layers, int64_t num_heads, bool bidirectional);
  torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& scores,
                           const torch::Tensor& positions, int64_t layer, int64_t begin, int64_t end,
                           const torch::Tensor& state) override;
  // Over packed documents (segments defined; causal FIRE, table within kTableBytes): the bias of
  // every (query, key) position pair in [0, S), [S, S, H], computed once per layer; score_term
  // then gathers each row's pairs from it instead of running the MLP per row.
  torch::Tensor layer_state(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& positions,
                            int64_t layer, const torch::Tensor& segments) override;
  // Causal FIRE: its MLP's piecewise-linear form and psi's constants.
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t layer, const torch::Tensor& state, bool causal) override;
  double score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const override;
  void reset_parameters() override;

  static constexpr double kEps = 1e-6;
  static constexpr double kTableBytes = 256.0 * (1 << 20);

  torch::nn::ModuleList layer{nullptr};  // FireFunction: one shared, or one per layer

 private:
  config::FireConfig config_;
  int64_t num_heads_;
  bool bidirectional_;
  std::vector<FireFunction> functions_;  // the modules in `layer`
};

}  // namespace roformer::model
