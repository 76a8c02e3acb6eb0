// The attention mask against its definitions: Toeplitz rows equal the offset formula for every
// block; ALiBi's mask is -m_h |i - j| with padding and causality written out; the blocks of a
// mask equal the whole mask in every combination of bias, padding and causality; long lengths
// switch to blocks within the budget while BERT-size masks stay whole (evaluation on the CPU
// goes in blocks sooner); causal rows stop at their last visible key; the reversed views of a
// bias mask equal its rows; and a model whose attention runs in query blocks gives the
// whole-mask model's loss and gradients in double (the bias families through SDPA, the families
// that form their scores, the RoPE remaps and stick-breaking; MLM and causal LM, with padding;
// and the bias families through the reversed views, without padding).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "model_compare.h"
#include "roformer/model/attention_mask.h"
#include "roformer/model/encoder.h"
#include "roformer/model/position/relative_bias.h"
#include "tiny_models.h"

namespace attention_mask_test {

using namespace roformer;
using namespace roformer::model;

namespace {

const torch::Device kCpu(torch::kCPU);
constexpr double kMasked = -1e30;
constexpr double kNoLimit = 1e300;

// [2, S] keep flags: batch row 1 pads its last three keys.
torch::Tensor padded_keep(int64_t S) {
  torch::Tensor keep = torch::ones({2, S}, torch::kLong);
  keep[1].narrow(0, S - 3, 3).fill_(0);
  return keep;
}

// The mask's rows over all blocks, concatenated and broadcast to [B, H, S, S].
torch::Tensor concat_blocks(const AttentionMask& m, int64_t S, int64_t B, int64_t H) {
  std::vector<torch::Tensor> parts;
  for (int64_t begin = 0; begin < S; begin += m.block_rows()) {
    const int64_t end = std::min(S, begin + m.block_rows());
    parts.push_back(m.rows(begin, end).expand({B, H, end - begin, S}));
  }
  return torch::cat(parts, 2);
}

using tiny_models::tiny_model;

}  // namespace

TEST(ToeplitzRows, EqualTheOffsetFormulaForEveryBlock) {
  constexpr int64_t S = 7, H = 3;
  torch::manual_seed(1);
  const torch::Tensor table = torch::randn({H, 2 * S - 1}, torch::kFloat64);
  const auto t = table.accessor<double, 2>();
  for (int64_t begin = 0; begin < S; ++begin)
    for (int64_t end = begin + 1; end <= S; ++end) {
      const torch::Tensor rows = toeplitz_rows(table, begin, end);
      ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{H, end - begin, S}));
      ASSERT_TRUE(rows.is_contiguous());
      const auto r = rows.accessor<double, 3>();
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < end - begin; ++i)
          for (int64_t j = 0; j < S; ++j)
            ASSERT_EQ(r[h][i][j], t[h][j - (begin + i) + S - 1]) << begin << ".." << end << " h" << h << " i" << i;
    }
  EXPECT_THROW(toeplitz_rows(table, 3, 3), c10::Error);
  EXPECT_THROW(toeplitz_rows(table, 0, S + 1), c10::Error);
  EXPECT_THROW(toeplitz_rows(torch::zeros({H, 2 * S}), 0, 1), c10::Error);
}

TEST(AttentionMask, AlibiIsMinusSlopeTimesDistanceWithPaddingAndCausality) {
  constexpr int64_t S = 9, H = 4;
  AlibiImpl alibi(H);
  const std::vector<double> slopes = alibi_slopes(H);
  const torch::Tensor keep = padded_keep(S);
  for (bool causal : {false, true}) {
    const AttentionMask m(alibi.relative_bias(S, kCpu), keep, causal, S, torch::kFloat64, kCpu, false);
    ASSERT_TRUE(m.defined());
    EXPECT_EQ(m.block_rows(), S);
    const torch::Tensor whole = m.whole();
    ASSERT_EQ(whole.sizes(), (std::vector<int64_t>{2, H, S, S}));
    const auto w = whole.accessor<double, 4>();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t j = 0; j < S; ++j) {
            const bool hidden = (b == 1 && j >= S - 3) || (causal && j > i);
            ASSERT_EQ(w[b][h][i][j], hidden ? kMasked : -slopes[h] * std::abs(double(i - j)))
                << "causal " << causal << " b" << b << " h" << h << " i" << i << " j" << j;
          }
  }
}

