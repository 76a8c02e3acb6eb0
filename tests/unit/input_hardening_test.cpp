// The input-hardening layer's pieces, each against what it guards: checked arithmetic, a
// meta.json token count whose byte size overflows (it once wrapped to 0 and matched an empty
// shard), Hugging Face config.json values of the wrong type (they once escaped as json
// exceptions, exit 1), the memory estimate against the parameters build_model really makes,
// and the command line's parse-time checks (empty values, negative strides, NaN depths).
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <fstream>
#include <limits>

#include "cli/cli_options.h"
#include "roformer/common/checked_math.h"
#include "roformer/common/errors.h"
#include "roformer/convert/hf_config.h"
#include "roformer/data/dataset_meta.h"
#include "roformer/model/encoder.h"
#include "roformer/runtime/memory_estimate.h"
#include "test_support.h"

namespace input_hardening_test {

using namespace roformer;
using roformer::testing::TempDir;
using roformer::testing::user_error;
using roformer::testing::write_file;

TEST(CheckedMath, OverflowIsAUserErrorNamingTheQuantity) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, 4, "x"), int64_t{1} << 33);
  EXPECT_EQ(checked_add(-5, 7, "x"), 2);
  EXPECT_NE(user_error([] { checked_mul(int64_t{1} << 62, 4, "shard bytes"); }).find("shard bytes overflows"),
            std::string::npos);
  EXPECT_NE(user_error([] { checked_add(std::numeric_limits<int64_t>::max(), 1, "sum"); }).find("sum overflows"),
            std::string::npos);
}

TEST(DatasetMetaHardening, TokenCountWhoseByteSizeOverflowsIsRefused) {
  TempDir dir;
  write_file(dir.file("train-00000.bin"), "");  // 0 bytes: 2^62 tokens x 4 bytes wraps to exactly 0
  write_file(dir.file("meta.json"),
             R"({"format_version": 1, "tokenizer": "byte", "vocab_size": 264, "token_bytes": 4,
                 "special_ids": {}, "splits": {"train": [{"file": "train-00000.bin",
                 "tokens": 4611686018427387904, "crc32": 0}]}})");
  const std::string err = user_error([&] { data::read_dataset_meta(dir.path(), false); });
  EXPECT_NE(err.find("promises 4611686018427387904 tokens"), std::string::npos) << err;
}

TEST(HfConfigHardening, WrongTypesAndSizesAreUserErrorsNamingTheKey) {
  const std::string base =
      R"("model_type": "roformer", "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 64)";
  auto err = [&](const std::string& extra) {
    return user_error([&] { convert::parse_hf_config("{" + base + extra + "}", "hf", "x"); });
  };
  EXPECT_EQ(err(""), "");
  EXPECT_NE(err(R"(, "architectures": [1])").find("'architectures' must be a list"), std::string::npos);
  EXPECT_NE(err(R"(, "is_decoder": "yes")").find("'is_decoder' must be true or false"), std::string::npos);
  EXPECT_NE(err(R"(, "hidden_act": 3)").find("'hidden_act' must be a string"), std::string::npos);
  EXPECT_NE(err(R"(, "rotary_value": 1)").find("'rotary_value' must be true or false"), std::string::npos);
  EXPECT_NE(err(R"(, "max_position_embeddings": -1)").find("'max_position_embeddings' is -1"), std::string::npos);
  EXPECT_NE(err(R"(, "layer_norm_eps": -1e-5)").find("layer_norm_eps"), std::string::npos);
  EXPECT_NE(user_error([] {
              convert::parse_hf_config(R"({"model_type": 5})", "hf", "x");
            }).find("'model_type' must be a string"),
            std::string::npos);
  EXPECT_NE(user_error([&] {
              convert::parse_hf_config(R"({"model_type": "roformer", "vocab_size": 100, "hidden_size": 32,
                 "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 0})",
                                       "hf", "x");
            }).find("'intermediate_size' is 0"),
            std::string::npos);
  EXPECT_NE(user_error([] { convert::parse_hf_config("[]", "hf", "x"); }).find("must be a JSON object"),
            std::string::npos);
  const convert::HfConfig ok = convert::parse_hf_config(
      "{" + base + R"(, "architectures": ["RoFormerForCausalLM"], "max_position_embeddings": 300})", "hf", "x");
  EXPECT_EQ(ok.architecture, "RoFormerForCausalLM");
  EXPECT_EQ(ok.config.model.objective, config::Objective::causal_lm);
  EXPECT_EQ(ok.config.data.seq_len, 300);
  EXPECT_EQ(ok.config.name, "hf-x");
}

