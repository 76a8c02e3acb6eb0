// Which kernel attention ran: while an AttentionKernelProbe is in scope on a thread, every
// attention call on that thread records its kernel (for SDPA, the backend LibTorch picks for the
// call's own arguments: flash, memory-efficient, cuDNN or math; else the explicit-scores or linear
// path). Training logs it for its first step and evaluation reports it per length, so a run that
// fell back to the math kernel says so; tests assert it. No probe, no cost beyond a thread-local read.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace roformer::model {

// Kernel names as the probe records them.
namespace attention_kernel {
inline constexpr const char* kExplicitScores = "explicit-scores";  // matmul + softmax formed here (score terms)
inline constexpr const char* kLinear = "linear";                   // linear attention (no scores)
inline constexpr const char* kShort = "short-attention";           // ops/short_attention (CPU)
inline constexpr const char* kTile = "tile-attention";             // ops/tile_attention (CPU evaluation, score terms)
}  // namespace attention_kernel

// "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math", "sdpa-overrideable" for an
// at::SDPBackend value; "sdpa-unknown(N)" for anything else.
std::string sdpa_kernel_name(int64_t backend);

// The backend at::scaled_dot_product_attention picks for exactly these arguments (it asks the
// same at::_fused_sdp_choice, under the same global switches), by name as above.
std::string sdpa_kernel_for(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::optional<at::Tensor>& mask, double dropout, bool causal);

class AttentionKernelProbe {
 public:
  AttentionKernelProbe();  // active on this thread until destroyed (an inner probe hides an outer one)
  ~AttentionKernelProbe();
  AttentionKernelProbe(const AttentionKernelProbe&) = delete;
  AttentionKernelProbe& operator=(const AttentionKernelProbe&) = delete;

  // The probe active on this thread, or nullptr.
  static AttentionKernelProbe* active();
  void record(const std::string& kernel);  // first sighting of each kernel is kept, in order

  const std::vector<std::string>& kernels() const { return kernels_; }
  // "sdpa-flash", or "sdpa-efficient + sdpa-math" when calls differed; "none" if nothing ran.
  std::string summary() const;

 private:
  std::vector<std::string> kernels_;
  AttentionKernelProbe* outer_;
};

}  // namespace roformer::model
