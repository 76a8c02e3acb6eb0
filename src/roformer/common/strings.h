// Small string helpers shared across the project (splitting, joining, did-you-mean).
#pragma once

#include <string>
#include <vector>

namespace roformer {

std::vector<std::string> split(const std::string& text, char sep);
std::string trim(const std::string& text);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
// Text up to its first newline (an exception message without LibTorch's hints and backtrace).
std::string first_line(const std::string& text);

// Levenshtein edit distance between two strings.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word` if it is plausibly a typo of it (small edit distance or a
// containing/contained name); empty if none is close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// Shortest decimal text that parses back to exactly `value` ("0.1", "1e-12", "10000").
std::string shortest_double(double value);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF) without control characters (U+0000-U+001F, U+007F).
bool is_plain_utf8(const std::string& text);
// `text` itself when is_plain_utf8, else with every control and non-ASCII byte written as \xNN
// (fit to quote in a message).
std::string printable(const std::string& text);

}  // namespace roformer
