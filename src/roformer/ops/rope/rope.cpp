// Fused RoPE op: argument checks, the RopeLaunch description, device dispatch, the autograd
// Function (backward = the same kernel with the sine negated, nothing saved but positions,
// frequencies and the optional (cos, sin) table), rope_table() and the TORCH_LIBRARY(roformer) registration with CPU,
// CUDA and Autograd kernels.
#include "roformer/ops/rope/rope.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <torch/autograd.h>
#include <torch/library.h>

#ifdef ROFORMER_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/rope/rope_kernels.h"

namespace roformer::ops {
namespace {

// Element strides in (b, s, h, d) order for the layout.
void bshd_strides(const at::Tensor& t, RopeLayout layout, int64_t* out) {
  if (layout == RopeLayout::bshd) {
    out[0] = t.stride(0), out[1] = t.stride(1), out[2] = t.stride(2), out[3] = t.stride(3);
  } else {
    out[0] = t.stride(0), out[1] = t.stride(2), out[2] = t.stride(1), out[3] = t.stride(3);
  }
}

struct Prepared {
  RopeLaunch launch;
  at::Tensor positions, inv_freq;  // kept alive (device copies) while the kernel runs
};

// Autograd Functions cannot take an undefined tensor as an input: an empty one means no table.
at::Tensor table_or_empty(const at::Tensor& table) {
  return table.defined() ? table : at::empty({0}, at::TensorOptions().dtype(at::kFloat));
}

// Attaches the optional (cos, sin) table to the launch after checking it.
void attach_table(const at::Tensor& table, const at::Tensor& x0, RopeLaunch* p) {
  if (!table.defined() || (table.dim() == 1 && table.numel() == 0) || p->dtype == KernelDType::f64) return;
  TORCH_CHECK(
      table.scalar_type() == at::kFloat && table.dim() == 2 && table.size(1) == p->rotary_dim && table.is_contiguous(),
      "roformer::rope: cos_sin must be a contiguous float32 [rows, rotary_dim = ", p->rotary_dim,
      "] table (rope_table), got ", table.scalar_type(), " ", table.sizes());
  TORCH_CHECK(table.device() == x0.device(), "roformer::rope: cos_sin is on ", table.device(), ", the inputs on ",
              x0.device(), "; build it once per device (rope_table(...).to(device))");
  p->cos_sin = table.data_ptr<float>();
  p->cos_sin_rows = table.size(0);
}

// Checks the arguments and describes the launch; outs may alias xs (in place).
Prepared prepare(const std::vector<at::Tensor>& xs, const std::vector<at::Tensor>& outs, const at::Tensor& positions,
                 const RopeSpec& spec, double sign) {
  TORCH_CHECK(!xs.empty() && xs.size() <= 3, "roformer::rope: expects 1 to 3 tensors (q, k, v), got ", xs.size());
  const at::Tensor& x0 = xs[0];
  TORCH_CHECK(x0.dim() == 4, "roformer::rope: tensors must be 4-D (", spec.layout == RopeLayout::bshd ? "BSHD" : "BHSD",
              "), got ", x0.sizes());
  const int64_t seq_dim = spec.layout == RopeLayout::bshd ? 1 : 2, head_axis = spec.layout == RopeLayout::bshd ? 2 : 1;
  Prepared out;
  RopeLaunch& p = out.launch;
  p.batch = x0.size(0);
  p.seq = x0.size(seq_dim);
  p.head_dim = x0.size(3);
  p.rotary_dim = spec.rotary_dim > 0 ? spec.rotary_dim : p.head_dim;
  TORCH_CHECK(p.rotary_dim % 2 == 0 && p.rotary_dim <= p.head_dim, "roformer::rope: rotary_dim ", p.rotary_dim,
              " must be even and at most head_dim ", p.head_dim);
  p.dtype = to_kernel_dtype(x0.scalar_type(), "roformer::rope");
  p.interleaved = spec.interleaved;
  p.sign = sign;
  p.num_tensors = static_cast<int>(xs.size());
  p.position_scale = spec.position_scale;
  p.inplace = xs[0].data_ptr() == outs[0].data_ptr();
  for (size_t j = 0; j < xs.size(); ++j) {
    const at::Tensor& x = xs[j];
    TORCH_CHECK(x.dim() == 4 && x.size(0) == p.batch && x.size(seq_dim) == p.seq && x.size(3) == p.head_dim,
                "roformer::rope: tensor ", j, " has shape ", x.sizes(), ", incompatible with tensor 0's ", x0.sizes());
    TORCH_CHECK(x.scalar_type() == x0.scalar_type() && x.device() == x0.device(),
                "roformer::rope: all tensors must share dtype and device");
    RopeTensorArgs& t = p.tensors[j];
    t.in = x.data_ptr();
    t.out = outs[j].data_ptr();
    t.heads = x.size(head_axis);
    t.magnitude = j < 2 ? spec.magnitude : 1.0;
    bshd_strides(x, spec.layout, t.in_stride);
    bshd_strides(outs[j], spec.layout, t.out_stride);
  }
  TORCH_CHECK(positions.scalar_type() == at::kLong, "roformer::rope: positions must be int64, got ",
              positions.scalar_type());
  out.positions = positions.to(x0.device());
  if (spec.position_offsets) {
    TORCH_CHECK(positions.dim() == 1 && positions.size(0) == p.batch, "roformer::rope: offsets must be [B] = [",
                p.batch, "], got ", positions.sizes());
    p.position_mode = RopePositionMode::offsets;
    p.position_stride_b = out.positions.stride(0);
  } else if (positions.dim() == 1) {
    TORCH_CHECK(positions.size(0) == p.seq, "roformer::rope: positions [S] must have S = ", p.seq, ", got ",
                positions.sizes());
    p.position_mode = RopePositionMode::shared;
    p.position_stride_s = out.positions.stride(0);
  } else {
    TORCH_CHECK(positions.dim() == 2 && positions.size(0) == p.batch && positions.size(1) == p.seq,
                "roformer::rope: positions must be [S], [B, S] or (with offsets) [B]; got ", positions.sizes());
    p.position_mode = RopePositionMode::explicit_ids;
    p.position_stride_b = out.positions.stride(0);
    p.position_stride_s = out.positions.stride(1);
  }
  p.positions = out.positions.data_ptr<int64_t>();
  TORCH_CHECK(spec.inv_freq.defined() && spec.inv_freq.numel() == p.rotary_dim / 2,
              "roformer::rope: inv_freq must hold rotary_dim/2 = ", p.rotary_dim / 2, " values");
  out.inv_freq = spec.inv_freq.to(x0.device(), at::kDouble).contiguous();
  p.inv_freq = out.inv_freq.data_ptr<double>();
  attach_table(spec.cos_sin, x0, &p);
  return out;
}

void run(const Prepared& prepared, const at::Device& device) {
  if (device.is_cpu()) return rope_cpu(prepared.launch);
#ifdef ROFORMER_WITH_CUDA
  if (device.is_cuda()) {
    const c10::cuda::CUDAGuard guard(device);
    return rope_cuda(prepared.launch, c10::cuda::getCurrentCUDAStream(device.index()).stream());
  }
#endif
  TORCH_CHECK(false, "roformer::rope: no kernel for device ", device, " in this build");
}

// Outputs are BSHD in memory whatever the layout argument: for BHSD that is a transposed view,
// the layout attention kernels read best and the one the projection's gradient needs (so the
// backward pass reaches the projection without a transposing copy).
at::Tensor empty_output(const at::Tensor& x, RopeLayout layout) {
  if (layout == RopeLayout::bshd) return at::empty(x.sizes(), x.options());
  return at::empty({x.size(0), x.size(2), x.size(1), x.size(3)}, x.options()).transpose(1, 2);
}

std::vector<at::Tensor> rotate_copy(const std::vector<at::Tensor>& xs, const at::Tensor& positions,
                                    const RopeSpec& spec, double sign) {
  std::vector<at::Tensor> outs;
  for (const auto& x : xs) {
    if (!x.defined()) break;
    outs.push_back(empty_output(x, spec.layout));
  }
  std::vector<at::Tensor> ins(xs.begin(), xs.begin() + static_cast<long>(outs.size()));
  const Prepared prepared = prepare(ins, outs, positions, spec, sign);
  run(prepared, ins[0].device());
  return outs;
}

// ---- autograd -----------------------------------------------------------------------------
RopeSpec spec_from(const at::Tensor& inv_freq, double position_scale, double magnitude, bool interleaved,
                   int64_t rotary_dim, bool bshd, bool offsets, const at::Tensor& cos_sin) {
  RopeSpec s;
  s.inv_freq = inv_freq;
  s.cos_sin = cos_sin;
  s.position_scale = position_scale;
  s.magnitude = magnitude;
  s.interleaved = interleaved;
  s.rotary_dim = rotary_dim;
  s.layout = bshd ? RopeLayout::bshd : RopeLayout::bhsd;
  s.position_offsets = offsets;
  return s;
}

struct RopeFunction : public torch::autograd::Function<RopeFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::TensorList xs,
                                                const at::Tensor& positions, const at::Tensor& inv_freq,
                                                double position_scale, double magnitude, bool interleaved,
                                                int64_t rotary_dim, bool bshd, bool offsets,
                                                const at::Tensor& cos_sin) {
    at::AutoDispatchBelowADInplaceOrView guard;
    const RopeSpec spec =
        spec_from(inv_freq, position_scale, magnitude, interleaved, rotary_dim, bshd, offsets, cos_sin);
    ctx->save_for_backward({positions, inv_freq, cos_sin});
    ctx->saved_data["n"] = static_cast<int64_t>(xs.size());
    for (size_t j = 0; j < xs.size(); ++j) ctx->saved_data["shape" + std::to_string(j)] = xs[j].sizes().vec();
    ctx->saved_data["position_scale"] = position_scale;
    ctx->saved_data["magnitude"] = magnitude;
    ctx->saved_data["interleaved"] = interleaved;
    ctx->saved_data["rotary_dim"] = rotary_dim;
    ctx->saved_data["bshd"] = bshd;
    ctx->saved_data["offsets"] = offsets;
    return rotate_copy(xs.vec(), positions, spec, 1.0);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const RopeSpec spec =
        spec_from(saved[1], ctx->saved_data["position_scale"].toDouble(), ctx->saved_data["magnitude"].toDouble(),
                  ctx->saved_data["interleaved"].toBool(), ctx->saved_data["rotary_dim"].toInt(),
                  ctx->saved_data["bshd"].toBool(), ctx->saved_data["offsets"].toBool(), saved[2]);
    const int64_t n = ctx->saved_data["n"].toInt();
    // An output nobody used arrives undefined; its gradient is zero (one launch for all).
    std::vector<at::Tensor> g(grads.begin(), grads.begin() + n);
    at::TensorOptions options;
    for (const auto& other : g)
      if (other.defined()) options = other.options();
    for (int64_t j = 0; j < n; ++j)
      if (!g[j].defined()) g[j] = at::zeros(ctx->saved_data["shape" + std::to_string(j)].toIntVector(), options);
    torch::autograd::variable_list result = rope_backward(g, saved[0], spec);
    // One entry per forward input: the n tensors, positions, inv_freq, six scalars, cos_sin (none).
    result.resize(static_cast<size_t>(n) + 9);
    return result;
  }
};

