// Sinusoidal and learned absolute position encodings (see absolute.h).
#include "roformer/model/position/absolute.h"

#include <torch/torch.h>

#include "roformer/common/errors.h"

namespace roformer::model {

torch::Tensor sinusoidal_table(const torch::Tensor& positions, int64_t dim, torch::ScalarType dtype) {
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(positions.device());
  const torch::Tensor i = torch::arange(0, dim, 2, f64);                         // 2i
  const torch::Tensor inv = torch::pow(10000.0, -i / static_cast<double>(dim));  // [ceil(E/2)]
  const torch::Tensor angle = positions.to(f64).unsqueeze(-1) * inv;             // [.., S, ceil(E/2)]
  // Interleave: even features sin, odd features cos; an odd E drops the last cos.
  const torch::Tensor table = torch::stack({angle.sin(), angle.cos()}, -1).flatten(-2).narrow(-1, 0, dim);
  return table.to(dtype);
}

torch::Tensor SinusoidalPositionImpl::embed(const torch::Tensor& x, const torch::Tensor& positions) {
  if (positions.dim() == 1)  // 0..S-1: the same table every step
    return x + table_.get(x.device(), positions.size(0), x.scalar_type(),
                          [&] { return sinusoidal_table(positions, dim_, x.scalar_type()); });  // [S, E]
  return x + sinusoidal_table(positions, dim_, x.scalar_type());                                // [B, S, E]
}

LearnedPositionImpl::LearnedPositionImpl(int64_t max_positions, int64_t dim) : max_positions_(max_positions) {
  table = register_module("embedding", torch::nn::Embedding(max_positions, dim));
  traits_.rotation = Rotation::none;
}

torch::Tensor LearnedPositionImpl::embed(const torch::Tensor& x, const torch::Tensor& positions) {
  // Shared positions are 0..S-1, so the longest is known without reading the device.
  const int64_t longest = positions.dim() == 1     ? positions.size(0)
                          : positions.numel() == 0 ? 0
                                                   : positions.max().item<int64_t>() + 1;
  if (longest > max_positions_)
    throw UserError("learned position embeddings have " + std::to_string(max_positions_) +
                    " rows but the input needs position " + std::to_string(longest - 1) + " (sequence length " +
                    std::to_string(longest) +
                    "); this family cannot run longer sequences than model.position.max_positions");
  return x + table->forward(positions);
}

std::shared_ptr<PositionEncodingImpl> make_sinusoidal_position(const config::ModelConfig& m) {
  return std::make_shared<SinusoidalPositionImpl>(m.embed_dim());
}

std::shared_ptr<PositionEncodingImpl> make_learned_position(const config::ModelConfig& m) {
  return std::make_shared<LearnedPositionImpl>(m.position.max_positions, m.embed_dim());
}

std::shared_ptr<PositionEncodingImpl> make_none_position(const config::ModelConfig& m) {
  return std::make_shared<NoPositionImpl>();
}

}  // namespace roformer::model
