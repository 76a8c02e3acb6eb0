// Host allocator settings for training. LibTorch allocates every CPU tensor with malloc and
// frees it when the last reference goes; glibc serves large blocks with fresh mmap()s and
// returns freed heap to the kernel, so a training step faults in every activation's pages
// again (about 2,900 page faults per quickstart step, each a few microseconds in a VM).
#pragma once

#include <string>

namespace roformer {

// Keeps freed blocks of up to 32 MiB (glibc's largest mmap threshold) in the heap and the heap
// from shrinking, so steps reuse warm pages, and has LibTorch put blocks of 2 MiB or more on
// transparent huge pages (THP_MEM_ALLOC_ENABLE=1 unless set), so larger ones fault in 2 MiB at
// a time. Leaves glibc's defaults when the environment
// already tunes malloc (MALLOC_*_ variables, GLIBC_TUNABLES) or ROFORMER_HOST_MALLOC=default;
// any other value than 'tuned' or 'default' is a UserError.
// Applies the settings on the first call; every call returns a one-line description of them.
const std::string& tune_host_allocator();

// Whether ROFORMER_HOST_MALLOC=default asks for glibc's own behaviour (and no tuning of ours);
// a value other than 'tuned' or 'default' is a UserError.
bool host_allocator_left_default();

}  // namespace roformer
