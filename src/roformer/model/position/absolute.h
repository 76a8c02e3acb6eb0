// Absolute position encodings, added to the token embeddings before the embedding LayerNorm:
//   sinusoidal (Vaswani et al. 2017), computed from the position, no length limit;
//   learned (BERT), a trained table of max_positions rows.
#pragma once

#include <torch/nn/modules/embedding.h>

#include "roformer/model/position/position_encoding.h"
#include "roformer/model/position/table_cache.h"

namespace roformer::model {

// PE(pos, 2i) = sin(pos / 10000^(2i/E)), PE(pos, 2i+1) = cos(pos / 10000^(2i/E)).
// Layout: Vaswani's interleaved sin/cos. The concatenated [sin | cos] layout of
// tensor2tensor/fairseq is the same encoding under a fixed permutation of embedding features,
// so for models trained from scratch the choice does not matter; we keep the paper's formula
// so the test can check it literally. Values are computed in double, then cast.
torch::Tensor sinusoidal_table(const torch::Tensor& positions, int64_t dim, torch::ScalarType dtype);

class SinusoidalPositionImpl : public PositionEncodingImpl {
 public:
  explicit SinusoidalPositionImpl(int64_t dim) : dim_(dim) { traits_.rotation = Rotation::none; }
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) override;

 private:
  int64_t dim_;
  TableCache table_;  // [S, E] for shared positions 0..S-1
};

class LearnedPositionImpl : public PositionEncodingImpl {
 public:
  LearnedPositionImpl(int64_t max_positions, int64_t dim);
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) override;

  torch::nn::Embedding table{nullptr};  // weight [max_positions, E]

 private:
  int64_t max_positions_;
};

}  // namespace roformer::model
