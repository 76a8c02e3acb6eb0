// Runs a program to its end with a time limit, without a shell: the report renderer the sweep
// starts after its runs. No LibTorch.
#pragma once

#include <string>
#include <vector>

namespace roformer {

struct ProcessOutcome {
  bool started = false;    // false: fork or exec failed (exit_code 127 from the child)
  bool timed_out = false;  // killed (SIGKILL) after the limit
  int exit_code = -1;      // its exit status; 128 + signal when a signal ended it
  bool ok() const { return started && !timed_out && exit_code == 0; }
};

// argv[0] is looked up on PATH when it has no '/'. Its stdout and stderr are ours.
ProcessOutcome run_process(const std::vector<std::string>& argv, double timeout_seconds);

}  // namespace roformer
