// Relative position encodings whose score term mixes content and position, the schemes RoFormer
// derives RoPE against (its section 2.2). Each adds score_term(q, k) to the scaled q.k scores
// of every layer (position_encoding.h), so attention forms the scores itself for them:
//   shaw           (Shaw et al. 2018, Eqs. 3-4): e_ij = q_i.(k_j + a^K_ij)/sqrt(d),
//                  z_i = sum_j p_ij (v_j + a^V_ij), a_ij = w_clip(j - i, k), tables shared by heads;
//   transformer_xl (Dai et al. 2019, Eq. for A^rel): (q_i + u).k_j + (q_i + v).W_kr R_{i-j}, R sinusoidal;
//   deberta        (He et al. 2021, Eq. 4): (q_i.k_j + q_i.K^r_d(i,j) + k_j.Q^r_d(j,i)) / sqrt(3d).
// Distances come from the position values (not their indices), so any positions work. Terms come
// for a range of query rows (all of them, or one block at long lengths): tables indexed by
// distance are gathered for those rows only, so no S x S table is kept past the whole-attention size.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <utility>
#include <vector>

#include "roformer/model/position/position_encoding.h"
#include "roformer/model/position/table_cache.h"

namespace roformer::model {

// Shaw's relative key/value tables for one layer (or all, when shared).
class ShawTablesImpl : public torch::nn::Module {
 public:
  ShawTablesImpl(int64_t max_distance, int64_t head_dim, bool values);
  torch::nn::Embedding relative_key{nullptr};    // weight [2k+1, D]: w^K_{-k..k}
  torch::nn::Embedding relative_value{nullptr};  // weight [2k+1, D]: w^V_{-k..k} (when values)
};
TORCH_MODULE(ShawTables);

class ShawImpl : public PositionEncodingImpl {
 public:
  ShawImpl(const config::ShawConfig& config, int64_t num_layers, int64_t head_dim);
  torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& scores,
                           const torch::Tensor& positions, int64_t layer, int64_t begin, int64_t end,
                           const torch::Tensor& /*state*/) override;
  torch::Tensor output_term(const torch::Tensor& probs, const torch::Tensor& positions, int64_t layer,
                            int64_t begin) override;
  // Causal: the key and value tables laid out by distance d = i - j >= 0 (row k - min(d, k)).
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t layer, const torch::Tensor& state, bool causal) override;

  torch::nn::ModuleList layer{nullptr};  // ShawTables: one per layer, or one shared

 private:
  const ShawTables& tables(int64_t layer_index) const { return tables_[config_.per_layer ? layer_index : 0]; }
  // Relative-distance row of w for query rows [begin, end) and every key: clip(j - i, -k, k) + k,
  // [C, S] or [B, C, S] (the whole [S, S] one cached per length).
  torch::Tensor table_index(const torch::Tensor& positions, int64_t begin, int64_t end);
  // For query rows [begin, end) and keys [0, keys): the columns [first, last) whose clipped
  // distance differs between rows; before `first` every row clips to -k, from `last` on to +k.
  // All keys for explicit positions.
  std::pair<int64_t, int64_t> clipped_columns(const torch::Tensor& positions, int64_t begin, int64_t end,
                                              int64_t keys) const;

  config::ShawConfig config_;
  std::vector<ShawTables> tables_;  // the modules in `layer`
  TableCache index_;                // the index of the current rows
};

// Transformer-XL's per-layer position parameters (Hugging Face TransfoXL names).
class XlLayerImpl : public torch::nn::Module {
 public:
  XlLayerImpl(int64_t hidden, int64_t num_heads);
  torch::nn::Linear r_net{nullptr};  // W_kr: weight [H*D, hidden], no bias
  torch::Tensor r_w_bias;            // u [H, D]
  torch::Tensor r_r_bias;            // v [H, D]
};
TORCH_MODULE(XlLayer);

