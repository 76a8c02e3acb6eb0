// Tile attention with its backward in tiles (see tile_attention.h): the autograd Function that
// saves the output and each row's log-sum-exp and calls tile_attention_backward.
#include <torch/autograd.h>

#include <vector>

#include "roformer/ops/tile_attention/tile_attention.h"

namespace roformer::ops {
namespace tile_attention_training {

// What backward needs besides the saved tensors.
struct Call : torch::CustomClassHolder {
  TileTerm term;
  torch::Tensor key_lengths;
  double scale = 1;
  bool causal = true;
  TileNormalizer normalizer = TileNormalizer::softmax;
  std::vector<size_t> term_slots;  // per defined tensor of the term (inputs 3..): its index in the term's list
  size_t term_tensors = 0;
};

class TileAttentionFunction : public torch::autograd::Function<TileAttentionFunction> {
 public:
  // inputs: the scoring q and k, v, then the term's defined tensors.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, at::TensorList inputs,
                               const c10::intrusive_ptr<Call>& call) {
    const bool softmax = call->normalizer == TileNormalizer::softmax;
    auto [out, lse] = tile_attention_with_lse(inputs[0], inputs[1], inputs[2], call->scale, call->causal, call->term,
                                              call->normalizer, call->key_lengths, softmax);
    std::vector<torch::Tensor> saved(inputs.begin(), inputs.begin() + 3);
    saved.push_back(out);
    saved.push_back(lse);  // undefined for stick-breaking
    ctx->save_for_backward(saved);
    ctx->saved_data["call"] = at::IValue::make_capsule(call);
    ctx->saved_data["inputs"] = static_cast<int64_t>(inputs.size());
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_output) {
    auto call = c10::static_intrusive_pointer_cast<Call>(ctx->saved_data["call"].toCapsule());
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    // The term's tensors are the scoring q and k where it replaces them: its q and k are saved ones.
    TileAttentionGrads grads =
        tile_attention_backward(saved[0], saved[1], saved[2], call->scale, call->causal, call->term, call->normalizer,
                                call->key_lengths, saved[3], saved[4], grad_output[0]);
    torch::autograd::variable_list result(static_cast<size_t>(ctx->saved_data["inputs"].toInt()) + 1);
    result[0] = grads.q.to(saved[0].scalar_type());
    result[1] = grads.k.to(saved[1].scalar_type());
    result[2] = grads.v.to(saved[2].scalar_type());
    for (size_t i = 0; i < call->term_slots.size(); ++i) result[3 + i] = grads.term.at(call->term_slots[i]);
    return result;  // the last: the call argument, no gradient
  }
};

}  // namespace tile_attention_training

torch::Tensor tile_attention_trainable(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       double scale, bool causal, const TileTerm& term, TileNormalizer normalizer,
                                       const torch::Tensor& key_lengths) {
  TORCH_CHECK(tile_attention_trains(term, normalizer),
              "roformer::tile_attention_trainable: this term has no backward in tiles under this normaliser (or has "
              "rotations; CoPE's takes softmax only)");
  auto call = c10::make_intrusive<tile_attention_training::Call>();
  call->term = term;
  call->key_lengths = key_lengths;
  call->scale = scale;
  call->causal = causal;
  call->normalizer = normalizer;
  std::vector<torch::Tensor> inputs{term.q.defined() ? term.q : q, term.k.defined() ? term.k : k, v};
  const std::vector<torch::Tensor> term_tensors = tile_term_grad_tensors(term);
  for (size_t i = 0; i < term_tensors.size(); ++i) {
    if (!term_tensors[i].defined()) continue;
    inputs.push_back(term_tensors[i]);
    call->term_slots.push_back(i);
  }
  return tile_attention_training::TileAttentionFunction::apply(at::TensorList(inputs), call);
}

}  // namespace roformer::ops
