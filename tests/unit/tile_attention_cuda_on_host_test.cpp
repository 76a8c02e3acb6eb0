// CUDA tile attention's kernel (tile_attention_cuda_kernels.cuh) run on this CPU through
// cuda_host_emulator.h, the tensor cores' mma.sync emulated from the PTX ISA's fragment layout:
// its output and log-sum-exp against the explicit scores in double, softmax(q k^T scale + term +
// mask) v from the same inputs, for every dtype (bf16 and fp16 on the tensor-core path, float32
// and float64 on the CUDA cores), each term (none, a relative bias row per head, FoX's decay,
// FIRE's piecewise-linear map on both sides, DeBERTa's bucketed tables, a relative table with
// values as Shaw's), causal and bidirectional, right padding, lengths that end inside a tile and strided [B, S, H, D]
// inputs. A check of the emulated product itself pins the fragment layout to a plain matrix
// product. The GPU test (tile_attention_cuda_test.cpp) decides on a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "random_fire_term.h"
#include "roformer/config/config.h"
#include "roformer/model/position/position_encoding.h"
#include "roformer/ops/common/kernel_dtype_torch.h"
#include "roformer/ops/tile_attention/tile_attention.h"
#include "roformer/ops/tile_attention/tile_attention_cuda_kernels.cuh"
#include "roformer/ops/tile_attention/tile_attention_cuda_setup.h"
#include "tiny_models.h"

