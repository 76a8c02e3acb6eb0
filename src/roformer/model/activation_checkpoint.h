// Activation checkpointing (train.activation_checkpointing): a layer runs its forward without
// keeping its activations, and backward recomputes them, so a checkpointed layer holds only its
// input until then. The C++ frontend has no torch.utils.checkpoint; this is a custom autograd
// function in the manner of its reentrant variant:
//   forward   the layer under no-grad; saved: its input, the generator states and autocast;
//   backward  the generators set back to the forward's states (dropout draws the same masks),
//             the layer run again with autograd on, and torch::autograd::grad of its output with
//             respect to its input, the parameters it may use and the mask's differentiable
//             tensors; the generators are then put back where backward found them.
// The gradients are those of the unchecked layer, bitwise on the CPU where each gradient reaches
// its tensor the same number of times (always for parameters; for a relative-bias mask while it
// is built whole, not in query-row blocks).
#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

#include "roformer/model/attention.h"

namespace roformer::model {

// A layer's forward: its output for x under ctx. It must stay callable until backward has run
// (capture the layer's module holder, not a reference to a local).
using LayerForward = std::function<torch::Tensor(const torch::Tensor& x, const AttentionContext& ctx)>;

// The layer's output for x under ctx, from a forward that keeps no activations. `parameters`: every
// trainable tensor the layer may read besides x and ctx (its own and its position modules'); the
// mask's differentiable tensors are found in ctx. Only meaningful with autograd on.
torch::Tensor checkpointed_layer(LayerForward layer, const torch::Tensor& x, const AttentionContext& ctx,
                                 const std::vector<torch::Tensor>& parameters);

}  // namespace roformer::model
