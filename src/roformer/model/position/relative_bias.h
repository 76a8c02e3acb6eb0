// Relative position encodings as additive attention-score biases of the offset key - query,
// returned as one [H, 2S - 1] row per head (attention_mask.h builds the score rows from it):
//   t5_bias (Raffel et al. 2020): a learned scalar per (log-spaced distance bucket, head);
//   alibi   (Press et al. 2022): a fixed per-head slope times the distance, -m_h |i - j|.
#pragma once

#include <torch/nn/modules/embedding.h>

#include <vector>

#include "roformer/model/position/position_encoding.h"
#include "roformer/model/position/table_cache.h"

namespace roformer::model {

// T5's bucket of relative position (key - query). Bidirectional halves the buckets between the
// two directions; causal uses all of them for the past. Elementwise on an int64 tensor.
torch::Tensor t5_relative_bucket(const torch::Tensor& relative, bool bidirectional, int64_t num_buckets,
                                 int64_t max_distance);

class T5BiasImpl : public PositionEncodingImpl {
 public:
  T5BiasImpl(const config::T5BiasConfig& config, int64_t num_heads, bool bidirectional);
  torch::Tensor relative_bias(int64_t S, const torch::Device& device) override;

  torch::nn::Embedding relative_attention_bias{nullptr};  // weight [num_buckets, H]

 private:
  config::T5BiasConfig config_;
  bool bidirectional_;
  TableCache buckets_;  // int64 [2S - 1] bucket ids per offset (the learned values are looked up each pass)
};

// ALiBi head slopes: geometric from 2^(-8/n) for n a power of two; otherwise the slopes of the
// closest lower power of two c followed by every other slope of 2c (official code, BLOOM).
std::vector<double> alibi_slopes(int64_t num_heads);

class AlibiImpl : public PositionEncodingImpl {
 public:
  explicit AlibiImpl(int64_t num_heads);
  torch::Tensor relative_bias(int64_t S, const torch::Device& device) override;

 private:
  std::vector<double> slopes_;
  TableCache bias_;  // float64 [H, 2S - 1]
};

}  // namespace roformer::model
