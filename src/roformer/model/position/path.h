// PaTH attention (Yang, Shen, Wen, Tan, Mishra, Ren, Panda, Kim; NeurIPS 2025; the authors' layer
// is flash-linear-attention's PaTHAttention): positions as accumulated, data-dependent
// Householder-like transforms. Per layer, from the layer's input x,
//   w_t    = l2norm_head(silu(conv3(W_up W_down x_t)))   (w_proj.0 / w_proj.1, w_conv1d; causal)
//   beta_t = 2 sigmoid(bt_proj(x_t))                     (in (0, 2): negative eigenvalues allowed)
//   H_t    = I - beta_t w_t w_t^T
// and the score of query i and key j is q_i . (H_i H_{i-1} ... H_{j+1} k_j) / sqrt(d). With
// path.forget_gate FoX's c_i - c_j joins before the scale, as the authors' reference does
// (PaTH-FoX). Causal only; no RoPE.
//
// The products are formed blockwise (path.block tokens), as the authors' kernel does: within a
// block by the UT transform (one triangular solve turns the block's sweep of reflections into
// matrix products), across blocks by each block's product M = H_e-1 ... H_s and its keys carried
// to the block's end, so a pass makes about S / block sequential steps of batched matrix
// products. Attention forms the scores; content_scores hands back PaTH's scores and
// score_term the gate.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <vector>

#include "roformer/model/position/position_encoding.h"

namespace roformer::model {

// One layer's PaTH parameters (the authors' names).
class PathLayerImpl : public torch::nn::Module {
 public:
  PathLayerImpl(const config::PathConfig& config, int64_t hidden, int64_t heads);
  torch::nn::ModuleList w_proj{nullptr};  // Linear hidden -> rank, Linear rank -> hidden, no biases
  torch::nn::Conv1d w_conv1d{nullptr};    // depthwise, width 3, no bias (path.short_conv)
  torch::nn::Linear bt_proj{nullptr};     // hidden -> heads
  torch::nn::Linear g_proj{nullptr};      // hidden -> heads (path.forget_gate)
};
TORCH_MODULE(PathLayer);

// The Householder vectors w [B, H, S, D] (unit per head) and beta [B, H, S] of one layer.
struct PathTransforms {
  torch::Tensor w, beta;
};

// What every block of query rows needs from the keys, formed once per layer and pass, block-major
// (blocks first, then batch x heads): the keys and w padded to whole blocks of `block` tokens
// ([n, B * H, block, D]), each block's UT transform T = (I + diag(beta) strictly_lower(W W^T))^-1
// diag(beta) and strictly_lower(W K^T) ([n, B * H, block, block]), its keys carried to its end
// (H_{e-1} ... H_{j+1} k_j) and its product H_{e-1} ... H_s ([n, B * H, D, D]).
struct PathKeyBlocks {
  int64_t length = 0, block = 0, blocks = 0;
  torch::Tensor keys, w, transform, key_reach, carried, product;
};
// Blocks of min(block, S rounded up to `multiple`) tokens.
PathKeyBlocks path_key_blocks(const torch::Tensor& k, const PathTransforms& t, int64_t block, int64_t multiple = 1);

// Query blocks [first, first + count) of q [B, H, S, D] against the key blocks, block-major: their
// raw scores with their own key blocks ([count, B * H, block, block], keys after the query 0)
// and their rows carried to their block's start ([count, B * H, block, D]).
struct PathQueryBlocks {
  torch::Tensor own, rows;
};
PathQueryBlocks path_query_blocks(const torch::Tensor& q, const PathKeyBlocks& keys, int64_t first, int64_t count);

// PaTH's raw scores q_i . (H_i ... H_{j+1} k_j) for query rows [begin, end) of q [B, H, S, D]
// -> [B, H, C, S]; keys after the query hold 0.
torch::Tensor path_scores(const torch::Tensor& q, const PathKeyBlocks& keys, int64_t begin, int64_t end);
// The same from k, w [B, H, S, D] and beta [B, H, S] directly.
torch::Tensor path_scores(const torch::Tensor& q, const torch::Tensor& k, const PathTransforms& t, int64_t begin,
                          int64_t end, int64_t block);

// PaTH's causal softmax attention softmax_j(scale (S_ij + c_i - c_j)) v over keys j <= i, by the
// sweep with an online softmax (path_evaluation.h) in blocks of `block` tokens: q, k, v [B, H, S, D],
// gate c [B, H, S] (FoX's running sums; undefined: none) -> [B, H, S, D]. No autograd.
torch::Tensor path_attention_swept(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const PathTransforms& t, const torch::Tensor& gate, double scale, int64_t block);

class PathImpl : public PositionEncodingImpl {
 public:
  PathImpl(const config::PathConfig& config, int64_t num_layers, int64_t hidden, int64_t heads);
  // w, beta (and FoX's c with the gate) packed as [B, H, S, D + 2] in fp32 (fp64 for a double model).
  torch::Tensor layer_state(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& positions,
                            int64_t layer, const torch::Tensor& segments) override;
  // PaTH's scores / sqrt(d) for query rows [begin, end), in state's precision.
  torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                               int64_t begin, int64_t end, const torch::Tensor& state) override;
  // PaTH-FoX's (c_i - c_j) / sqrt(d) for query rows [begin, end); undefined without the gate.
  torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& scores,
                           const torch::Tensor& positions, int64_t layer, int64_t begin, int64_t end,
                           const torch::Tensor& state) override;
  double score_term_bytes_per_pair(int64_t batch, int64_t heads, double elem) const override;
  // The whole attention in blocks (ops::path_block_attention) where they take the pass: on the
  // CPU with a block and head dim that are multiples of 8.
  std::optional<torch::Tensor> attend_in_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                const torch::Tensor& state, double scale) override;
  // The sweep with an online softmax by LibTorch ops (path_evaluation.h), on any device.
  torch::Tensor evaluate_in_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& state, double scale) override;
  // The Householder walk of tile attention (ops::PathTerm) over layer_state's w,
  // beta and c.
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t layer, const torch::Tensor& state, bool causal) override;

  torch::nn::ModuleList layer{nullptr};  // PathLayer per encoder layer

 private:
  config::PathConfig config_;
  int64_t heads_;
  std::vector<PathLayer> layers_;
  // The current layer's key blocks: attention asks for query rows from 0 upwards, so a request
  // for rows from 0 (or for another layer's state or keys) forms them anew.
  PathKeyBlocks key_blocks_;
  torch::Tensor key_blocks_state_;
};

}  // namespace roformer::model
