// Line I/O with a child process over a socket pair, every wait bounded (see line_child.h).
#include "roformer/common/line_child.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

#include "roformer/common/errors.h"
#include "roformer/common/log.h"

namespace roformer {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Waits until `fd` is ready for `events` or the deadline passes; false on the deadline.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r > 0) return true;  // ready, or hung up / an error the read or write then reports
    if (r < 0 && errno != EINTR) return true;
  }
}

}  // namespace

bool read_fd_line(int fd, std::string& buffer, std::string& line) {
  for (;;) {
    const size_t nl = buffer.find('\n');
    if (nl != std::string::npos && nl > kMaxLineBytes) return false;
    if (nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
    if (buffer.size() > kMaxLineBytes) return false;
    char chunk[65536];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

bool write_fd_all(int fd, const std::string& text, bool socket) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = socket ? ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL)
                             : ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

double helper_timeout_seconds() {
  const char* v = std::getenv("ROFORMER_HELPER_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return 120.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (*end != '\0' || !std::isfinite(s) || s <= 0 || s > 1e6)
    throw UserError(std::string("ROFORMER_HELPER_TIMEOUT_S='") + v +
                    "' is not a number of seconds (0 < s <= 1e6); unset it for the default 120");
  return s;
}

LineChild::LineChild(const std::vector<std::string>& argv, std::string name, size_t max_line_bytes)
    : name_(std::move(name)), max_line_bytes_(max_line_bytes), exit_wait_s_(std::min(10.0, helper_timeout_seconds())) {
  if (argv.empty()) throw std::invalid_argument("LineChild: empty argv");
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {  // the child: its stdin and stdout are the socket, stderr stays ours
    ::dup2(sv[1], 0);
    ::dup2(sv[1], 1);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  fd_ = sv[0];
}

LineChild::~LineChild() {
  if (fd_ >= 0) {
    ::shutdown(fd_, SHUT_WR);  // end of input: the child finishes and exits
    ::close(fd_);
  }
  if (pid_ <= 0) return;
  const auto deadline = deadline_after(exit_wait_s_);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) return;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  log::warn(name_, " (pid ", pid_, ") did not exit within ", exit_wait_s_, " s of its input ending; killed it");
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

LineRead LineChild::read_line(std::string& line, double timeout_s) {
  const auto deadline = deadline_after(timeout_s);
  for (;;) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos && nl > max_line_bytes_) return LineRead::too_long;  // arrived whole
    if (nl != std::string::npos) {
      line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return LineRead::line;
    }
    if (buffer_.size() > max_line_bytes_) return LineRead::too_long;
    if (!wait_ready(fd_, POLLIN, deadline)) return LineRead::timed_out;
    char chunk[65536];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return LineRead::closed;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

bool LineChild::write_line(const std::string& line, double timeout_s) {
  const auto deadline = deadline_after(timeout_s);
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    if (!wait_ready(fd_, POLLOUT, deadline)) return false;
    const ssize_t n = ::send(fd_, text.data() + done, text.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void LineChild::kill() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

std::string LineChild::describe(LineRead what, double timeout_s) const {
  const std::string who = name_ + " (pid " + std::to_string(pid_) + ")";
  switch (what) {
    case LineRead::closed:
      return who + " closed its output (it exited; its message, if any, is above)";
    case LineRead::timed_out: {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
      return who + " sent no complete line within " + seconds + " s (ROFORMER_HELPER_TIMEOUT_S sets the wait)";
    }
    case LineRead::too_long:
      return who + " sent a line longer than " +
             (max_line_bytes_ >= (size_t{1} << 20) ? std::to_string(max_line_bytes_ >> 20) + " MiB"
                                                   : std::to_string(max_line_bytes_) + " bytes");
    case LineRead::line:
      break;
  }
  return who;
}

}  // namespace roformer
