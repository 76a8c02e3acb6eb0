// CUDA tile attention's scan from the diagonal back (tile_attention_cuda_scan.cuh), run on this CPU
// through cuda_host_emulator.h: CoPE's term (Golovneva et al. 2024) and stick-breaking's weights
// (Tan et al. 2025) against their formulas transcribed directly in double, causal, for bf16, fp16,
// float32 and float64 (the 16-bit types over no term and CoPE), with right padding, lengths that end
// inside and past a tile's edge,
// head dimensions 32, 64 and 128, and strided [B, S, H, D] inputs; stick-breaking over no term,
// a relative bias and FoX's decay, with what the sticks leave dropped or on the query's own value;
// and CoPE under stick-breaking. The setup's refusals of what the scan does not take are checked
// here too.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/tile_attention/tile_attention.h"
#include "roformer/ops/tile_attention/tile_attention_cuda_kernels.cuh"
#include "roformer/ops/tile_attention/tile_attention_cuda_setup.h"

namespace tile_attention_cuda_scan_on_host_test {

using namespace roformer::ops;

namespace {

constexpr int64_t kPositions = 9;  // CoPE's table: counts pass P - 1 = 8, so the clamp is exercised

struct Case {
  torch::ScalarType dtype = torch::kFloat32;
  TileCudaTerm term = TileCudaTerm::none;  // none, bias_rows, fox or cope
  TileCudaWeights weights = TileCudaWeights::softmax;
  bool padded = false;
  int64_t batch = 2, heads = 2, seq = 100, head_dim = 32;
  std::string name() const {
    return std::string(c10::toString(dtype)) + " term " + std::to_string(static_cast<int>(term)) + " weights " +
           std::to_string(static_cast<int>(weights)) + (padded ? " padded" : "") + " S " + std::to_string(seq) + " D " +
           std::to_string(head_dim);
  }
};

struct Inputs {
  torch::Tensor q, k, v, bias, cumulative, at_integers, lengths;
};

// The formulas in double: scores z = scale q . k + term (the relative bias at j - i, FoX's
// c_i - c_j, or CoPE's table interpolated at sum_{t=j..i} sigmoid(scale q_i . k_t) clamped to
// [0, P - 1]); softmax over keys j <= i, or stick-breaking's w_ij = sigmoid(z_ij) prod_{j<t<i}
// sigmoid(-z_it) over keys j < i, plus (1 - sum_j w_ij) v_i where the remainder goes to the query.
torch::Tensor reference(const Case& c, const Inputs& in, double scale) {
  const int64_t S = c.seq;
  auto dbl = [](const torch::Tensor& t) { return t.to(torch::kDouble); };
  const torch::Tensor i = torch::arange(S).view({S, 1}), j = torch::arange(S).view({1, S});
  const torch::Tensor dot = torch::matmul(dbl(in.q), dbl(in.k).transpose(2, 3)) * scale;
  torch::Tensor visible = (j <= i).view({1, 1, S, S});
  if (c.padded) visible = visible & (j.view({1, 1, 1, S}) < in.lengths.view({c.batch, 1, 1, 1}));
  torch::Tensor z = dot;
  if (c.term == TileCudaTerm::bias_rows)
    z = z + dbl(in.bias).index_select(1, ((S - 1) + j - i).flatten()).view({1, c.heads, S, S});
  if (c.term == TileCudaTerm::fox) z = z + (dbl(in.cumulative).unsqueeze(3) - dbl(in.cumulative).unsqueeze(2));
  if (c.term == TileCudaTerm::cope) {
    const torch::Tensor gates = torch::where(visible, torch::sigmoid(dot), torch::zeros_like(dot));
    const torch::Tensor count = gates.flip(-1).cumsum(-1).flip(-1).clamp(0, kPositions - 1);  // keys j..S-1
    const torch::Tensor low = count.floor(), w = count - low;
    const torch::Tensor a = dbl(in.at_integers);
    z = z + a.gather(3, count.ceil().to(torch::kLong)) * w + a.gather(3, low.to(torch::kLong)) * (1 - w);
  }
  const double inf = std::numeric_limits<double>::infinity();
  if (c.weights == TileCudaWeights::softmax)
    return torch::matmul(torch::softmax(z.masked_fill(~visible, -inf), -1), dbl(in.v));
  const torch::Tensor before = visible & (j < i).view({1, 1, S, S});
  const torch::Tensor kept = torch::where(before, torch::log_sigmoid(-z), torch::zeros_like(z));
  const torch::Tensor after = kept.flip(-1).cumsum(-1).flip(-1) - kept;  // sum over t > j
  const torch::Tensor w = torch::where(before, torch::exp(torch::log_sigmoid(z) + after), torch::zeros_like(z));
  torch::Tensor out = torch::matmul(w, dbl(in.v));
  if (c.weights == TileCudaWeights::stick_breaking_remainder_to_query) out = out + (1 - w.sum(-1, true)) * dbl(in.v);
  return out;
}

void check_case(const Case& c) {
  SCOPED_TRACE(c.name());
  torch::manual_seed(21);
  const torch::ScalarType acc = c.dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto heads = [&] {  // [B, H, S, D] views of [B, S, H, D] storage
    return torch::randn({c.batch, c.seq, c.heads, c.head_dim}, torch::kDouble).to(c.dtype).transpose(1, 2);
  };
  Inputs in;
  in.q = heads(), in.k = heads(), in.v = heads();
  in.bias = (torch::randn({c.heads, 2 * c.seq - 1}, torch::kDouble) * 2).to(acc);
  in.cumulative = torch::log_sigmoid(torch::randn({c.batch, c.heads, c.seq}, torch::kDouble) + 2).cumsum(-1).to(acc);
  in.at_integers = torch::randn({c.batch, c.heads, c.seq, kPositions}, torch::kDouble).to(acc);
  if (c.padded) in.lengths = torch::tensor(std::vector<int64_t>{c.seq, std::max<int64_t>(1, c.seq / 2 - 3)});
  const torch::Tensor out = torch::full({c.batch, c.heads, c.seq, c.head_dim}, 7.0, torch::TensorOptions(c.dtype));
  TileCudaLaunch p;
  p.batch = c.batch, p.heads = c.heads, p.seq = c.seq, p.head_dim = c.head_dim;
  p.causal = true;
  p.dtype = to_kernel_dtype(c.dtype, "test");
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  p.q = in.q.data_ptr(), p.k = in.k.data_ptr(), p.v = in.v.data_ptr(), p.out = out.data_ptr();
  for (int a = 0; a < 3; ++a) {
    p.q_stride[a] = in.q.stride(a), p.k_stride[a] = in.k.stride(a), p.v_stride[a] = in.v.stride(a);
    p.out_stride[a] = out.stride(a);
  }
  if (c.padded) p.key_lengths = in.lengths.data_ptr<int64_t>();
  p.term = c.term;
  p.weights = c.weights;
  p.bias = in.bias.data_ptr();
  p.bias_head_stride = in.bias.stride(0);
  p.cumulative = in.cumulative.data_ptr();
  p.cope.at_integers = in.at_integers.data_ptr();
  p.cope.positions = kPositions;
  cuda_host::HostLauncher launcher;
  tile_attention_launch(p, launcher);
  ASSERT_EQ(launcher.launches, 1);
  const torch::Tensor want = reference(c, in, p.scale);
  const double tol = c.dtype == torch::kFloat64   ? 1e-11
                     : c.dtype == torch::kFloat32 ? 1e-5
                     : c.dtype == torch::kHalf    ? 4e-3
                                                  : 2.5e-2;
  const torch::Tensor err = (out.to(torch::kDouble) - want).abs() - tol * (1 + want.abs());
  EXPECT_LE(err.max().item<double>(), 0.0) << "worst at " << err.flatten().argmax().item<int64_t>();
}

}  // namespace

TEST(TileAttentionCudaScanOnHost, CopeAndStickBreakingEqualTheirFormulasInEveryDtype) {
  using W = TileCudaWeights;
  for (torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32, torch::kBFloat16, torch::kHalf}) {
    for (W weights : {W::softmax, W::stick_breaking, W::stick_breaking_remainder_to_query}) {
      Case c;
      c.dtype = dtype, c.term = TileCudaTerm::cope, c.weights = weights, c.padded = weights != W::stick_breaking;
      check_case(c);
    }
    for (TileCudaTerm term : {TileCudaTerm::none, TileCudaTerm::bias_rows, TileCudaTerm::fox})
      for (W weights : {W::stick_breaking, W::stick_breaking_remainder_to_query}) {
        const bool wide = dtype == torch::kFloat64 || dtype == torch::kFloat32;
        if (!wide && (term != TileCudaTerm::none || weights != W::stick_breaking_remainder_to_query)) continue;
        Case c;
        c.dtype = dtype, c.term = term, c.weights = weights, c.padded = term == TileCudaTerm::bias_rows;
        check_case(c);
      }
  }
}

