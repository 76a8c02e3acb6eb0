// Tests for the config system: every shipped YAML parses; each kind of bad input gives an
// error naming file:line:col, the key path and the fix; precedence CLI > file > base >
// defaults; the resolved dump round-trips.
#include <gtest/gtest.h>

#include <filesystem>

#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/position_families.h"
#include "roformer/sweep/sweep.h"
#include "test_support.h"

namespace config_test {

using namespace roformer;
using namespace roformer::config;
using roformer::testing::TempDir;
using roformer::testing::write_file;

namespace {

// The config a resolved dump of `c` loads back as (written to a file, as a run directory holds it).
LoadedConfig reloaded(const Config& c) {
  TempDir dir;
  write_file(dir.file("resolved.yaml"), dump_yaml(c));
  return load_config(dir.file("resolved.yaml"));
}

// Loads YAML text written to a temp file and returns the error message (empty if none).
std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  TempDir dir;
  write_file(dir.file("c.yaml"), yaml);
  try {
    load_config(dir.file("c.yaml"), overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// A sweep file (variants x seeds over a base config) rather than a config: a top-level `variants:`.
bool is_sweep_file(const std::filesystem::path& path) {
  return roformer::testing::read_file(path.string()).find("\nvariants:") != std::string::npos;
}

void expect_contains(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "expected '" << fragment << "' in: " << text;
}

}  // namespace

TEST(Config, EveryShippedConfigParses) {
  namespace fs = std::filesystem;
  int count = 0;
  for (const auto& entry : fs::recursive_directory_iterator(roformer::testing::source_dir() + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    // Sweep files (configs/ablation, configs/scale) have their own schema, checked below.
    if (is_sweep_file(entry.path())) continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_config(entry.path().string()));
    ++count;
  }
  EXPECT_GE(count, 7);  // quickstart base + six families
}

TEST(Config, QuickstartFamiliesResolveAsNamed) {
  const std::string dir = roformer::testing::source_dir() + "/configs/quickstart/";
  for (const std::string kind : {"rope", "sinusoidal", "learned", "t5_bias", "alibi", "none"}) {
    const LoadedConfig c = load_config(dir + kind + ".yaml");
    EXPECT_EQ(position_kind_names().name(c.config.model.position.kind), kind);
    EXPECT_EQ(c.config.model.hidden_size, 128);  // from base.yaml
    EXPECT_EQ(c.files.size(), 2u);
  }
}

// Each feature a CUDA graph cannot capture says so beside its settings, naming them; the
// defaults, and settings that do not apply (a task length without a task, FAVOR+'s redraws under
// softmax attention), leave the step capturable.
TEST(Config, EachFeatureACudaGraphCannotCaptureNamesItsSetting) {
  const Config base;
  auto refusal = [](const Config& c) {
    const char* why = cuda_graph_refusal(c);
    return std::string(why != nullptr ? why : "");
  };
  EXPECT_EQ(refusal(base), "");
  Config c = base;
  c.train.activation_checkpointing = ActivationCheckpointing::every_k;
  EXPECT_NE(refusal(c).find("train.activation_checkpointing"), std::string::npos) << refusal(c);
  c = base;
  c.train.positions = PositionSampling::random;
  EXPECT_NE(refusal(c).find("train.positions=random"), std::string::npos) << refusal(c);
  c = base;
  c.data.packing = DataPacking::documents;
  EXPECT_NE(refusal(c).find("data.packing"), std::string::npos) << refusal(c);
  c = base;
  c.data.task.min_length = 8;
  EXPECT_EQ(refusal(c), "");  // no task: the corpus' length is fixed
  c.data.task.name = TaskKind::copy;
  EXPECT_NE(refusal(c).find("data.task.min_length"), std::string::npos) << refusal(c);
  c.data.task.min_length = c.data.seq_len;
  EXPECT_EQ(refusal(c), "");
  c = base;
  c.model.linear_attention.feature_map = FeatureMap::favor;
  EXPECT_EQ(refusal(c), "");  // softmax attention: the feature map is unused
  c.model.attention = AttentionKind::linear;
  EXPECT_NE(refusal(c).find("model.linear_attention.redraw_interval=0"), std::string::npos) << refusal(c);
  c.model.linear_attention.redraw_interval = 0;
  EXPECT_EQ(refusal(c), "");
}

TEST(Config, UnknownKeySuggestsTheClosestName) {
  const std::string err = load_error("model:\n  num_layer: 3\n");
  expect_contains(err, "c.yaml:2:3");
  expect_contains(err, "unknown key 'model.num_layer'");
  expect_contains(err, "did you mean 'model.num_layers'?");
}

// A key an earlier version wrote into run directories (dist.nccl_engine, from when we had an NCCL
// engine of our own) loads with a warning, from a file and from --set; its misspelling does not.
TEST(Config, RetiredKeysLoadAndTheirMisspellingsDoNot) {
  EXPECT_EQ(load_error("dist:\n  nccl_engine: own\n"), "");
  EXPECT_EQ(load_error("name: x\n", {"dist.nccl_engine=c10d"}), "");
  expect_contains(load_error("dist:\n  nccl_engin: own\n"), "unknown key 'dist.nccl_engin'");
}

TEST(Config, UnknownTopLevelKeyWithoutCloseMatchListsValidKeys) {
  const std::string err = load_error("optimizer: adam\n");
  expect_contains(err, "c.yaml:1:1");
  expect_contains(err, "valid keys here:");
  expect_contains(err, "train");
}

TEST(Config, WrongTypeNamesTheExpectedType) {
  expect_contains(load_error("model:\n  hidden_size: big\n"),
                  "c.yaml:2:16: model.hidden_size expected an integer, got 'big'");
  expect_contains(load_error("train:\n  lr: fast\n"), "train.lr expected a number");
  expect_contains(load_error("model:\n  rope: 3\n"), "unknown key 'model.rope'");
  expect_contains(load_error("model: [1, 2]\n"), "model expected a mapping");
  expect_contains(load_error("model:\n  position:\n    rope:\n      rotate_value: maybe\n"),
                  "model.position.rope.rotate_value expected true or false");
  expect_contains(load_error("eval:\n  lengths: [128, x]\n"), "eval.lengths expected an integer");
  expect_contains(load_error("model:\n  hidden_size:\n"), "model.hidden_size has no value");
}

TEST(Config, BadEnumListsTheAllowedValues) {
  const std::string err = load_error("model:\n  position:\n    kind: rotary\n");
  expect_contains(err, "c.yaml:3:11");
  expect_contains(err, "'rotary' is not allowed; choose one of: rope, sinusoidal, learned, t5_bias, alibi, none");
  expect_contains(load_error("model:\n  position:\n    kind: alibii\n"), "did you mean 'alibi'?");
}

TEST(Config, OutOfRangeValuesAreRefused) {
  expect_contains(load_error("model:\n  num_layers: 0\n"), "model.num_layers = 0 is out of range: must be >= 1");
  expect_contains(load_error("model:\n  hidden_dropout: 1.5\n"), "must be in [0, 0.99]");
  expect_contains(load_error("train:\n  lr: 0\n"), "train.lr = 0 is out of range: must be > 0");
  expect_contains(load_error("train:\n  lr: .nan\n"), "must be a finite number");
}

TEST(Config, CrossFieldConflictsNameBothKeysAndWhereTheyWereSet) {
  const std::string err = load_error("model:\n  hidden_size: 130\n  num_heads: 4\n");
  expect_contains(err, "model.hidden_size (set at");
  expect_contains(err, "c.yaml:2:16");
  expect_contains(err, "model.num_heads");
  expect_contains(load_error("model:\n  position:\n    kind: learned\n    max_positions: 64\n"),
                  "cannot train on length 128");
  expect_contains(load_error("model:\n  position:\n    rope:\n      rotary_dim: 7\n"), "must be even");
}

TEST(Config, YamlSyntaxErrorGivesLineAndColumn) {
  const std::string err = load_error("model:\n  hidden_size: [1, 2\n");
  expect_contains(err, "c.yaml:");
  expect_contains(err, "YAML syntax error");
}

TEST(Config, DuplicateKeysAreRefused) {
  expect_contains(load_error("model:\n  num_layers: 2\n  num_layers: 3\n"), "duplicate key 'model.num_layers'");
}

TEST(Config, MissingBaseFileIsNamed) {
  const std::string err = load_error("base: nowhere.yaml\n");
  expect_contains(err, "c.yaml:1:7: base file 'nowhere.yaml' not found");
}

TEST(Config, CyclicBaseIsDetected) {
  TempDir dir;
  write_file(dir.file("a.yaml"), "base: b.yaml\n");
  write_file(dir.file("b.yaml"), "base: a.yaml\n");
  try {
    load_config(dir.file("a.yaml"));
    FAIL() << "expected a cycle error";
  } catch (const UserError& e) {
    expect_contains(e.what(), "config base cycle");
    expect_contains(e.what(), "a.yaml");
  }
}

TEST(Config, MissingFileIsNamed) {
  try {
    load_config("/nonexistent/dir/x.yaml");
    FAIL();
  } catch (const UserError& e) {
    expect_contains(e.what(), "'/nonexistent/dir/x.yaml' does not exist");
  }
}

TEST(Config, PrecedenceIsCliOverFileOverBaseOverDefaults) {
  TempDir dir;
  write_file(dir.file("base.yaml"), "model:\n  num_layers: 3\n  hidden_size: 64\n  num_heads: 2\n");
  write_file(dir.file("child.yaml"), "base: base.yaml\nmodel:\n  num_layers: 5\n");
  const LoadedConfig c = load_config(dir.file("child.yaml"), {"model.hidden_size=96"});
  EXPECT_EQ(c.config.model.num_layers, 5);                     // file beats base
  EXPECT_EQ(c.config.model.hidden_size, 96);                   // CLI beats base
  EXPECT_EQ(c.config.model.num_heads, 2);                      // base beats default (4)
  EXPECT_EQ(c.config.model.ffn_size, ModelConfig{}.ffn_size);  // default
  EXPECT_EQ(c.origins.at("model.num_layers"), dir.file("child.yaml") + ":3:15");
  EXPECT_EQ(c.origins.at("model.hidden_size"), "--set model.hidden_size=96");
  const LoadedConfig c2 = load_config(dir.file("child.yaml"), {"model.num_layers=7"});
  EXPECT_EQ(c2.config.model.num_layers, 7);  // CLI beats file
}

TEST(Config, OverridesAreTypedAndValidatedLikeFileValues) {
  TempDir dir;
  write_file(dir.file("c.yaml"), "name: x\n");
  auto err = [&](const std::string& spec) {
    try {
      load_config(dir.file("c.yaml"), {spec});
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  expect_contains(err("model.num_layrs=4"),
                  "--set model.num_layrs=4: unknown key 'model.num_layrs'; did you mean 'model.num_layers'?");
  expect_contains(err("model.num_layers=four"), "--set model.num_layers=four: model.num_layers expected an integer");
  expect_contains(err("model.num_layers=0"), "out of range");
  expect_contains(err("model.position.kind=foo"), "choose one of");
  expect_contains(err("model.num_layers"), "expected key.path=value");
  expect_contains(err("base=other.yaml"), "'base' can only be set in a config file");
  const LoadedConfig ok =
      load_config(dir.file("c.yaml"), {"eval.lengths=64,128", "model.position.rope.scaling.kind=yarn",
                                       "model.position.rope.scaling.factor=4", "model.position.rope.base=500000"});
  EXPECT_DOUBLE_EQ(ok.config.model.position.rope.base, 500000.0);  // a nested key named base is a plain key
  EXPECT_EQ(ok.config.eval.lengths, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(ok.config.model.position.rope.scaling.kind, RopeScalingKind::yarn);
  EXPECT_DOUBLE_EQ(ok.config.model.position.rope.scaling.factor, 4.0);
}

TEST(Config, ResolutionFillsDerivedDefaults) {
  const LoadedConfig c = load_overrides({"model.hidden_size=256", "model.num_heads=8", "data.seq_len=64"});
  EXPECT_EQ(c.config.model.position.rope.rotary_dim, 32);                      // head_dim
  EXPECT_EQ(c.config.model.position.rope.scaling.original_max_positions, 64);  // data.seq_len
}

TEST(Config, ResolvedDumpRoundTrips) {
  const LoadedConfig a = load_config(roformer::testing::source_dir() + "/configs/quickstart/t5_bias.yaml",
                                     {"train.lr=0.1", "eval.lengths=[100, 200]", "name=with \"quotes\""});
  const std::string text = dump_yaml(a.config);
  const LoadedConfig b = reloaded(a.config);
  EXPECT_EQ(dump_yaml(b.config), text);
  EXPECT_EQ(flatten(a.config), flatten(b.config));
  EXPECT_NE(text.find("lr: 0.1\n"), std::string::npos) << text;
}

// An evaluation length past 2^24 tokens leaves the derived train.random_positions_max at its
// ceiling, so the resolved config loads again (the config fuzzer found the dump refused).
TEST(Config, EvaluationLengthsPastTheRandomPositionCeilingStillRoundTrip) {
  const LoadedConfig a = load_overrides({"eval.lengths=[128, 20000000]"});
  EXPECT_EQ(a.config.train.random_positions_max, kMaxRandomPositions);
  EXPECT_EQ(dump_yaml(reloaded(a.config).config), dump_yaml(a.config));
}

// A config's strings are UTF-8 text without control characters: yaml-cpp decodes the bytes
// 01 00 00 00 ... of a --set value as UTF-32 into an overlong UTF-8 form that its emitter writes
// back as a NUL (the config fuzzer found the dump refused); such values are refused up front,
// and plain non-ASCII text still round-trips.
TEST(Config, StringsMustBeUtf8TextWithoutControlCharacters) {
  const std::string utf32_bytes(
      "name=\x01\0\0\0\0\0\0\x13"
      "c",
      14);
  for (const std::string& bad :
       {utf32_bytes, std::string("name=a\tb"), std::string("data.path=\xc0\x80"), std::string("data.path=\xed\xa0\x80"),
        std::string("name=\xf4\x90\x80\x80"), std::string("name=\xe2\x82")}) {
    SCOPED_TRACE(bad);
    try {
      load_overrides({bad});
      ADD_FAILURE() << "accepted";
    } catch (const roformer::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("UTF-8 text without control characters"), std::string::npos) << e.what();
    }
  }
  const LoadedConfig a = load_overrides({"name=r\xc3\xa9sum\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80"});
  EXPECT_EQ(a.config.name, "r\xc3\xa9sum\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80");
  EXPECT_EQ(reloaded(a.config).config.name, a.config.name);
}

// A resolved layout (every auto written in) loads again as itself, for every preset.
TEST(Config, ResolvedLayoutsRoundTrip) {
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"model.layout.preset=irope", "model.num_layers=4"},
        {"model.layout.preset=rnope_swa", "model.num_layers=8", "model.position.kind=alibi"},
        {"model.layout.preset=gemma3", "model.num_layers=6"},
        {"model.layout.preset=gemma3", "model.num_layers=6", "model.position.kind=t5_bias"},
        {"model.layout.preset=custom", "model.layout.pattern=LG", "model.layout.global.position=none"}}) {
    SCOPED_TRACE(sets.front() + " " + sets.back());
    const LoadedConfig a = load_overrides(sets);
    EXPECT_EQ(dump_yaml(reloaded(a.config).config), dump_yaml(a.config));
  }
}

TEST(Config, DefaultsAreValid) {
  EXPECT_NO_THROW(load_overrides({}));
  EXPECT_FALSE(schema_text().empty());
  EXPECT_NE(schema_text().find("model.position.rope.scaling.kind"), std::string::npos);
}

TEST(Config, EveryShippedSweepFileLoads) {
  namespace fs = std::filesystem;
  int count = 0;
  for (const auto& entry : fs::recursive_directory_iterator(roformer::testing::source_dir() + "/configs")) {
    if (entry.path().extension() != ".yaml" || !is_sweep_file(entry.path())) continue;
    SCOPED_TRACE(entry.path().string());
    const sweep::SweepSpec spec = sweep::load_sweep(entry.path().string());  // validates every variant's config
    EXPECT_FALSE(spec.variants.empty());
    ++count;
  }
  EXPECT_GE(count, 7);  // configs/ablation (5) and the scale ladder's rungs (2)
}

// `roformer sweep --set`: after the file's own set (it wins over the file), before each
// variant's (the variant still wins); a typo names the sweep file and the variant.
TEST(Config, SweepSetAppliesToEveryPointBetweenTheFileAndTheVariant) {
  const std::string file = roformer::testing::source_dir() + "/configs/ablation/quickstart.yaml";
  const sweep::SweepSpec plain = sweep::load_sweep(file);
  const sweep::SweepSpec set = sweep::load_sweep(file, {"train.steps=7", "model.position.kind=alibi"});
  for (const auto& v : set.variants) {
    const Config c = sweep::point_config(set, v, 1234).config;
    const Config p = sweep::point_config(plain, v, 1234).config;
    EXPECT_EQ(c.train.steps, 7) << v.name;
    EXPECT_NE(p.train.steps, 7) << v.name;
    EXPECT_EQ(c.model.position.kind, p.model.position.kind) << v.name;  // every variant sets its own kind
  }
  const std::string error = roformer::testing::user_error([&] { sweep::load_sweep(file, {"train.stepz=3"}); });
  EXPECT_NE(error.find("quickstart.yaml, variant '"), std::string::npos) << error;
  EXPECT_NE(error.find("train.stepz"), std::string::npos) << error;
}

// The evaluation keys the sweep file's eval block sets are replaced by --set too, so a quick
// look (--set eval.max_tokens=512) is not silently overridden by the file.
TEST(Config, SweepSetReplacesTheFilesEvalEntries) {
  const std::string file = roformer::testing::source_dir() + "/configs/ablation/reproduction.yaml";
  const sweep::SweepSpec plain = sweep::load_sweep(file);
  EXPECT_EQ(plain.max_tokens, 16384);
  EXPECT_EQ(plain.protocols, (std::vector<std::string>{"chunks", "sliding"}));
  const sweep::SweepSpec set = sweep::load_sweep(
      file, {"eval.max_tokens=512", "eval.lengths=[128,256]", "eval.protocol=sliding", "eval.split=valid"});
  EXPECT_EQ(set.max_tokens, 512);
  EXPECT_EQ(set.lengths, (std::vector<int64_t>{128, 256}));
  EXPECT_EQ(set.protocols, (std::vector<std::string>{"sliding"}));
  EXPECT_EQ(set.split, "valid");
  EXPECT_EQ(plain.split, "test");
  const sweep::SweepSpec other = sweep::load_sweep(file, {"train.steps=3"});  // other keys leave the block
  EXPECT_EQ(other.max_tokens, 16384);
  EXPECT_EQ(other.lengths, plain.lengths);
}

// A config's eval block pasted into a sweep file (eval.protocol, one name) is read as the one
// protocol; both spellings at once, or a list under the singular, are refused with the fix.
TEST(Config, SweepFilesTakeAConfigsEvalProtocolToo) {
  TempDir dir;
  const std::string base = roformer::testing::source_dir() + "/configs/quickstart/rope.yaml";
  auto sweep_with = [&](const std::string& eval) {
    write_file(dir.file("s.yaml"), "name: s\nconfig: " + base + "\nvariants:\n  - {name: a, set: []}\neval:\n" + eval);
    return dir.file("s.yaml");
  };
  EXPECT_EQ(sweep::load_sweep(sweep_with("  protocol: sliding\n")).protocols, (std::vector<std::string>{"sliding"}));
  const std::string both = roformer::testing::user_error(
      [&] { sweep::load_sweep(sweep_with("  protocol: sliding\n  protocols: [chunks]\n")); });
  EXPECT_NE(both.find("eval.protocol and eval.protocols are both set"), std::string::npos) << both;
  const std::string listed =
      roformer::testing::user_error([&] { sweep::load_sweep(sweep_with("  protocol: [chunks, sliding]\n")); });
  EXPECT_NE(listed.find("use eval.protocols"), std::string::npos) << listed;
}

// The position-family table: one row per kind, in order; each family's settings are its own;
// the validator's family lists come from the traits.
TEST(PositionFamilies, OneRowPerKindInEnumOrder) {
  const auto& rows = position_families();
  ASSERT_EQ(rows.size(), position_kind_names().names().size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(rows[i].kind), i);
    EXPECT_EQ(&position_family(rows[i].kind), &rows[i]);
    EXPECT_EQ(rows[i].traits.explicit_positions, rows[i].no_random_positions.empty())
        << position_kind_names().name(rows[i].kind) << ": a family randomized positions cannot reach says why";
  }
}

TEST(PositionFamilies, SettingsBelongToTheirFamilies) {
  EXPECT_TRUE(belongs_to_unused_family("model.position.rope.base", PositionKind::alibi));
  EXPECT_FALSE(belongs_to_unused_family("model.position.rope.base", PositionKind::rope));
  EXPECT_FALSE(belongs_to_unused_family("model.position.rope.base", PositionKind::xpos));  // xPos is RoPE + decay
  EXPECT_TRUE(belongs_to_unused_family("model.position.xpos.scale_base", PositionKind::rope));
  EXPECT_FALSE(belongs_to_unused_family("model.position.fire.mlp_width", PositionKind::fire));
  EXPECT_TRUE(belongs_to_unused_family("model.position.fire.mlp_width", PositionKind::kerple));
  EXPECT_FALSE(belongs_to_unused_family("model.position.max_positions", PositionKind::learned));
  EXPECT_TRUE(belongs_to_unused_family("model.position.max_positions", PositionKind::rope));
  EXPECT_FALSE(belongs_to_unused_family("model.hidden_size", PositionKind::alibi));  // nobody's own
  EXPECT_FALSE(belongs_to_unused_family("model.position.kind", PositionKind::alibi));
}

TEST(PositionFamilies, TraitsNameTheFamiliesTheValidatorOffers) {
  EXPECT_EQ(family_names([](const PositionTraits& t) { return t.linear_attention; }),
            "rope, sinusoidal, learned or none");
  EXPECT_EQ(family_names([](const PositionTraits& t) { return t.explicit_positions; }),
            "rope, sinusoidal, learned, shaw, transformer_xl, deberta, xpos or fire");
  EXPECT_EQ(family_names([](const PositionTraits& t) { return t.rotary; }), "rope or xpos");
  expect_contains(load_error("model:\n  attention: linear\n  position:\n    kind: alibi\n"),
                  "use rope, sinusoidal, learned or none");
  expect_contains(load_error("model:\n  objective: mlm\n  position:\n    kind: cope\n"), "use objective causal_lm");
  ModelConfig learned;
  learned.position.kind = PositionKind::learned;
  learned.position.max_positions = 300;
  EXPECT_EQ(position_length_limit(learned), 300);
  learned.position.kind = PositionKind::rope;
  EXPECT_EQ(position_length_limit(learned), 0);
}

}  // namespace config_test
