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
//
// `{roformer} command ...` runs the CLI through a fork server started once per test process
// (tests/support/fork_server.cpp: the binary's own objects, LibTorch loaded once, one fork per
// command), since LibTorch's start was most of a case's time; {roformer} anywhere else (a
// script's ROFORMER_BIN, `dirname {roformer}`) is the binary's path. ROFORMER_BAD_INPUTS_EXEC=1
// starts the binary for every command instead.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "fork_protocol.h"
#include "roformer/common/files.h"
#include "test_support.h"

extern char** environ;

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

// The fork server of this test process, started on first use and stopped at exit.
class ForkServer {
 public:
  ForkServer() {
    char dir[] = "/tmp/roformer-fork.XXXXXX";
    if (!::mkdtemp(dir)) throw std::runtime_error("mkdtemp failed for the fork server's socket");
    dir_ = dir;
    socket_ = dir_ + "/socket";
    const std::string server =
        roformer_binary().substr(0, roformer_binary().find_last_of('/')) + "/roformer-fork-server";
    const std::string argv0 = roformer_binary();
    char* argv[] = {const_cast<char*>(server.c_str()), socket_.data(), const_cast<char*>(argv0.c_str()), nullptr};
    if (::posix_spawn(&pid_, server.c_str(), nullptr, nullptr, argv, environ) != 0)
      throw std::runtime_error("cannot start " + server);
    for (int waited_ms = 0; !reachable(); waited_ms += 20) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_ || waited_ms > 120000)
        throw std::runtime_error(server + " did not start listening on " + socket_);
      ::usleep(20000);
    }
    ::setenv(roformer::fork_protocol::kSocketVariable, socket_.c_str(), 1);
  }
  ~ForkServer() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }

 private:
  bool reachable() const {
    const int s = roformer::fork_protocol::connect_to(socket_);
    if (s >= 0) ::close(s);
    return s >= 0;
  }
  std::string dir_, socket_;
  pid_t pid_ = -1;
};

// What `{roformer} command` becomes: the fork client (its server started once), or the binary.
std::string command_runner(bool through_server) {
  if (!through_server) return "'" + roformer_binary() + "'";
  static ForkServer server;
  return "'" + fork_client_binary() + "'";
}

bool cases_use_the_fork_server() {
  const char* exec = std::getenv("ROFORMER_BAD_INPUTS_EXEC");
  return !(exec && std::string(exec) == "1");
}

// `{roformer} word` (a command) runs through `runner`; any other {roformer} is the binary's path.
std::string expand_roformer(std::string s, const std::string& runner) {
  const std::string key = "{roformer} ";
  for (size_t p = s.find(key); p != std::string::npos; p = s.find(key, p)) {
    if (p + key.size() < s.size() && std::islower(static_cast<unsigned char>(s[p + key.size()]))) {
      s.replace(p, key.size() - 1, runner);
      p += runner.size();
    } else {
      p += key.size();
    }
  }
  return replace_all(s, "{roformer}", "'" + roformer_binary() + "'");
}

class BadInput : public ::testing::TestWithParam<std::string> {};

constexpr int kDeadlineSeconds = 120;

}  // namespace

// A case's own copy of the fixture in `tmp`, its configs naming `tmp`.
bool copy_fixture(const std::string& tmp) {
  return run_command("cp -r '" + fixture().root + "/.' '" + tmp + "/' && sed -i 's|" + fixture().origin + "|" + tmp +
                     "|g' '" + tmp + "/tiny.yaml' '" + tmp + "/run/config.yaml' '" + tmp +
                     "/run/checkpoints/step_10/config.yaml'")
             .exit_code == 0;
}

TEST_P(BadInput, ExitsWithItsMessageAndChangesNothing) {
  const Case c = parse_case(GetParam());
  TempDir dir;
  const std::string tmp = dir.path();
  ASSERT_TRUE(copy_fixture(tmp));
  const std::string runner = command_runner(cases_use_the_fork_server());
  auto expand = [&](std::string s) {
    s = expand_roformer(s, runner);
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

// The same commands through the fork server and by starting the binary, each in its own copy of
// the fixture: the same exit code and output (digits masked: timings, and the folder's name).
// Between them they exercise what the client carries: arguments with spaces, the environment,
// the working directory, a file-size limit, standard output and error, a sibling executable
// (prepare-data's tokenizer process), a command that succeeds (an evaluation's threads).
TEST(BadInputSuite, TheForkServerRunsACommandAsTheBinaryDoes) {
  const std::vector<std::string> commands = {
      "{roformer} frobnicate",
      "{roformer} eval --help",
      "cd run && {roformer} eval checkpoints/step_10 --lengths 32 --out 'an eval' 2>&1 | grep -v tok/s",
      "RANK=x WORLD_SIZE=2 {roformer} train {tmp}/tiny.yaml --run-dir new",
      "ulimit -f 1 && {roformer} prepare-data --input {source}/README.md --tokenizer byte --out new > log 2>&1;"
      " echo \"exit $?\"; grep -v tokenizing log",
  };
  auto masked = [](std::string s, const std::string& tmp) {
    s = replace_all(s, tmp, "{tmp}");
    std::string out;
    for (char ch : s)
      if (!std::isdigit(static_cast<unsigned char>(ch)) || out.empty() || out.back() != '#')
        out += std::isdigit(static_cast<unsigned char>(ch)) ? '#' : ch;
    return out;
  };
  for (const std::string& command : commands) {
    std::string seen[2];
    int codes[2] = {0, 0};
    for (int via_server = 0; via_server < 2; ++via_server) {
      TempDir dir;
      ASSERT_TRUE(copy_fixture(dir.path()));
      std::string expanded = expand_roformer(command, command_runner(via_server == 1));
      expanded = replace_all(replace_all(expanded, "{tmp}", dir.path()), "{source}", source_dir());
      const auto r = run_command("cd '" + dir.path() + "' && " + expanded, kDeadlineSeconds);
      seen[via_server] = masked(r.output, dir.path());
      codes[via_server] = r.exit_code;
    }
    EXPECT_EQ(codes[0], codes[1]) << command << "\nbinary:\n" << seen[0] << "\nfork server:\n" << seen[1];
    EXPECT_EQ(seen[0], seen[1]) << command;
    EXPECT_FALSE(seen[0].empty()) << command;
  }
}

TEST(BadInputSuite, EveryCaseExpectsAUserErrorExit) {
  for (const std::string& f : case_files()) EXPECT_EQ(parse_case(f).exit, 2) << f;
}

}  // namespace bad_inputs_test
