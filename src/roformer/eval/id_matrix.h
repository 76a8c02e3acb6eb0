// The JSON inputs of `roformer forward` (--input-ids, --attention-mask, --token-type-ids): one
// list of integers, or a list of equal-length lists, each value in [lo, hi]. Needs no LibTorch,
// so the fuzz target links it alone; forward.cpp turns the values into a [B, S] tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::eval {

struct IdMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> values;  // row-major, rows * cols
};

// Parses `json_text`; a bad input throws UserError naming `source` (e.g. "--input-ids file 'x.json'"),
// the row and entry. Nesting deeper than two lists is refused while parsing.
IdMatrix parse_id_matrix(const std::string& json_text, const std::string& source, int64_t lo, int64_t hi);

}  // namespace roformer::eval
