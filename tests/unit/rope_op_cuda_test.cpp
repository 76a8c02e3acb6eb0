// The fused RoPE op on the GPU: the same cases as on the CPU, GPU against CPU (and the
// reference), forward and backward, vectorised and strided paths. Skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "roformer/model/position/rope_frequencies.h"
#include "roformer/ops/rope/rope.h"

namespace rope_op_cuda_test {

using namespace roformer;

namespace {

bool have_gpu() {
  return torch::cuda::is_available();
}

ops::RopeSpec spec_for(int64_t rd, bool interleaved, ops::RopeLayout layout, config::RopeScalingKind scaling) {
  config::RopeConfig rc;
  rc.scaling.kind = scaling;
  rc.scaling.factor = 4.0;
  rc.scaling.original_max_positions = 64;
  const model::RopeFrequencies f = model::rope_frequencies(rc, rd, 128);
  ops::RopeSpec s;
  s.inv_freq = torch::tensor(f.inv_freq, torch::kFloat64);
  s.position_scale = f.position_scale;
  s.magnitude = f.magnitude;
  s.interleaved = interleaved;
  s.rotary_dim = rd;
  s.layout = layout;
  return s;
}

}  // namespace

TEST(RopeOpCuda, MatchesTheCpuKernelForEveryLayoutPairingAndDtype) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible";
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kFloat16})
    for (auto layout : {ops::RopeLayout::bshd, ops::RopeLayout::bhsd})
      for (bool interleaved : {true, false})
        for (int64_t rd : {64, 32, 10})  // full (vectorised), partial, partial not a vector multiple
          for (int64_t heads : {4, 5})   // 5: head groups of the vector kernel end part-filled
            for (auto scaling : {config::RopeScalingKind::none, config::RopeScalingKind::yarn}) {
              SCOPED_TRACE(std::string(c10::toString(dtype)) + " rd=" + std::to_string(rd) +
                           " heads=" + std::to_string(heads) + (interleaved ? " interleaved" : " half"));
              const ops::RopeSpec spec = spec_for(rd, interleaved, layout, scaling);
              const std::vector<int64_t> shape = layout == ops::RopeLayout::bshd
                                                     ? std::vector<int64_t>{3, 128, heads, 64}
                                                     : std::vector<int64_t>{3, heads, 128, 64};
              torch::manual_seed(1);
              const torch::Tensor q = torch::randn(shape).to(dtype), k = torch::randn(shape).to(dtype);
              const torch::Tensor pos = torch::arange(128, torch::kLong) * 9;
              const auto cpu = ops::rope({q, k}, pos, spec);
              const auto gpu = ops::rope({q.cuda(), k.cuda()}, pos.cuda(), spec);
              const double tol = (dtype == torch::kFloat64) ? 1e-12 : (dtype == torch::kFloat32 ? 1e-5 : 2e-2);
              EXPECT_LT((gpu[0].cpu().to(torch::kFloat64) - cpu[0].to(torch::kFloat64)).abs().max().item<double>(),
                        tol);
              EXPECT_LT((gpu[1].cpu().to(torch::kFloat64) - cpu[1].to(torch::kFloat64)).abs().max().item<double>(),
                        tol);
              const auto back_cpu = ops::rope_backward({q, k}, pos, spec);
              const auto back_gpu = ops::rope_backward({q.cuda(), k.cuda()}, pos.cuda(), spec);
              EXPECT_LT(
                  (back_gpu[0].cpu().to(torch::kFloat64) - back_cpu[0].to(torch::kFloat64)).abs().max().item<double>(),
                  tol);
            }
}

TEST(RopeOpCuda, StridedInPlaceOffsetsAndAutogradOnTheGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible";
  const ops::RopeSpec base = spec_for(16, true, ops::RopeLayout::bhsd, config::RopeScalingKind::none);
  const torch::Tensor big = torch::randn({2, 6, 9, 32}, torch::kFloat64);
  const torch::Tensor x_cpu = big.slice(1, 0, 6, 2).slice(3, 0, 32, 2);  // non-contiguous
  const torch::Tensor x_gpu = big.cuda().slice(1, 0, 6, 2).slice(3, 0, 32, 2);
  ops::RopeSpec spec = base;
  spec.position_offsets = true;
  const torch::Tensor offsets = torch::tensor({3L, 100000L});
  const auto cpu = ops::rope({x_cpu}, offsets, spec);
  ops::rope_({x_gpu}, offsets.cuda(), spec);
  EXPECT_LT((x_gpu.cpu() - cpu[0]).abs().max().item<double>(), 1e-12);
  torch::Tensor q = torch::randn({2, 3, 9, 16}, torch::dtype(torch::kFloat64).device(torch::kCUDA)).requires_grad_();
  ops::rope({q}, torch::arange(9, torch::kLong).cuda(), base)[0].pow(2).sum().backward();
  EXPECT_LT((q.grad() - 2 * q).abs().max().item<double>(), 1e-10);  // rotations preserve the squared norm
}

