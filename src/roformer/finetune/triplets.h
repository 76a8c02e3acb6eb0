// Triplet ranking data (CAIL2019-SCM's layout, RoFormer's Table 5): one JSON object per line,
// {"A": text, "B": text, "C": text, "label": "B" or "C"} -- which of B and C is closer to A.
// The reader names file, line and fix for anything it cannot use. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::finetune {

struct Triplet {
  std::string a, b, c;
  bool b_closer = true;  // label "B"
  int64_t line = 0;
};

std::vector<Triplet> read_triplets(const std::string& path);

// One JSON line for a triplet (what scripts and tests write).
std::string triplet_json(const Triplet& t);

}  // namespace roformer::finetune
