// End-to-end tests of the `roformer` binary as a process: exit codes and messages of
// `--help`, `version` and `config check` on good and bad input.
#include <gtest/gtest.h>

#include "test_support.h"

namespace cli_test {

using namespace roformer::testing;

namespace {

CommandResult run_cli(const std::string& args) {
  return run_command("'" + roformer_binary() + "' " + args);
}

}  // namespace

TEST(Cli, HelpListsTheSubcommands) {
  const CommandResult r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("version"), std::string::npos);
  EXPECT_NE(r.output.find("config"), std::string::npos);
}

TEST(Cli, NoSubcommandIsAUserError) {
  const CommandResult r = run_cli("");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST(Cli, UnknownSubcommandIsAUserError) {
  const CommandResult r = run_cli("trian");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST(Cli, VersionReportsBuildFacts) {
  const CommandResult r = run_cli("version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("libtorch          2."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("visible gpus"), std::string::npos);
  EXPECT_NE(r.output.find("intra-op threads"), std::string::npos);
#ifdef ROFORMER_WITH_CUDA
  EXPECT_NE(r.output.find("compiled with CUDA"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("9.0"), std::string::npos) << r.output;
#endif
}

TEST(Cli, ConfigCheckPrintsTheResolvedConfig) {
  const CommandResult r = run_cli("config check '" + source_dir() +
                                  "/configs/quickstart/rope.yaml' --set model.num_layers=3 --set train.lr=0.002");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("num_layers: 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lr: 0.002"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rotary_dim: 32"), std::string::npos) << r.output;  // resolved head_dim
}

TEST(Cli, BadConfigExitsTwoWithLocation) {
  TempDir dir;
  write_file(dir.file("bad.yaml"), "model:\n  hidden_sise: 64\n");
  const CommandResult r = run_cli("config check '" + dir.file("bad.yaml") + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad.yaml:2:3: unknown key 'model.hidden_sise'; did you mean 'model.hidden_size'?"),
            std::string::npos)
      << r.output;
}

TEST(Cli, BadOverrideExitsTwo) {
  const CommandResult r =
      run_cli("config check '" + source_dir() + "/configs/quickstart/rope.yaml' --set model.position.kind=rotary");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--set model.position.kind=rotary"), std::string::npos) << r.output;
}

TEST(Cli, MissingConfigFileExitsTwo) {
  const CommandResult r = run_cli("config check /nonexistent.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
}

TEST(Cli, ConfigSchemaListsKeys) {
  const CommandResult r = run_cli("config schema");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("model.position.kind"), std::string::npos);
}

}  // namespace cli_test
