// What the bad-input suite's fork client and fork server say to each other over a Unix socket.
// The client sends its standard descriptors (SCM_RIGHTS) with an 8-byte payload length, then
// the payload: NUL-terminated strings (working directory, umask, resource limits, argc, the
// arguments after argv[0], then the environment); the server answers with the 4-byte wait status
// of the process that ran the command.
#pragma once

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace roformer::fork_protocol {

constexpr const char* kSocketVariable = "ROFORMER_FORK_SERVER";

// The limits a shell's `ulimit` sets, carried to the process that runs the command.
inline const std::vector<int>& carried_limits() {
  static const std::vector<int> limits = {RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_AS,  RLIMIT_DATA,
                                          RLIMIT_STACK, RLIMIT_CORE,   RLIMIT_CPU, RLIMIT_NPROC};
  return limits;
}

// Calls `io` (::read or ::write) until all n bytes moved; false at an error or the end of file.
template <typename Io, typename Byte>
bool move_all(Io io, int fd, Byte* p, size_t n) {
  while (n > 0) {
    const ssize_t moved = io(fd, p, n);
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) return false;
    p += moved;
    n -= static_cast<size_t>(moved);
  }
  return true;
}

inline bool write_all(int fd, const void* data, size_t n) {
  return move_all(::write, fd, static_cast<const char*>(data), n);
}

inline bool read_all(int fd, void* data, size_t n) {
  return move_all(::read, fd, static_cast<char*>(data), n);
}

// A message of one buffer with room for `count` descriptors in its control data.
struct FdMessage {
  FdMessage(void* data, size_t bytes, int count)
      : iov{data, bytes}, control(CMSG_SPACE(sizeof(int) * static_cast<size_t>(count))) {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
  }
  FdMessage(const FdMessage&) = delete;  // msg points into this object
  FdMessage& operator=(const FdMessage&) = delete;
  iovec iov;
  std::vector<char> control;
  msghdr msg{};
};

// A stream socket connected to the Unix socket at `path`, or -1.
inline int connect_to(const std::string& path) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (s >= 0 && ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return s;
  if (s >= 0) ::close(s);
  return -1;
}

// Sends `count` descriptors with `header` bytes as their carrier.
inline bool send_fds(int socket, const int* fds, int count, const void* header, size_t header_bytes) {
  FdMessage m(const_cast<void*>(header), header_bytes, count);
  msghdr& msg = m.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<size_t>(count));
  std::memcpy(CMSG_DATA(c), fds, sizeof(int) * static_cast<size_t>(count));
  return ::sendmsg(socket, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(header_bytes);
}

// Receives up to `count` descriptors (the rest stay -1) and exactly `header_bytes` bytes.
inline bool receive_fds(int socket, int* fds, int count, void* header, size_t header_bytes) {
  for (int i = 0; i < count; ++i) fds[i] = -1;
  FdMessage m(header, header_bytes, count);
  msghdr& msg = m.msg;
  const ssize_t r = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  if (r <= 0) return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    std::memcpy(fds, CMSG_DATA(c), sizeof(int) * std::min(n, static_cast<size_t>(count)));
  }
  const size_t got = static_cast<size_t>(r);
  return got == header_bytes || read_all(socket, static_cast<char*>(header) + got, header_bytes - got);
}

}  // namespace roformer::fork_protocol