TEST(MemoryEstimate, CountsTheParametersBuildModelMakes) {
  auto check = [](config::ModelConfig m) {
    const double estimated = runtime::estimate_memory(m, 1, 16, true, false).parameters;
    EXPECT_EQ(estimated, static_cast<double>(model::count_parameters(*model::build_model(m, 0))));
  };
  config::ModelConfig m;
  m.hidden_size = 32;
  m.num_heads = 2;
  m.ffn_size = 48;
  m.num_layers = 2;
  check(m);
  m.position.kind = config::PositionKind::learned;
  m.position.max_positions = 40;
  m.type_vocab_size = 2;
  check(m);
  m.position.kind = config::PositionKind::t5_bias;
  m.norm = config::NormPlacement::pre;
  m.embedding_size = 16;
  check(m);
  m.position.cope.max_positions = 10;
  for (auto kind : {config::PositionKind::shaw, config::PositionKind::transformer_xl, config::PositionKind::deberta,
                    config::PositionKind::xpos, config::PositionKind::fire, config::PositionKind::kerple,
                    config::PositionKind::sandwich, config::PositionKind::cope}) {
    m.position.kind = kind;
    check(m);
  }
  m.position.kind = config::PositionKind::fire;
  m.position.fire.shared_layers = false;
  m.objective = config::Objective::causal_lm;  // one side
  check(m);
  m.objective = config::Objective::mlm;
  m.position.kind = config::PositionKind::shaw;
  m.position.shaw.per_layer = false;
  m.position.shaw.values = false;
  check(m);
  m.norm_kind = config::NormKind::rms_norm;  // pre-norm: the final norm is an RMSNorm too
  m.feed_forward = config::FeedForwardKind::glu;
  check(m);
  m.num_kv_heads = 1;  // grouped-query attention with QK-norm: k_norm has one head's row
  m.qk_norm = true;
  check(m);
  m.position.kind = config::PositionKind::rope;
  m.explicit_head_dim = 24;  // a head width of its own (Qwen3): 2 heads of 24 on a width of 32
  m.output_gate = true;
  m.output_norm = true;
  check(m);
  m.norm = config::NormPlacement::sandwich;  // Gemma: two more norms per layer
  m.norm_weight_offset = 1.0;
  check(m);
}

TEST(MemoryEstimate, RefusesWhatCannotFitAndNamesTheEstimate) {
  config::ModelConfig m;
  m.hidden_size = 1 << 20;
  m.ffn_size = 1 << 22;
  m.num_heads = 16;
  m.num_layers = 24;
  const std::string err = user_error([&] {
    runtime::check_fits_device(runtime::estimate_memory(m, 8, 512, true, false), torch::kCPU, "training this model",
                               "it");
  });
  EXPECT_NE(err.find("training this model needs at least"), std::string::npos) << err;
  EXPECT_NE(err.find("parameters"), std::string::npos) << err;
  config::ModelConfig tiny;
  EXPECT_EQ(user_error([&] {
              runtime::check_fits_device(runtime::estimate_memory(tiny, 8, 128, true, false), torch::kCPU, "training",
                                         "it");
            }),
            "");
  // int64-limit lengths give an infinite-looking estimate, not a wrapped one.
  EXPECT_NE(user_error([&] {
              runtime::check_fits_device(
                  runtime::estimate_memory(tiny, 8, std::numeric_limits<int64_t>::max(), false, false), torch::kCPU,
                  "evaluating", "it");
            }).find("needs at least"),
            std::string::npos);
}