class TransformerXlImpl : public PositionEncodingImpl {
 public:
  TransformerXlImpl(int64_t num_layers, int64_t hidden, int64_t num_heads);
  torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& scores,
                           const torch::Tensor& positions, int64_t layer, int64_t begin, int64_t end,
                           const torch::Tensor& /*state*/) override;
  // Causal: the content queries q + u, the position queries q + v and the table W_kr R_d of the
  // distances d in [0, S).
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t layer, const torch::Tensor& state, bool causal) override;

  torch::nn::ModuleList layer{nullptr};  // XlLayer per encoder layer

 private:
  int64_t hidden_;
  std::vector<XlLayer> layers_;  // the modules in `layer`
  TableCache angles_;            // float64 [S, hidden]: [sin(p w_f), cos(p w_f)] of the positions
};

// DeBERTa's bucket of a relative distance delta = i - j: exact up to k/2, then (with
// max_relative_positions > 0) logarithmic up to the outermost bucket; elementwise on int64.
torch::Tensor deberta_bucket(const torch::Tensor& delta, int64_t position_buckets, int64_t max_relative_positions);

// DeBERTa's per-layer projections of the shared relative embeddings (HF DebertaV2 names).
class DebertaLayerImpl : public torch::nn::Module {
 public:
  explicit DebertaLayerImpl(int64_t hidden);
  torch::nn::Linear pos_key_proj{nullptr};    // W_k,r: [H*D, hidden]
  torch::nn::Linear pos_query_proj{nullptr};  // W_q,r: [H*D, hidden]
};
TORCH_MODULE(DebertaLayer);

class DebertaImpl : public PositionEncodingImpl {
 public:
  DebertaImpl(const config::DebertaConfig& config, int64_t num_layers, int64_t hidden);
  // Without autograd, every key against every position embedding, k_j . Q^r_d, as [B, H, 2k, S]
  // (keys along the rows, so p2c gathers each block's [C, K] pairs in place), once per layer;
  // with autograd, undefined (each block forms its keys' own, so that one view of P serves both
  // of its terms and the gradients add in the same order when a layer is recomputed).
  torch::Tensor layer_state(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& positions,
                            int64_t layer, const torch::Tensor& segments) override;
  torch::Tensor score_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& scores,
                           const torch::Tensor& positions, int64_t layer, int64_t begin, int64_t end,
                           const torch::Tensor& state) override;
  double score_scale(int64_t head_dim) const override { return 1.0 / std::sqrt(3.0 * static_cast<double>(head_dim)); }
  // Causal: c2p's q . K^r per query and bucket, p2c's layer state (Q^r . k per bucket and key) and
  // the two buckets of each distance.
  std::optional<ops::TileTerm> tile_term(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                         int64_t layer, const torch::Tensor& state, bool causal) override;

  torch::nn::Embedding rel_embeddings{nullptr};  // P: weight [2k, hidden], shared by the layers
  torch::nn::ModuleList layer{nullptr};          // DebertaLayer per encoder layer

 private:
  // Rows of P for query rows i in [begin, end) and every key j: delta(i, j) for c2p and
  // delta(j, i) for p2c, both [C, S] or [B, C, S].
  std::pair<torch::Tensor, torch::Tensor> table_index(const torch::Tensor& positions, int64_t begin, int64_t end);
  // The shared embeddings P [2k, hidden], through a view of their own for each use.
  torch::Tensor shared_table() const;
  // P through a projection, per head: [H, D, 2k].
  torch::Tensor position_heads(const torch::Tensor& P, const torch::nn::Linear& proj, int64_t heads,
                               int64_t head_dim) const;
  // Q^r k_j for every key of k [B, H, K, D] and position embedding d, from heads [H, D, 2k]: [B, H, 2k, K].
  static torch::Tensor key_positions(const torch::Tensor& k, const torch::Tensor& heads);

  config::DebertaConfig config_;
  std::vector<DebertaLayer> layers_;  // the modules in `layer`
  TableCache deltas_;                 // int64 [2S - 1]: delta by offset key - query, for positions 0..S-1
};

}  // namespace roformer::model
