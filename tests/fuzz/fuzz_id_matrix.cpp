// libFuzzer target: `roformer forward`'s JSON id matrices (--input-ids and friends). A bad input
// must end in a UserError (never a crash, an nlohmann exception or a stack overflow on deep
// nesting); one that parses is rectangular, rows x cols values, each inside [lo, hi].
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/eval/id_matrix.h"

using namespace roformer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  constexpr int64_t lo = 0, hi = 1000;
  eval::IdMatrix m;
  try {
    m = eval::parse_id_matrix(input, "--input-ids file 'fuzz.json'", lo, hi);
  } catch (const UserError&) {
    return 0;
  }
  if (m.rows <= 0 || m.cols <= 0 || static_cast<int64_t>(m.values.size()) != m.rows * m.cols) {
    std::fprintf(stderr, "parsed a %lld x %lld matrix holding %zu values\n", static_cast<long long>(m.rows),
                 static_cast<long long>(m.cols), m.values.size());
    std::abort();
  }
  for (int64_t v : m.values)
    if (v < lo || v > hi) {
      std::fprintf(stderr, "value %lld outside [%lld, %lld] was accepted\n", static_cast<long long>(v),
                   static_cast<long long>(lo), static_cast<long long>(hi));
      std::abort();
    }
  return 0;
}
