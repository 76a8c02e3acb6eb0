// The CPU kernels' vector width (see cpu_vectors.h).
#include "roformer/ops/common/cpu_vectors.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/ops/common/cpu_targets.h"

namespace roformer::ops {
namespace {

std::atomic<int> g_test_bytes{0};

int from_environment() {
  const char* value = std::getenv("ROFORMER_CPU_VECTOR_BYTES");
  if (value == nullptr || value[0] == '\0') return wide_cpu_vectors_available() ? 64 : 32;
  if (std::strcmp(value, "32") == 0) return 32;
  if (std::strcmp(value, "64") != 0)
    throw UserError(std::string("ROFORMER_CPU_VECTOR_BYTES='") + value +
                    "' is not a width; use 32 or 64 (bytes per vector in the CPU kernels), or unset it");
  if (!wide_cpu_vectors_available())
    throw UserError(
        "ROFORMER_CPU_VECTOR_BYTES=64 needs an x86-64-v4 CPU (AVX-512) and a GCC build without sanitizers, and "
        "this CPU or build lacks one of them; use 32, or unset it");
  return 64;
}

}  // namespace

bool wide_cpu_vectors_available() {
#if ROFORMER_WIDE_VECTORS
  static const bool available = __builtin_cpu_supports("x86-64-v4");
  return available;
#else
  return false;
#endif
}

int cpu_vector_bytes() {
  if (const int forced = g_test_bytes.load(std::memory_order_relaxed); forced != 0) return forced;
  static const int chosen = from_environment();
  return chosen;
}

void set_cpu_vector_bytes_for_testing(int bytes) {
  if (bytes != 0 && bytes != 32 && bytes != 64) throw UserError("set_cpu_vector_bytes_for_testing: 0, 32 or 64");
  if (bytes == 64 && !wide_cpu_vectors_available()) throw UserError("this build or CPU has no 64-byte kernels");
  g_test_bytes.store(bytes, std::memory_order_relaxed);
}

}  // namespace roformer::ops
