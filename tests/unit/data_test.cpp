// Data pipeline tests: byte tokenizer round trips, dataset preparation through the real tool,
// shard boundaries, MLM masking statistics, deterministic (resumable) batch streams, rank
// sharding, evaluation windows (chunks and sliding) covering every token once, prefetching,
// and every bad input giving its error.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/data/batches.h"
#include "roformer/data/dataset_meta.h"
#include "roformer/data/prefetcher.h"
#include "roformer/data/token_store.h"
#include "roformer/data/tokenizer.h"
#include "test_support.h"

namespace data_test {

using namespace roformer;
using namespace roformer::data;
using roformer::testing::run_command;
using roformer::testing::TempDir;
using roformer::testing::write_file;

namespace {

std::string tool() {
  return roformer::testing::roformer_binary() + "-prepare-data";
}

// Pseudo-text with a known byte distribution.
std::string text(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  const std::string alphabet = "abcdefghij klmnop\n.,";
  std::string s(n, ' ');
  for (auto& c : s) c = alphabet[rng() % alphabet.size()];
  return s;
}

// A byte dataset in dir/ds with the given split sizes and shard size.
std::string make_dataset(const TempDir& dir, size_t train, size_t valid, int64_t shard_tokens = 1 << 20) {
  write_file(dir.file("train.txt"), text(train, 1));
  write_file(dir.file("valid.txt"), text(valid, 2));
  const auto r = run_command("'" + tool() + "' --input '" + dir.file("train.txt") + "' '" + dir.file("valid.txt") +
                             "' --tokenizer byte --shard-tokens " + std::to_string(shard_tokens) + " --out '" +
                             dir.file("ds") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir.file("ds");
}

config::DataConfig data_config() {
  return config::DataConfig{};
}

}  // namespace

TEST(ByteTokenizer, RoundTripsAnyBytesIncludingInvalidUtf8) {
  ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  all += "\xff\xfe\xc3(invalid utf-8)\x80";
  const auto ids = tok.encode(all);
  ASSERT_EQ(ids.size(), all.size());
  EXPECT_EQ(tok.decode(ids), all);
  EXPECT_EQ(tok.vocab_size(), 263);
  EXPECT_EQ(tok.special_ids().at("[MASK]"), 257);
  for (int64_t id : ids) EXPECT_LT(id, 256);
}

TEST(Dataset, PreparedShardsReadBackAcrossShardBoundaries) {
  TempDir dir;
  const std::string ds = make_dataset(dir, 5000, 700, /*shard_tokens=*/999);
  const DatasetMeta meta = read_dataset_meta(ds, /*verify_checksums=*/true);
  EXPECT_EQ(meta.vocab_size, 263);
  EXPECT_EQ(meta.token_bytes, 2);
  EXPECT_EQ(meta.splits.at("train").size(), 6u);  // ceil(5000 / 999)
  EXPECT_EQ(meta.split_tokens("train"), 5000);
  TokenStore store(ds, meta, "train");
  const std::string raw = roformer::testing::read_file(dir.file("train.txt"));
  std::vector<int64_t> got(3000);
  store.read(900, 3000, got.data());  // spans shards 0..3
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<unsigned char>(raw[900 + i])) << i;
  EXPECT_EQ(store.at(4999), static_cast<unsigned char>(raw[4999]));
}

TEST(Dataset, MaskingStatisticsAreBinomialAndSkipSpecialTokens) {
  MaskingRule rule;
  rule.mask_id = 257;
  rule.is_special.assign(263, 0);
  for (int s = 256; s < 263; ++s) rule.is_special[s] = 1;
  for (int64_t i = 0; i < 256; ++i) rule.regular_ids.push_back(i);
  const int64_t n = 400000;
  int64_t selected = 0, masked = 0, randomised = 0, kept = 0, special_touched = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t original = (i % 10 == 0) ? 258 : i % 256;  // 10% special tokens
    int64_t id = original;
    const bool sel = mlm_mask_position(rule, static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL + 7, &id);
    if (rule.is_special[original]) {
      special_touched += sel || id != original;
      continue;
    }
    if (!sel) continue;
    ++selected;
    if (id == 257)
      ++masked;
    else if (id == original)
      ++kept;
    else
      ++randomised;
  }
  EXPECT_EQ(special_touched, 0);
  const double eligible = n * 0.9;
  auto within = [](double count, double trials, double p) {  // 5 standard deviations
    return std::abs(count - trials * p) < 5 * std::sqrt(trials * p * (1 - p));
  };
  EXPECT_TRUE(within(selected, eligible, 0.15)) << selected;
  // Among selected: 80% [MASK], 10% random (a random id equals the original 1/256 of the time), 10% kept.
  EXPECT_TRUE(within(masked, selected, 0.8)) << masked;
  EXPECT_TRUE(within(randomised, selected, 0.1 * 255.0 / 256.0)) << randomised;
  EXPECT_TRUE(within(kept, selected, 0.1 + 0.1 / 256.0)) << kept;
}

