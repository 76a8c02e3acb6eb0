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

}  // namespace roformer