TEST(AttentionMask, BlocksEqualTheWholeMaskInEveryCombination) {
  constexpr int64_t S = 37, H = 3, B = 2;
  torch::manual_seed(2);
  const torch::Tensor table = torch::randn({H, 2 * S - 1}, torch::kFloat32);
  for (bool bias : {false, true})
    for (bool pad : {false, true})
      for (bool causal : {false, true})
        for (bool always : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "bias " << bias << " pad " << pad << " causal " << causal << " always " << always);
          const torch::Tensor t = bias ? table : torch::Tensor();
          const torch::Tensor keep = pad ? padded_keep(S) : torch::Tensor();
          const AttentionMask whole(t, keep, causal, S, torch::kFloat32, kCpu, always, kNoLimit);
          const AttentionMask blocks(t, keep, causal, S, torch::kFloat32, kCpu, always, /*whole_limit_bytes=*/1000);
          const bool expect_defined = bias || pad || (always && causal);
          ASSERT_EQ(whole.defined(), expect_defined);
          ASSERT_EQ(blocks.defined(), expect_defined);
          if (!expect_defined) continue;
          const bool square = bias || causal;
          if (square) {
            EXPECT_LT(blocks.block_rows(), S);
          }
          const torch::Tensor expect = whole.whole().expand({B, H, S, S});
          EXPECT_TRUE(torch::equal(concat_blocks(blocks, S, B, H), expect));
          EXPECT_TRUE(torch::equal(blocks.whole().expand({B, H, S, S}), expect));
        }
}

// Causal rows are built for the keys up to their last row alone (key_span's end): those
// columns equal the whole mask's, and every key past them is masked in the whole mask.
TEST(AttentionMask, CausalRowsStopAtTheirLastVisibleKey) {
  constexpr int64_t S = 37, H = 3, B = 2;
  torch::manual_seed(2);
  const torch::Tensor table = torch::randn({H, 2 * S - 1}, torch::kFloat32);
  for (bool bias : {false, true})
    for (double limit : {kNoLimit, 1000.0})
      for (bool causal : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "bias " << bias << " limit " << limit << " causal " << causal);
        const AttentionMask m(bias ? table : torch::Tensor(), padded_keep(S), causal, S, torch::kFloat32, kCpu,
                              /*always=*/true, limit);
        const torch::Tensor whole = m.whole().expand({B, H, S, S});
        for (int64_t begin = 0; begin < S; begin += 5) {
          const int64_t end = std::min(S, begin + 5);
          const auto [first, last] = m.key_span(begin, end);
          EXPECT_EQ(first, 0);
          EXPECT_EQ(last, causal ? end : S);
          const torch::Tensor rows = whole.narrow(2, begin, end - begin);
          EXPECT_TRUE(
              torch::equal(m.rows(begin, end, last).expand({B, H, end - begin, last}), rows.narrow(3, 0, last)));
          if (last < S) {
            EXPECT_TRUE((rows.narrow(3, last, S - last) == kMasked).all().item<bool>());
          }
        }
      }
}

// Without autograd on the CPU, a bias mask in blocks hands out its rows as a reversed view of
// the offset table: reversed back, they equal rows() for every block and key count, causality
// included; with padding, or with autograd, there is no view.
TEST(AttentionMask, ReversedRowsAreTheRowsReversedWithoutACopy) {
  constexpr int64_t S = 37, H = 3;
  torch::manual_seed(2);
  const torch::Tensor table = torch::randn({H, 2 * S - 1}, torch::kFloat64);
  torch::NoGradGuard no_grad;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    const AttentionMask m(table, {}, causal, S, torch::kFloat64, kCpu, /*always=*/true, /*whole_limit_bytes=*/2000);
    ASSERT_LT(m.block_rows(), S);
    for (int64_t begin = 0; begin < S; begin += 6) {
      const int64_t end = std::min(S, begin + 6);
      for (int64_t keys : {end, S}) {
        const torch::Tensor reversed = m.reversed_rows(begin, end, keys);
        ASSERT_TRUE(reversed.defined());
        EXPECT_TRUE(torch::equal(reversed.flip(2), m.rows(begin, end, keys)));
      }
    }
    const AttentionMask padded(table, padded_keep(S), causal, S, torch::kFloat64, kCpu, true, 2000);
    EXPECT_FALSE(padded.reversed_rows(0, 6, S).defined());
  }
  torch::AutoGradMode grad(true);
  const AttentionMask trained(table, {}, true, S, torch::kFloat64, kCpu, true, 2000);
  EXPECT_FALSE(trained.reversed_rows(0, 6, S).defined());
}

