// The CUDA kernels themselves, run on this CPU through cuda_host_emulator.h (a block's threads
// are real threads; barriers and warp shuffles behave as on a GPU), against the CPU kernels on
// the same launch description: RoPE's vector and strided kernels (every dtype, both pairings,
// BSHD/BHSD and strided or misaligned tensors, partial rotary in and out of place, 1-3 tensors of
// different head counts, every position mode, with and without a (cos, sin) table, forward and
// backward), fused add + LayerNorm (the K = 8, 32 and 0 register paths, warp sums, the backward's
// partial rows) and bias + GELU (both forms). The CPU kernels are pinned to double references by
// their own tests, so agreement here checks the CUDA index math, tails and launch plans without a
// GPU; under ASan an out-of-bounds access of a kernel fails here too. The GPU tests
// (*_cuda_test.cpp) still decide on a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "roformer/ops/add_layer_norm/add_layer_norm_cuda_kernels.cuh"
#include "roformer/ops/add_layer_norm/add_layer_norm_kernels.h"
#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/feed_forward/bias_gelu_cuda_kernels.cuh"
#include "roformer/ops/feed_forward/bias_gelu_kernels.h"
#include "roformer/ops/rope/rope_cuda_kernels.cuh"
#include "roformer/ops/rope/rope_kernels.h"

