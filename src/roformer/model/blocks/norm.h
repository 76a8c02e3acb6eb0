// The layer's normalisation as a part, chosen by model.norm_kind: LayerNorm (BERT, RoFormer;
// registered as `LayerNorm`, weight and bias) or RMSNorm (Llama and its descendants: x / rms(x)
// * weight, no bias; registered as `RMSNorm`). Also DenseNorm, BERT's output part (a dense layer
// whose output is normalised after the residual add), and the two helpers the layers use:
// norm(x), which keeps a half-precision stream in its dtype, and add_norm(x, residual), through
// the fused add + LayerNorm op where model.norm_kernel picks it.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <string>

#include "roformer/config/config.h"

namespace roformer::model {

// x / rms(x) over the last dimension, computed in float32 (float64 for a double x) and returned in
// that precision: the math RMSNorm and QK-norm's per-head norm share.
torch::Tensor rms_normalized(const torch::Tensor& x, double eps);

// RMSNorm as transformers' LlamaRMSNorm computes it: in float32 (float64 for a double input),
// then weight * normed cast back to the input's dtype; with an offset (Gemma's 1), as
// Gemma3RMSNorm: normed * (offset + weight) in float32, then cast.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t width, double eps, double offset = 0.0);
  torch::Tensor forward(const torch::Tensor& x) const;
  double eps() const { return eps_; }
  torch::Tensor weight;  // [width], initialised to 1 - offset (a scale of one)

 private:
  double eps_, offset_;
};
TORCH_MODULE(RmsNorm);

// One norm of a layer: exactly one of the two modules is set, registered on its parent module.
class NormPart {
 public:
  NormPart() = default;
  // Registered on `parent` as prefix + "LayerNorm" or prefix + "RMSNorm"; offset: RMSNorm's.
  NormPart(torch::nn::Module& parent, config::NormKind kind, int64_t width, double eps, double offset = 0.0,
           const std::string& prefix = "");
  torch::Tensor forward(const torch::Tensor& x) const;
  // forward(x + residual); LayerNorm through the fused op unless `kernel` is reference.
  torch::Tensor add_norm(const torch::Tensor& x, const torch::Tensor& residual, config::NormKernel kernel) const;
  bool empty() const { return layer_norm.is_empty() && rms_norm.is_empty(); }

  torch::nn::LayerNorm layer_norm{nullptr};
  RmsNorm rms_norm{nullptr};
};

// LayerNorm that keeps a bf16/fp16 input in its dtype (see norm.cpp).
torch::Tensor norm(torch::nn::LayerNorm ln, const torch::Tensor& x);

class DenseNormImpl : public torch::nn::Module {
 public:
  DenseNormImpl(int64_t in, int64_t out, double eps, config::NormKind kind = config::NormKind::layer_norm,
                bool bias = true, double offset = 0.0, bool with_post_norm = false);
  torch::nn::Linear dense{nullptr};  // weight [out, in]
  NormPart norm;                     // [out]
  NormPart post_norm;                // [out], model.norm sandwich: on the sublayer's output (post_RMSNorm)
};
TORCH_MODULE(DenseNorm);

}  // namespace roformer::model