namespace tile_attention_cuda_on_host_test {

using namespace roformer::ops;

namespace {

struct Case {
  torch::ScalarType dtype = torch::kFloat32;
  TileCudaTerm term = TileCudaTerm::none;
  bool causal = true;
  bool padded = false;
  int64_t batch = 2, heads = 2, seq = 37, head_dim = 32;
  std::string name() const {
    return std::string(c10::toString(dtype)) + " term " + std::to_string(static_cast<int>(term)) +
           (causal ? " causal" : " bidirectional") + (padded ? " padded" : "") + " S " + std::to_string(seq) + " D " +
           std::to_string(head_dim);
  }
};

// FIRE's tables in double: psi, each side's denominators, kinks, slopes and intercepts, the
// intercepts chosen so that the map is continuous at the kinks (as FIRE's MLP is).
struct FireTables {
  double c = 0.3, threshold = 6, eps = 1e-6;
  torch::Tensor psi, denominator[2], kinks[2], slope[2], intercept[2];
  FireTables(int64_t H, int64_t S) {
    psi = torch::log1p(torch::arange(S, torch::kDouble) * c);
    for (int side = 0; side < 2; ++side) {
      const torch::Tensor pos = torch::arange(S, torch::kDouble);
      denominator[side] = torch::log1p((side == 0 ? pos : (S - 1) - pos).clamp_min(threshold) * c) + eps;
      kinks[side] = std::get<0>(torch::sort(torch::rand({5 + side}, torch::kDouble) * 1.2));
      slope[side] = torch::randn({H, 6 + side}, torch::kDouble) * 2;
      intercept[side] = torch::zeros({H, 6 + side}, torch::kDouble);
      intercept[side].select(1, 0).copy_(torch::randn({H}, torch::kDouble));
      for (int w = 0; w < 5 + side; ++w)  // equal at kink w: slope_w k + b_w = slope_{w+1} k + b_{w+1}
        intercept[side].select(1, w + 1).copy_(
            intercept[side].select(1, w) + (slope[side].select(1, w) - slope[side].select(1, w + 1)) * kinks[side][w]);
    }
  }
  // The term [H, S, S] of query i and key j.
  torch::Tensor term(int64_t S) const {
    const torch::Tensor i = torch::arange(S, torch::kLong).view({S, 1}),
                        j = torch::arange(S, torch::kLong).view({1, S});
    torch::Tensor out;
    for (int side = 0; side < 2; ++side) {
      const torch::Tensor d = side == 0 ? (i - j).clamp_min(0) : (j - i).clamp_min(0);
      const torch::Tensor x = psi.index_select(0, d.flatten()).view({S, S}) / denominator[side].view({S, 1});
      const torch::Tensor segment = (kinks[side].view({1, 1, -1}) < x.unsqueeze(-1)).sum(-1);  // [S, S]
      const torch::Tensor at = segment.flatten();
      const torch::Tensor value =
          slope[side].index_select(1, at).view({-1, S, S}) * x + intercept[side].index_select(1, at).view({-1, S, S});
      out = side == 0 ? value : torch::where((j > i).view({1, S, S}), value, out);
    }
    return out;
  }
};

// Bucketed tables in double: by_query [B, H, S, R], by_key [B, H, R, S] and the two bucket indices
// of distance d at [S - 1 + d] (every distance from -(S - 1) to S - 1).
struct BucketTables {
  static constexpr int64_t R = 6;
  torch::Tensor by_query, by_key, query_bucket, key_bucket;
  BucketTables(int64_t B, int64_t H, int64_t S) {
    by_query = torch::randn({B, H, S, R}, torch::kDouble);
    by_key = torch::randn({B, H, R, S}, torch::kDouble);
    const torch::Tensor at = torch::arange(2 * S - 1, torch::kLong);
    query_bucket = at.remainder(R);
    key_bucket = (at * 3 + 1).remainder(R);
  }
  // by_query[b, h, i, qb(i - j)] + by_key[b, h, kb(i - j), j], [B, H, S, S].
  torch::Tensor term(int64_t S) const {
    const torch::Tensor i = torch::arange(S, torch::kLong).view({S, 1}),
                        j = torch::arange(S, torch::kLong).view({1, S});
    const torch::Tensor d = ((S - 1) + i - j).expand({S, S});
    const int64_t B = by_query.size(0), H = by_query.size(1);
    const torch::Tensor qb = query_bucket.index({d}).view({1, 1, S, S}).expand({B, H, S, S});
    const torch::Tensor kb = key_bucket.index({d}).view({1, 1, S, S}).expand({B, H, S, S});
    return by_query.gather(3, qb) + by_key.gather(2, kb);
  }
};

// A relative table with values, in the kernel's dtype: the term's queries [B, H, S, D] and the
// tables [H, origin + S, D], origin 0 causal (rows before it would belong to hidden keys) and
// S + 1 bidirectional (two rows no pair reads).
struct RelativeTables {
  int64_t origin = 0;
  torch::Tensor q, table, value;
  RelativeTables(const Case& c, torch::ScalarType dtype) : origin(c.causal ? 0 : c.seq + 1) {
    q = torch::randn({c.batch, c.heads, c.seq, c.head_dim}, torch::kDouble).to(dtype);
    table = torch::randn({c.heads, origin + c.seq, c.head_dim}, torch::kDouble).to(dtype);
    value = torch::randn({c.heads, origin + c.seq, c.head_dim}, torch::kDouble).to(dtype);
  }
  // Each pair's row origin + i - j, [S, S] (clamped: the rows of hidden pairs do not matter).
  torch::Tensor rows(int64_t S) const {
    const torch::Tensor i = torch::arange(S).view({S, 1}), j = torch::arange(S).view({1, S});
    return (origin + i - j).clamp(0, origin + S - 1);
  }
  // q_i . table[h, origin + i - j], [B, H, S, S].
  torch::Tensor term(int64_t S) const {
    const torch::Tensor all = torch::matmul(q.to(torch::kDouble), table.to(torch::kDouble).transpose(1, 2));
    return all.gather(3, rows(S).view({1, 1, S, S}).expand({q.size(0), q.size(1), S, S}));
  }
  // sum_j w_ij value[h, origin + i - j], [B, H, S, D].
  torch::Tensor values(const torch::Tensor& w) const {
    const int64_t S = w.size(2);
    const torch::Tensor spread = torch::zeros({w.size(0), w.size(1), S, value.size(1)}, torch::kDouble)
                                     .scatter_add(3, rows(S).view({1, 1, S, S}).expand(w.sizes()), w);
    return torch::matmul(spread, value.to(torch::kDouble));
  }
};

// The explicit scores in double: output [B, H, S, D] and log-sum-exp [B, H, S].
std::pair<torch::Tensor, torch::Tensor> reference(const Case& c, const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, double scale, const torch::Tensor& bias,
                                                  const torch::Tensor& cumulative, const torch::Tensor& lengths,
                                                  const FireTables& fire, const BucketTables& buckets,
                                                  const RelativeTables& relative) {
  const int64_t S = c.seq;
  torch::Tensor s = torch::matmul(q.to(torch::kDouble), k.to(torch::kDouble).transpose(2, 3));
  if (c.term == TileCudaTerm::buckets) s = s + buckets.term(S);
  if (c.term == TileCudaTerm::relative) s = s + relative.term(S);
  s = s * scale;
  const torch::Tensor i = torch::arange(S, torch::kLong).view({S, 1}), j = torch::arange(S, torch::kLong).view({1, S});
  if (c.term == TileCudaTerm::bias_rows)
    s = s + bias.to(torch::kDouble).index_select(1, ((S - 1) + j - i).flatten()).view({1, c.heads, S, S});
  if (c.term == TileCudaTerm::fox) {
    const torch::Tensor cu = cumulative.to(torch::kDouble);
    const torch::Tensor decay = cu.unsqueeze(3) - cu.unsqueeze(2);
    s = s + (c.causal ? decay : -decay.abs());
  }
  if (c.term == TileCudaTerm::fire) s = s + fire.term(S).unsqueeze(0);
  torch::Tensor hidden = torch::zeros({c.batch, 1, S, S}, torch::kBool);
  if (c.causal) hidden = hidden | (j > i).view({1, 1, S, S});
  if (lengths.defined()) hidden = hidden | (j.view({1, 1, 1, S}) >= lengths.view({c.batch, 1, 1, 1}));
  s = s.masked_fill(hidden, -std::numeric_limits<double>::infinity());
  const torch::Tensor w = torch::softmax(s, -1);
  torch::Tensor out = torch::matmul(w, v.to(torch::kDouble));
  if (c.term == TileCudaTerm::relative) out = out + relative.values(w);
  return {out, torch::logsumexp(s, -1)};
}

// [B, H, S, D] views of [B, S, H, D] storage, as attention hands them over.
torch::Tensor heads_view(const Case& c, torch::ScalarType dtype) {
  return torch::randn({c.batch, c.seq, c.heads, c.head_dim}, torch::kDouble).to(dtype).transpose(1, 2);
}

void check_case(const Case& c) {
  SCOPED_TRACE(c.name());
  torch::manual_seed(7);
  const torch::ScalarType acc = c.dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor q = heads_view(c, c.dtype), k = heads_view(c, c.dtype), v = heads_view(c, c.dtype);
  const torch::Tensor out = torch::full({c.batch, c.heads, c.seq, c.head_dim}, 7.0, torch::TensorOptions(c.dtype));
  const torch::Tensor lse = torch::empty({c.batch, c.heads, c.seq}, torch::TensorOptions(acc));
  const torch::Tensor bias = (torch::randn({c.heads, 2 * c.seq - 1}, torch::kDouble) * 2).to(acc);
  const torch::Tensor cumulative =
      torch::log_sigmoid(torch::randn({c.batch, c.heads, c.seq}, torch::kDouble) + 2).cumsum(-1).to(acc);
  const FireTables fire(c.heads, c.seq);
  const BucketTables buckets(c.batch, c.heads, c.seq);
  const RelativeTables relative(c, c.dtype);
  std::vector<torch::Tensor> fire_acc;  // the tables in the accumulation dtype, alive during the launch
  auto acc_ptr = [&](const torch::Tensor& t) {
    fire_acc.push_back(t.to(acc).contiguous());
    return fire_acc.back().data_ptr();
  };
  torch::Tensor lengths;
  if (c.padded) lengths = torch::tensor(std::vector<int64_t>{c.seq, std::max<int64_t>(1, c.seq / 2 - 3)});
  TileCudaLaunch p;
  p.batch = c.batch, p.heads = c.heads, p.seq = c.seq, p.head_dim = c.head_dim;
  p.causal = c.causal;
  p.dtype = to_kernel_dtype(c.dtype, "test");
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  p.q = q.data_ptr(), p.k = k.data_ptr(), p.v = v.data_ptr(), p.out = out.data_ptr();
  for (int a = 0; a < 3; ++a) {
    p.q_stride[a] = q.stride(a), p.k_stride[a] = k.stride(a), p.v_stride[a] = v.stride(a);
    p.out_stride[a] = out.stride(a);
  }
  p.lse = lse.data_ptr();
  if (c.padded) p.key_lengths = lengths.data_ptr<int64_t>();
  p.term = c.term;
  p.bias = bias.data_ptr();
  p.bias_head_stride = bias.stride(0);
  p.cumulative = cumulative.data_ptr();
  p.fire.psi = acc_ptr(fire.psi);
  TileCudaFireSide* sides[2] = {&p.fire.past, &p.fire.future};
  for (int side = 0; side < 2; ++side) {
    sides[side]->denominator = acc_ptr(fire.denominator[side]);
    sides[side]->kinks = acc_ptr(fire.kinks[side]);
    sides[side]->kink_count = fire.kinks[side].size(0);
    sides[side]->slope = acc_ptr(fire.slope[side]);
    sides[side]->intercept = acc_ptr(fire.intercept[side]);
  }
  p.buckets.by_query = acc_ptr(buckets.by_query);
  p.buckets.by_key = acc_ptr(buckets.by_key);
  p.buckets.query_bucket = buckets.query_bucket.data_ptr<int64_t>() + (c.seq - 1);
  p.buckets.key_bucket = buckets.key_bucket.data_ptr<int64_t>() + (c.seq - 1);
  p.buckets.buckets = BucketTables::R;
  p.relative.q = relative.q.data_ptr();
  for (int a = 0; a < 3; ++a) p.relative.q_stride[a] = relative.q.stride(a);
  p.relative.table = relative.table.data_ptr(), p.relative.value = relative.value.data_ptr();
  p.relative.table_head_stride = relative.table.stride(0), p.relative.value_head_stride = relative.value.stride(0);
  p.relative.origin = relative.origin;
  cuda_host::HostLauncher launcher;
  tile_attention_launch(p, launcher);
  ASSERT_EQ(launcher.launches, 1);
  const auto [want, want_lse] = reference(c, q, k, v, p.scale, bias, cumulative, lengths, fire, buckets, relative);
  // float64 to rounding; float32 at the 1e-5 the GPU test asks; the 16-bit types round the
  // weights before their product with the values and the output to storage.
  const double tol = c.dtype == torch::kFloat64   ? 1e-11
                     : c.dtype == torch::kFloat32 ? 1e-5
                     : c.dtype == torch::kHalf    ? 4e-3
                                                  : 2.5e-2;
  const torch::Tensor err = (out.to(torch::kDouble) - want).abs() - tol * (1 + want.abs());
  EXPECT_LE(err.max().item<double>(), 0.0) << "output, worst at " << err.flatten().argmax().item<int64_t>();
  const torch::Tensor lse_err =
      (lse.to(torch::kDouble) - want_lse).abs() - (c.dtype == torch::kFloat64 ? 1e-11 : 1e-4) * (1 + want_lse.abs());
  EXPECT_LE(lse_err.max().item<double>(), 0.0) << "log-sum-exp";
}

}  // namespace

// The emulated mma.sync against a plain product: A 16 x 16 and B 16 x 8 in the PTX fragment
// layout, with C added.
TEST(TileAttentionCudaOnHost, EmulatedMmaIsTheMatrixProductInTheFragmentLayout) {
  torch::manual_seed(3);
  const torch::Tensor A = torch::randn({16, 16}).to(torch::kBFloat16), B = torch::randn({16, 8}).to(torch::kBFloat16);
  const torch::Tensor C = torch::randn({16, 8});
  const torch::Tensor D = torch::empty({16, 8});
  const auto* a = static_cast<const __nv_bfloat16*>(A.data_ptr());
  const torch::Tensor Bt = B.t().contiguous();  // column g's 16 values in a row
  const auto* bt = static_cast<const __nv_bfloat16*>(Bt.data_ptr());
  const float* c = C.data_ptr<float>();
  float* d = D.data_ptr<float>();
  cuda_host::run_grid(1, 32, 0, [&] {
    const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
    const uint32_t ra[4] = {cuda_mma::load2(a + g * 16 + 2 * t), cuda_mma::load2(a + (g + 8) * 16 + 2 * t),
                            cuda_mma::load2(a + g * 16 + 2 * t + 8), cuda_mma::load2(a + (g + 8) * 16 + 2 * t + 8)};
    const uint32_t rb[2] = {cuda_mma::load2(bt + g * 16 + 2 * t), cuda_mma::load2(bt + g * 16 + 2 * t + 8)};
    float acc[4];
    for (int i = 0; i < 4; ++i) acc[i] = c[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
    cuda_mma::mma_16816<__nv_bfloat16>(acc, ra, rb);
    for (int i = 0; i < 4; ++i) d[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
  });
  const torch::Tensor want = torch::matmul(A.to(torch::kDouble), B.to(torch::kDouble)) + C.to(torch::kDouble);
  EXPECT_LE((D.to(torch::kDouble) - want).abs().max().item<double>(), 1e-5);
}

TEST(TileAttentionCudaOnHost, EveryDtypeAndTermEqualsTheExplicitScores) {
  for (torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32, torch::kBFloat16, torch::kHalf})
    for (TileCudaTerm term : {TileCudaTerm::none, TileCudaTerm::bias_rows, TileCudaTerm::fox, TileCudaTerm::fire,
                              TileCudaTerm::buckets, TileCudaTerm::relative})
      for (bool causal : {true, false}) {
        Case c;
        c.dtype = dtype, c.term = term, c.causal = causal;
        c.padded = term == TileCudaTerm::bias_rows || term == TileCudaTerm::relative;
        c.seq = causal ? 100 : 37;
        check_case(c);
      }
}

// The relative table's walk asks for the most shared memory (52 KiB at bf16 D = 128, past the
// default 48 KiB: its launch opts in).
TEST(TileAttentionCudaOnHost, HeadDimensionsAndLengthsAtTileEdges) {
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat32})
    for (int64_t head_dim : {64, 128})
      for (int64_t seq : {1, 64, 130})
        for (TileCudaTerm term : {TileCudaTerm::bias_rows, TileCudaTerm::relative}) {
          Case c;
          c.dtype = dtype, c.head_dim = head_dim, c.seq = seq, c.batch = 1, c.heads = 1;
          c.term = term;
          check_case(c);
        }
}

