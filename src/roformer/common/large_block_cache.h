// A cache of large host blocks for LibTorch's CPU tensors. glibc serves blocks of 32 MiB or more
// (its largest mmap threshold, host_memory.h) with a fresh mmap() each time, so a training step
// that allocates such a tensor (CoPE's position table at 1024 tokens, a [B, H, S, S] block of
// scores) has the kernel zero all its pages again on every step. While a training run's steps
// repeat their sizes (a ReuseLargeBlocks scope), the cache is LibTorch's CPU allocator: it keeps
// freed blocks of those sizes (up to 512 MiB, the oldest given back first) and hands one out
// again for a request of exactly its size; a request that no idle block fits frees them all (the
// sizes in use changed); smaller requests go to LibTorch's own allocator. Outside that scope
// (evaluation, conversion) LibTorch's allocator serves everything, as before.
#pragma once

#include <cstddef>
#include <string>

namespace roformer {

// Prepares the cache on the first call (not under AddressSanitizer, which must see every block
// freed, nor with ROFORMER_HOST_MALLOC=default); every call returns a one-line description.
const std::string& install_large_block_cache();

// Bytes of the idle blocks the cache holds now (0 when it is not installed).
size_t large_block_cache_idle_bytes();

// While one lives, the prepared cache is the CPU allocator and keeps freed large blocks for
// reuse; when the last goes, LibTorch's allocator is back and the idle blocks are freed.
class ReuseLargeBlocks {
 public:
  ReuseLargeBlocks();
  ~ReuseLargeBlocks();
  ReuseLargeBlocks(const ReuseLargeBlocks&) = delete;
  ReuseLargeBlocks& operator=(const ReuseLargeBlocks&) = delete;
};

}  // namespace roformer
