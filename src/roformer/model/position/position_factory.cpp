// make_position_encoding: the only place that maps model.position.kind to a class.
#include "roformer/model/position/absolute.h"
#include "roformer/model/position/relative_bias.h"
#include "roformer/model/position/rope.h"

namespace roformer::model {

std::shared_ptr<PositionEncodingImpl> make_position_encoding(const config::ModelConfig& m) {
  using config::PositionKind;
  switch (m.position.kind) {
    case PositionKind::rope:
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
  }
  return std::make_shared<NoPositionImpl>();
}

}  // namespace roformer::model