// Two rotations (a far pair, i - j >= 40, scores far_q . far_k) and chunks of 24 (the chunk gap
// picks q . k, mid_q . k or far_q . far_k) against the explicit scores in double: every pair takes
// its own product, in tiles of one product and tiles that mix them, the far keys staged over the keys.
TEST(TileAttentionCudaOnHost, RotationsGiveEachPairItsOwnProduct) {
  const int64_t B = 1, H = 2, S = 150;
  for (torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32, torch::kBFloat16})
    for (int64_t D : {32, 64})
      for (bool chunks : {false, true}) {
        SCOPED_TRACE(std::string(c10::toString(dtype)) + " D " + std::to_string(D) + (chunks ? " chunks" : " two"));
        torch::manual_seed(12);
        auto heads = [&] { return torch::randn({B, S, H, D}, torch::kDouble).to(dtype).transpose(1, 2); };
        const torch::Tensor q = heads(), k = heads(), v = heads(), mid_q = heads(), far_q = heads(), far_k = heads();
        const torch::Tensor out = torch::empty({B, S, H, D}, torch::TensorOptions(dtype)).transpose(1, 2);
        TileCudaLaunch p;
        p.batch = B, p.heads = H, p.seq = S, p.head_dim = D, p.causal = true, p.scale = 0.2;
        p.dtype = to_kernel_dtype(dtype, "test");
        auto rows = [](const torch::Tensor& t, const void*& data, int64_t(&stride)[3]) {
          data = t.data_ptr();
          for (int a = 0; a < 3; ++a) stride[a] = t.stride(a);
        };
        const void* out_data = nullptr;
        rows(q, p.q, p.q_stride), rows(k, p.k, p.k_stride), rows(v, p.v, p.v_stride), rows(out, out_data, p.out_stride);
        p.out = out.data_ptr();
        rows(far_q, p.far_q, p.far_q_stride), rows(far_k, p.far_k, p.far_k_stride);
        if (chunks) {
          rows(mid_q, p.mid_q, p.mid_q_stride);
          p.chunk = 24;
        } else {
          p.far_from = 40;
        }
        tile_attention_launch(p, cuda_host::HostLauncher{});
        auto dot = [](const torch::Tensor& a, const torch::Tensor& b) {
          return torch::matmul(a.to(torch::kDouble), b.to(torch::kDouble).transpose(2, 3));
        };
        const torch::Tensor i = torch::arange(S).view({S, 1}), j = torch::arange(S).view({1, S});
        const torch::Tensor gap = torch::div(i, 24, "floor") - torch::div(j, 24, "floor");
        const torch::Tensor far = chunks ? gap >= 2 : (i - j) >= 40, mid = chunks ? gap == 1 : torch::zeros_like(far);
        torch::Tensor scores = torch::where(far, dot(far_q, far_k), torch::where(mid, dot(mid_q, k), dot(q, k))) * 0.2;
        scores = scores.masked_fill(j > i, -std::numeric_limits<double>::infinity());
        const torch::Tensor want = torch::matmul(torch::softmax(scores, -1), v.to(torch::kDouble));
        const double tol = dtype == torch::kFloat64 ? 1e-11 : dtype == torch::kFloat32 ? 1e-5 : 2.5e-2;
        EXPECT_LE(((out.to(torch::kDouble) - want).abs() - tol * (1 + want.abs())).max().item<double>(), 0.0);
      }
}

