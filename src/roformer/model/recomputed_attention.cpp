// Attention with its gradient recomputed in query blocks (see recomputed_attention.h).
#include "roformer/model/recomputed_attention.h"

#include <torch/autograd.h>

#include <algorithm>
#include <utility>

namespace roformer::model {
namespace recomputed_attention {

// What backward needs besides the saved tensors.
struct Recompute : torch::CustomClassHolder {
  AttentionForward forward;
  AttentionRows rows;
  int64_t block_rows = 0;
  bool has_state = false;
};

// The gradient of the block sum rows(begin, end) . grad[begin, end) with respect to `wrt`,
// added into `sums` (undefined until a block reaches it). The graph is retained: a family may
// share a part of it between a layer's blocks (PaTH's key blocks, formed at the first); each
// block's own part goes with its output at the end of the call.
void add_block_gradient(const Recompute& r, const std::vector<torch::Tensor>& leaves,
                        const std::vector<torch::Tensor>& wrt, const torch::Tensor& grad, int64_t begin, int64_t end,
                        std::vector<torch::Tensor>& sums) {
  torch::Tensor out;
  {
    torch::AutoGradMode grad_on(true);
    out = r.rows(leaves[0], leaves[1], leaves[2], r.has_state ? leaves[3] : torch::Tensor(), begin, end);
  }
  const torch::autograd::variable_list grads =
      torch::autograd::grad({out}, wrt, {grad.narrow(2, begin, end - begin).to(out.scalar_type())},
                            /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
  for (size_t j = 0; j < wrt.size(); ++j) {
    if (!grads[j].defined()) continue;
    if (sums[j].defined()) {
      sums[j].add_(grads[j]);
    } else {
      sums[j] = grads[j].clone(at::MemoryFormat::Contiguous);
    }
  }
}

class RecomputedAttentionFunction : public torch::autograd::Function<RecomputedAttentionFunction> {
 public:
  // inputs: q, k, v, the state (when has_state), then the parameters.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, at::TensorList inputs,
                               const c10::intrusive_ptr<Recompute>& recompute) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["recompute"] = at::IValue::make_capsule(recompute);
    return recompute->forward(inputs[0], inputs[1], inputs[2], recompute->has_state ? inputs[3] : torch::Tensor());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_output) {
    auto r = c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data["recompute"].toCapsule());
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const size_t operands = r->has_state ? 4 : 3;
    // The recomputation's leaves: the operands detached, the parameters as they are.
    std::vector<torch::Tensor> leaves;
    for (size_t i = 0; i < saved.size(); ++i)
      leaves.push_back(i < operands ? saved[i].detach().requires_grad_(saved[i].requires_grad()) : saved[i]);
    std::vector<torch::Tensor> wrt;  // the leaves that take a gradient
    std::vector<size_t> slot;
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (leaves[i].requires_grad()) {
        wrt.push_back(leaves[i]);
        slot.push_back(i);
      }
    }
    torch::autograd::variable_list result(saved.size() + 1);  // + the recompute argument (no gradient)
    if (wrt.empty()) return result;
    const int64_t S = saved[0].size(2);
    std::vector<torch::Tensor> sums(wrt.size());
    for (int64_t begin = 0; begin < S; begin += r->block_rows)
      add_block_gradient(*r, leaves, wrt, grad_output[0], begin, std::min(S, begin + r->block_rows), sums);
    for (size_t j = 0; j < wrt.size(); ++j) result[slot[j]] = std::move(sums[j]);
    return result;
  }
};

}  // namespace recomputed_attention

torch::Tensor attention_with_recomputed_gradient(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                 const torch::Tensor& state,
                                                 const std::vector<torch::Tensor>& parameters, AttentionForward forward,
                                                 AttentionRows rows, int64_t block_rows) {
  TORCH_CHECK(block_rows >= 1, "attention_with_recomputed_gradient: block_rows must be positive, got ", block_rows);
  auto recompute = c10::make_intrusive<recomputed_attention::Recompute>();
  recompute->forward = std::move(forward);
  recompute->rows = std::move(rows);
  recompute->block_rows = block_rows;
  recompute->has_state = state.defined();
  std::vector<torch::Tensor> inputs{q, k, v};
  if (state.defined()) inputs.push_back(state);
  inputs.insert(inputs.end(), parameters.begin(), parameters.end());
  return recomputed_attention::RecomputedAttentionFunction::apply(at::TensorList(inputs), recompute);
}

}  // namespace roformer::model
