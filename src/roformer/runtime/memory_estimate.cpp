// Memory estimate from a config (see memory_estimate.h). Every count is a double, so absurd
// dimensions give an absurd (finite or infinite) estimate rather than a wrapped integer.
#include "roformer/runtime/memory_estimate.h"

#include <sys/resource.h>
#include <unistd.h>

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "roformer/common/errors.h"
#include "roformer/config/layer_layout.h"
#include "roformer/config/position_families.h"

namespace roformer::runtime {
namespace {

// The bytes a cgroup memory file allows; 0 for "max", no file or a value that means no limit.
double cgroup_file_limit(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v)) return 0;
  char* end = nullptr;
  const double b = std::strtod(v.c_str(), &end);
  return *end == '\0' && b > 0 && b < 1e18 ? b : 0;  // cgroup v1 writes about 2^63 for none
}

// The smallest cgroup memory limit over this process: v2 memory.max and v1
// memory.limit_in_bytes, at the root a container sees and at the process's own cgroup path.
double cgroup_memory_limit() {
  double best = 0;
  const auto take = [&best](double b) {
    if (b > 0 && (best == 0 || b < best)) best = b;
  };
  take(cgroup_file_limit("/sys/fs/cgroup/memory.max"));
  take(cgroup_file_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {  // "0::/path" (v2) or "4:memory:/path" (v1)
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos || line.size() <= b + 2) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) take(cgroup_file_limit("/sys/fs/cgroup" + path + "/memory.max"));
    if (controllers.find("memory") != std::string::npos)
      take(cgroup_file_limit("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes"));
  }
  return best;
}

// What RLIMIT_AS (ulimit -v) leaves: the limit less what is mapped now; 0 without a limit.
double address_space_left() {
  rlimit r{};
  if (::getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  std::ifstream in("/proc/self/statm");
  double mapped_pages = 0;
  in >> mapped_pages;
  return std::max(1.0, double(r.rlim_cur) - mapped_pages * double(::sysconf(_SC_PAGE_SIZE)));
}

struct HostMemory {
  double bytes;
  std::string what;  // how the message says it: "this machine has", ...
};

// The memory this process may allocate: physical RAM, or less where a cgroup limit or the
// address-space limit says so.
HostMemory host_memory() {
  HostMemory m{double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE)), "this machine has"};
  if (const double c = cgroup_memory_limit(); c > 0 && c < m.bytes) m = {c, "its memory limit (cgroup) is"};
  if (const double a = address_space_left(); a > 0 && a < m.bytes)
    m = {a, "the address-space limit (ulimit -v) leaves"};
  return m;
}

std::string gib(double bytes) {
  char buf[64];
  if (!std::isfinite(bytes) || bytes > 1e30) return "more than 1e21 GiB";
  std::snprintf(buf, sizeof buf, "%.3g GiB", bytes / double(1 << 30));
  return buf;
}

