// GPU (label gpu; skipped without a CUDA GPU): CUDA tile attention on the device, in what the GPU
// build has (bf16 and float32, head dimensions 64 and 128). The op against the explicit scores in
// double on the same device (float32 at 1e-5, bf16 to its rounding of the weights and outputs;
// FIRE, DeBERTa's buckets and the rotations against the CPU tile kernel in double), with no term,
// FoX's decay, FIRE's map, the buckets and a relative bias row per head, causal and bidirectional,
// right padding, lengths inside and at the ends of tiles, two rotations and chunks; and the
// families it serves (ALiBi, T5, KERPLE, Sandwich, FoX, FIRE, DeBERTa, RoPE's remaps) evaluated
// under model.attention_kernel fused as under reference, with the probe saying the tiles ran. The
// same kernel runs on the CPU under emulation in tile_attention_cuda_on_host_test.cpp.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "random_fire_term.h"
#include "roformer/model/attention_kernel.h"
#include "roformer/model/encoder.h"
#include "roformer/ops/tile_attention/tile_attention.h"
#include "tiny_models.h"

namespace tile_attention_cuda_test {

using namespace roformer;

namespace {

enum class Term { none, fox, bias, fire, buckets };

double tolerance(torch::ScalarType dtype) {
  return dtype == torch::kFloat32 ? 1e-5 : 2.5e-2;  // bf16: its rounding of the weights and outputs
}

// One case on the device: the op's output against softmax(q k^T / sqrt(D) + term + mask) v in double.
void check_op(torch::ScalarType dtype, Term term, bool causal, int64_t S, int64_t D, bool padded) {
  SCOPED_TRACE(std::string(c10::toString(dtype)) + " term " + std::to_string(static_cast<int>(term)) +
               (causal ? " causal" : " bidirectional") + " S " + std::to_string(S) + " D " + std::to_string(D) +
               (padded ? " padded" : ""));
  const int64_t B = 2, H = 3;
  const auto dev = torch::TensorOptions().device(torch::kCUDA);
  torch::manual_seed(11);
  auto heads = [&] { return torch::randn({B, S, H, D}, dev.dtype(torch::kDouble)).to(dtype).transpose(1, 2); };
  const torch::Tensor q = heads(), k = heads(), v = heads();
  const torch::Tensor bias = torch::randn({H, 2 * S - 1}, dev.dtype(torch::kDouble)) * 2;
  const torch::Tensor cumulative =
      torch::log_sigmoid(torch::randn({B, H, S}, dev.dtype(torch::kDouble)) + 2).cumsum(-1);
  const torch::Tensor lengths =
      padded ? torch::tensor(std::vector<int64_t>{S, std::max<int64_t>(1, S / 2 - 3)}) : torch::Tensor();
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  torch::NoGradGuard no_grad;
  torch::Tensor got;
  if (term == Term::bias) {
    got = ops::tile_attention_bias(q, k, v, scale, causal, bias);
  } else if (term == Term::fire || term == Term::buckets) {  // against the CPU tile kernel in double (held to the
                                                             // family's formula by its tests)
    auto on = [&](torch::Device device) {
      if (term == Term::fire) return ops::TileTerm{roformer::testing::random_fire_term(H, device)};
      torch::manual_seed(6);
      const torch::Tensor at = torch::arange(2 * S - 1, torch::kLong);
      return ops::TileTerm{ops::BucketTerm{torch::randn({B, H, S, 6}, torch::kDouble).to(device),
                                           torch::randn({B, H, 6, S}, torch::kDouble).to(device),
                                           at.remainder(6).to(device), (at * 3 + 1).remainder(6).to(device), S - 1}};
    };
    got = ops::tile_attention(q, k, v, scale, causal, on(torch::kCUDA));
    auto cpu = [](const torch::Tensor& t) { return t.to(torch::kCPU, torch::kDouble); };
    const torch::Tensor want = ops::tile_attention(cpu(q), cpu(k), cpu(v), scale, causal, on(torch::kCPU));
    const torch::Tensor excess = (got.cpu().to(torch::kDouble) - want).abs() - tolerance(dtype) * (1 + want.abs());
    EXPECT_LE(excess.max().item<double>(), 0.0);
    return;
  } else {
    ops::TileTerm t;
    if (term == Term::fox) t.added = ops::FoxTerm{cumulative};
    got = ops::tile_attention(q, k, v, scale, causal, t, ops::TileNormalizer::softmax, lengths);
  }
  torch::Tensor s = torch::matmul(q.to(torch::kDouble), k.to(torch::kDouble).transpose(2, 3)) * scale;
  const torch::Tensor i = torch::arange(S, dev.dtype(torch::kLong)).view({S, 1});
  const torch::Tensor j = torch::arange(S, dev.dtype(torch::kLong)).view({1, S});
  if (term == Term::bias) s = s + bias.index_select(1, ((S - 1) + j - i).flatten()).view({1, H, S, S});
  if (term == Term::fox) {
    const torch::Tensor decay = cumulative.unsqueeze(3) - cumulative.unsqueeze(2);
    s = s + (causal ? decay : -decay.abs());
  }
  torch::Tensor hidden = torch::zeros({B, 1, S, S}, dev.dtype(torch::kBool));
  if (causal) hidden = hidden | (j > i).view({1, 1, S, S});
  if (padded) hidden = hidden | (j.view({1, 1, 1, S}) >= lengths.to(torch::kCUDA).view({B, 1, 1, 1}));
  const torch::Tensor want = torch::matmul(
      torch::softmax(s.masked_fill(hidden, -std::numeric_limits<double>::infinity()), -1), v.to(torch::kDouble));
  const double tol = tolerance(dtype);
  const torch::Tensor excess = (got.to(torch::kDouble) - want).abs() - tol * (1 + want.abs());
  EXPECT_LE(excess.max().item<double>(), 0.0);
}

// The tiny two-layer causal or MLM model of `kind` (RoPE's remaps: `mode`, chunks of 224 for DCA)
// widened to head dimension 64, in float32 on the GPU, the same weights whatever the kernel.
model::EncoderModel cuda_model(config::PositionKind kind, config::Objective objective, config::AttentionKernel kernel,
                               config::RopeMode mode = config::RopeMode::rotate,
                               config::AttentionNormalizer normalizer = config::AttentionNormalizer::softmax) {
  config::ModelConfig c = tiny_models::tiny_model(kind, objective);
  c.position.rope.mode = mode;
  c.attention_normalizer = normalizer;
  c.position.cope.max_positions = 24;  // counts reach the clamp
  c.position.rope.dual_chunk.chunk_size = 256, c.position.rope.dual_chunk.local_window = 32;
  c.attention_kernel = kernel;
  c.vocab_size = 64, c.hidden_size = 128, c.ffn_size = 256;
  c.position.max_positions = 1024;
  model::EncoderModel m = model::build_model(c, 5);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : m->named_parameters())  // CoPE's table starts at zero, the authors' choice
      if (p.key().find("pos_emb") != std::string::npos) p.value().normal_(0.0, 0.5);
  }
  m->to(torch::kCUDA);
  m->eval();
  return m;
}

