// Host allocator settings (see host_memory.h).
#include "roformer/common/host_memory.h"

#include <cstdlib>
#include <cstring>

#include "roformer/common/errors.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace roformer {
namespace {

[[maybe_unused]] bool environment_tunes_malloc() {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

// LibTorch's CPU allocator aligns blocks of 2 MiB or more to 2 MiB and asks for transparent huge
// pages on them when THP_MEM_ALLOC_ENABLE=1 (read at its first allocation, so set before any
// tensor): a block larger than the mmap threshold (long-sequence evaluation's 128 MiB query
// blocks) then faults in 2 MiB at a time instead of 4 KiB. A value the user set is kept.
[[maybe_unused]] std::string huge_pages() {
  setenv("THP_MEM_ALLOC_ENABLE", "1", /*overwrite=*/0);
  const char* value = std::getenv("THP_MEM_ALLOC_ENABLE");
  return std::strcmp(value, "0") == 0 ? "" : ", huge pages for blocks of 2 MiB or more";
}

std::string apply_settings() {
#if defined(__GLIBC__)
  if (host_allocator_left_default()) return "glibc defaults (ROFORMER_HOST_MALLOC=default)";
  const std::string pages = huge_pages();
  if (environment_tunes_malloc()) return "glibc, tuned by the environment" + pages;
  constexpr int kMiB = 1 << 20;
  // Setting these also turns off glibc's dynamic threshold, which would otherwise move.
  const bool ok = mallopt(M_MMAP_THRESHOLD, 32 * kMiB) == 1 && mallopt(M_TRIM_THRESHOLD, 1024 * kMiB) == 1 &&
                  mallopt(M_TOP_PAD, 64 * kMiB) == 1;
  return (ok ? "glibc, blocks up to 32 MiB reused (mmap threshold 32 MiB, trim 1 GiB, top pad 64 MiB)"
             : "glibc defaults (mallopt refused the settings)") +
         pages;
#else
  return "the platform's allocator, untuned";
#endif
}

}  // namespace

bool host_allocator_left_default() {
  const char* choice = std::getenv("ROFORMER_HOST_MALLOC");  // checked on every platform; "" = unset
  if (choice == nullptr || choice[0] == '\0') return false;
  if (std::strcmp(choice, "tuned") != 0 && std::strcmp(choice, "default") != 0)
    throw UserError(std::string("ROFORMER_HOST_MALLOC='") + choice +
                    "' is not a setting; use 'tuned' (the default) or 'default' (glibc's own), or unset it");
  return std::strcmp(choice, "default") == 0;
}

const std::string& tune_host_allocator() {
  static const std::string applied = apply_settings();
  return applied;
}

}  // namespace roformer
