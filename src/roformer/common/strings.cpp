// String helpers: split/trim/join, edit distance for did-you-mean, shortest double text, UTF-8.
#include "roformer/common/strings.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace roformer {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string trim(const std::string& text) {
  const auto b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = text.find_last_not_of(" \t\r\n");
  return text.substr(b, e - b + 1);
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_dist = static_cast<size_t>(-1);
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    // A name contained in the other ("layers" in "num_layers") counts as close.
    if (word.size() >= 3 && (c.find(word) != std::string::npos || word.find(c) != std::string::npos))
      d = std::min<size_t>(d, 1);
    if (d < best_dist) {
      best_dist = d;
      best = c;
    }
  }
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  return best_dist <= limit ? best : "";
}

std::string shortest_double(double value) {
  char buf[64];
  // std::to_chars without a format gives the shortest text that round-trips exactly,
  // choosing fixed or scientific notation, whichever is shorter.
  const auto res = std::to_chars(buf, buf + sizeof(buf), value);
  std::string s(buf, res.ptr);
  // Keep a marker that it is a float so YAML readers do not see an integer.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

bool is_plain_utf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x20 || lead == 0x7f) return false;
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // Continuation bytes, the payload of the lead byte and the smallest code point of the form.
    const int more = (lead & 0xE0) == 0xC0 ? 1 : (lead & 0xF0) == 0xE0 ? 2 : (lead & 0xF8) == 0xF0 ? 3 : 0;
    if (more == 0 || i + static_cast<size_t>(more) >= text.size()) return false;
    uint32_t cp = lead & (0x7F >> (more + 1));
    for (int k = 1; k <= more; ++k) {
      const auto c = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const uint32_t smallest = more == 1 ? 0x80 : more == 2 ? 0x800 : 0x10000;
    if (cp < smallest || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(more) + 1;
  }
  return true;
}

std::string printable(const std::string& text) {
  if (is_plain_utf8(text)) return text;
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
      continue;
    }
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += hex;
  }
  return out;
}

}  // namespace roformer
