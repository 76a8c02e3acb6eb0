// Line I/O with a child process over a socket pair (see line_child.h).
#include "roformer/common/line_child.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace roformer {

bool read_fd_line(int fd, std::string& buffer, std::string& line) {
  for (;;) {
    const size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
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

LineChild::LineChild(const std::vector<std::string>& argv) {
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
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

bool LineChild::read_line(std::string& line) {
  return read_fd_line(fd_, buffer_, line);
}

bool LineChild::write_line(const std::string& line) {
  return write_fd_all(fd_, line + "\n", true);
}

}  // namespace roformer