// The LibTorch side (tile_attention_cuda_setup.h) on CPU tensors, run through the emulator: no
// term with right padding, FoX's running sums, FIRE's and the buckets' tables and a relative table
// with values (heads sharing its rows, as Shaw's) give the CPU tile kernel's output (held to each
// family's formula in double by its own tests), and the bias rows with right padding the explicit
// scores; float64 to rounding, float32 at 1e-5.
TEST(TileAttentionCudaOnHost, TheSetupDescribesEachTermAsTheCpuTileKernelComputesIt) {
  const int64_t B = 2, H = 2, S = 90, D = 32;
  for (torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32})
    for (bool causal : {true, false})
      for (int term = 0; term < 6; ++term) {
        SCOPED_TRACE(std::string(c10::toString(dtype)) + (causal ? " causal" : " bidirectional") + " term " +
                     std::to_string(term));
        torch::manual_seed(8);
        auto heads = [&] { return torch::randn({B, S, H, D}, torch::kDouble).to(dtype).transpose(1, 2); };
        const torch::Tensor q = heads(), k = heads(), v = heads();
        const torch::Tensor out = torch::empty({B, S, H, D}, torch::TensorOptions(dtype)).transpose(1, 2);
        const double scale = 0.2;
        TileTerm t;
        torch::Tensor lengths, want;
        const torch::Tensor bias = torch::randn({H, 2 * S - 1}, torch::kDouble);
        if (term == 1) t.added = FoxTerm{torch::log_sigmoid(torch::randn({B, H, S}, torch::kDouble)).cumsum(-1)};
        if (term == 2) t.added = roformer::testing::random_fire_term(H, torch::kCPU);
        if (term == 0 || term == 3) lengths = torch::tensor(std::vector<int64_t>{S, 41});
        if (term == 4) {
          const BucketTables b(B, H, S);
          t.added = BucketTerm{b.by_query, b.by_key, b.query_bucket, b.key_bucket, S - 1};
        }
        if (term == 5) {
          const int64_t origin = causal ? 0 : S - 1;
          RelativeTerm r{heads(), torch::randn({1, origin + S + 3, D}, torch::kDouble).expand({H, -1, -1})};
          r.value_table = torch::randn({H, origin + S, D}, torch::kDouble);
          r.origin = origin;
          t.added = r;
          lengths = torch::tensor(std::vector<int64_t>{S, 50});
        }
        std::vector<torch::Tensor> keep;
        const TileCudaLaunch p =
            term == 3 ? describe_tile_cuda_bias(q, k, v, out, scale, causal, bias, lengths, keep)
                      : describe_tile_cuda(q, k, v, out, scale, causal, t, TileNormalizer::softmax, lengths, keep);
        tile_attention_launch(p, cuda_host::HostLauncher{});
        auto dbl = [](const torch::Tensor& x) { return x.to(torch::kDouble); };
        if (term == 3) {
          const torch::Tensor i = torch::arange(S).view({S, 1}), j = torch::arange(S).view({1, S});
          torch::Tensor s = torch::matmul(dbl(q), dbl(k).transpose(2, 3)) * scale +
                            bias.index_select(1, ((S - 1) + j - i).flatten()).view({1, H, S, S});
          if (causal) s = s.masked_fill((j > i).view({1, 1, S, S}), -std::numeric_limits<double>::infinity());
          s = s.masked_fill((j.view({1, 1, 1, S}) >= lengths.view({B, 1, 1, 1})),
                            -std::numeric_limits<double>::infinity());
          want = torch::matmul(torch::softmax(s, -1), dbl(v));
        } else {
          if (term == 1) t.added = FoxTerm{std::get<FoxTerm>(t.added).cumulative};
          if (term == 5) {  // the term's queries in q's dtype, float64 here
            RelativeTerm r = std::get<RelativeTerm>(t.added);
            r.q = dbl(r.q);
            t.added = r;
          }
          torch::NoGradGuard no_grad;
          want = tile_attention(dbl(q), dbl(k), dbl(v), scale, causal, t, TileNormalizer::softmax, lengths);
        }
        const double tol = dtype == torch::kFloat64 ? 1e-11 : 1e-5;
        EXPECT_LE(((dbl(out) - want).abs() - tol * (1 + want.abs())).max().item<double>(), 0.0);
      }
}