namespace cuda_kernels_on_host_test {

using namespace roformer::ops;

namespace {

// |got - want| <= tol * max(1, |want|) elementwise; tol covers FMA contraction and summation
// order (fp32) or one rounding of the storage type (fp16, bf16).
double tolerance(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat64:
      return 1e-12;
    case torch::kFloat32:
      return 2e-6;
    case torch::kHalf:
      return 1e-3;
    default:
      return 8e-3;  // bfloat16
  }
}

void expect_same(const torch::Tensor& got, const torch::Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const torch::Tensor g = got.to(torch::kFloat64), w = want.to(torch::kFloat64);
  const torch::Tensor excess = (g - w).abs() - tol * w.abs().clamp_min(1.0);
  const double worst = excess.max().item<double>();
  EXPECT_LE(worst, 0.0) << what << ": worst excess over the tolerance " << worst << " at flat index "
                        << excess.flatten().argmax().item<int64_t>();
  EXPECT_TRUE(torch::equal(g.isnan(), w.isnan())) << what << ": NaNs differ";
}

const std::vector<torch::ScalarType> kDTypes{torch::kFloat32, torch::kFloat64, torch::kHalf, torch::kBFloat16};

std::string dtype_name(torch::ScalarType t) {
  return c10::toString(t);
}

// ---- RoPE ----------------------------------------------------------------------------------

enum class Storage { bshd, bhsd, strided_features, misaligned };
enum class Table { none, all_rows, some_rows, misaligned };

struct RopeCase {
  std::string name;
  Storage storage = Storage::bshd;
  bool interleaved = true;
  int64_t batch = 2, seq = 5, head_dim = 16, rotary_dim = 16;
  std::vector<int64_t> heads{3, 2};
  bool inplace = false;
  RopePositionMode mode = RopePositionMode::shared;
  Table table = Table::none;
  bool vector_kernel = true;  // the plan this case is meant to reach
};

// A [B, S, H, D] view (logical order b, s, h, d) of fresh storage laid out as `storage` says.
torch::Tensor make_tensor(const RopeCase& c, int64_t heads, torch::ScalarType dtype, bool random) {
  auto opts = torch::TensorOptions().dtype(dtype);
  auto fill = [&](std::vector<int64_t> shape) {
    return random ? torch::randn(shape, opts) : torch::zeros(shape, opts);
  };
  const int64_t B = c.batch, S = c.seq, H = heads, D = c.head_dim;
  switch (c.storage) {
    case Storage::bshd:
      return fill({B, S, H, D});
    case Storage::bhsd:
      return fill({B, H, S, D}).transpose(1, 2);
    case Storage::strided_features:
      return fill({B, S, H, 2 * D}).slice(3, 0, 2 * D, 2);
    case Storage::misaligned:
      return fill({B * S * H * D + 1}).narrow(0, 1, B * S * H * D).view({B, S, H, D});
  }
  return {};
}

struct RopeRun {
  std::vector<torch::Tensor> ins, outs;
  torch::Tensor positions, inv_freq, table;
  RopeLaunch launch;
};

// The launch description rope.cpp would build for these tensors (BSHD order strides).
RopeRun describe(const RopeCase& c, torch::ScalarType dtype, double sign, const std::vector<torch::Tensor>& xs,
                 const torch::Tensor& positions, const torch::Tensor& inv_freq, const torch::Tensor& table) {
  RopeRun r;
  RopeLaunch& p = r.launch;
  p.num_tensors = static_cast<int>(xs.size());
  p.dtype = to_kernel_dtype(dtype, "test");
  p.batch = c.batch, p.seq = c.seq, p.head_dim = c.head_dim, p.rotary_dim = c.rotary_dim;
  p.interleaved = c.interleaved;
  p.inplace = c.inplace;
  p.sign = sign;
  p.position_scale = 0.75;
  for (size_t j = 0; j < xs.size(); ++j) {
    r.ins.push_back(make_tensor(c, xs[j].size(2), dtype, false).copy_(xs[j]));  // same layout, own storage
    r.outs.push_back(c.inplace ? r.ins.back() : make_tensor(c, xs[j].size(2), dtype, false));
    RopeTensorArgs& t = p.tensors[j];
    t.in = r.ins[j].data_ptr();
    t.out = r.outs[j].data_ptr();
    t.heads = xs[j].size(2);
    t.magnitude = j < 2 ? 1.25 : 1.0;
    for (int k = 0; k < 4; ++k) t.in_stride[k] = r.ins[j].stride(k), t.out_stride[k] = r.outs[j].stride(k);
  }
  r.positions = positions, r.inv_freq = inv_freq, r.table = table;
  p.positions = positions.data_ptr<int64_t>();
  p.position_mode = c.mode;
  if (c.mode == RopePositionMode::shared) p.position_stride_s = positions.stride(0);
  if (c.mode == RopePositionMode::explicit_ids)
    p.position_stride_b = positions.stride(0), p.position_stride_s = positions.stride(1);
  if (c.mode == RopePositionMode::offsets) p.position_stride_b = positions.stride(0);
  p.inv_freq = inv_freq.data_ptr<double>();
  if (table.defined()) {
    p.cos_sin = table.data_ptr<float>();
    p.cos_sin_rows = table.size(0);
  }
  return r;
}

torch::Tensor positions_for(const RopeCase& c) {
  auto opts = torch::TensorOptions().dtype(torch::kLong);
  switch (c.mode) {
    case RopePositionMode::shared:
      return torch::arange(c.seq, opts) * 37 + 3;
    case RopePositionMode::explicit_ids:
      return torch::randint(0, 400, {c.batch, c.seq}, opts);
    case RopePositionMode::offsets:
      return torch::randint(0, 200, {c.batch}, opts);
  }
  return {};
}

// The (cos, sin) table the model would pass (rows 0..rows-1), or a misaligned copy of it.
torch::Tensor table_for(const RopeCase& c, const torch::Tensor& inv_freq) {
  if (c.table == Table::none) return {};
  const int64_t rows = c.table == Table::some_rows ? 100 : 500;  // positions reach about 400
  torch::Tensor t = torch::empty({rows * c.rotary_dim + 1}, torch::kFloat);
  torch::Tensor rows_view =
      t.narrow(0, c.table == Table::misaligned ? 1 : 0, rows * c.rotary_dim).view({rows, c.rotary_dim});
  rope_cpu_table(inv_freq.data_ptr<double>(), c.rotary_dim / 2, 0.75, rows, rows_view.data_ptr<float>());
  return rows_view;
}

bool takes_vector_kernel(const RopeLaunch& p) {
  bool vec = false;
  cuda_elem::with_storage_type(p.dtype, [&](auto tag) { vec = rope_takes_vector_kernel<decltype(tag)>(p); });
  return vec;
}

void check_rope(const RopeCase& c) {
  for (torch::ScalarType dtype : kDTypes) {
    for (double sign : {1.0, -1.0}) {
      SCOPED_TRACE(c.name + ", " + dtype_name(dtype) + (sign > 0 ? ", forward" : ", backward"));
      torch::manual_seed(7);
      std::vector<torch::Tensor> xs;
      for (int64_t h : c.heads) xs.push_back(make_tensor(c, h, dtype, true));
      const torch::Tensor positions = positions_for(c);
      const torch::Tensor inv_freq =
          torch::pow(10000.0, -torch::arange(0, c.rotary_dim, 2, torch::kFloat64) / static_cast<double>(c.rotary_dim));
      const torch::Tensor table = table_for(c, inv_freq);
      RopeRun cpu = describe(c, dtype, sign, xs, positions, inv_freq, table);
      RopeRun gpu = describe(c, dtype, sign, xs, positions, inv_freq, table);
      rope_cpu(cpu.launch);
      cuda_host::HostLauncher launcher;
      rope_launch(gpu.launch, launcher);
      EXPECT_EQ(launcher.launches, 1);
      if (dtype != torch::kFloat64) {  // double's vectors are two values wide: other cases reach them
        EXPECT_EQ(takes_vector_kernel(gpu.launch), c.vector_kernel);
      }
      for (size_t j = 0; j < xs.size(); ++j) {
        expect_same(gpu.outs[j], cpu.outs[j], tolerance(dtype), "tensor " + std::to_string(j));
        if (!c.inplace) {
          EXPECT_TRUE(torch::equal(gpu.ins[j], xs[j])) << "input " << j << " was written";
        }
      }
    }
  }
}

TEST(CudaKernelsOnHost, RopeVectorKernelMatchesTheCpuKernel) {
  RopeCase c;
  c.name = "BSHD, q and k";
  check_rope(c);
  c.name = "half pairing, three tensors of 3, 2 and 5 heads";
  c.interleaved = false;
  c.heads = {3, 2, 5};
  check_rope(c);
  c.name = "BHSD views, explicit positions, nine heads (row groups with a remainder)";
  c.storage = Storage::bhsd;
  c.interleaved = true;
  c.heads = {9};
  c.mode = RopePositionMode::explicit_ids;
  check_rope(c);
  c.name = "partial rotary out of place (copied tail), offsets";
  c.storage = Storage::bshd;
  c.head_dim = 48;
  c.rotary_dim = 32;
  c.heads = {2, 1};
  c.mode = RopePositionMode::offsets;
  check_rope(c);
  c.name = "partial rotary in place, half pairing";
  c.inplace = true;
  c.interleaved = false;
  check_rope(c);
}

TEST(CudaKernelsOnHost, RopeVectorKernelReadsTheCosSinTable) {
  RopeCase c;
  for (bool interleaved : {true, false}) {
    c.interleaved = interleaved;
    c.head_dim = c.rotary_dim = 32;
    c.mode = RopePositionMode::explicit_ids;
    c.name = std::string(interleaved ? "interleaved" : "half") + ", table covering every position";
    c.table = Table::all_rows;
    check_rope(c);
    c.name = std::string(interleaved ? "interleaved" : "half") + ", positions past the table's rows computed";
    c.table = Table::some_rows;
    check_rope(c);
    c.name = std::string(interleaved ? "interleaved" : "half") + ", misaligned table (computed instead)";
    c.table = Table::misaligned;
    check_rope(c);
  }
}

// The rows-per-thread and blocks-per-SM choices tests/benchmarks/rope_kernel_variants.cu times
// on a GPU: whichever a tuning run picks must write what the default writes, for bf16 (the
// training dtype, eight rows a thread by default when interleaved) and fp32.
template <typename T, int ROWS, int MIN_BLOCKS>
void check_rope_variant(const RopeLaunch& p, torch::Tensor& out, const torch::Tensor& want, const std::string& what) {
  constexpr int VEC = static_cast<int>(16 / sizeof(T));
  out.zero_();
  cuda_host::HostLauncher launcher;
  const bool launched = p.interleaved ? launch_vector<T, VEC, true, ROWS, MIN_BLOCKS>(p, launcher)
                                      : launch_vector<T, VEC, false, ROWS, MIN_BLOCKS>(p, launcher);
  ASSERT_TRUE(launched) << what;
  EXPECT_TRUE(torch::equal(out, want)) << what << ": rows per thread " << ROWS << " differ from the default";
}

TEST(CudaKernelsOnHost, RopeVectorKernelVariantsWriteTheDefaultsBits) {
  RopeCase c;
  c.heads = {9};  // rows 9: groups of 1, 2, 4 and 8 rows all leave a remainder
  c.head_dim = c.rotary_dim = 32;
  c.mode = RopePositionMode::explicit_ids;
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat32}) {
    for (bool interleaved : {true, false}) {
      for (Table table : {Table::none, Table::some_rows}) {
        c.interleaved = interleaved;
        c.table = table;
        const std::string what = dtype_name(dtype) + (interleaved ? ", interleaved" : ", half") +
                                 (table == Table::none ? ", computed" : ", table");
        torch::manual_seed(5);
        const std::vector<torch::Tensor> xs{make_tensor(c, 9, dtype, true)};
        const torch::Tensor positions = positions_for(c);
        const torch::Tensor inv_freq = torch::pow(10000.0, -torch::arange(0, 32, 2, torch::kFloat64) / 32.0);
        const torch::Tensor cos_sin = table_for(c, inv_freq);
        RopeRun run = describe(c, dtype, 1.0, xs, positions, inv_freq, cos_sin);
        rope_launch(run.launch, cuda_host::HostLauncher{});
        const torch::Tensor want = run.outs[0].clone();
        if (dtype == torch::kBFloat16) {
          check_rope_variant<__nv_bfloat16, 1, 4>(run.launch, run.outs[0], want, what);
          check_rope_variant<__nv_bfloat16, 2, 4>(run.launch, run.outs[0], want, what);
          check_rope_variant<__nv_bfloat16, 4, 3>(run.launch, run.outs[0], want, what);
          check_rope_variant<__nv_bfloat16, 8, 1>(run.launch, run.outs[0], want, what);
        } else {
          check_rope_variant<float, 1, 4>(run.launch, run.outs[0], want, what);
          check_rope_variant<float, 2, 2>(run.launch, run.outs[0], want, what);
          check_rope_variant<float, 8, 1>(run.launch, run.outs[0], want, what);
        }
      }
    }
  }
}