TEST(Dataset, TrainBatchesAreAPureFunctionOfTheStep) {
  TempDir dir;
  const std::string ds = make_dataset(dir, 20000, 3000);
  const DatasetMeta meta = read_dataset_meta(ds);
  auto store = std::make_shared<const TokenStore>(ds, meta, "train");
  for (auto sampling : {config::DataSampling::random, config::DataSampling::packed}) {
    for (auto objective : {config::Objective::mlm, config::Objective::causal_lm}) {
      TrainBatcher a(store, objective, 32, 4, 0, 1, 99, sampling, MaskingRule::from(meta, data_config()));
      TrainBatcher b(store, objective, 32, 4, 0, 1, 99, sampling, MaskingRule::from(meta, data_config()));
      // b starts "after a resume" at step 7; both must agree at every step.
      for (int64_t step : {7, 8, 3, 0, 700}) {
        const Batch x = a.batch(step), y = b.batch(step);
        EXPECT_TRUE(torch::equal(x.input_ids, y.input_ids));
        EXPECT_TRUE(torch::equal(x.targets, y.targets));
      }
      EXPECT_FALSE(torch::equal(a.batch(1).input_ids, a.batch(2).input_ids));
      TrainBatcher other_seed(store, objective, 32, 4, 0, 1, 100, sampling, MaskingRule::from(meta, data_config()));
      EXPECT_FALSE(torch::equal(a.batch(5).input_ids, other_seed.batch(5).input_ids));
      if (objective == config::Objective::causal_lm) {  // targets are the next tokens
        const Batch x = a.batch(3);
        EXPECT_TRUE(torch::equal(x.input_ids.slice(1, 1), x.targets.slice(1, 0, 31)));
      }
    }
  }
}

TEST(Dataset, RankShardsAreDisjointAndCompleteAndPackedCoversEveryChunkOncePerEpoch) {
  TempDir dir;
  const std::string ds = make_dataset(dir, 6400, 1000);
  const DatasetMeta meta = read_dataset_meta(ds);
  auto store = std::make_shared<const TokenStore>(ds, meta, "train");
  for (auto sampling : {config::DataSampling::random, config::DataSampling::packed}) {
    TrainBatcher single(store, config::Objective::mlm, 64, 6, 0, 1, 5, sampling,
                        MaskingRule::from(meta, data_config()));
    for (int64_t step = 0; step < 4; ++step) {
      // Random offsets: rank r takes rows [2r, 2r+2) of the global batch; packed (PyTorch's
      // DistributedSampler layout): rows r, r+3. Either way the same global batch and masks.
      std::vector<int64_t> joined(6);
      std::vector<torch::Tensor> ids(6);
      for (int r = 0; r < 3; ++r) {
        TrainBatcher rank(store, config::Objective::mlm, 64, 2, r, 3, 5, sampling,
                          MaskingRule::from(meta, data_config()));
        const auto o = rank.offsets(step);
        const Batch b = rank.batch(step);
        for (int64_t i = 0; i < 2; ++i) {
          const int64_t row = sampling == config::DataSampling::packed ? r + 3 * i : 2 * r + i;
          joined[static_cast<size_t>(row)] = o[static_cast<size_t>(i)];
          ids[static_cast<size_t>(row)] = b.input_ids[i];
        }
      }
      EXPECT_EQ(joined, single.offsets(step));
      EXPECT_TRUE(torch::equal(torch::stack(ids), single.batch(step).input_ids));  // same MLM masks
    }
  }
  // Packed: 100 chunks of 64; 100 consecutive global samples form one permutation of them.
  TrainBatcher packed(store, config::Objective::mlm, 64, 10, 0, 1, 5, config::DataSampling::packed,
                      MaskingRule::from(meta, data_config()));
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 10; ++step)
    for (int64_t o : packed.offsets(step)) seen.insert(o);
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(*seen.rbegin(), 99 * 64);
}

