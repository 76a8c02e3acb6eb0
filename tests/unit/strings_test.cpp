// Tests for the string helpers: splitting, edit distance, did-you-mean, shortest doubles.
#include <gtest/gtest.h>

#include <cstdlib>

#include "roformer/common/strings.h"

namespace strings_test {

using namespace roformer;

TEST(Strings, SplitKeepsEmptyParts) {
  EXPECT_EQ(split("a.b..c", '.'), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
}

TEST(Strings, TrimAndJoin) {
  EXPECT_EQ(trim("  x y \n"), "x y");
  EXPECT_EQ(trim("   "), "");
  EXPECT_EQ(join({"a", "b", "c"}, ", "), "a, b, c");
}

TEST(Strings, FirstLineStopsAtTheFirstNewline) {
  EXPECT_EQ(first_line("CUDA error: not permitted\nSearch for ...\nException raised from"),
            "CUDA error: not permitted");
  EXPECT_EQ(first_line("one line"), "one line");
  EXPECT_EQ(first_line(""), "");
}

TEST(Strings, EditDistanceMatchesHandComputed) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
}

TEST(Strings, ClosestMatchFindsTyposAndRejectsStrangers) {
  const std::vector<std::string> keys{"num_layers", "num_heads", "hidden_size", "ffn_size"};
  EXPECT_EQ(closest_match("num_layer", keys), "num_layers");
  EXPECT_EQ(closest_match("hiden_size", keys), "hidden_size");
  EXPECT_EQ(closest_match("layers", keys), "num_layers");  // contained name
  EXPECT_EQ(closest_match("optimizer", keys), "");
}

TEST(Strings, ShortestDoubleRoundTripsExactly) {
  for (double v : {0.1, 1e-12, 10000.0, 0.98, 1.0 / 3.0, 6.02214076e23, -2.5, 0.0}) {
    const std::string s = shortest_double(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
  }
  EXPECT_EQ(shortest_double(0.1), "0.1");
  EXPECT_EQ(shortest_double(10000.0), "10000.0");
  EXPECT_EQ(shortest_double(1e-12), "1e-12");
}

}  // namespace strings_test
