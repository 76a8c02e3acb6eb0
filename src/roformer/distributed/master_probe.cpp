// MASTER_ADDR resolution and reachability probe (see master_probe.h), on POSIX sockets.
#include "roformer/distributed/master_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "roformer/common/errors.h"

namespace roformer::dist {
namespace {

// 0: answered (connected or refused); otherwise the errno-like reason it did not.
int try_connect(const addrinfo& a, std::chrono::milliseconds within) {
  const int fd = ::socket(a.ai_family, a.ai_socktype, a.ai_protocol);
  if (fd < 0) return errno;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  int err = 0;
  if (::connect(fd, a.ai_addr, a.ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(within.count()));
      err = ETIMEDOUT;
      if (ready == 1) {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
  }
  ::close(fd);
  return err == ECONNREFUSED ? 0 : err;
}

}  // namespace

void probe_master(const DistEnv& env, std::chrono::milliseconds answer_within) {
  if (!env.distributed()) return;
  const std::string where = "MASTER_ADDR=" + env.master_addr + " MASTER_PORT=" + std::to_string(env.master_port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(env.master_addr.c_str(), std::to_string(env.master_port).c_str(), &hints, &found);
  if (rc != 0)
    throw UserError(where + ": the address does not resolve (" + ::gai_strerror(rc) +
                    "); set MASTER_ADDR to the host name or IP of rank 0");
  const bool connects = env.rank != 0 || env.agent_store;
  int reason = 0;
  if (connects) {
    reason = ETIMEDOUT;
    for (const addrinfo* a = found; a && reason != 0; a = a->ai_next) reason = try_connect(*a, answer_within);
  }
  ::freeaddrinfo(found);
  if (reason != 0)
    throw UserError(where + ": the host does not answer (" + std::strerror(reason) + " within " +
                    std::to_string(answer_within.count() / 1000) +
                    " s); check that MASTER_ADDR names the node of rank 0 and that it is reachable from this one");
}

}  // namespace roformer::dist
