// The bad-input suite: every file in tests/bad_inputs/*.case is one case, run as a process
// against a fresh copy of a fixture (a prepared dataset, a tiny config, a trained run with a
// checkpoint; built once per build and shared by the cases' processes). Each case asserts the exit code, a fragment of
// the message, and that nothing in the fixture was created or changed by the failing command.
//
// Case format (one key per line; `setup:` may repeat and runs before the snapshot):
//   # what the case checks
//   setup: shell command run in the case directory
//   run: shell command
//   exit: 2
//   expect: fragment of the output
// Placeholders: {roformer} {launch} {source} {tmp} {dataset} {config} {run} {checkpoint}.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "roformer/common/files.h"
#include "test_support.h"

namespace bad_inputs_test {

using namespace roformer::testing;

namespace {

struct Case {
  std::string name, setup, run, expect;
  int exit = 2;
};

Case parse_case(const std::string& path) {
  Case c;
  c.name = path.substr(path.find_last_of('/') + 1);
  c.name = c.name.substr(0, c.name.find('.'));
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) throw std::runtime_error(path + ": bad line '" + line + "'");
    const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key == "setup") {
      c.setup += (c.setup.empty() ? "" : " && ") + value;
    } else if (key == "run") {
      c.run = value;
    } else if (key == "exit") {
      c.exit = std::stoi(value);
    } else if (key == "expect") {
      c.expect = value;
    } else {
      throw std::runtime_error(path + ": unknown key '" + key + "'");
    }
  }
  if (c.run.empty() || c.expect.empty()) throw std::runtime_error(path + ": needs run: and expect:");
  return c;
}

std::vector<std::string> case_files() {
  std::vector<std::string> out;
  const std::string dir = source_dir() + "/tests/bad_inputs";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".case") out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// path -> size and content hash, for every file and directory under root.
std::map<std::string, std::string> snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  std::function<void(const std::string&)> walk = [&](const std::string& rel) {
    const std::string dir = root + rel;
    DIR* d = opendir(dir.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      const std::string r = rel + "/" + n;
      struct stat st {};
      if (::lstat((root + r).c_str(), &st) != 0) continue;
      if (S_ISLNK(st.st_mode)) {  // never follow: a case may plant a link to /dev/zero
        char target[4096];
        const ssize_t len = ::readlink((root + r).c_str(), target, sizeof target);
        out[r] = "link:" + std::string(target, len > 0 ? static_cast<size_t>(len) : 0);
      } else if (S_ISDIR(st.st_mode)) {
        out[r] = "dir";
        walk(r);
      } else if (!S_ISREG(st.st_mode)) {
        out[r] = "special";
      } else {
        std::ifstream f(root + r, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        const std::string content = ss.str();
        out[r] = std::to_string(content.size()) + ":" + std::to_string(std::hash<std::string>()(content));
      }
    }
    closedir(d);
  };
  walk("");
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

// What the fixture is built from: the roformer binary and this test binary (their paths,
// sizes and modification times), so a rebuild of either gets a fresh fixture.
std::string fixture_key() {
  std::string identity;
  for (const std::string& path : {roformer_binary(), std::string("/proc/self/exe")}) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) throw std::runtime_error("cannot stat " + path);
    identity += path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
                std::to_string(st.st_mtim.tv_nsec) + ";";
  }
  return std::to_string(std::hash<std::string>()(identity));
}

struct Fixture {
  std::string root;    // where it lives: cases copy it from here
  std::string origin;  // the directory it was built in, which its configs name
};

