// fork + execvp, then waitpid polled every 20 ms until the child ends or its time is up.
#include "roformer/common/run_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace roformer {

ProcessOutcome run_process(const std::vector<std::string>& argv, double timeout_seconds) {
  ProcessOutcome out;
  if (argv.empty()) return out;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return out;
  if (pid == 0) {
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return out;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      out.started = true;
      out.timed_out = true;
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  out.started = out.exit_code != 127;
  return out;
}

}  // namespace roformer