// The models `build` makes under `kernel` and under reference give the same outputs on `in` in
// evaluation, and the tiles ran under `kernel`.
void expect_like_reference(const std::function<model::EncoderModel(config::AttentionKernel)>& build,
                           const model::EncoderInput& in, config::AttentionKernel kernel) {
  torch::NoGradGuard no_grad;
  auto run = [&](config::AttentionKernel k, std::string* ran) {
    model::EncoderModel m = build(k);
    model::AttentionKernelProbe probe;
    const torch::Tensor out = m->forward(in);
    torch::cuda::synchronize();
    *ran = probe.summary();
    return out;
  };
  std::string tested_ran, reference_ran;
  const torch::Tensor tested = run(kernel, &tested_ran);
  const torch::Tensor reference = run(config::AttentionKernel::reference, &reference_ran);
  EXPECT_NE(tested_ran.find(model::attention_kernel::kTile), std::string::npos) << tested_ran;
  EXPECT_LE((tested - reference).abs().max().item<double>(), 1e-4) << tested_ran << " / " << reference_ran;
}

}  // namespace

TEST(TileAttentionCuda, EqualsTheExplicitScoresOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16})
    for (Term term : {Term::none, Term::fox, Term::bias, Term::fire, Term::buckets})
      for (bool causal : {true, false}) check_op(dtype, term, causal, 300, 64, term == Term::fox);
  for (int64_t D : {128})
    for (int64_t S : {1, 64, 65, 1000}) check_op(torch::kBFloat16, Term::bias, true, S, D, false);
  check_op(torch::kFloat32, Term::none, false, 513, 128, true);
  // Key lengths outside [1, S] are refused as on the CPU (an empty row would divide by zero).
  const torch::Tensor x = torch::randn({2, 2, 10, 64}, torch::TensorOptions().device(torch::kCUDA));
  torch::NoGradGuard no_grad;
  for (int64_t bad : {0, 11})
    EXPECT_THROW(ops::tile_attention(x, x, x, 0.125, true, ops::TileTerm{}, ops::TileNormalizer::softmax,
                                     torch::tensor(std::vector<int64_t>{10, bad})),
                 c10::Error);
}