// ---- dispatcher entry points --------------------------------------------------------------
std::vector<at::Tensor> rope_entry(at::TensorList xs, const at::Tensor& positions, const at::Tensor& inv_freq,
                                   double position_scale, double magnitude, bool interleaved, int64_t rotary_dim,
                                   bool bshd, bool offsets, const std::optional<at::Tensor>& cos_sin) {
  return rotate_copy(xs.vec(), positions,
                     spec_from(inv_freq, position_scale, magnitude, interleaved, rotary_dim, bshd, offsets,
                               cos_sin.value_or(at::Tensor())),
                     1.0);
}

// What PyTorch's own in-place ops refuse: a tensor that autograd tracks (rope_ has no backward;
// a leaf that requires grad would be changed under autograd) and one whose elements share
// memory (an expand()ed tensor: each write would rotate some values twice).
void check_writable_in_place(at::TensorList xs) {
  for (const auto& x : xs) {
    TORCH_CHECK(!(x.requires_grad() && at::GradMode::is_enabled()),
                "roformer::rope_: in-place rotation is for inference and has no backward; a tensor that requires "
                "grad (a leaf or not) must use roformer::rope, or run under torch.no_grad()");
    at::assert_no_internal_overlap(x);
  }
}

void rope_inplace_entry(at::TensorList xs, const at::Tensor& positions, const at::Tensor& inv_freq,
                        double position_scale, double magnitude, bool interleaved, int64_t rotary_dim, bool bshd,
                        bool offsets, const std::optional<at::Tensor>& cos_sin) {
  check_writable_in_place(xs);
  const RopeSpec spec = spec_from(inv_freq, position_scale, magnitude, interleaved, rotary_dim, bshd, offsets,
                                  cos_sin.value_or(at::Tensor()));
  const std::vector<at::Tensor> v = xs.vec();
  const Prepared prepared = prepare(v, v, positions, spec, 1.0);
  run(prepared, v[0].device());
}

