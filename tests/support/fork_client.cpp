// roformer-fork-client: stands in for the roformer binary in the bad-input suite. It hands its
// arguments, environment, working directory, umask, limits and standard descriptors to the fork
// server named by $ROFORMER_FORK_SERVER, which runs the command line in a process forked from one
// that has already loaded LibTorch, and then exits as that process did (its code, or its signal).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fork_protocol.h"

extern char** environ;

namespace {

using namespace roformer::fork_protocol;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "roformer-fork-client: %s\n", message.c_str());
  std::exit(1);
}

std::string limits_field() {
  std::string out;
  for (int resource : carried_limits()) {
    rlimit l{};
    if (::getrlimit(resource, &l) != 0) continue;
    out += std::to_string(resource) + ":" + std::to_string(l.rlim_cur) + ":" + std::to_string(l.rlim_max) + ",";
  }
  return out;
}

std::string request(int argc, char** argv) {
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) fail("cannot read the working directory");
  const mode_t mask = ::umask(0);
  ::umask(mask);
  std::string out;
  auto add = [&out](const std::string& s) { out.append(s).push_back('\0'); };
  add(cwd);
  add(std::to_string(mask));
  add(limits_field());
  add(std::to_string(argc - 1));
  for (int i = 1; i < argc; ++i) add(argv[i]);
  for (char** e = environ; *e; ++e) add(*e);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = std::getenv(kSocketVariable);
  if (!path || !*path) fail(std::string(kSocketVariable) + " is not set (the bad-input suite sets it)");
  const int s = connect_to(path);
  if (s < 0) fail(std::string("cannot reach the fork server at ") + path);
  const std::string payload = request(argc, argv);
  const uint64_t length = payload.size();
  const int fds[3] = {0, 1, 2};
  if (!send_fds(s, fds, 3, &length, sizeof length) || !write_all(s, payload.data(), payload.size()))
    fail("cannot send the command to the fork server");
  int status = 0;
  if (!read_all(s, &status, sizeof status)) fail("the fork server closed the connection without an exit status");
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  fail("the fork server sent an unknown status " + std::to_string(status));
}
