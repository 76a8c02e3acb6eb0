// User-facing error types. A UserError is a problem with the user's input (config, flag,
// file, environment): the CLI prints its message and exits with code 2, writing nothing.
#pragma once

#include <stdexcept>
#include <string>

namespace roformer {

// Exit code for errors the user can fix (bad config, flag, file); 1 is for internal failures.
constexpr int kUserErrorExitCode = 2;

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace roformer