TEST(CudaKernelsOnHost, RopeStridedKernelMatchesTheCpuKernel) {
  RopeCase c;
  c.vector_kernel = false;
  c.name = "every other feature (stride 2)";
  c.storage = Storage::strided_features;
  c.table = Table::some_rows;
  check_rope(c);
  c.name = "misaligned base pointer, half pairing, in place";
  c.storage = Storage::misaligned;
  c.interleaved = false;
  c.inplace = true;
  c.mode = RopePositionMode::explicit_ids;
  check_rope(c);
  c.name = "head_dim 6 with rotary 4 (no whole vectors), three tensors, out of place";
  c.storage = Storage::bshd;
  c.head_dim = 6;
  c.rotary_dim = 4;
  c.heads = {1, 3, 2};
  c.inplace = false;
  c.table = Table::all_rows;
  c.mode = RopePositionMode::offsets;
  check_rope(c);
}

// ---- add + LayerNorm -----------------------------------------------------------------------

struct NormRun {
  torch::Tensor x, residual, weight, bias, y, mean, rstd, grad, grad_in, weight_grad, bias_grad;
};

NormRun norm_inputs(int64_t rows, int64_t cols, torch::ScalarType dtype) {
  torch::manual_seed(11);
  const auto acc = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  NormRun r;
  r.x = torch::randn({rows, cols}).mul(3).add(5).to(dtype);  // away from zero: a one-pass variance would lose it
  r.residual = torch::randn({rows, cols}).to(dtype);
  r.weight = torch::randn({cols}, acc);
  r.bias = torch::randn({cols}, acc);
  r.grad = torch::randn({rows, cols}).to(dtype);
  r.y = torch::empty_like(r.x);
  r.grad_in = torch::empty_like(r.x);
  r.mean = torch::empty({rows}, acc);
  r.rstd = torch::empty({rows}, acc);
  return r;
}