// Two rotations (far pairs past 300) and chunks of 200, on the device, against the CPU tile kernel in
// double on the same term.
TEST(TileAttentionCuda, RotationsEqualTheCpuTileKernel) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  const int64_t B = 2, H = 3, S = 1000, D = 64;
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16})
    for (bool chunks : {false, true}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (chunks ? " chunks" : " two rotations"));
      torch::manual_seed(13);
      auto heads = [&] { return torch::randn({B, S, H, D}, torch::kDouble).to(dtype).cuda().transpose(1, 2); };
      const torch::Tensor q = heads(), k = heads(), v = heads();
      ops::TileTerm t;
      t.far_q = heads(), t.far_k = heads();
      if (chunks) t.mid_q = heads(), t.chunk = 200;
      if (!chunks) t.far_threshold = 300;
      torch::NoGradGuard no_grad;
      const torch::Tensor got = ops::tile_attention(q, k, v, 0.125, true, t);
      auto cpu = [](const torch::Tensor& x) { return x.defined() ? x.to(torch::kCPU, torch::kDouble) : x; };
      ops::TileTerm on_cpu = t;
      on_cpu.far_q = cpu(t.far_q), on_cpu.far_k = cpu(t.far_k), on_cpu.mid_q = cpu(t.mid_q);
      const torch::Tensor want = ops::tile_attention(cpu(q), cpu(k), cpu(v), 0.125, true, on_cpu);
      const torch::Tensor excess = (got.cpu().to(torch::kDouble) - want).abs() - tolerance(dtype) * (1 + want.abs());
      EXPECT_LE(excess.max().item<double>(), 0.0);
    }
}

