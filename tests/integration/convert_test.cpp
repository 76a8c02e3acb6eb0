// `roformer convert` and `roformer forward` refusals, as processes: every unsupported or
// malformed input exits 2 with a message naming the problem and the fix, and leaves no
// output behind. (Numerical parity with transformers is tests/python/test_hf_parity.py.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "roformer/common/files.h"
#include "roformer/config/config_loader.h"
#include "roformer/io/safetensors.h"
#include "roformer/model/encoder.h"
#include "test_support.h"

namespace convert_test {

using namespace roformer;
using namespace roformer::testing;

namespace {

CommandResult cli(const std::string& args) {
  return run_command("'" + roformer_binary() + "' " + args);
}

// A Hugging Face-looking directory with the given config.json and an empty weights file.
std::string hf_dir(const TempDir& dir, const std::string& name, const std::string& config_json,
                   bool safetensors = true) {
  const std::string d = dir.file(name);
  make_directories(d);
  write_file(d + "/config.json", config_json);
  if (safetensors) io::write_safetensors(d + "/model.safetensors", {});
  return d;
}

const char* kRoformerConfig =
    R"({"model_type": "roformer", "architectures": ["RoFormerForMaskedLM"], "vocab_size": 50, "hidden_size": 16,
        "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu"})";

// A native checkpoint directory for `model` settings given as --set style edits of the defaults.
std::string native_checkpoint(const TempDir& dir, const std::string& name, const std::vector<std::string>& sets) {
  config::LoadedConfig loaded;
  config::apply_overrides(loaded, sets);
  config::resolve(loaded.config);
  const std::string d = dir.file(name);
  make_directories(d);
  model::EncoderModel m = model::build_model(loaded.config.model, 1);
  std::vector<std::pair<std::string, torch::Tensor>> w;
  for (const auto& p : m->named_parameters()) w.emplace_back(p.key(), p.value());
  io::write_safetensors(d + "/model.safetensors", w);
  write_file(d + "/config.yaml", config::dump_yaml(loaded.config));
  write_file(d + "/meta.json", R"({"step": 0, "complete": true})");
  return d;
}

void expect_refused(const CommandResult& r, const std::string& fragment, const std::string& out = "") {
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << "expected '" << fragment << "' in: " << r.output;
  if (!out.empty()) {
    EXPECT_FALSE(path_exists(out)) << out << " was created";
  }
}

}  // namespace

TEST(Convert, HuggingFaceInputsItCannotUseAreRefusedWithTheReason) {
  TempDir dir;
  const std::string out = dir.file("out");
  expect_refused(cli("convert hf-to-native '" + dir.file("nope") + "' '" + out + "'"), "does not exist", out);
  const std::string no_config = dir.file("no_config");
  make_directories(no_config);
  expect_refused(cli("convert hf-to-native '" + no_config + "' '" + out + "'"), "has no config.json", out);
  const std::string bin_only = hf_dir(dir, "bin_only", kRoformerConfig, false);
  write_file(bin_only + "/pytorch_model.bin", "not really");
  expect_refused(cli("convert hf-to-native '" + bin_only + "' '" + out + "'"),
                 "has pytorch_model.bin but no model.safetensors; convert it once with: .venv/bin/python -c", out);
  expect_refused(cli("convert hf-to-native '" + hf_dir(dir, "bert", R"({"model_type": "bert"})") + "' '" + out + "'"),
                 "model_type is 'bert', not 'roformer'", out);
  expect_refused(
      cli("convert hf-to-native '" +
          hf_dir(dir, "cls", R"({"model_type": "roformer", "architectures": ["RoFormerForSequenceClassification"]})") +
          "' '" + out + "'"),
      "architecture 'RoFormerForSequenceClassification' is not supported", out);
  std::string mish = kRoformerConfig;
  mish.replace(mish.find("\"gelu\""), 6, "\"mish\"");
  expect_refused(cli("convert hf-to-native '" + hf_dir(dir, "mish", mish) + "' '" + out + "'"),
                 "hidden_act 'mish' is not supported", out);
  expect_refused(cli("convert hf-to-native '" + hf_dir(dir, "bad_json", "{\"model_type\": ") + "' '" + out + "'"),
                 "config.json is not valid JSON", out);
  // The config is fine but the weights file holds nothing: the first missing tensor is named.
  expect_refused(cli("convert hf-to-native '" + hf_dir(dir, "empty", kRoformerConfig) + "' '" + out + "'"),
                 "has no tensor for our parameter 'embeddings.word_embeddings.weight'", out);
}

