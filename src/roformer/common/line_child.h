// A child process spoken to in lines over a socket pair (its stdin and stdout; its stderr stays
// ours): the out-of-process tokenizers and the TensorBoard writer. Also the line helpers the
// services' own loops use. No LibTorch.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace roformer {

// Reads up to and excluding the next '\n', keeping what follows in `buffer`; false at end of input.
bool read_fd_line(int fd, std::string& buffer, std::string& line);
// Writes all of `text`; false when the other side has gone (sockets: no SIGPIPE).
bool write_fd_all(int fd, const std::string& text, bool socket);

class LineChild {
 public:
  // Starts argv (argv[0] looked up on PATH when it has no '/').
  explicit LineChild(const std::vector<std::string>& argv);
  ~LineChild();  // ends its input, then waits for it to exit
  LineChild(const LineChild&) = delete;
  LineChild& operator=(const LineChild&) = delete;

  bool read_line(std::string& line);  // false when it has exited or closed its output
  bool write_line(const std::string& line);
  pid_t pid() const { return pid_; }

 private:
  int fd_ = -1;
  pid_t pid_ = -1;
  std::string buffer_;
};

}  // namespace roformer
