// Signal flag for graceful stops (see signals.h).
#include "roformer/run/signals.h"

#include <csignal>

namespace roformer::run {
namespace {
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) {
  g_signal = sig;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() {
  return g_signal != 0;
}
int stop_signal() {
  return g_signal;
}

}  // namespace roformer::run