TEST(Dataset, ChunksAndSlidingWindowsScoreEveryTokenExactlyOnce) {
  TempDir dir;
  const std::string ds = make_dataset(dir, 3000, 1003);
  const DatasetMeta meta = read_dataset_meta(ds);
  auto store = std::make_shared<const TokenStore>(ds, meta, "valid");
  for (auto objective : {config::Objective::mlm, config::Objective::causal_lm}) {
    const bool causal = objective == config::Objective::causal_lm;
    for (auto [protocol, stride] :
         {std::pair{config::EvalProtocol::chunks, 0}, std::pair{config::EvalProtocol::sliding, 25},
          std::pair{config::EvalProtocol::sliding, 64}}) {
      EvalWindows ew(store, objective, 64, protocol, stride, 0, 4, 0, 1, 11, MaskingRule::from(meta, data_config()));
      std::vector<int> count(1003, 0);
      int64_t prev_start = -1;
      for (const EvalWindow& w : ew.windows()) {
        EXPECT_GE(w.start, prev_start);
        prev_start = w.start;
        for (int64_t p = w.score_from; p < w.score_to; ++p) ++count[static_cast<size_t>(p)];
        // Everything scored lies inside the window (causal targets: start+1 .. start+L).
        EXPECT_GE(w.score_from, w.start + (causal ? 1 : 0));
        EXPECT_LE(w.score_to, w.start + 64 + (causal ? 1 : 0));
        // Sliding windows leave at least L - S tokens of context before the scored ones (but the first).
        if (protocol == config::EvalProtocol::sliding && w.start > 0 && w.score_to < 1003) {
          EXPECT_GE(w.score_from - w.start, 64 - stride);
        }
      }
      for (int64_t p = causal ? 1 : 0; p < 1003; ++p) ASSERT_EQ(count[static_cast<size_t>(p)], 1) << p;
      if (causal) {
        EXPECT_EQ(count[0], 0);
      }
    }
  }
  // Sliding with stride = L is the chunks protocol.
  EvalWindows chunks(store, config::Objective::causal_lm, 64, config::EvalProtocol::chunks, 0, 0, 4, 0, 1, 11,
                     MaskingRule::from(meta, data_config()));
  EvalWindows sliding(store, config::Objective::causal_lm, 64, config::EvalProtocol::sliding, 64, 0, 4, 0, 1, 11,
                      MaskingRule::from(meta, data_config()));
  ASSERT_EQ(chunks.windows().size(), sliding.windows().size());
  for (int64_t i = 0; i < chunks.num_batches(); ++i) {
    EXPECT_TRUE(torch::equal(chunks.batch(i).input_ids, sliding.batch(i).input_ids));
    EXPECT_TRUE(torch::equal(chunks.batch(i).targets, sliding.batch(i).targets));
  }
}

TEST(Dataset, MlmEvaluationMasksDependOnlyOnAbsolutePosition) {
  TempDir dir;
  const std::string ds = make_dataset(dir, 3000, 2000);
  const DatasetMeta meta = read_dataset_meta(ds);
  auto store = std::make_shared<const TokenStore>(ds, meta, "valid");
  EvalWindows a(store, config::Objective::mlm, 100, config::EvalProtocol::sliding, 30, 0, 2, 0, 1, 7,
                MaskingRule::from(meta, data_config()));
  // Window k starts at 30k: the input at absolute position p is the same in every window covering p.
  std::map<int64_t, int64_t> input_at;
  for (int64_t i = 0; i < a.num_batches(); ++i) {
    const Batch b = a.batch(i);
    for (int64_t r = 0; r < b.input_ids.size(0); ++r) {
      const EvalWindow& w = a.windows()[static_cast<size_t>(i * 2 + r)];
      for (int64_t p = 0; p < 100; ++p) {
        const int64_t id = b.input_ids[r][p].item<int64_t>();
        auto [it, inserted] = input_at.emplace(w.start + p, id);
        EXPECT_EQ(it->second, id) << "position " << w.start + p;
      }
    }
  }
  EXPECT_GT(input_at.size(), 1900u);
}

TEST(Dataset, EvalWindowsShardAcrossRanksWithoutOverlap) {
  TempDir dir;
  const std::string ds = make_dataset(dir, 3000, 2000);
  const DatasetMeta meta = read_dataset_meta(ds);
  auto store = std::make_shared<const TokenStore>(ds, meta, "valid");
  int64_t total = 0;
  std::set<int64_t> starts;
  for (int r = 0; r < 3; ++r) {
    EvalWindows ew(store, config::Objective::causal_lm, 50, config::EvalProtocol::chunks, 0, 0, 3, r, 3, 1,
                   MaskingRule::from(meta, data_config()));
    for (int64_t i = 0; i < ew.num_batches(); ++i) total += ew.batch(i).scored;
  }
  EXPECT_EQ(total, 1999);  // every target of the split, once
}

