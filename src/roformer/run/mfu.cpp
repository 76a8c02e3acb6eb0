// FLOPs per token and device peaks (see mfu.h).
#include "roformer/run/mfu.h"

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <string>
#include <utility>
#include <vector>

namespace roformer::run {

double training_flops_per_token(const config::ModelConfig& m, const config::DataConfig& data) {
  const double H = static_cast<double>(m.hidden_size), F = static_cast<double>(m.ffn_size);
  const double E = static_cast<double>(m.embed_dim()), V = static_cast<double>(m.vocab_size);
  const double L = static_cast<double>(m.num_layers), S = static_cast<double>(data.seq_len);
  const double ffn_matrices = m.feed_forward == config::FeedForwardKind::glu ? 3 : 2;  // GLU: gate, up, down
  const double KV = static_cast<double>(m.kv_heads() * m.head_dim());                  // key/value width
  const double A = static_cast<double>(m.attention_width());                           // the queries' width
  double matmul_params =
      L * (2 * H * A + 2 * H * KV + ffn_matrices * H * F) + H * E;  // q, o, k, v, FFN; head transform
  if (m.embed_dim() != m.hidden_size) matmul_params += E * H;       // embedding projection
  const double scored = m.objective == config::Objective::mlm ? data.mask_prob : 1.0;
  return 6 * matmul_params + 6 * E * V * scored + 12 * L * A * S;
}

std::string device_name(const torch::Device& device) {
#ifdef ROFORMER_WITH_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index())->name;
#endif
  return "";
}

double peak_tflops(const config::TrainConfig& t, const torch::Device& device, bool bf16) {
  if (t.peak_tflops > 0) return t.peak_tflops;
  const std::string name = device_name(device);
  if (name.empty()) return 0;
  // Dense bf16 tensor-core peaks from the vendor's datasheets (first match wins).
  static const std::vector<std::pair<const char*, double>> kPeaks{
      {"H100 PCIe", 756}, {"H100 NVL", 835}, {"H100", 989}, {"H200", 989},     {"GH200", 989},
      {"B200", 2250},     {"B100", 1750},    {"A100", 312}, {"A800", 312},     {"L40S", 362},
      {"L4", 121},        {"A10G", 70},      {"A10", 125},  {"RTX 4090", 165}, {"V100", 125}};
  for (const auto& [needle, peak] : kPeaks)
    if (name.find(needle) != std::string::npos) return bf16 ? peak : peak / 2;
  return 0;
}

}  // namespace roformer::run