AddLayerNormLaunch norm_launch(NormRun& r, torch::ScalarType dtype) {
  AddLayerNormLaunch p;
  p.rows = r.x.size(0), p.cols = r.x.size(1);
  p.dtype = to_kernel_dtype(dtype, "test");
  p.eps = 1e-5;
  p.x = r.x.data_ptr(), p.residual = r.residual.data_ptr(), p.weight = r.weight.data_ptr(), p.bias = r.bias.data_ptr();
  p.out = r.y.data_ptr(), p.mean = r.mean.data_ptr(), p.rstd = r.rstd.data_ptr();
  p.grad = r.grad.data_ptr(), p.grad_in = r.grad_in.data_ptr();
  return p;
}

// rows_per_block: rows of each backward warp (0: add_layer_norm_backward_rows_per_warp's choice,
// which gives one row per warp up to 1024 rows).
void check_add_layer_norm(int64_t rows, int64_t cols, int64_t rows_per_block = 0) {
  for (torch::ScalarType dtype : kDTypes) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + ", " + dtype_name(dtype));
    NormRun cpu = norm_inputs(rows, cols, dtype), gpu = norm_inputs(rows, cols, dtype);
    AddLayerNormLaunch pc = norm_launch(cpu, dtype), pg = norm_launch(gpu, dtype);
    add_layer_norm_forward_cpu(pc);
    cuda_host::HostLauncher launcher;
    add_layer_norm_launch(pg, launcher, /*backward=*/false);
    const double tol = dtype == torch::kFloat64 ? 1e-12 : 1e-5;  // statistics in float, summed in another order
    expect_same(gpu.mean, cpu.mean, tol, "mean");
    expect_same(gpu.rstd, cpu.rstd, tol, "rstd");
    expect_same(gpu.y, cpu.y, std::max(tol, tolerance(dtype)), "y");

    const auto acc = cpu.weight.options();
    torch::Tensor sums = torch::empty({2, cols}, acc);
    pc.weight_grad = sums[0].data_ptr(), pc.bias_grad = sums[1].data_ptr();
    add_layer_norm_backward_cpu(pc);
    pg.mean = cpu.mean.data_ptr(), pg.rstd = cpu.rstd.data_ptr();  // the same statistics for both
    pg.rows_per_block = rows_per_block > 0 ? rows_per_block : add_layer_norm_backward_rows_per_warp(rows);
    torch::Tensor partial = torch::full({2, add_layer_norm_blocks(pg), cols}, std::nan(""), acc);
    pg.weight_grad_partial = partial[0].data_ptr(), pg.bias_grad_partial = partial[1].data_ptr();
    add_layer_norm_launch(pg, launcher, /*backward=*/true);
    EXPECT_EQ(launcher.launches, 2);
    expect_same(gpu.grad_in, cpu.grad_in, std::max(tol, tolerance(dtype)), "grad of x and residual");
    expect_same(partial.sum(1), sums, dtype == torch::kFloat64 ? 1e-12 : 1e-4, "weight and bias grads");
  }
}