TEST(Dataset, PrefetcherYieldsTheSameStreamInOrderAndForwardsErrors) {
  std::vector<int64_t> got;
  {
    Prefetcher<int64_t> p([](int64_t i) { return i * i; }, 3, 40, 2);
    for (int64_t i = 3; i < 40; ++i) got.push_back(p.next());
  }
  for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], static_cast<int64_t>((k + 3) * (k + 3)));
  Prefetcher<int64_t> failing(
      [](int64_t i) -> int64_t {
        if (i == 2) throw UserError("boom");
        return i;
      },
      0, 5);
  EXPECT_EQ(failing.next(), 0);
  EXPECT_EQ(failing.next(), 1);
  EXPECT_THROW(failing.next(), UserError);
}

TEST(DatasetBadInput, EachProblemGetsItsError) {
  TempDir dir;
  auto expect_error = [](const std::function<void()>& f, const std::string& fragment) {
    try {
      f();
      ADD_FAILURE() << "expected an error containing '" << fragment << "'";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error([&] { read_dataset_meta(dir.file("nope")); }, "does not exist");
  make_directories(dir.file("empty"));
  expect_error([&] { read_dataset_meta(dir.file("empty")); }, "has no meta.json");
  const std::string ds = make_dataset(dir, 4000, 500);
  const std::string meta_text = roformer::testing::read_file(ds + "/meta.json");
  write_file(ds + "/meta.json", "{ not json");
  expect_error([&] { read_dataset_meta(ds); }, "not valid JSON");
  // Regression (fuzz_dataset_meta): a number too large for a double is out_of_range, not a parse error.
  write_file(ds + "/meta.json", "{\"format_version\": 9e999}");
  expect_error([&] { read_dataset_meta(ds); }, "not valid JSON");
  write_file(ds + "/meta.json", meta_text);
  // Truncated shard (mid-token: an odd number of bytes).
  const std::string shard = ds + "/valid-00000.bin";
  const std::string bytes = roformer::testing::read_file(shard);
  write_file(shard, bytes.substr(0, bytes.size() - 1));
  expect_error([&] { read_dataset_meta(ds); }, "truncated");
  // Same size, different content: only the checksum notices.
  std::string flipped = bytes;
  flipped[10] = static_cast<char>(flipped[10] ^ 1);
  write_file(shard, flipped);
  EXPECT_NO_THROW(read_dataset_meta(ds));
  expect_error([&] { read_dataset_meta(ds, true); }, "CRC-32");
  // An id outside the vocabulary.
  std::string bad_id = bytes;
  bad_id[0] = static_cast<char>(0xff), bad_id[1] = static_cast<char>(0x7f);
  write_file(shard, bad_id);
  expect_error([&] { TokenStore(ds, read_dataset_meta(ds), "valid"); }, "outside its vocabulary");
  write_file(shard, bytes);
  const DatasetMeta meta = read_dataset_meta(ds, true);
  auto store = std::make_shared<const TokenStore>(ds, meta, "valid");
  expect_error(
      [&] {
        EvalWindows(store, config::Objective::mlm, 600, config::EvalProtocol::chunks, 0, 0, 1, 0, 1, 1,
                    MaskingRule::from(meta, data_config()));
      },
      "evaluation length 600");
  expect_error([&] { TokenStore(ds, meta, "test"); }, "no tokens in split 'test'");
  // The preparation tool refuses missing and empty inputs and an existing output.
  write_file(dir.file("valid.txt"), "");
  auto r = run_command("'" + tool() + "' --input '" + dir.file("valid.txt") + "' --out '" + dir.file("x") + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("is empty"), std::string::npos) << r.output;
  r = run_command("'" + tool() + "' --input '" + dir.file("missing.txt") + "' --out '" + dir.file("x") + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  r = run_command("'" + tool() + "' --input '" + dir.file("train.txt") + "' --out '" + ds + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
  EXPECT_FALSE(roformer::path_exists(dir.file("x")));
  EXPECT_EQ(roformer::testing::read_file(ds + "/meta.json"), meta_text);  // untouched
}

// The one helper both output-directory checks (prepare-data --out, convert's output) use.
TEST(Files, LastPathComponentIgnoresTrailingSlashes) {
  EXPECT_EQ(last_path_component("runs/a/"), "a");
  EXPECT_EQ(last_path_component("runs//b"), "b");
  EXPECT_EQ(last_path_component("c"), "c");
  EXPECT_EQ(last_path_component("/"), "");
  EXPECT_EQ(last_path_component("///"), "");
  EXPECT_EQ(last_path_component("x/.."), "..");
}

}  // namespace data_test
