// Document packing (data.packing): rows of `documents` hold the stream's tokens with each
// token's document and in-document position (computed here from the recorded starts, not by
// the code under test), and no causal target crosses a boundary; rows of `none` are one
// document from its start, padded; batches are pure functions of the step. In the model, for
// every position family and the attention options that see other tokens (windows, SSMax,
// log-n, stick-breaking, PaTH's short convolution): a document's hidden states in a packed row
// equal those of the document run alone (double, 1e-9; whole and in query-row blocks), and
// changing one document changes no other; a negative control shows the comparison fails without the document mask.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attention_reference.h"
#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/position_families.h"
#include "roformer/data/batches.h"
#include "roformer/data/document_index.h"
#include "roformer/data/token_store.h"
#include "roformer/model/encoder.h"
#include "test_support.h"

namespace packing_test {

using namespace roformer;
using roformer::testing::run_command;
using roformer::testing::TempDir;
using roformer::testing::write_file;

namespace {

// A byte-level dataset of 40 documents of 3-90 characters, separated by "<doc>" lines.
struct Documents {
  TempDir dir;
  std::string path;
  data::DatasetMeta meta;
  std::shared_ptr<const data::TokenStore> store;
  Documents() {
    std::mt19937 rng(11);
    std::string text;
    for (int d = 0; d < 40; ++d) {
      if (d > 0) text += "<doc>\n";
      for (int i = 0, n = 3 + static_cast<int>(rng() % 88); i < n; ++i)
        text.push_back(i % 17 == 16 ? '\n' : static_cast<char>('a' + rng() % 26));
      text += "\n";
    }
    write_file(dir.file("train.txt"), text);
    path = dir.file("ds");
    const auto r =
        run_command("'" + roformer::testing::roformer_binary() + "-prepare-data' --input '" + dir.file("train.txt") +
                    "' --tokenizer byte --out '" + path + "' --document-separator '<doc>'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    meta = data::read_dataset_meta(path);
    store = std::make_shared<const data::TokenStore>(path, meta, "train");
  }
  data::TrainBatcher batcher(config::Objective objective, config::DataPacking packing, config::DataSampling sampling,
                             int64_t L = 24) const {
    config::DataConfig d;
    data::TrainBatcher b(store, objective, L, 6, 0, 1, 5, sampling, data::MaskingRule::from(meta, d));
    if (packing != config::DataPacking::stream) b.set_packing(packing, 0);
    return b;
  }
};

std::vector<int64_t> row(const torch::Tensor& t, int64_t i) {
  const torch::Tensor r = t[i].contiguous();
  return {r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel()};
}

}  // namespace

TEST(Packing, DocumentRowsCarryEachTokensDocumentAndPosition) {
  Documents docs;
  const std::vector<int64_t>& starts = docs.store->document_starts();
  ASSERT_EQ(starts.size(), 40u);
  for (auto objective : {config::Objective::causal_lm, config::Objective::mlm}) {
    for (auto sampling : {config::DataSampling::random, config::DataSampling::packed}) {
      const data::TrainBatcher stream = docs.batcher(objective, config::DataPacking::stream, sampling);
      const data::TrainBatcher packed = docs.batcher(objective, config::DataPacking::documents, sampling);
      int64_t boundaries = 0, crossings = 0;
      for (int64_t step = 0; step < 12; ++step) {
        const data::Batch s = stream.batch(step), p = packed.batch(step);
        EXPECT_TRUE(torch::equal(s.input_ids, p.input_ids)) << "the same tokens as the stream";
        const std::vector<int64_t> offsets = packed.offsets(step);
        // A batch without a boundary carries no segments (its rows are 0..L-1 of one document each).
        const bool crossing = p.segments.defined();
        crossings += crossing;
        for (int64_t i = 0; i < 6; ++i) {
          const std::vector<int64_t> seg = crossing ? row(p.segments, i) : std::vector<int64_t>(24, 0);
          const std::vector<int64_t> pos =
              crossing ? row(p.positions, i) : row(torch::arange(24, torch::kLong).unsqueeze(0), 0);
          const std::vector<int64_t> want_targets = row(s.targets, i), got_targets = row(p.targets, i);
          const int64_t start = offsets[static_cast<size_t>(i)], first_doc = data::document_of(starts, start);
          for (int64_t t = 0; t < 24; ++t) {
            const int64_t a = start + t, doc = data::document_of(starts, a);
            EXPECT_EQ(seg[t], doc - first_doc);
            EXPECT_EQ(pos[t], a - std::max(starts[static_cast<size_t>(doc)], start)) << "restarts at doc and row";
            const bool crosses = objective == config::Objective::causal_lm &&
                                 data::document_of(starts, a + 1) != doc;  // the target is the next doc's
            boundaries += crosses;
            EXPECT_EQ(got_targets[t], crosses ? -100 : want_targets[t]) << "row " << i << " token " << t;
          }
        }
      }
      if (objective == config::Objective::causal_lm) {
        EXPECT_GT(boundaries, 10) << "the rows do cross documents";
      }
      EXPECT_GT(crossings, 0);
    }
  }
}

// One row of 3 tokens: most steps stay inside one document and carry no segments (attention
// keeps its unmasked kernels); a step whose row crosses a boundary carries them.
TEST(Packing, BatchesInsideOneDocumentCarryNoSegments) {
  Documents docs;
  const std::vector<int64_t>& starts = docs.store->document_starts();
  config::DataConfig d;
  data::TrainBatcher b(docs.store, config::Objective::causal_lm, 3, 1, 0, 1, 5, config::DataSampling::random,
                       data::MaskingRule::from(docs.meta, d));
  b.set_packing(config::DataPacking::documents, 0);
  int64_t inside = 0, crossing = 0;
  for (int64_t step = 0; step < 200; ++step) {
    const int64_t start = b.offsets(step)[0];
    const bool crosses = data::document_of(starts, start) != data::document_of(starts, start + 3);  // 4 tokens read
    const data::Batch batch = b.batch(step);
    EXPECT_EQ(batch.segments.defined(), data::document_of(starts, start) != data::document_of(starts, start + 2))
        << "segments exactly when the row's inputs cross a boundary";
    EXPECT_EQ(batch.positions.defined(), batch.segments.defined());
    (crosses ? crossing : inside) += 1;
  }
  EXPECT_GT(inside, 50);
  EXPECT_GT(crossing, 5);
}

TEST(Packing, NoneRowsAreOneDocumentFromItsStartPadded) {
  Documents docs;
  const std::vector<int64_t>& starts = docs.store->document_starts();
  for (auto objective : {config::Objective::causal_lm, config::Objective::mlm}) {
    const bool causal = objective == config::Objective::causal_lm;
    const data::TrainBatcher none = docs.batcher(objective, config::DataPacking::none, config::DataSampling::packed);
    std::vector<int> seen(starts.size(), 0);
    int64_t padded_rows = 0, cut_rows = 0;
    for (int64_t step = 0; step < 40 / 6; ++step) {  // one epoch of the document sampler
      const data::Batch b = none.batch(step);
      EXPECT_FALSE(b.segments.defined());
      const std::vector<int64_t> offsets = none.offsets(step);
      bool batch_padded = false;
      for (int64_t i = 0; i < 6; ++i) {
        const int64_t d = data::document_of(starts, offsets[static_cast<size_t>(i)]);
        ASSERT_EQ(starts[static_cast<size_t>(d)], offsets[static_cast<size_t>(i)]) << "rows start at a document";
        ++seen[static_cast<size_t>(d)];
        const int64_t end = d + 1 < 40 ? starts[static_cast<size_t>(d + 1)] : docs.store->size();
        const int64_t n = end - starts[static_cast<size_t>(d)];
        const int64_t inputs = std::min<int64_t>(causal ? n - 1 : n, 24);
        padded_rows += inputs < 24;
        cut_rows += inputs == 24;
        std::vector<int64_t> doc(static_cast<size_t>(n));
        docs.store->read(starts[static_cast<size_t>(d)], n, doc.data());
        const std::vector<int64_t> ids = row(b.input_ids, i), tg = row(b.targets, i);
        const std::vector<int64_t> keep = b.key_keep.defined() ? row(b.key_keep, i) : std::vector<int64_t>(24, 1);
        batch_padded = batch_padded || inputs < 24;
        for (int64_t t = 0; t < 24; ++t) {
          EXPECT_EQ(keep[t], t < inputs ? 1 : 0);
          if (t >= inputs) {
            EXPECT_EQ(tg[t], -100) << "padding is never scored";
            continue;
          }
          if (causal) {
            EXPECT_EQ(ids[t], doc[static_cast<size_t>(t)]);
            EXPECT_EQ(tg[t], doc[static_cast<size_t>(t + 1)]);
          } else if (tg[t] != -100) {
            EXPECT_EQ(tg[t], doc[static_cast<size_t>(t)]) << "a masked token's target is the document's";
          } else {
            EXPECT_EQ(ids[t], doc[static_cast<size_t>(t)]);
          }
        }
      }
      EXPECT_EQ(b.key_keep.defined(), batch_padded) << "a padding mask exactly when a row is padded";
    }
    EXPECT_GT(padded_rows, 3);
    EXPECT_GT(cut_rows, 3);
    for (size_t d = 0; d < seen.size() && d < 36; ++d) EXPECT_LE(seen[d], 1) << "an epoch draws a document once";
  }
}

TEST(Packing, BatchesAreFunctionsOfTheStepAlone) {
  Documents docs;
  for (auto packing : {config::DataPacking::documents, config::DataPacking::none}) {
    const data::TrainBatcher a = docs.batcher(config::Objective::mlm, packing, config::DataSampling::random);
    const data::TrainBatcher b = docs.batcher(config::Objective::mlm, packing, config::DataSampling::random);
    (void)a.batch(0);
    const data::Batch x = a.batch(7), y = b.batch(7);
    EXPECT_TRUE(torch::equal(x.input_ids, y.input_ids));
    EXPECT_TRUE(torch::equal(x.targets, y.targets));
    ASSERT_EQ(x.segments.defined(), y.segments.defined());
    if (x.segments.defined()) {
      EXPECT_TRUE(torch::equal(x.segments, y.segments));
      EXPECT_TRUE(torch::equal(x.positions, y.positions));
    }
  }
}

namespace {

using config::PositionKind;

// One model of the comparison: a family with an objective, or an attention option on RoPE.
struct Variant {
  std::string name;
  config::ModelConfig model;
};

config::ModelConfig resolved(config::ModelConfig m) {
  config::Config c;
  c.model = m;
  c.data.seq_len = 24;
  config::resolve(c);
  return c.model;
}

config::ModelConfig with_window(config::ModelConfig m, int64_t window, config::WindowKind kind) {
  m.layout.preset = config::LayoutPreset::custom;
  m.layout.pattern = "LG";
  m.layout.local.window_kind = kind;
  m.layout.local.window = window;
  return m;
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const config::PositionFamily& f : config::position_families()) {
    for (bool causal : {false, true}) {
      if (!causal && !f.causal_only.empty()) continue;
      out.push_back({f.name + (causal ? " causal" : " mlm"), attention_reference::small_model(f.kind, causal)});
    }
  }
  const config::ModelConfig rope = attention_reference::small_model(PositionKind::rope, true);
  config::ModelConfig m = rope;
  m.attention_scale = config::AttentionScale::ssmax;
  out.push_back({"ssmax causal", m});
  m.objective = config::Objective::mlm;
  out.push_back({"ssmax mlm", m});
  m = rope;
  m.attention_scale = config::AttentionScale::logn;
  m.attention_scale_length = 4;
  out.push_back({"logn causal", m});
  m = rope;
  m.attention_normalizer = config::AttentionNormalizer::stick_breaking;
  out.push_back({"stick-breaking causal", m});
  out.push_back({"sliding window causal", with_window(rope, 3, config::WindowKind::sliding)});
  out.push_back({"chunked window causal", with_window(rope, 4, config::WindowKind::chunked)});
  config::ModelConfig mlm = rope;
  mlm.objective = config::Objective::mlm;
  out.push_back({"chunked window mlm", with_window(mlm, 4, config::WindowKind::chunked)});
  for (Variant& v : out) {
    v.model.hidden_dropout = 0;
    v.model = resolved(v.model);
  }
  return out;
}

// Two rows of documents: lengths {5, 9, 7} and {12, 9} (S = 21).
const std::vector<std::vector<int64_t>> kLengths{{5, 9, 7}, {12, 9}};
constexpr int64_t kS = 21;

struct Packed {
  torch::Tensor ids, segments, positions;
};

Packed pack(const torch::Tensor& ids) {
  Packed p{ids, torch::empty({2, kS}, torch::kLong), torch::empty({2, kS}, torch::kLong)};
  for (int64_t b = 0; b < 2; ++b) {
    int64_t t = 0, segment = 0;
    for (int64_t n : kLengths[static_cast<size_t>(b)]) {
      for (int64_t k = 0; k < n; ++k, ++t) {
        p.segments[b][t] = segment;
        p.positions[b][t] = k;
      }
      ++segment;
    }
  }
  return p;
}

model::EncoderModel double_model(const config::ModelConfig& c) {
  model::EncoderModel m = model::build_model(c, 5);
  m->to(torch::kFloat64);
  m->eval();
  torch::NoGradGuard no_grad;
  for (auto& p : m->position->parameters()) p.normal_(0.0, 0.3);  // zero-initialised tables would hide terms
  for (const auto& layer : *m->encoder->layer)
    for (auto& p : layer->parameters()) p.normal_(0.0, 0.3);
  return m;
}

torch::Tensor run_packed(model::EncoderModel& m, const Packed& p, bool documents) {
  torch::NoGradGuard no_grad;
  return documents ? m->forward({p.ids, {}, {}, p.positions, p.segments}) : m->forward({p.ids});
}

// max |packed hidden - hidden of the document alone| over every document of both rows.
double worst_against_alone(model::EncoderModel& m, const Packed& p, bool documents) {
  const torch::Tensor packed = run_packed(m, p, documents);
  double worst = 0;
  for (int64_t b = 0; b < 2; ++b) {
    int64_t t = 0;
    for (int64_t n : kLengths[static_cast<size_t>(b)]) {
      torch::NoGradGuard no_grad;
      const torch::Tensor alone = m->forward({p.ids[b].narrow(0, t, n).unsqueeze(0)})[0];
      worst = std::max(worst, (packed[b].narrow(0, t, n) - alone).abs().max().item<double>());
      t += n;
    }
  }
  return worst;
}

}  // namespace

TEST(Packing, EveryFamilyGivesEachDocumentItsUnpackedHiddenStates) {
  torch::manual_seed(9);
  const Packed p = pack(torch::randint(8, 200, {2, kS}, torch::kLong));
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    model::EncoderModel m = double_model(v.model);
    EXPECT_LT(worst_against_alone(m, p, true), 1e-9);
    EXPECT_GT(worst_against_alone(m, p, false), 1e-4) << "negative control: without the document mask";
    m->attention_whole_limit_bytes = 2048;  // the mask and the scores in blocks of query rows
    EXPECT_LT(worst_against_alone(m, p, true), 1e-9) << "in row blocks";
  }
}