// Lengths that end inside the first tile, one past its edge, and past two tiles (the carry
// across tiles), at the head dimensions the GPU build has.
TEST(TileAttentionCudaScanOnHost, LengthsAtTileEdgesAndHeadDimensions) {
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat32})
    for (int64_t head_dim : {64, 128})
      for (int64_t seq : {1, 65, 150}) {
        Case c;
        c.dtype = dtype, c.head_dim = head_dim, c.seq = seq, c.batch = 1, c.heads = 1;
        c.term = TileCudaTerm::cope;
        check_case(c);
        c.term = TileCudaTerm::none, c.weights = TileCudaWeights::stick_breaking_remainder_to_query;
        check_case(c);
      }
}

// The setup (tile_attention_cuda_setup.h) on CPU tensors: CoPE's term and stick-breaking give the
// CPU tile kernel's output (held to the formulas by its own tests) in float64; bidirectional
// stick-breaking or CoPE, a log-sum-exp under stick-breaking, and stick-breaking over RoPE's
// remaps are refused with their reasons.
TEST(TileAttentionCudaScanOnHost, TheSetupGivesTheCpuTileKernelsOutputAndRefusesWhatTheScanLacks) {
  const int64_t B = 2, H = 2, S = 90, D = 32;
  torch::manual_seed(5);
  auto heads = [&] { return torch::randn({B, S, H, D}, torch::kDouble).transpose(1, 2); };
  const torch::Tensor q = heads(), k = heads(), v = heads();
  const torch::Tensor lengths = torch::tensor(std::vector<int64_t>{S, 47});
  TileTerm cope;
  cope.added = CopeTerm{torch::randn({B, H, S, 12}, torch::kDouble)};
  for (bool with_cope : {false, true})
    for (TileNormalizer normalizer :
         {TileNormalizer::softmax, TileNormalizer::stick_breaking, TileNormalizer::stick_breaking_remainder_to_query}) {
      if (!with_cope && normalizer == TileNormalizer::softmax) continue;
      SCOPED_TRACE(std::string(with_cope ? "CoPE" : "no term") + " normaliser " +
                   std::to_string(static_cast<int>(normalizer)));
      const TileTerm& term = with_cope ? cope : TileTerm{};
      const torch::Tensor out = torch::empty({B, S, H, D}, torch::kDouble).transpose(1, 2);
      std::vector<torch::Tensor> keep;
      tile_attention_launch(describe_tile_cuda(q, k, v, out, 0.2, true, term, normalizer, lengths, keep),
                            cuda_host::HostLauncher{});
      torch::NoGradGuard no_grad;
      const torch::Tensor want = tile_attention(q, k, v, 0.2, true, term, normalizer, lengths);
      EXPECT_LE((out - want).abs().max().item<double>(), 1e-11);
    }
  const torch::Tensor out = torch::empty_like(q);
  std::vector<torch::Tensor> keep;
  auto refusal = [&](bool causal, const TileTerm& term, TileNormalizer normalizer) {
    try {
      describe_tile_cuda(q, k, v, out, 0.2, causal, term, normalizer, {}, keep);
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(false, cope, TileNormalizer::softmax).find("causal"), std::string::npos);
  EXPECT_NE(refusal(false, TileTerm{}, TileNormalizer::stick_breaking).find("causal"), std::string::npos);
  TileTerm remap;
  remap.far_q = q, remap.far_k = k, remap.far_threshold = 10;
  EXPECT_NE(refusal(true, remap, TileNormalizer::stick_breaking).find("remaps"), std::string::npos);
  EXPECT_EQ(refusal(true, remap, TileNormalizer::softmax), "accepted");
}

}  // namespace tile_attention_cuda_scan_on_host_test