// The bias families in blocks without padding or autograd (the reversed views) give the
// whole-mask model's hidden states in double, causal and bidirectional.
TEST(AttentionMask, BiasFamiliesInReversedBlocksEqualTheWholeMask) {
  using config::PositionKind;
  for (PositionKind kind : {PositionKind::alibi, PositionKind::t5_bias, PositionKind::kerple, PositionKind::sandwich})
    for (config::Objective objective : {config::Objective::mlm, config::Objective::causal_lm}) {
      SCOPED_TRACE(::testing::Message() << "kind " << int(kind) << " objective " << int(objective));
      config::ModelConfig c = tiny_model(kind, objective);
      torch::manual_seed(9);
      const torch::Tensor ids = torch::randint(0, c.vocab_size, {2, 40}, torch::kLong);
      auto hidden = [&](double limit) {
        EncoderModel m = build_model(c, 5);
        m->to(torch::kFloat64);
        m->eval();
        m->attention_whole_limit_bytes = limit;
        torch::NoGradGuard no_grad;
        EncoderInput in;
        in.input_ids = ids;
        EXPECT_EQ(m->attention_context(in, torch::arange(40), torch::kFloat64).mask.reversed_rows(0, 8, 40).defined(),
                  limit < kNoLimit);
        return m->forward(in);
      };
      EXPECT_LE((hidden(2 * 8 * 40 * 9.0) - hidden(kNoLimit)).abs().max().item<double>(), 1e-12);
    }
}

TEST(AttentionMask, PaddingAloneIsOneKeyRowPerSequence) {
  constexpr int64_t S = 4096;
  const AttentionMask m({}, padded_keep(S), /*causal=*/false, S, torch::kFloat32, kCpu, /*always=*/true);
  EXPECT_EQ(m.whole().sizes(), (std::vector<int64_t>{2, 1, 1, S}));
  EXPECT_EQ(m.block_rows(), S);
}

TEST(AttentionMask, LongLengthsSwitchToBlocksWithinTheBudget) {
  // BERT-base at its training length: 12 heads x 512^2 in bf16 (6 MiB) stays whole.
  const AttentionMask bert(torch::zeros({12, 2 * 512 - 1}), {}, false, 512, torch::kBFloat16, kCpu, false);
  EXPECT_EQ(bert.block_rows(), 512);
  // ALiBi/T5 at 32k: 24 GiB whole in bf16. On the CPU blocks hold at most kCpuBlockBytes (and at
  // least half of that, so the blocks are not needlessly thin), in whole 16-row tiles.
  constexpr int64_t S = 32768;
  const AttentionMask m(torch::zeros({12, 2 * S - 1}), {}, false, S, torch::kBFloat16, kCpu, false);
  const int64_t n = m.block_rows();
  EXPECT_LT(n, S);
  EXPECT_EQ(n % 16, 0);
  const double row_bytes = 12.0 * S * 2, block_bytes = double(n) * row_bytes;
  EXPECT_LE(block_bytes, AttentionMask::kCpuBlockBytes);
  EXPECT_GE(block_bytes, AttentionMask::kCpuBlockBytes / 2);
  // On a GPU they hold at most a quarter of the whole-mask limit (the rule alone; nothing is
  // allocated). A small whole limit (as tests set) caps the CPU's blocks below kCpuBlockBytes.
  const double gpu_rows = double(query_block_rows(row_bytes, S, AttentionMask::kWholeMaskBytes, torch::kCUDA));
  EXPECT_LE(gpu_rows * row_bytes, AttentionMask::kWholeMaskBytes / AttentionMask::kBlocksPerWholeLimit);
  EXPECT_GE(gpu_rows * row_bytes, AttentionMask::kWholeMaskBytes / AttentionMask::kBlocksPerWholeLimit / 2);
  EXPECT_EQ(query_block_rows(row_bytes, S, 64 * row_bytes, kCpu), 16);
  // Evaluation on the CPU: ALiBi at 4096 tokens (4 heads, fp32: 256 MiB whole) goes in blocks of
  // kCpuBlockBytes; with autograd (training) and on a GPU it stays whole.
  const double alibi_row = 4.0 * 4096 * 4;
  EXPECT_EQ(query_block_rows(alibi_row, 4096, AttentionMask::kWholeMaskBytes, kCpu), 4096);
  {
    torch::NoGradGuard no_grad;
    EXPECT_EQ(query_block_rows(alibi_row, 4096, AttentionMask::kWholeMaskBytes, kCpu),
              int64_t(AttentionMask::kCpuBlockBytes / alibi_row));
    EXPECT_EQ(query_block_rows(alibi_row, 4096, AttentionMask::kWholeMaskBytes, torch::kCUDA), 4096);
  }
  const torch::Tensor last = m.rows(S - n, S);
  EXPECT_EQ(last.sizes(), (std::vector<int64_t>{1, 12, n, S}));
  EXPECT_EQ(last[0][0][n - 1][S - 1].item<float>(), 0.0f);  // the last query sees itself
}

