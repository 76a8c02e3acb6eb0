// Polling an asynchronous state until it leaves "in progress", within a deadline. A
// nonblocking NCCL communicator answers ncclInProgress both while it initialises and when a
// collective is accepted but not yet on the stream (NCCL connects peers lazily, at the first
// collective that needs them): an event recorded on the stream before then completes before
// the collective runs. Generic over the state type, so tests drive it without NCCL.
#pragma once

#include <chrono>
#include <thread>

namespace roformer::dist {

// Returns the first state other than `in_progress`, starting from `state` and asking `poll()`
// (every `interval`) while it is; the result of `on_deadline()` (which may throw) once
// `deadline` has passed with the state still in progress.
template <class State, class Poll, class OnDeadline>
State poll_in_progress(State state, State in_progress, Poll poll, std::chrono::steady_clock::time_point deadline,
                       OnDeadline on_deadline, std::chrono::microseconds interval = std::chrono::microseconds(50)) {
  while (state == in_progress) {
    if (std::chrono::steady_clock::now() > deadline) return on_deadline();
    std::this_thread::sleep_for(interval);
    state = poll();
  }
  return state;
}

}  // namespace roformer::dist
