// Activation checkpointing of one encoder layer (see activation_checkpoint.h).
#include "roformer/model/activation_checkpoint.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include <mutex>
#include <optional>

#include "roformer/common/autocast.h"

namespace roformer::model {
namespace {

// The default generator of a device type: its state now, and putting a state back.
class GeneratorState {
 public:
  explicit GeneratorState(const torch::Device& device) : generator_(at::globalContext().defaultGenerator(device)) {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    state_ = generator_.get_state();
  }
  void restore() {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(state_);
  }

 private:
  at::Generator generator_;
  torch::Tensor state_;
};

// What backward needs besides the saved tensors: the layer, its context and the forward's RNG
// and autocast state.
struct RecomputeState : torch::CustomClassHolder {
  LayerForward layer;
  AttentionContext ctx;
  std::vector<GeneratorState> generators;  // CPU, and the input's CUDA device
  bool autocast = false;
  std::vector<bool> mask_defined;  // which of the mask's differentiable() tensors were passed
};

std::vector<GeneratorState> generator_states(const torch::Device& device) {
  std::vector<GeneratorState> states{GeneratorState(torch::kCPU)};
  if (device.is_cuda()) states.emplace_back(device);
  return states;
}

// A leaf standing for `t` in the recomputation (undefined stays undefined).
torch::Tensor recompute_leaf(const torch::Tensor& t) {
  if (!t.defined()) return t;
  return t.detach().requires_grad_(t.requires_grad());
}

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // The tensors come as TensorLists (each element an input of the node; undefined ones left out).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, at::TensorList parameters,
                               at::TensorList mask_tensors, const c10::intrusive_ptr<RecomputeState>& state) {
    state->generators = generator_states(x.device());
    state->autocast = at::autocast::is_autocast_enabled(at::kCUDA);
    std::vector<torch::Tensor> saved{x};
    saved.insert(saved.end(), parameters.begin(), parameters.end());
    saved.insert(saved.end(), mask_tensors.begin(), mask_tensors.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["state"] = at::IValue::make_capsule(state);
    ctx->saved_data["parameters"] = static_cast<int64_t>(parameters.size());
    return state->layer(x, state->ctx);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_output) {
    auto state = c10::static_intrusive_pointer_cast<RecomputeState>(ctx->saved_data["state"].toCapsule());
    const int64_t n_parameters = ctx->saved_data["parameters"].toInt();
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    // The recomputation's leaves: the input, the parameters as they are, the mask's tensors.
    std::vector<torch::Tensor> leaves{saved[0].detach().requires_grad_(true)};
    leaves.insert(leaves.end(), saved.begin() + 1, saved.begin() + 1 + n_parameters);
    std::vector<torch::Tensor> mask_leaves;  // in differentiable()'s slots, undefined where not passed
    auto passed = saved.begin() + 1 + n_parameters;
    for (bool defined : state->mask_defined)
      mask_leaves.push_back(defined ? recompute_leaf(*passed++) : torch::Tensor());
    for (const auto& t : mask_leaves)
      if (t.defined()) leaves.push_back(t);
    AttentionContext recompute_ctx = state->ctx;
    recompute_ctx.mask = state->ctx.mask.with_differentiable(mask_leaves);

    std::vector<GeneratorState> now = generator_states(saved[0].device());
    for (auto& g : state->generators) g.restore();
    torch::Tensor out;
    {
      torch::AutoGradMode grad_on(true);
      AutocastGuard autocast(state->autocast);
      out = state->layer(leaves[0], recompute_ctx);
    }
    for (auto& g : now) g.restore();

    std::vector<torch::Tensor> wrt;  // the leaves that take a gradient
    std::vector<size_t> slot;
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (leaves[i].defined() && leaves[i].requires_grad()) {
        wrt.push_back(leaves[i]);
        slot.push_back(i);
      }
    }
    const torch::autograd::variable_list grads =
        torch::autograd::grad({out}, wrt, {grad_output[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                              /*allow_unused=*/true);
    torch::autograd::variable_list result(leaves.size() + 1);  // + the state argument (no gradient)
    for (size_t j = 0; j < wrt.size(); ++j) result[slot[j]] = grads[j];
    return result;
  }
};

}  // namespace

torch::Tensor checkpointed_layer(LayerForward layer, const torch::Tensor& x, const AttentionContext& ctx,
                                 const std::vector<torch::Tensor>& parameters) {
  auto state = c10::make_intrusive<RecomputeState>();
  state->layer = std::move(layer);
  state->ctx = ctx;
  std::vector<torch::Tensor> mask_tensors;
  for (const auto& t : ctx.mask.differentiable()) {
    state->mask_defined.push_back(t.defined());
    if (t.defined()) mask_tensors.push_back(t);
  }
  return CheckpointFunction::apply(x, at::TensorList(parameters), at::TensorList(mask_tensors), state);
}

}  // namespace roformer::model