// What the CPU offers is what this process may still map: under an address-space limit
// (ulimit -v) an estimate past it is refused with that limit named (it failed inside the
// allocator, exit 1), and lifting the limit gives the machine's memory back.
TEST(MemoryEstimate, AnAddressSpaceLimitLowersWhatTheCpuOffers) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan maps terabytes of shadow memory; an address-space limit would stop the process";
#else
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &before), 0);
  if (before.rlim_cur != RLIM_INFINITY) GTEST_SKIP() << "already under an address-space limit";
  std::ifstream statm("/proc/self/statm");
  double mapped_pages = 0;
  statm >> mapped_pages;
  const double mapped = mapped_pages * double(::sysconf(_SC_PAGE_SIZE)), headroom = double(1 << 30);
  const double machine = runtime::device_memory_bytes(torch::kCPU);
  rlimit capped = before;
  capped.rlim_cur = static_cast<rlim_t>(mapped + headroom);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &capped), 0);
  const double offered = runtime::device_memory_bytes(torch::kCPU);
  config::ModelConfig tiny;
  const std::string err = user_error([&] {
    runtime::check_fits_device(runtime::estimate_memory(tiny, 64, 1 << 16, false, false), torch::kCPU, "evaluating",
                               "it");
  });
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &before), 0);
  EXPECT_LE(offered, headroom);
  EXPECT_GT(offered, 0.5 * headroom);  // what the test's own allocations took meanwhile is small
  EXPECT_NE(err.find("the address-space limit (ulimit -v) leaves"), std::string::npos) << err;
  EXPECT_EQ(runtime::device_memory_bytes(torch::kCPU), machine);
#endif
}

namespace {

// Parses `roformer ARGS...` with the binary's own declarations; returns CLI11's error or "".
std::string parse_error(std::vector<std::string> args) {
  CLI::App app{"roformer"};
  app.require_subcommand(1);
  cli::TrainArgs train;
  cli::EvalArgs eval;
  cli::SweepArgs sweep;
  cli::declare_train(app, train);
  cli::declare_eval(app, eval);
  cli::declare_sweep(app, sweep);
  std::vector<char*> argv{const_cast<char*>("roformer")};
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CliOptions, ValuesThatCannotBeRightAreRefusedAtParseTime) {
  EXPECT_EQ(parse_error({"eval", "ckpt", "--stride", "0", "--out", "o"}), "");
  EXPECT_NE(parse_error({"eval", "ckpt", "--stride", "-5"}), "");
  EXPECT_NE(parse_error({"eval", "ckpt", "--out", ""}).find("empty value"), std::string::npos);
  EXPECT_NE(parse_error({"eval", "ckpt", "--lengths", ""}).find("empty value"), std::string::npos);
  EXPECT_NE(parse_error({"eval", "ckpt", "--trials", "0"}), "");
  EXPECT_NE(parse_error({"train", "c.yaml", "--run-dir", ""}).find("empty value"), std::string::npos);
  EXPECT_NE(parse_error({"sweep", "s.yaml", "--seeds", "0"}), "");
  EXPECT_NE(parse_error({"sweep", "s.yaml", "--seeds", "-2"}), "");
  EXPECT_EQ(parse_error({"sweep", "s.yaml", "--seeds", "3"}), "");
}

TEST(CliOptions, DepthsMustBeNumbersInTheUnitInterval) {
  EXPECT_EQ(cli::parse_depths("0,0.5,1"), (std::vector<double>{0, 0.5, 1}));
  for (const char* bad : {"nan", "0.5x", "-0.1", "1.5", "inf", "0,,1"})
    EXPECT_NE(user_error([&] { cli::parse_depths(bad); }), "") << bad;
}

TEST(CliOptions, EvalFlagsBecomeRuntimeOverrides) {
  cli::EvalArgs a;
  a.overrides = {"eval.batch_size=2"};
  a.lengths = "64,128";
  a.stride = 0;
  EXPECT_EQ(cli::eval_overrides(a),
            (std::vector<std::string>{"eval.batch_size=2", "eval.lengths=64,128", "eval.stride=0"}));
}

}  // namespace input_hardening_test