// Every family (and RoPE's remaps) whose traits claim a CUDA tile form hands tile attention a term
// the CUDA setup takes, and the kernel, run under emulation in float64, gives the CPU tile
// kernel's output on that term, causal and (where the term serves it) bidirectional. A family
// claiming a form the CUDA kernel lacks fails here instead of on a GPU.
TEST(TileAttentionCudaOnHost, EveryFamilyClaimingCudaTilesGetsTheCpuTileKernelsOutput) {
  using roformer::config::PositionKind;
  const int64_t B = 1, S = 70, H = 2, D = 32;
  int checked = 0;
  std::vector<std::pair<PositionKind, roformer::config::RopeMode>> cases;
  for (const auto& [kind, name] : roformer::config::position_kind_names().entries)
    cases.push_back({kind, roformer::config::RopeMode::rotate});
  for (auto mode : {roformer::config::RopeMode::rerope, roformer::config::RopeMode::string,
                    roformer::config::RopeMode::self_extend, roformer::config::RopeMode::dual_chunk})
    cases.push_back({PositionKind::rope, mode});
  for (const auto& [kind, mode] : cases)
    for (bool causal : {true, false}) {
      roformer::config::ModelConfig c = tiny_models::tiny_model(
          kind, causal ? roformer::config::Objective::causal_lm : roformer::config::Objective::mlm);
      c.hidden_size = H * D, c.num_heads = H;
      c.position.max_positions = 128;
      c.position.cope.max_positions = 24;  // counts reach the clamp
      c.position.rope.rotary_dim = D;
      c.position.rope.mode = mode;
      c.position.rope.dual_chunk.chunk_size = 24, c.position.rope.dual_chunk.local_window = 4;  // chunks of 20
      SCOPED_TRACE(roformer::config::position_kind_names().name(kind) + " mode " + std::to_string(int(mode)) +
                   (causal ? " causal" : " bidirectional"));
      std::shared_ptr<roformer::model::PositionEncodingImpl> pe;
      try {
        pe = roformer::model::make_position_encoding(c);
      } catch (const std::exception&) {
        continue;  // a combination the config refuses (e.g. a causal-only mode in MLM)
      }
      pe->to(torch::kDouble);
      {
        torch::NoGradGuard init;
        for (auto& p : pe->named_parameters())  // CoPE's table starts at zero, the authors' choice
          if (p.key().find("pos_emb") != std::string::npos) p.value().normal_(0.0, 0.5);
      }
      const auto& term_properties = pe->traits().term;
      if (!pe->traits().forms_scores || !term_properties || !term_properties->cuda) continue;
      if (!causal && !term_properties->bidirectional) continue;
      torch::manual_seed(9);
      torch::NoGradGuard no_grad;
      const torch::Tensor x = torch::randn({B, S, H * D}, torch::kDouble);
      const torch::Tensor q = torch::randn({B, H, S, D}, torch::kDouble),
                          k = torch::randn({B, H, S, D}, torch::kDouble);
      const torch::Tensor v = torch::randn({B, H, S, D}, torch::kDouble), positions = torch::arange(S);
      const torch::Tensor state = pe->layer_state(x, k, positions, 0, {});
      const std::optional<TileTerm> term = pe->tile_term(q, k, positions, 0, state, causal);
      if (!term) continue;
      // Softmax, and stick-breaking (causal) where the term claims it.
      for (TileNormalizer normalizer : {TileNormalizer::softmax, TileNormalizer::stick_breaking_remainder_to_query}) {
        if (normalizer != TileNormalizer::softmax && (!causal || !term_properties->cuda_stick_breaking)) continue;
        SCOPED_TRACE("normaliser " + std::to_string(static_cast<int>(normalizer)));
        const torch::Tensor out = torch::empty({B, S, H, D}, torch::kDouble).transpose(1, 2);
        std::vector<torch::Tensor> keep;
        const torch::Tensor& sq = term->q.defined() ? term->q : q;
        const torch::Tensor& sk = term->k.defined() ? term->k : k;
        ASSERT_NO_THROW(tile_attention_launch(
            describe_tile_cuda(sq, sk, v, out, 0.17, causal, *term, normalizer, {}, keep), cuda_host::HostLauncher{}));
        const torch::Tensor want = tile_attention(q, k, v, 0.17, causal, *term, normalizer);
        ASSERT_TRUE(want.isfinite().all().item<bool>());
        EXPECT_LE((out - want).abs().max().item<double>(), 1e-11);
        ++checked;
      }
    }
  // FoX, FIRE, DeBERTa, Shaw and Transformer-XL both ways, CoPE causal, RoPE's four remaps causal
  // (softmax only), and stick-breaking over FoX, FIRE, DeBERTa and CoPE
  EXPECT_GE(checked, 19);
}

}  // namespace tile_attention_cuda_on_host_test
