// make_position_encoding: the only place that maps model.position.kind to a class; and the
// seam's default content scores.
#include <ATen/ops/matmul.h>

#include <stdexcept>

#include "roformer/model/position/absolute.h"
#include "roformer/model/position/cope.h"
#include "roformer/model/position/fire.h"
#include "roformer/model/position/fox.h"
#include "roformer/model/position/kerple_sandwich.h"
#include "roformer/model/position/path.h"
#include "roformer/model/position/relative_bias.h"
#include "roformer/model/position/relative_terms.h"
#include "roformer/model/position/rope.h"
#include "roformer/model/position/rope_remap.h"
#include "roformer/model/position/xpos.h"

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
  using config::PositionKind;
  switch (m.position.kind) {
    case PositionKind::rope:
      if (m.position.rope.mode != config::RopeMode::rotate)
        return std::make_shared<RopeRemapImpl>(m.position.rope, m.head_dim(), m.objective == config::Objective::mlm);
      return std::make_shared<RopeImpl>(m.position.rope, m.head_dim());
    case PositionKind::sinusoidal:
      return std::make_shared<SinusoidalPositionImpl>(m.embed_dim());
    case PositionKind::learned:
      return std::make_shared<LearnedPositionImpl>(m.position.max_positions, m.embed_dim());
    case PositionKind::t5_bias:
      return std::make_shared<T5BiasImpl>(m.position.t5_bias, m.num_heads, m.objective == config::Objective::mlm);
    case PositionKind::alibi:
      return std::make_shared<AlibiImpl>(m.num_heads);
    case PositionKind::none:
      return std::make_shared<NoPositionImpl>();
    case PositionKind::shaw:
      return std::make_shared<ShawImpl>(m.position.shaw, m.num_layers, m.head_dim());
    case PositionKind::transformer_xl:
      return std::make_shared<TransformerXlImpl>(m.num_layers, m.hidden_size, m.num_heads);
    case PositionKind::deberta:
      return std::make_shared<DebertaImpl>(m.position.deberta, m.num_layers, m.hidden_size);
    case PositionKind::xpos:
      return std::make_shared<XposImpl>(m.position.rope, m.position.xpos, m.head_dim());
    case PositionKind::fire:
      return std::make_shared<FireImpl>(m.position.fire, m.num_layers, m.num_heads,
                                        m.objective == config::Objective::mlm);
    case PositionKind::kerple:
      return std::make_shared<KerpleImpl>(m.position.kerple, m.num_heads);
    case PositionKind::sandwich:
      return std::make_shared<SandwichImpl>(m.position.sandwich.resolved_dim(m.head_dim()), m.num_heads);
    case PositionKind::cope:
      return std::make_shared<CopeImpl>(m.position.cope, m.num_layers, m.head_dim());
    case PositionKind::path:
      return std::make_shared<PathImpl>(m.position.path, m.num_layers, m.hidden_size, m.num_heads);
    case PositionKind::fox:
      return std::make_shared<FoxImpl>(m.position, m.num_layers, m.hidden_size, m.num_heads,
                                       m.objective == config::Objective::mlm);
  }
  return std::make_shared<NoPositionImpl>();
}

}  // namespace roformer::model