TEST(Convert, NativeFamiliesHuggingFaceCannotRepresentAreRefused) {
  TempDir dir;
  const std::string out = dir.file("hf");
  expect_refused(cli("convert native-to-hf '" + native_checkpoint(dir, "alibi", {"model.position.kind=alibi"}) + "' '" +
                     out + "'"),
                 "position encoding is 'alibi' (RoFormer has RoPE only)", out);
  expect_refused(cli("convert native-to-hf '" + native_checkpoint(dir, "half", {"model.position.rope.pairing=half"}) +
                     "' '" + out + "'"),
                 "this checkpoint sets model.position.rope.pairing half (RoFormer: interleaved)", out);
  expect_refused(cli("convert native-to-hf '" + native_checkpoint(dir, "pre", {"model.norm=pre"}) + "' '" + out + "'"),
                 "pre-LayerNorm", out);
  expect_refused(
      cli("convert native-to-hf '" +
          native_checkpoint(dir, "rms", {"model.norm_kind=rms_norm", "model.feed_forward=glu"}) + "' '" + out + "'"),
      "RMSNorm (RoFormer normalises with LayerNorm)", out);
  expect_refused(cli("convert native-to-hf '" + dir.file("missing") + "' '" + out + "'"), "not a checkpoint directory",
                 out);
  // A good checkpoint converts, but never into a non-empty directory.
  const std::string good = native_checkpoint(dir, "rope", {});
  make_directories(out);
  write_file(out + "/keep.txt", "user data");
  expect_refused(cli("convert native-to-hf '" + good + "' '" + out + "'"), "exists and is not an empty directory");
  EXPECT_EQ(read_file(out + "/keep.txt"), "user data");
  const auto ok = cli("convert native-to-hf '" + good + "' '" + dir.file("hf2") + "'");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(path_exists(dir.file("hf2") + "/config.json"));
  EXPECT_TRUE(path_exists(dir.file("hf2") + "/model.safetensors"));
}

TEST(Forward, WritesLogitsAndHiddenStatesAndRefusesBadInputs) {
  TempDir dir;
  const std::string ckpt = native_checkpoint(dir, "rope", {"model.type_vocab_size=0"});
  write_file(dir.file("ids.json"), "[[1, 2, 3, 4], [5, 6, 7, 8]]");
  const std::string out = dir.file("out.safetensors");
  const auto ok = cli("forward '" + ckpt + "' --input-ids '" + dir.file("ids.json") + "' --output '" + out + "'");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  const io::SafetensorsFile f = io::read_safetensors(out);
  ASSERT_NE(f.find("logits"), nullptr);
  EXPECT_EQ(f.find("logits")->sizes(), (std::vector<int64_t>{2, 4, 264}));
  EXPECT_EQ(f.find("last_hidden_state")->sizes(), (std::vector<int64_t>{2, 4, 128}));
  const std::string out2 = dir.file("out2.safetensors");
  auto bad = [&](const std::string& ids_json, const std::string& extra, const std::string& fragment) {
    write_file(dir.file("bad.json"), ids_json);
    expect_refused(
        cli("forward '" + ckpt + "' --input-ids '" + dir.file("bad.json") + "' --output '" + out2 + "' " + extra),
        fragment, out2);
  };
  bad("[[1, 2], [3]]", "", "row 1 does not have 2 entries");
  bad("[[1, 999]]", "", "entry [0][1] = 999 is not an integer in [0, 263]");
  bad("[[1, 2.5]]", "", "is not an integer");
  bad("{\"ids\": 1}", "", "must hold a non-empty list");
  bad("[[1, 2", "", "is not valid JSON");
  write_file(dir.file("mask.json"), "[[1, 1, 0]]");
  bad("[[1, 2]]", "--attention-mask '" + dir.file("mask.json") + "'", "--attention-mask has shape [1, 3]");
  bad("[[1, 2]]", "--token-type-ids '" + dir.file("ids.json") + "'", "the model has no token types");
}

}  // namespace convert_test
