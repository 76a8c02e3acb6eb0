// The out-of-process tokenizer and its service loop (see tokenizer_process.h).
#include "roformer/data/tokenizer_process.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "roformer/common/errors.h"

namespace roformer::data {
namespace {

using nlohmann::json;

// Reads up to and excluding the next '\n' (buffering what follows); "" at end of input.
bool read_line(int fd, std::string& buffer, std::string& line) {
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

// Writes all of `text`; false when the other side has gone (no SIGPIPE: a socket with MSG_NOSIGNAL).
bool write_all(int fd, const std::string& text, bool socket) {
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

// Texts travel as hex: any bytes (invalid UTF-8 included) arrive unchanged, which JSON strings
// cannot promise.
std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw std::runtime_error("not a hex digit in a tokenizer request");
  };
  if (hex.size() % 2) throw std::runtime_error("odd-length hex in a tokenizer request");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(value(hex[2 * i]) * 16 + value(hex[2 * i + 1]));
  return out;
}

}  // namespace

ProcessTokenizer::ProcessTokenizer(const std::string& tool, const std::string& model_file) {
  if (::access(tool.c_str(), X_OK) != 0)
    throw UserError("'" + tool + "' is missing: rebuild the project (it is built with the roformer binary)");
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {  // the service: its stdin and stdout are the socket, stderr stays ours
    ::dup2(sv[1], 0);
    ::dup2(sv[1], 1);
    ::execl(tool.c_str(), tool.c_str(), "--tokenizer-service", model_file.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(sv[1]);
  fd_ = sv[0];
  std::string header;
  if (!read_line(fd_, buffer_, header))
    throw UserError("the tokenizer service could not load '" + model_file + "' (its message is above); is the " +
                    "checkpoint's dataset (data.path) the one it was pretrained on?");
  const json h = json::parse(header);
  name_ = h.at("name").get<std::string>();
  vocab_size_ = h.at("vocab_size").get<int64_t>();
  special_ = h.at("special_ids").get<std::map<std::string, int64_t>>();
}

ProcessTokenizer::~ProcessTokenizer() {
  if (fd_ >= 0) {
    ::shutdown(fd_, SHUT_WR);  // end of requests: the service exits
    ::close(fd_);
  }
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::string ProcessTokenizer::request(const std::string& line) const {
  std::string answer;
  if (!write_all(fd_, line + "\n", true) || !read_line(fd_, buffer_, answer))
    throw std::runtime_error("the tokenizer service (pid " + std::to_string(pid_) + ") stopped answering");
  return answer;
}

std::vector<int64_t> ProcessTokenizer::encode(const std::string& text) const {
  const json a = json::parse(request(json{{"encode", to_hex(text)}}.dump()));
  if (a.contains("error")) throw std::runtime_error("tokenizer service: " + a["error"].get<std::string>());
  return a.at("ids").get<std::vector<int64_t>>();
}

std::string ProcessTokenizer::decode(const std::vector<int64_t>& ids) const {
  const json a = json::parse(request(json{{"decode", ids}}.dump()));
  if (a.contains("error")) throw std::runtime_error("tokenizer service: " + a["error"].get<std::string>());
  return from_hex(a.at("text").get<std::string>());
}

int serve_tokenizer(const Tokenizer& tokenizer, int in_fd, int out_fd) {
  const json header{
      {"name", tokenizer.name()}, {"vocab_size", tokenizer.vocab_size()}, {"special_ids", tokenizer.special_ids()}};
  if (!write_all(out_fd, header.dump() + "\n", false)) return 1;
  std::string buffer, line;
  while (read_line(in_fd, buffer, line)) {
    json answer;
    try {
      const json q = json::parse(line);
      if (q.contains("encode"))
        answer = {{"ids", tokenizer.encode(from_hex(q["encode"].get<std::string>()))}};
      else
        answer = {{"text", to_hex(tokenizer.decode(q.at("decode").get<std::vector<int64_t>>()))}};
    } catch (const std::exception& e) {
      answer = {{"error", e.what()}};
    }
    if (!write_all(out_fd, answer.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", false)) return 1;
  }
  return 0;
}

}  // namespace roformer::data