// The families the CUDA tiles serve evaluate under fused as under reference (SDPA with the mask, or
// the explicit scores), and the tiles ran: Shaw's and Transformer-XL's relative tables, CoPE, and
// stick-breaking over no term, RoPE, FoX and CoPE, too.
TEST(TileAttentionCuda, FamiliesEvaluateUnderFusedAsUnderReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  using config::AttentionNormalizer;
  using config::PositionKind;
  using config::RopeMode;
  const auto softmax = AttentionNormalizer::softmax, sticks = AttentionNormalizer::stick_breaking;
  std::vector<std::tuple<PositionKind, RopeMode, config::Objective, AttentionNormalizer>> cases;
  for (PositionKind kind :
       {PositionKind::alibi, PositionKind::t5_bias, PositionKind::kerple, PositionKind::sandwich, PositionKind::fox,
        PositionKind::fire, PositionKind::deberta, PositionKind::shaw, PositionKind::transformer_xl})
    for (config::Objective objective : {config::Objective::causal_lm, config::Objective::mlm})
      cases.push_back({kind, RopeMode::rotate, objective, softmax});
  for (RopeMode mode : {RopeMode::rerope, RopeMode::string, RopeMode::self_extend, RopeMode::dual_chunk})
    cases.push_back({PositionKind::rope, mode, config::Objective::causal_lm, softmax});
  cases.push_back({PositionKind::cope, RopeMode::rotate, config::Objective::causal_lm, softmax});
  for (PositionKind kind : {PositionKind::none, PositionKind::rope, PositionKind::fox, PositionKind::cope})
    cases.push_back({kind, RopeMode::rotate, config::Objective::causal_lm, sticks});
  for (const auto& [kind, mode, objective, normalizer] : cases) {
    SCOPED_TRACE(std::to_string(static_cast<int>(kind)) + " mode " + std::to_string(static_cast<int>(mode)) +
                 " objective " + std::to_string(static_cast<int>(objective)) + " normaliser " +
                 std::to_string(static_cast<int>(normalizer)));
    torch::manual_seed(4);
    model::EncoderInput in;
    in.input_ids = torch::randint(0, 64, {2, 700}, torch::kLong).cuda();
    expect_like_reference(
        [&](config::AttentionKernel kernel) { return cuda_model(kind, objective, kernel, mode, normalizer); }, in,
        config::AttentionKernel::fused);
  }
}

// A right-padded batch (the key lengths found on the GPU in evaluation) evaluates under fused as
// under reference for the bias families (their bias and the padding in the tiles, no mask) and the
// families that form their scores, MLM and causal, and the tiles ran.
TEST(TileAttentionCuda, RightPaddedBatchesEvaluateUnderFusedAsUnderReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  using config::PositionKind;
  for (PositionKind kind : {PositionKind::alibi, PositionKind::t5_bias, PositionKind::fox, PositionKind::fire,
                            PositionKind::deberta, PositionKind::shaw, PositionKind::transformer_xl})
    for (config::Objective objective : {config::Objective::mlm, config::Objective::causal_lm}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(kind)) + " objective " +
                   std::to_string(static_cast<int>(objective)));
      torch::manual_seed(6);
      model::EncoderInput in;
      in.input_ids = torch::randint(0, 64, {2, 300}, torch::kLong).cuda();
      in.attention_mask = torch::ones({2, 300}, torch::kLong);
      in.attention_mask[1].narrow(0, 137, 300 - 137).zero_();
      in.attention_mask = in.attention_mask.cuda();
      expect_like_reference([&](config::AttentionKernel kernel) { return cuda_model(kind, objective, kernel); }, in,
                            config::AttentionKernel::fused);
    }
}

// PaTH and PaTH-FoX evaluate on CUDA by the sweep with an online softmax (no tile form there) as by
// their explicit scores (the reference kernel), and the sweep ran.
TEST(TileAttentionCuda, PathEvaluatesBySweepAsByItsExplicitScores) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  for (bool gate : {false, true}) {
    SCOPED_TRACE(gate ? "PaTH-FoX" : "PaTH");
    torch::manual_seed(8);
    model::EncoderInput in;
    expect_like_reference(
        [&](config::AttentionKernel kernel) {
          config::ModelConfig c = tiny_models::tiny_model(config::PositionKind::path, config::Objective::causal_lm);
          c.position.path.forget_gate = gate;
          c.attention_kernel = kernel;
          c.vocab_size = 64, c.hidden_size = 128, c.ffn_size = 256;
          model::EncoderModel m = model::build_model(c, 5);
          m->to(torch::kCUDA);
          m->eval();
          return m;
        },
        in, config::AttentionKernel::auto_);
  }
}

}  // namespace tile_attention_cuda_test
