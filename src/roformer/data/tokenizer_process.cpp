// The out-of-process tokenizer and its service loop (see tokenizer_process.h).
#include "roformer/data/tokenizer_process.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "roformer/common/errors.h"
#include "roformer/common/line_child.h"

namespace roformer::data {
namespace {

using nlohmann::json;

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
  start({tool, "--tokenizer-service", model_file}, model_file, "the tokenizer service");
}

ProcessTokenizer::ProcessTokenizer(const std::vector<std::string>& argv, const std::string& model_file,
                                   const std::string& what) {
  start(argv, model_file, what);
}

ProcessTokenizer::~ProcessTokenizer() = default;

void ProcessTokenizer::start(const std::vector<std::string>& argv, const std::string& model_file,
                             const std::string& what) {
  wait_s_ = helper_timeout_seconds();
  child_ = std::make_unique<LineChild>(argv, what);
  std::string header;
  const LineRead r = child_->read_line(header, wait_s_);
  if (r != LineRead::line) {
    if (r != LineRead::closed) child_->kill();
    throw UserError(child_->describe(r, wait_s_) + " before loading '" + model_file + "'; is the " +
                    "checkpoint's dataset (data.path) the one it was pretrained on?");
  }
  try {
    const json h = json::parse(header);
    name_ = h.at("name").get<std::string>();
    vocab_size_ = h.at("vocab_size").get<int64_t>();
    special_ = h.at("special_ids").get<std::map<std::string, int64_t>>();
  } catch (const json::exception& e) {
    child_->kill();
    throw UserError(what + " (" + argv[0] + ") began with '" + header.substr(0, 80) +
                    "' where its header was expected (" + e.what() +
                    "); is ROFORMER_PYTHON a Python with the "
                    "tokenizers package?");
  }
}

std::string ProcessTokenizer::request(const std::string& line) const {
  std::string answer;
  if (!child_->write_line(line, wait_s_)) {
    child_->kill();
    throw UserError(child_->describe(LineRead::line, wait_s_) + " took no request within " +
                    std::to_string(static_cast<int64_t>(wait_s_)) + " s (it exited, or stopped reading)");
  }
  const LineRead r = child_->read_line(answer, wait_s_);
  if (r != LineRead::line) {
    if (r != LineRead::closed) child_->kill();
    throw UserError(child_->describe(r, wait_s_) + " while answering a request");
  }
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
  if (!write_fd_all(out_fd, header.dump() + "\n", false)) return 1;
  std::string buffer, line;
  while (read_fd_line(in_fd, buffer, line)) {
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
    if (!write_fd_all(out_fd, answer.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", false)) return 1;
  }
  return 0;
}

}  // namespace roformer::data