// Dataset, tiny config (at {tmp}/tiny.yaml, data at {tmp}/ds) and a 10-step run, built once
// per fixture_key() and shared by every case: ctest runs each case in a process of its own,
// and building it (prepare-data and a training run) cost more than most cases, 3x so under
// ASan. It is built in a temporary directory and renamed into place, so a case never sees half
// of one; when two cases race, the second rename fails and its copy is removed.
const Fixture& fixture() {
  static const Fixture f = [] {
    const char* base = std::getenv("TMPDIR");
    const std::string cache = std::string(base ? base : "/tmp") + "/roformer_bad_input_fixture." + fixture_key();
    if (!roformer::is_directory(cache)) {
      TempDir dir;
      const std::string ds = make_word_dataset(dir, 20000);
      const std::string cfg = write_tiny_config(dir, ds, "causal_lm");
      const auto r = run_command("'" + roformer_binary() + "' train '" + cfg + "' --run-dir '" + dir.file("run") +
                                 "' --set train.steps=10 --set train.checkpoint_every=10 --set train.eval_every=10");
      if (r.exit_code != 0) throw std::runtime_error("fixture training failed:\n" + r.output);
      run_command("rm -f '" + dir.file("run") + "/train.log'");
      write_file(dir.file("origin"), dir.path());
      std::error_code ec;
      std::filesystem::rename(dir.path(), cache, ec);  // fails only when another case won the race
    }
    return Fixture{cache, read_file(cache + "/origin")};
  }();
  return f;
}

class BadInput : public ::testing::TestWithParam<std::string> {};

constexpr int kDeadlineSeconds = 120;

}  // namespace

TEST_P(BadInput, ExitsWithItsMessageAndChangesNothing) {
  const Case c = parse_case(GetParam());
  TempDir dir;
  const std::string tmp = dir.path();
  ASSERT_EQ(run_command("cp -r '" + fixture().root + "/.' '" + tmp + "/' && sed -i 's|" + fixture().origin + "|" + tmp +
                        "|g' '" + tmp + "/tiny.yaml' '" + tmp + "/run/config.yaml' '" + tmp +
                        "/run/checkpoints/step_10/config.yaml'")
                .exit_code,
            0);
  auto expand = [&](std::string s) {
    s = replace_all(s, "{roformer}", "'" + roformer_binary() + "'");
    s = replace_all(s, "{launch}", "'" + source_dir() + "/scripts/launch.sh'");
    s = replace_all(s, "{source}", source_dir());
    s = replace_all(s, "{dataset}", tmp + "/ds");
    s = replace_all(s, "{config}", tmp + "/tiny.yaml");
    s = replace_all(s, "{checkpoint}", tmp + "/run/checkpoints/step_10");
    s = replace_all(s, "{run}", tmp + "/run");
    return replace_all(s, "{tmp}", tmp);
  };
  if (!c.setup.empty()) {
    const auto s = run_command("cd '" + tmp + "' && " + expand(c.setup));
    ASSERT_EQ(s.exit_code, 0) << "setup failed: " << s.output;
  }
  const auto before = snapshot(tmp);
  // Under a deadline: a hang is a failure of its own (timeout's 124), not a stalled suite.
  const auto r = run_command("cd '" + tmp + "' && " + expand(c.run), kDeadlineSeconds);
  EXPECT_EQ(r.exit_code, c.exit) << c.name << ": " << r.output;
  // Whatever a case expects, a user's mistake is never our bug (1), a crash (a signal: 128+)
  // or a hang (124).
  EXPECT_NE(r.exit_code, 1) << c.name << " exited 1 (internal error) for a user error:\n" << r.output;
  EXPECT_LT(r.exit_code, 124) << c.name << " crashed or ran past " << kDeadlineSeconds << " s:\n" << r.output;
  EXPECT_NE(r.output.find(expand(c.expect)), std::string::npos)
      << c.name << ": expected '" << expand(c.expect) << "' in:\n"
      << r.output;
  const auto after = snapshot(tmp);
  for (const auto& [path, sig] : after) {
    auto it = before.find(path);
    EXPECT_TRUE(it != before.end()) << c.name << " created " << path;
    if (it != before.end()) {
      EXPECT_EQ(it->second, sig) << c.name << " changed " << path;
    }
  }
  for (const auto& [path, sig] : before) EXPECT_TRUE(after.count(path)) << c.name << " removed " << path;
}

INSTANTIATE_TEST_SUITE_P(Cases, BadInput, ::testing::ValuesIn(case_files()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string n = param.param.substr(param.param.find_last_of('/') + 1);
                           n = n.substr(0, n.find('.'));
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(BadInputSuite, HasAtLeastOneHundredTenCases) {
  EXPECT_GE(case_files().size(), 110u);
}

TEST(BadInputSuite, EveryCaseExpectsAUserErrorExit) {
  for (const std::string& f : case_files()) EXPECT_EQ(parse_case(f).exit, 2) << f;
}

}  // namespace bad_inputs_test
