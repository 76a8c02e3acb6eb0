// Counter-based randomness: every random number is a pure function of (seed, stream, indices),
// so the batch at step t is the same whether the run got there directly or after a resume,
// and evaluation masks depend only on a token's absolute position. SplitMix64 finalizer.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace roformer::data {

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Hash of a seed and a list of counters.
inline uint64_t hash_counters(uint64_t seed, std::initializer_list<uint64_t> counters) {
  uint64_t h = mix64(seed);
  for (uint64_t c : counters) h = mix64(h ^ c);
  return h;
}

// Uniform in [0, 1) from 53 random bits.
inline double to_unit(uint64_t h) {
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace roformer::data
