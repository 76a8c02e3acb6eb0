// See attention_kernel.h.
#include "roformer/model/attention_kernel.h"

#include <ATen/SDPBackend.h>
#include <ATen/autocast_mode.h>
#include <ATen/ops/_fused_sdp_choice.h>

#include <algorithm>

namespace roformer::model {
namespace {

thread_local AttentionKernelProbe* active_probe = nullptr;

// What autocast hands SDPA (it is on autocast's lower-precision list): floating tensors other
// than double in the autocast dtype. _fused_sdp_choice is on no list, so the cast is done here.
at::Tensor as_autocast_sees(const at::Tensor& t) {
  const at::DeviceType type = t.device().type();
  if (!at::autocast::is_autocast_enabled(type) || !t.is_floating_point() || t.scalar_type() == at::kDouble) return t;
  return t.to(at::autocast::get_autocast_dtype(type));
}

}  // namespace

std::string sdpa_kernel_name(int64_t backend) {
  switch (static_cast<at::SDPBackend>(backend)) {
    case at::SDPBackend::math:
      return "sdpa-math";
    case at::SDPBackend::flash_attention:
      return "sdpa-flash";
    case at::SDPBackend::efficient_attention:
      return "sdpa-efficient";
    case at::SDPBackend::cudnn_attention:
      return "sdpa-cudnn";
    case at::SDPBackend::overrideable:
      return "sdpa-overrideable";
    default:
      return "sdpa-unknown(" + std::to_string(backend) + ")";
  }
}

std::string sdpa_kernel_for(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::optional<at::Tensor>& mask, double dropout, bool causal) {
  std::optional<at::Tensor> m;
  if (mask.has_value() && mask->defined()) m = as_autocast_sees(*mask);
  return sdpa_kernel_name(
      at::_fused_sdp_choice(as_autocast_sees(q), as_autocast_sees(k), as_autocast_sees(v), m, dropout, causal));
}

AttentionKernelProbe::AttentionKernelProbe() : outer_(active_probe) {
  active_probe = this;
}

AttentionKernelProbe::~AttentionKernelProbe() {
  active_probe = outer_;
}

AttentionKernelProbe* AttentionKernelProbe::active() {
  return active_probe;
}

void AttentionKernelProbe::record(const std::string& kernel) {
  if (std::find(kernels_.begin(), kernels_.end(), kernel) == kernels_.end()) kernels_.push_back(kernel);
}

std::string AttentionKernelProbe::summary() const {
  if (kernels_.empty()) return "none";
  std::string s;
  for (const std::string& k : kernels_) s += (s.empty() ? "" : " + ") + k;
  return s;
}

}  // namespace roformer::model
