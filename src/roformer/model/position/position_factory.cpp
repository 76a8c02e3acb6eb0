// make_position_encoding: model.position.kind to the family's factory (make_kind_position, in
// its own file), from the list of families; and the seam's defaults.
#include <ATen/ops/matmul.h>

#include <stdexcept>

#include "roformer/model/position/position_encoding.h"

namespace roformer::model {

torch::Tensor PositionEncodingImpl::content_scores(const torch::Tensor& q, const torch::Tensor& k,
                                                   const torch::Tensor& /*positions*/, int64_t begin, int64_t end,
                                                   const torch::Tensor& /*state*/) {
  return at::matmul(q.narrow(2, begin, end - begin), k.transpose(-2, -1)) * score_scale(q.size(-1));
}

torch::Tensor PositionEncodingImpl::short_attention_with_term(const torch::Tensor& /*q*/, const torch::Tensor& /*k*/,
                                                              const torch::Tensor& /*v*/, const ops::TileTerm& /*term*/,
                                                              double /*scale*/, bool /*causal*/) {
  throw std::logic_error("short_attention_with_term: this family's term has no short-kernel form");
}

std::shared_ptr<PositionEncodingImpl> make_position_encoding(const config::ModelConfig& m) {
  switch (m.position.kind) {
#define ROFORMER_POSITION_CASE(kind) \
  case config::PositionKind::kind:   \
    return make_##kind##_position(m);
    ROFORMER_POSITION_FAMILIES(ROFORMER_POSITION_CASE)
#undef ROFORMER_POSITION_CASE
  }
  throw std::logic_error("make_position_encoding: a kind outside the list of families");
}

}  // namespace roformer::model