TEST(CudaKernelsOnHost, AddLayerNormMatchesTheCpuKernel) {
  for (int64_t cols : {1, 7, 256})  // K = 8: values in registers, lanes past the width idle
    check_add_layer_norm(5, cols);
  for (int64_t cols : {257, 1000})  // K = 32
    check_add_layer_norm(3, cols);
  check_add_layer_norm(2, 1500);     // K = 0: rows re-read
  check_add_layer_norm(10, 100, 3);  // three rows per backward warp (as past 2048 rows), the last warp short
  EXPECT_EQ(add_layer_norm_backward_rows_per_warp(1024), 1);
  EXPECT_EQ(add_layer_norm_backward_rows_per_warp(3000), 3);
}

// ---- bias + GELU ---------------------------------------------------------------------------

void check_bias_gelu(int64_t rows, int64_t cols) {
  for (torch::ScalarType dtype : kDTypes) {
    for (GeluKind kind : {GeluKind::exact, GeluKind::tanh}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + ", " + dtype_name(dtype) +
                   (kind == GeluKind::exact ? ", exact" : ", tanh"));
      torch::manual_seed(13);
      const torch::Tensor x = torch::randn({rows, cols}).mul(3).to(dtype);
      const torch::Tensor bias = torch::randn({cols}, dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
      const torch::Tensor grad = torch::randn({rows, cols}).to(dtype);
      torch::Tensor y_cpu = torch::empty_like(x), y_gpu = torch::empty_like(x);
      torch::Tensor gx_cpu = torch::empty_like(x), gx_gpu = torch::empty_like(x);
      torch::Tensor gb_cpu = torch::empty({cols}, bias.options());
      BiasGeluLaunch p;
      p.rows = rows, p.cols = cols, p.kind = kind;
      p.dtype = to_kernel_dtype(dtype, "test");
      p.x = x.data_ptr(), p.bias = bias.data_ptr(), p.grad = grad.data_ptr();
      BiasGeluLaunch pc = p, pg = p;
      pc.out = y_cpu.data_ptr(), pg.out = y_gpu.data_ptr();
      bias_gelu_forward_cpu(pc);
      cuda_host::HostLauncher launcher;
      bias_gelu_launch(pg, launcher, /*backward=*/false);
      expect_same(y_gpu, y_cpu, tolerance(dtype), "GELU(x + bias)");
      pc.out = gx_cpu.data_ptr(), pg.out = gx_gpu.data_ptr();
      pc.bias_grad = gb_cpu.data_ptr();
      bias_gelu_backward_cpu(pc);
      bias_gelu_launch(pg, launcher, /*backward=*/true);
      EXPECT_EQ(launcher.launches, 2);
      expect_same(gx_gpu, gx_cpu, tolerance(dtype), "grad of x");
    }
  }
}