std::string count(double n) {
  char buf[64];
  if (!std::isfinite(n) || n > 1e30) return "more than 1e30";
  if (n >= 1e12)
    std::snprintf(buf, sizeof buf, "%.3g", n);
  else if (n >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3gB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3gM", n / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

// Parameters of build_model's encoder: embeddings (the decoder is tied to them unless
// model.tie_output is false), layers (each projection's bias as model.*_bias says), head; the
// position family's own parameters (its row in config/position_families); the attention
// options' (QK-norm, output gate, SSMax).
double count_parameters(const config::ModelConfig& m) {
  const double H = double(m.hidden_size), F = double(m.ffn_size), E = double(m.embed_dim());
  const double V = double(m.vocab_size), L = double(m.num_layers);
  double n = V * E + double(m.type_vocab_size) * E;                           // word + type embeddings
  if (m.embedding_norm) n += 2 * E;                                           // their LayerNorm
  if (m.embed_dim() != m.hidden_size) n += E * H + H;                         // projection
  const double norm = m.norm_kind == config::NormKind::rms_norm ? H : 2 * H;  // RMSNorm has no bias
  const double ffn_bias = m.ffn_bias ? 1.0 : 0.0;
  const double up = (m.feed_forward == config::FeedForwardKind::glu ? 2.0 : 1.0) * (H * F + ffn_bias * F);
  const double KV = double(m.kv_heads() * m.head_dim());  // key/value width (grouped-query attention)
  const double A = double(m.attention_width());           // the queries' width (H unless model.head_dim)
  const double qkv = H * A + 2 * H * KV + (m.qkv_bias ? A + 2 * KV : 0.0);
  n += L * (qkv + A * H + (m.output_bias ? H : 0.0) + norm + up + F * H + ffn_bias * H + norm);
  if (m.norm != config::NormPlacement::post) n += norm;                              // final norm
  if (m.norm == config::NormPlacement::sandwich) n += L * 2 * norm;                  // the sublayers' output norms
  if (m.lm_head == config::LmHeadKind::transform) n += H * E + E + 2 * E + V;        // transform, its LayerNorm, bias
  if (!m.tie_output) n += V * (m.lm_head == config::LmHeadKind::transform ? E : H);  // the decoder's own weight
  n += config::position_parameters(m);                                               // the position family's own
  for (int64_t i = 0; i < m.num_layers; ++i)  // q_norm, k_norm: [heads, head_dim] each (a layout's kinds may differ)
    if (config::layer_model(m, config::is_global_layer(m, i)).qk_norm) n += A + KV;
  if (m.output_gate) n += L * H * A;                                                     // W_g
  if (m.output_norm) n += L * A;                                                         // [heads, head_dim]
  if (m.kv_shift) n += L * 2 * H * double(m.kv_heads());                                 // two W [kv_heads, H]
  if (m.attention_scale == config::AttentionScale::ssmax) n += L * double(m.num_heads);  // s per head
  return n;
}

}  // namespace

std::string MemoryEstimate::describe() const {
  return "at least " + gib(total()) + " (" + count(parameters) + " parameters: " + gib(weight_bytes) + " of weights" +
         (state_bytes > 0 ? ", " + gib(state_bytes) + " of gradients and AdamW state" : std::string()) + ", " +
         gib(activation_bytes) + " of activations)";
}

MemoryEstimate estimate_memory(const config::ModelConfig& m, int64_t batch, int64_t length, bool training, bool bf16,
                               int64_t checkpoint_every) {
  MemoryEstimate e;
  e.parameters = count_parameters(m);
  e.weight_bytes = 4 * e.parameters;
  if (training) e.state_bytes = 3 * e.weight_bytes;
  const double tokens = double(batch) * double(length), act = bf16 ? 2 : 4;
  const double H = double(m.hidden_size), F = double(m.ffn_size), V = double(m.vocab_size);
  // Lower bounds: what backward must keep per layer (layer input, q, k, v, attention output, the
  // FFN's two hidden tensors, the two LayerNorm outputs), or one layer's live tensors without
  // gradients; plus the fp32 logits of one pass over the vocabulary. A checkpointed layer keeps
  // its input only, and backward holds one of them recomputed at a time.
  const double A = double(m.attention_width());  // q and the attention output (H unless model.head_dim)
  const double kept = 6 * H + 2 * A + 2 * F;
  double per_layer = 3 * H + A + F;
  if (training) {
    per_layer = 0;
    for (int64_t i = 0; i < m.num_layers; ++i)
      per_layer += config::is_checkpointed_layer(i, checkpoint_every) ? H : kept;
    if (checkpoint_every > 0) per_layer += kept;
  }
  e.activation_bytes = tokens * (per_layer * act + (training ? V * 4 * 0.15 : 0));
  return e;
}

double device_memory_bytes(const torch::Device& device) {
#ifdef ROFORMER_WITH_CUDA
  if (device.is_cuda()) return double(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
#endif
  (void)device;
  return host_memory().bytes;
}

void check_fits_device(const MemoryEstimate& estimate, const torch::Device& device, const std::string& what,
                       const std::string& what_to_lower) {
  const HostMemory host = device.is_cuda() ? HostMemory{device_memory_bytes(device), "the GPU has"} : host_memory();
  if (host.bytes <= 0 || estimate.total() <= host.bytes) return;
  throw UserError(what + " needs " + estimate.describe() + " but " + host.what + " " + gib(host.bytes) + "; lower " +
                  what_to_lower);
}

}  // namespace roformer::runtime