TEST(Packing, ChangingOneDocumentChangesNoOther) {
  torch::manual_seed(10);
  const Packed p = pack(torch::randint(8, 200, {2, kS}, torch::kLong));
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    model::EncoderModel m = double_model(v.model);
    const torch::Tensor base = run_packed(m, p, true);
    for (int64_t doc : {0, 2}) {  // row 0's first (seen by later tokens when causal) and last document
      Packed changed = p;
      changed.ids = p.ids.clone();
      const torch::Tensor in_doc = p.segments[0] == doc;
      changed.ids[0].masked_fill_(in_doc, 7);
      const torch::Tensor out = run_packed(m, changed, true);
      const double others = (out[0] - base[0]).abs().sum(-1).masked_select(in_doc.logical_not()).max().item<double>();
      const double own = (out[0] - base[0]).abs().sum(-1).masked_select(in_doc).max().item<double>();
      EXPECT_LT(others, 1e-9) << "document " << doc << " leaked";
      EXPECT_GT(own, 1e-3) << "the change reached its own document";
      EXPECT_TRUE(torch::equal(out[1], base[1])) << "the other row";
    }
  }
}

// Gradients too: for the families whose packed path differs from the unpacked one (FIRE's
// table of pair biases, PaTH's convolution stopped at the boundary, SSMax's per-document counts),
// the gradient of every parameter through a packed batch equals the sum over its documents run
// alone (double, 1e-9 relative to the largest).
TEST(Packing, GradientsEqualTheDocumentsRunAlone) {
  torch::manual_seed(12);
  const Packed p = pack(torch::randint(8, 200, {2, kS}, torch::kLong));
  const torch::Tensor weights = torch::randn({2, kS, attention_reference::kHidden}, torch::kFloat64);
  config::ModelConfig ssmax = attention_reference::small_model(PositionKind::rope, true);
  ssmax.attention_scale = config::AttentionScale::ssmax;
  for (const config::ModelConfig& base : {attention_reference::small_model(PositionKind::fire, true),
                                          attention_reference::small_model(PositionKind::path, true), ssmax}) {
    config::ModelConfig c = base;
    c.hidden_dropout = 0;
    model::EncoderModel m = double_model(resolved(c));
    SCOPED_TRACE(config::position_kind_names().name(c.position.kind));
    auto gradients = [&](bool packed) {
      m->zero_grad();
      torch::Tensor loss = torch::zeros({}, torch::kFloat64);
      if (packed) {
        loss = (m->forward({p.ids, {}, {}, p.positions, p.segments}) * weights).sum();
      } else {
        for (int64_t b = 0; b < 2; ++b) {
          int64_t t = 0;
          for (int64_t n : kLengths[static_cast<size_t>(b)]) {
            const torch::Tensor h = m->forward({p.ids[b].narrow(0, t, n).unsqueeze(0)})[0];
            loss = loss + (h * weights[b].narrow(0, t, n)).sum();
            t += n;
          }
        }
      }
      loss.backward();
      std::vector<torch::Tensor> out;
      for (const auto& q : m->parameters()) out.push_back(q.grad().defined() ? q.grad().clone() : torch::zeros_like(q));
      return out;
    };
    const std::vector<torch::Tensor> packed = gradients(true), alone = gradients(false);
    double worst = 0, largest = 0;
    for (size_t i = 0; i < packed.size(); ++i) {
      worst = std::max(worst, (packed[i] - alone[i]).abs().max().item<double>());
      largest = std::max(largest, alone[i].abs().max().item<double>());
    }
    EXPECT_GT(largest, 1e-3);
    EXPECT_LT(worst, 1e-9 * largest);
  }
}

TEST(Packing, TheConfigNamesWhatCannotFollowDocuments) {
  TempDir dir;
  const std::string path = dir.file("c.yaml");
  auto error = [&](const std::string& body) {
    write_file(path, "data:\n  packing: documents\n" + body);
    try {
      config::load_config(path, {});
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("train:\n  positions: random\n").find("train.positions"), std::string::npos);
  EXPECT_NE(error("model:\n  attention: linear\n").find("model.attention"), std::string::npos);
  EXPECT_NE(error("  task:\n    name: copy\n").find("data.task.name"), std::string::npos);
  EXPECT_EQ(error(""), "");
}

}  // namespace packing_test
