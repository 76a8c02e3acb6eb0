// Checked int64 arithmetic for sizes computed from untrusted numbers (meta.json token counts,
// config dimensions, CLI lengths): an overflow throws UserError naming what was computed,
// instead of wrapping into a small size that a later mmap or allocation trusts.
#pragma once

#include <cstdint>
#include <string>

#include "roformer/common/errors.h"

namespace roformer {

inline int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw UserError(what + " overflows a 64-bit integer (" + std::to_string(a) + " x " + std::to_string(b) +
                    "); check the numbers it is computed from");
  return out;
}

inline int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw UserError(what + " overflows a 64-bit integer (" + std::to_string(a) + " + " + std::to_string(b) +
                    "); check the numbers it is computed from");
  return out;
}

}  // namespace roformer