TEST(CudaKernelsOnHost, BiasGeluMatchesTheCpuKernel) {
  check_bias_gelu(3, 1);     // one thread's worth of columns in a 32-thread block
  check_bias_gelu(4, 33);    // a partial second warp
  check_bias_gelu(17, 300);  // columns past the 256 threads of a block
}

// ---- the emulator refuses what a GPU would ------------------------------------------------

__global__ void shuffle_after_a_lane_returned(float* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void barrier_in_a_branch(float* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void syncwarp_after_a_lane_returned(float* out) {
  if (threadIdx.x == 3) return;
  __syncwarp();
  out[threadIdx.x] = 1.0f;
}

// Each lane writes its slot of shared memory and reads its neighbour's, a __syncwarp between.
__global__ void syncwarp_passes_neighbours(float* out) {
  float* slots = reinterpret_cast<float*>(cuda_elem::dynamic_shared_memory());
  const unsigned lane = threadIdx.x;
  out[lane] = 0.0f;
  for (int round = 0; round < 8; ++round) {
    slots[lane] = static_cast<float>(lane + 100 * round);
    __syncwarp();
    out[lane] += slots[(lane + 1) % 32];
    __syncwarp();
  }
}

TEST(CudaKernelsOnHost, TheEmulatorReportsWhatTheGpuWouldRefuseOrLeaveUndefined) {
  std::vector<float> out(64);
  cuda_host::HostLauncher launcher;
  EXPECT_THROW(launcher(shuffle_after_a_lane_returned, 1, 32, 0, out.data()), std::runtime_error);
  EXPECT_THROW(launcher(syncwarp_after_a_lane_returned, 1, 32, 0, out.data()), std::runtime_error);
  EXPECT_THROW(launcher(barrier_in_a_branch, 0, 32, 0, out.data()), std::runtime_error);    // empty grid
  EXPECT_THROW(launcher(barrier_in_a_branch, 1, 2048, 0, out.data()), std::runtime_error);  // block too big
  // Past 48 KiB a launch opts in (cuda_elem::StreamLauncher), up to 64 KiB on every built architecture.
  EXPECT_NO_THROW(launcher(barrier_in_a_branch, 1, 32, 64 * 1024, out.data()));
  EXPECT_THROW(launcher(barrier_in_a_branch, 1, 32, 64 * 1024 + 16, out.data()), std::runtime_error);
  launcher(syncwarp_passes_neighbours, 1, 32, 32 * sizeof(float), out.data());
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(out[lane], 8.0f * ((lane + 1) % 32) + 100.0f * 28) << lane;
  // Threads that return leave __syncthreads (Volta and later): a barrier reached by only some
  // threads completes once the others have returned.
  launcher(barrier_in_a_branch, 2, 32, 0, out.data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 1.0f);
}

}  // namespace

}  // namespace cuda_kernels_on_host_test