// rope_ seen by autograd: refuses tracked tensors (the device kernels below would not know
// grad mode was on), then runs the device kernel.
void rope_inplace_autograd_entry(at::TensorList xs, const at::Tensor& positions, const at::Tensor& inv_freq,
                                 double position_scale, double magnitude, bool interleaved, int64_t rotary_dim,
                                 bool bshd, bool offsets, const std::optional<at::Tensor>& cos_sin) {
  check_writable_in_place(xs);
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    rope_inplace_entry(xs, positions, inv_freq, position_scale, magnitude, interleaved, rotary_dim, bshd, offsets,
                       cos_sin);
  }
  // As every in-place op does (ADInplaceOrView was skipped): a graph that saved one of these
  // tensors then refuses a backward through its stale value instead of using it.
  for (const auto& x : xs) x.unsafeGetTensorImpl()->bump_version();
}

std::vector<at::Tensor> rope_autograd_entry(at::TensorList xs, const at::Tensor& positions, const at::Tensor& inv_freq,
                                            double position_scale, double magnitude, bool interleaved,
                                            int64_t rotary_dim, bool bshd, bool offsets,
                                            const std::optional<at::Tensor>& cos_sin) {
  return RopeFunction::apply(xs, positions, inv_freq, position_scale, magnitude, interleaved, rotary_dim, bshd, offsets,
                             table_or_empty(cos_sin.value_or(at::Tensor())));
}

}  // namespace

