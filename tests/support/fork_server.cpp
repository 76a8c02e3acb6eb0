// roformer-fork-server SOCKET ARGV0: the tests' way to start the CLI without paying LibTorch's
// start (about 0.6 s of operator registration per process, 0.8 s under ASan, where a bad-input
// case needs a few milliseconds). `roformer-fork-server --around ARGV0 -- COMMAND...` serves on a
// private socket for as long as COMMAND (a test that runs the CLI many times, given the client's
// path) runs, and exits as it did. It links the roformer binary's own objects (run_cli) and
// lives beside it (so /proc/self/exe finds its siblings), loads once, then for each connection of
// roformer-fork-client forks the process that runs the command: it takes the client's
// descriptors, directory, umask, limits and environment, runs run_cli with argv[0] = ARGV0 (the
// roformer binary's path, as its messages name it) and exits with its code. The server sends the
// wait status back, or kills the command when the client goes away first (a deadline). It forks
// from its one thread (it refuses to start with more), so children start as a fresh process would.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/run_cli.h"
#include "fork_protocol.h"
#include "roformer/common/log.h"

namespace {

using namespace roformer::fork_protocol;

int thread_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

struct Request {
  int fds[3] = {-1, -1, -1};
  std::vector<std::string> fields;  // cwd, umask, limits, argc, arguments..., environment...
};

bool read_request(int c, Request& r) {
  uint64_t length = 0;
  if (!receive_fds(c, r.fds, 3, &length, sizeof length) || length > (64u << 20)) return false;
  std::string payload(length, '\0');
  if (!read_all(c, payload.data(), length)) return false;
  for (size_t p = 0; p < payload.size();) {
    const size_t end = payload.find('\0', p);
    if (end == std::string::npos) return false;  // every field ends in a NUL
    r.fields.push_back(payload.substr(p, end - p));
    p = end + 1;
  }
  return r.fields.size() >= 4 && r.fds[0] >= 0 && r.fds[1] >= 0 && r.fds[2] >= 0;
}

void apply_limits(const std::string& field) {
  for (size_t p = 0; p < field.size();) {
    const size_t end = field.find(',', p);
    unsigned long long resource = 0, cur = 0, max = 0;
    if (std::sscanf(field.c_str() + p, "%llu:%llu:%llu", &resource, &cur, &max) == 3) {
      const rlimit l{static_cast<rlim_t>(cur), static_cast<rlim_t>(max)};
      ::setrlimit(static_cast<__rlimit_resource_t>(resource), &l);
    }
    p = end == std::string::npos ? field.size() : end + 1;
  }
}

// In the forked process: become the command the client asked for, and run it.
[[noreturn]] void run_command(Request& r, const char* argv0) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::setpgid(0, 0);
  for (int i = 0; i < 3; ++i) ::dup2(r.fds[i], i);  // dup2 clears close-on-exec on 0-2
  for (int fd : r.fds)
    if (fd > 2) ::close(fd);
  if (::chdir(r.fields[0].c_str()) != 0) {
    std::perror("roformer-fork-server: chdir");
    std::_Exit(1);
  }
  ::umask(static_cast<mode_t>(std::stoul(r.fields[1])));
  apply_limits(r.fields[2]);
  const size_t argc = std::stoul(r.fields[3]);
  std::vector<char*> argv{const_cast<char*>(argv0)};
  for (size_t i = 0; i < argc; ++i) argv.push_back(r.fields[4 + i].data());
  argv.push_back(nullptr);
  ::clearenv();
  for (size_t i = 4 + argc; i < r.fields.size(); ++i) ::putenv(r.fields[i].data());
  for (int sig : {SIGCHLD, SIGPIPE, SIGINT, SIGTERM}) ::signal(sig, SIG_DFL);
  const int code = roformer::cli::run_cli(static_cast<int>(argc + 1), argv.data());
  // What the command wrote is flushed; the static destructors are not run: LibTorch's took
  // 0.16 s of copy-on-write faults per command here, and the binary's own exit runs them in
  // every other test that starts it.
  roformer::log::close_file();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

// A command in flight: the client's connection, the forked process and its pidfd.
struct Running {
  int connection;
  pid_t pid;
  int pidfd;
};

// Reads a connection's request and forks the process that runs it; false when the request is bad.
bool start(int c, const char* argv0, Running& out) {
  Request r;
  if (!read_request(c, r)) return false;
  const pid_t child = ::fork();
  if (child == 0) run_command(r, argv0);
  for (int fd : r.fds) ::close(fd);
  if (child < 0) return false;
  out = {c, child, static_cast<int>(::syscall(SYS_pidfd_open, child, 0))};
  if (out.pidfd >= 0) return true;
  ::kill(child, SIGKILL);  // unwatchable: nobody would report it
  ::waitpid(child, nullptr, 0);
  return false;
}

// The command ended: its wait status goes to the client. The client hung up first (a deadline):
// the command and whatever it started are killed, since nothing may outlive the client.
void finish(const Running& r, bool client_gone) {
  int status = 0;
  if (client_gone) {
    ::kill(-r.pid, SIGKILL);
    ::kill(r.pid, SIGKILL);
  }
  ::waitpid(r.pid, &status, 0);
  if (!client_gone) write_all(r.connection, &status, sizeof status);
  ::close(r.pidfd);
  ::close(r.connection);
}

// The command --around serves (pid 0: none) and its socket's folder.
struct Around {
  pid_t pid = 0;
  int pidfd = -1;
  std::string folder;
};

// --around's command ended: the server ends with its exit code (128 + a signal).
[[noreturn]] void end_with(const Around& around) {
  int status = 0;
  ::waitpid(around.pid, &status, 0);
  std::filesystem::remove_all(around.folder);
  std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// One thread, one fork per command: accept, start, and report as the processes end.
[[noreturn]] void serve(int listener, const char* argv0, const Around& around) {
  std::vector<Running> running;
  for (;;) {
    std::vector<pollfd> watch{{listener, POLLIN, 0}, {around.pidfd, POLLIN, 0}};
    for (const Running& r : running) {
      watch.push_back({r.pidfd, POLLIN, 0});
      watch.push_back({r.connection, POLLIN, 0});
    }
    if (::poll(watch.data(), watch.size(), -1) < 0) continue;
    if (watch[1].revents != 0) end_with(around);
    std::vector<Running> still;
    for (size_t i = 0; i < running.size(); ++i) {
      const bool ended = watch[2 + 2 * i].revents != 0, gone = watch[3 + 2 * i].revents != 0;
      if (ended || gone) {
        finish(running[i], !ended);
      } else {
        still.push_back(running[i]);
      }
    }
    running.swap(still);
    if (watch[0].revents & POLLIN) {
      const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      Running r{};
      if (c >= 0 && start(c, argv0, r)) {
        running.push_back(r);
      } else if (c >= 0) {
        ::close(c);
      }
    }
  }
}

int listen_on(const std::string& path) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  const mode_t mask = ::umask(077);
  const bool ok = s >= 0 && ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(s, 64) == 0;
  ::umask(mask);
  if (!ok) {
    std::perror(("roformer-fork-server: cannot listen on " + path).c_str());
    std::exit(1);
  }
  return s;
}

// --around: a private socket, the command started with it in its environment, then served.
[[noreturn]] void serve_around(const char* argv0, char** command) {
  char folder[] = "/tmp/roformer-fork.XXXXXX";
  if (!::mkdtemp(folder)) {
    std::perror("roformer-fork-server: mkdtemp");
    std::exit(1);
  }
  Around around;
  around.folder = folder;
  const int listener = listen_on(around.folder + "/socket");
  ::setenv(kSocketVariable, (around.folder + "/socket").c_str(), 1);
  around.pid = ::fork();
  if (around.pid == 0) {
    ::execvp(command[0], command);
    std::perror(("roformer-fork-server: cannot run " + std::string(command[0])).c_str());
    std::_Exit(127);
  }
  around.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, around.pid, 0));
  if (around.pid < 0 || around.pidfd < 0) {
    std::perror("roformer-fork-server: cannot start the command");
    std::exit(1);
  }
  serve(listener, argv0, around);
}

}  // namespace

int main(int argc, char** argv) {
  const bool around = argc >= 5 && std::string(argv[1]) == "--around" && std::string(argv[3]) == "--";
  if (argc != 3 && !around) {
    std::fprintf(stderr, "usage: roformer-fork-server SOCKET ARGV0 | --around ARGV0 -- COMMAND...\n");
    return 2;
  }
  if (thread_count() != 1) {
    std::fprintf(stderr, "roformer-fork-server: %d threads at start; forking needs one\n", thread_count());
    return 1;
  }
  if (around) serve_around(argv[2], argv + 4);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the suite that started it may die without stopping it
  serve(listen_on(argv[1]), argv[2], Around{});
}
