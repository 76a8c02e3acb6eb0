// A child process spoken to in lines over a socket pair (its stdin and stdout; its stderr stays
// ours): the out-of-process tokenizers and the TensorBoard writer. Every wait on it is bounded:
// its first line, each answer, each write and its exit; a child past its time is killed and
// named. Also the line helpers the services' own loops use. No LibTorch.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace roformer {

// The longest line either side accepts (a tokenizer's answer for a long document fits).
constexpr size_t kMaxLineBytes = size_t{256} << 20;

// Reads up to and excluding the next '\n', keeping what follows in `buffer`; false at end of input
// or when a line grows past kMaxLineBytes.
bool read_fd_line(int fd, std::string& buffer, std::string& line);
// Writes all of `text`; false when the other side has gone (sockets: no SIGPIPE).
bool write_fd_all(int fd, const std::string& text, bool socket);

// Seconds a helper process may take to start and to answer: ROFORMER_HELPER_TIMEOUT_S (a
// positive number), else 120. A UserError names a bad value.
double helper_timeout_seconds();

enum class LineRead { line, closed, timed_out, too_long };

class LineChild {
 public:
  // Starts argv (argv[0] looked up on PATH when it has no '/'); `name` says what it is in messages.
  LineChild(const std::vector<std::string>& argv, std::string name, size_t max_line_bytes = kMaxLineBytes);
  // Ends its input, waits for it to exit (10 s, or helper_timeout_seconds() when shorter), then
  // kills it and says so.
  ~LineChild();
  LineChild(const LineChild&) = delete;
  LineChild& operator=(const LineChild&) = delete;

  // The next line, waiting at most `timeout_s`; a line past max_line_bytes is too_long.
  LineRead read_line(std::string& line, double timeout_s);
  // false when it has gone or has not taken the line within `timeout_s`.
  bool write_line(const std::string& line, double timeout_s);
  void kill();  // SIGKILL now: it did not answer in time; the destructor still reaps it
  // "<name> (pid N) <what happened>" for an error message: closed its output (exited?), sent
  // nothing for T s, sent a line longer than the limit.
  std::string describe(LineRead what, double timeout_s) const;
  pid_t pid() const { return pid_; }

 private:
  std::string name_;
  size_t max_line_bytes_;
  double exit_wait_s_;
  int fd_ = -1;
  pid_t pid_ = -1;
  std::string buffer_;
};

}  // namespace roformer