TEST(AttentionMask, ModelInQueryBlocksMatchesTheWholeMask) {
  constexpr int64_t B = 2, S = 40;
  using config::PositionKind;
  // Every family that forms its scores or sends a bias through the mask, and the RoPE remaps and
  // stick-breaking, which form theirs too; causal blocks score only the keys up to their last row.
  struct Variant {
    const char* name;
    PositionKind kind;
    std::function<void(config::ModelConfig&)> set;
    bool causal_only;
  };
  auto none = [](config::ModelConfig&) {};
  auto rope_mode = [](config::RopeMode mode) {
    return [mode](config::ModelConfig& c) {
      c.position.rope.mode = mode;
      c.position.rope.rerope.window = 6;
      c.position.rope.self_extend.window = 6;
      c.position.rope.self_extend.group = 3;
      c.position.rope.dual_chunk.chunk_size = 12;
      c.position.rope.dual_chunk.local_window = 4;
    };
  };
  const std::vector<Variant> variants = {
      {"alibi", PositionKind::alibi, none, false},
      {"t5", PositionKind::t5_bias, none, false},
      {"shaw", PositionKind::shaw, none, false},
      {"xl", PositionKind::transformer_xl, none, false},
      {"deberta", PositionKind::deberta, none, false},
      {"kerple", PositionKind::kerple, none, false},
      {"sandwich", PositionKind::sandwich, none, false},
      {"fire", PositionKind::fire, none, false},
      {"cope", PositionKind::cope, none, true},
      {"fox", PositionKind::fox, none, false},
      {"path", PositionKind::path, none, true},
      {"rerope", PositionKind::rope, rope_mode(config::RopeMode::rerope), false},
      {"string", PositionKind::rope, rope_mode(config::RopeMode::string), false},
      {"self_extend", PositionKind::rope, rope_mode(config::RopeMode::self_extend), false},
      {"dual_chunk", PositionKind::rope, rope_mode(config::RopeMode::dual_chunk), true},
      {"stick_breaking", PositionKind::none,
       [](config::ModelConfig& c) { c.attention_normalizer = config::AttentionNormalizer::stick_breaking; }, true},
  };
  for (const Variant& variant : variants)
    for (config::Objective objective : {config::Objective::mlm, config::Objective::causal_lm}) {
      if (variant.causal_only && objective == config::Objective::mlm) continue;
      SCOPED_TRACE(::testing::Message() << variant.name << " objective " << int(objective));
      config::ModelConfig c = tiny_model(variant.kind, objective);
      c.position.shaw.max_distance = 6;  // 40 tokens reach past the clip and the exact buckets
      c.position.deberta.position_buckets = 8;
      c.position.deberta.max_relative_positions = 24;
      c.position.fire.l_init = 8;
      c.position.cope.max_positions = 12;
      variant.set(c);
      auto run = [&](double limit, int64_t expect_block) {
        EncoderModel m = build_model(c, 5);
        m->to(torch::kFloat64);
        m->attention_whole_limit_bytes = limit;
        torch::manual_seed(9);
        EncoderInput in;
        in.input_ids = torch::randint(0, c.vocab_size, {B, S}, torch::kLong);
        in.attention_mask = padded_keep(S);
        const torch::Tensor targets = torch::where(torch::rand({B, S}) < 0.4, in.input_ids, torch::full({B, S}, -100L))
                                          .masked_fill(in.attention_mask == 0, -100);
        // The rows per block that the layers get: of the mask (SDPA) or of the scores (score terms).
        const AttentionContext ctx = m->attention_context(in, torch::arange(S), torch::kFloat64);
        const bool forms_scores = m->position_encoding().traits().forms_scores ||
                                  c.attention_normalizer == config::AttentionNormalizer::stick_breaking;
        EXPECT_EQ(forms_scores ? ctx.score_block_rows : ctx.mask.block_rows(), expect_block);
        torch::Tensor hidden;  // without autograd the blocks are written into one output
        {
          torch::NoGradGuard no_grad;
          hidden = m->forward(in);
        }
        torch::Tensor loss = m->loss(in, targets);
        loss.backward();
        roformer::testing::LossAndGrads out{loss.item<double>(), {}};
        for (const auto& item : m->named_parameters()) out.grads[item.key()] = item.value().grad();
        return std::make_pair(out, hidden);
      };
      // Rows of B x H x S doubles (1280 bytes, mask or scores; the whole is 40 rows), plus what
      // a score term holds per pair: a limit of 4 x 9 rows gives blocks of 9 rows, four full
      // blocks and one of 4.
      const double term_bytes = build_model(c, 5)->position_encoding().score_term_bytes_per_pair(B, c.num_heads, 8);
      const bool stick_breaking = c.attention_normalizer == config::AttentionNormalizer::stick_breaking;
      const double row_bytes = (double(B * c.num_heads * 8) * (stick_breaking ? 7.0 : 1.0) + term_bytes) * S;
      const auto blocks = run(4 * 9 * row_bytes, 9), whole = run(kNoLimit, S);
      roformer::testing::expect_same_loss_and_grads(blocks.first, whole.first, 1e-12);
      EXPECT_LE((blocks.second - whole.second).abs().max().item<double>(), 1e-12);
    }
}

}  // namespace attention_mask_test