std::vector<torch::Tensor> rope(const std::vector<torch::Tensor>& xs, const torch::Tensor& positions,
                                const RopeSpec& spec) {
  bool needs_grad = false;
  for (const auto& x : xs) needs_grad = needs_grad || (x.requires_grad() && at::GradMode::is_enabled());
  const bool bshd = spec.layout == RopeLayout::bshd;
  if (needs_grad)  // as a TensorList: autograd tracks each element (a std::vector would not be)
    return RopeFunction::apply(at::TensorList(xs), positions, spec.inv_freq, spec.position_scale, spec.magnitude,
                               spec.interleaved, spec.rotary_dim, bshd, spec.position_offsets,
                               table_or_empty(spec.cos_sin));
  return rotate_copy(xs, positions, spec, 1.0);
}

void rope_(const std::vector<torch::Tensor>& xs, const torch::Tensor& positions, const RopeSpec& spec) {
  check_writable_in_place(xs);
  const Prepared prepared = prepare(xs, xs, positions, spec, 1.0);
  run(prepared, xs[0].device());
}

torch::Tensor rope_table(const torch::Tensor& inv_freq, double position_scale, int64_t rows) {
  TORCH_CHECK(inv_freq.dim() == 1 && rows >= 0, "roformer::rope_table: inv_freq must be 1-D and rows >= 0");
  const at::Tensor freqs = inv_freq.to(at::kCPU, at::kDouble).contiguous();
  const int64_t half = freqs.numel();
  at::Tensor table = at::empty({rows, 2 * half}, at::TensorOptions().dtype(at::kFloat));
  rope_cpu_table(freqs.data_ptr<double>(), half, position_scale, rows, table.data_ptr<float>());
  return table;
}

std::vector<torch::Tensor> rope_backward(const std::vector<torch::Tensor>& grads, const torch::Tensor& positions,
                                         const RopeSpec& spec) {
  return rotate_copy(grads, positions, spec, -1.0);
}

}  // namespace roformer::ops

TORCH_LIBRARY(roformer, m) {
  m.def(
      "rope(Tensor[] xs, Tensor positions, Tensor inv_freq, float position_scale, float magnitude, bool interleaved, "
      "int rotary_dim, bool bshd, bool position_offsets, Tensor? cos_sin=None) -> Tensor[]");
  m.def(
      "rope_(Tensor(a!)[] xs, Tensor positions, Tensor inv_freq, float position_scale, float magnitude, "
      "bool interleaved, int rotary_dim, bool bshd, bool position_offsets, Tensor? cos_sin=None) -> ()");
}

TORCH_LIBRARY_IMPL(roformer, CPU, m) {
  m.impl("rope", &roformer::ops::rope_entry);
  m.impl("rope_", &roformer::ops::rope_inplace_entry);
}

#ifdef ROFORMER_WITH_CUDA
TORCH_LIBRARY_IMPL(roformer, CUDA, m) {
  m.impl("rope", &roformer::ops::rope_entry);
  m.impl("rope_", &roformer::ops::rope_inplace_entry);
}
#endif

TORCH_LIBRARY_IMPL(roformer, Autograd, m) {
  m.impl("rope", &roformer::ops::rope_autograd_entry);
  m.impl("rope_", &roformer::ops::rope_inplace_autograd_entry);
}
