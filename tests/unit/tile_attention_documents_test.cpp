// Packed documents (data.packing documents) in tile attention: every tile family, causal and
// bidirectional, attends one document piece at a time in tiles, each with its own positions
// (but STRING, whose shift reads the pass's length, which keeps the explicit scores),
// and gives the hidden states and every parameter's gradient of the explicit scores under the
// document mask (model.attention_kernel reference), in double, over rows cut into pieces of 1,
// 47, 48, 49, 131, 24, and 131, 169 tokens (either side of the 48-key tile, a one-token piece).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "roformer/model/attention_kernel.h"
#include "roformer/model/attention_plan.h"
#include "roformer/model/encoder.h"
#include "roformer/ops/tile_attention/tile_attention.h"
#include "tiny_models.h"

namespace tile_attention_documents_test {

using namespace roformer;

constexpr int64_t kTokens = 300;

// Rows of pieces: segments (0, 1, ... along each row) and each token's place in its piece.
model::EncoderInput packed_input(const torch::Tensor& ids) {
  const std::vector<std::vector<int64_t>> rows{{1, 47, 48, 49, 131, 24}, {131, 169}};
  model::EncoderInput in;
  in.input_ids = ids;
  in.segments = torch::empty({2, kTokens}, torch::kLong);
  in.positions = torch::empty({2, kTokens}, torch::kLong);
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t at = 0, segment = 0;
    for (const int64_t length : rows[r]) {
      in.segments[static_cast<int64_t>(r)].narrow(0, at, length).fill_(segment++);
      in.positions[static_cast<int64_t>(r)].narrow(0, at, length).copy_(torch::arange(length, torch::kLong));
      at += length;
    }
  }
  return in;
}

struct Pass {
  torch::Tensor hidden;
  std::vector<torch::Tensor> gradients;  // every parameter's, in order
  std::string kernels;
};

// The hidden states without autograd (evaluation), then a weighted sum of them differentiated in
// training mode, under `kernel`.
Pass packed_pass(config::ModelConfig c, config::AttentionKernel kernel) {
  c.attention_kernel = kernel;
  auto [m, ids] = tiny_models::double_model(c, kTokens);
  const model::EncoderInput in = packed_input(ids);
  Pass out;
  {
    m->eval();
    torch::NoGradGuard no_grad;
    model::AttentionKernelProbe probe;
    out.hidden = m->forward(in);
    out.kernels = probe.summary();
  }
  m->train();
  torch::manual_seed(4);
  const torch::Tensor weights = torch::randn_like(out.hidden);
  (m->forward(in) * weights).sum().backward();
  for (const torch::Tensor& p : m->parameters())
    out.gradients.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

void expect_documents_in_tiles(const std::vector<std::pair<std::string, config::ModelConfig>>& models) {
  for (const auto& [name, c] : models) {
    SCOPED_TRACE(name);
    // Evaluation under auto takes the tiles; gradients in tiles under fused (auto may keep a
    // family without a backward in tiles on its explicit scores in training).
    const Pass tiled = packed_pass(c, config::AttentionKernel::auto_);
    const Pass fused = packed_pass(c, config::AttentionKernel::fused);
    const Pass reference = packed_pass(c, config::AttentionKernel::reference);
    // STRING's shift reads the pass's length: a piece would score as a shorter pass, so it keeps
    // the explicit scores over the whole row.
    if (name == "rope string")
      EXPECT_EQ(tiled.kernels.find(model::attention_kernel::kTile), std::string::npos) << tiled.kernels;
    else
      EXPECT_EQ(tiled.kernels, model::attention_kernel::kTile);
    EXPECT_EQ(reference.kernels.find(model::attention_kernel::kTile), std::string::npos) << reference.kernels;
    EXPECT_LE((tiled.hidden - reference.hidden).abs().max().item<double>(), 1e-10);
    ASSERT_EQ(fused.gradients.size(), reference.gradients.size());
    double scale = 0;
    for (const torch::Tensor& g : reference.gradients) scale = std::max(scale, g.abs().max().item<double>());
    ASSERT_GT(scale, 0.0);
    for (size_t i = 0; i < fused.gradients.size(); ++i)
      EXPECT_LE((fused.gradients[i] - reference.gradients[i]).abs().max().item<double>(), 1e-10 * scale) << i;
  }
}

TEST(TileAttentionDocuments, EveryCausalFamilyEqualsTheExplicitScoresUnderTheDocumentMask) {
  expect_documents_in_tiles(tiny_models::tile_family_models());
}

TEST(TileAttentionDocuments, EveryBidirectionalFamilyEqualsTheExplicitScoresUnderTheDocumentMask) {
  expect_documents_in_tiles(tiny_models::bidirectional_tile_family_models());
}

// Documents alone qualify: a window or a padding beside them keeps the explicit scores.
TEST(TileAttentionDocuments, ThePlanTakesTilesForDocumentsAlone) {
  model::AttentionPassFacts f;
  f.forms_scores = f.softmax = f.causal = f.tile_shape = true;
  f.batch = 1, f.heads = 4, f.seq = 4096, f.head_dim = 32;
  f.term = ops::RelativeTerm::properties();
  f.shared_positions = false;
  f.right_padding_at_most = false;
  f.documents_alone = true;
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::tiles);
  f.documents_alone = false;  // a window or padding as well
  EXPECT_EQ(model::plan_attention(f).path, model::AttentionPath::explicit_scores);
}

}  // namespace tile_attention_documents_test