// The vector kernel with tensors of different head counts (grouped-query k), a rotated v, and
// in place: GPU equals the CPU kernel in every element.
TEST(RopeOpCuda, VectorKernelHandlesGroupedHeadsValuesAndInPlace) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible";
  for (auto dtype : {torch::kBFloat16, torch::kFloat32})
    for (bool interleaved : {true, false}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (interleaved ? " interleaved" : " half"));
      const ops::RopeSpec spec = spec_for(64, interleaved, ops::RopeLayout::bshd, config::RopeScalingKind::none);
      torch::manual_seed(2);
      const torch::Tensor q = torch::randn({2, 96, 12, 64}).to(dtype), k = torch::randn({2, 96, 3, 64}).to(dtype);
      const torch::Tensor v = torch::randn({2, 96, 3, 64}).to(dtype);
      const torch::Tensor pos = torch::arange(96, torch::kLong) * 7;
      const auto cpu = ops::rope({q, k, v}, pos, spec);
      const auto gpu = ops::rope({q.cuda(), k.cuda(), v.cuda()}, pos.cuda(), spec);
      std::vector<torch::Tensor> inplace{q.cuda(), k.cuda(), v.cuda()};
      ops::rope_(inplace, pos.cuda(), spec);
      const double tol = dtype == torch::kFloat32 ? 1e-5 : 2e-2;
      for (int j = 0; j < 3; ++j) {
        const torch::Tensor ref = cpu[j].to(torch::kFloat64);
        EXPECT_TRUE(torch::isfinite(gpu[j]).all().item<bool>());
        EXPECT_LT((gpu[j].cpu().to(torch::kFloat64) - ref).abs().max().item<double>(), tol) << "tensor " << j;
        EXPECT_LT((inplace[j].cpu().to(torch::kFloat64) - ref).abs().max().item<double>(), tol) << "in place " << j;
      }
    }
}

TEST(RopeOpCuda, CosSinTableMatchesComputingOnTheGpu) {
  // The GPU kernels reading a (cos, sin) table (vector path: contiguous; strided path: a
  // transposed copy) against the same kernels computing them and against the CPU kernel with
  // the same table: the table was built on the host, the GPU computes with FMA contraction,
  // so values agree to float rounding (1e-6 fp32), bf16 to one rounding.
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible";
  for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16})
    for (bool interleaved : {true, false})
      for (bool strided : {false, true}) {
        SCOPED_TRACE(std::string(c10::toString(dtype)) + (interleaved ? " interleaved" : " half") +
                     (strided ? " strided" : " vector"));
        ops::RopeSpec spec = spec_for(64, interleaved, ops::RopeLayout::bshd, config::RopeScalingKind::linear);
        torch::manual_seed(4);
        torch::Tensor q = torch::randn({2, 200, 12, 64}).to(dtype).cuda(),
                      k = torch::randn({2, 200, 4, 64}).to(dtype).cuda();
        if (strided) q = q.transpose(1, 2).contiguous().transpose(1, 2);
        const torch::Tensor pos = torch::arange(200, torch::kLong).cuda();
        const auto computed = ops::rope({q, k}, pos, spec);
        const torch::Tensor table = ops::rope_table(spec.inv_freq, spec.position_scale, 150);  // 150..199 computed
        spec.cos_sin = table.cuda();
        const auto tabled = ops::rope({q, k}, pos, spec);
        const auto back = ops::rope_backward({q, k}, pos, spec);
        spec.cos_sin = table;
        const auto cpu = ops::rope({q.cpu(), k.cpu()}, pos.cpu(), spec);
        const double tol = dtype == torch::kFloat32 ? 1e-5 : 2e-2;
        for (int j = 0; j < 2; ++j) {
          const torch::Tensor t64 = tabled[j].cpu().to(torch::kFloat64);
          EXPECT_LT((t64 - computed[j].cpu().to(torch::kFloat64)).abs().max().item<double>(), tol) << j;
          EXPECT_LT((t64 - cpu[j].to(torch::kFloat64)).abs().max().item<double>(), tol) << j;
        }
        const auto back_cpu = ops::rope_backward({q.cpu(), k.cpu()}, pos.cpu(), spec);
        EXPECT_LT((back[0].cpu().to(torch::kFloat64) - back_cpu[0].to(torch::kFloat64)).abs().max().item<double>(),
                  tol);
        // An identity table (position scale 0) over rows 0..149: those tokens come out unrotated,
        // so the kernels did read it (both paths agreeing above would not show that).
        spec.cos_sin = ops::rope_table(spec.inv_freq, 0.0, 150).cuda();
        const auto identity = ops::rope({q, k}, pos, spec);
        EXPECT_TRUE(torch::equal(identity[0].slice(1, 0, 150).cpu(), q.slice(1, 0, 150).cpu()));
        EXPECT_TRUE(torch::equal(identity[1].slice(1, 150, 200).cpu(), tabled[1].slice(1, 150, 200).cpu()));
      }
}

}  // namespace rope_op_cuda_test
