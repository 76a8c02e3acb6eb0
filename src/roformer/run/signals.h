// SIGINT/SIGTERM during training: the handler only records the request; the loop finishes the
// current step, saves a checkpoint and exits.
#pragma once

namespace roformer::run {

void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the signal received (0 if none)

}  // namespace roformer::run
