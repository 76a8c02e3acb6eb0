// The large-block cache (common/large_block_cache.h), LibTorch's CPU allocator inside each test's
// ReuseLargeBlocks scope as in a training run: a freed block of 32 MiB or more comes back for a
// tensor of exactly its size, a size no idle block fits frees them all, smaller tensors and
// LibTorch's raw interface keep working, values written survive, the idle blocks never exceed
// 512 MiB (the oldest given back first), and outside a scope a freed block is freed at once.
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "roformer/common/large_block_cache.h"

namespace large_block_cache_test {

using roformer::install_large_block_cache;
using roformer::large_block_cache_idle_bytes;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

bool installed() {
  return install_large_block_cache().rfind("none", 0) != 0;
}

torch::Tensor bytes(int64_t n) {
  return torch::empty({n}, torch::kUInt8);
}

}  // namespace

TEST(LargeBlockCache, AFreedBlockComesBackForItsExactSizeOnly) {
  if (!installed()) GTEST_SKIP() << install_large_block_cache();
  const roformer::ReuseLargeBlocks reuse;
  torch::Tensor a = bytes(32 * kMiB);
  const void* first = a.data_ptr();
  const size_t idle_before = large_block_cache_idle_bytes();
  a = torch::Tensor();
  EXPECT_EQ(large_block_cache_idle_bytes(), idle_before + 32 * kMiB);
  torch::Tensor again = bytes(32 * kMiB);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(large_block_cache_idle_bytes(), idle_before);
  // A reused block holds what is written to it, as any tensor does.
  torch::Tensor floats = again.view(torch::kFloat32);
  floats.copy_(torch::arange(floats.numel(), torch::kFloat32));
  EXPECT_EQ(floats[8 * kMiB - 1].item<float>(), static_cast<float>(8 * kMiB - 1));
}

TEST(LargeBlockCache, ARequestNoIdleBlockFitsFreesThemAll) {
  if (!installed()) GTEST_SKIP() << install_large_block_cache();
  const roformer::ReuseLargeBlocks reuse;
  torch::Tensor a = bytes(32 * kMiB), b = bytes(34 * kMiB);
  a = torch::Tensor();
  b = torch::Tensor();
  EXPECT_GE(large_block_cache_idle_bytes(), size_t{66} * kMiB);
  // No idle block of its size: both go back to the system and it gets a block of its own (which the
  // kernel may map where the first one was, so its address proves nothing; a cache that handed out
  // the 34 MiB block, or kept either, leaves idle bytes).
  const torch::Tensor other = bytes(33 * kMiB);
  EXPECT_EQ(other.numel(), 33 * int64_t(kMiB));
  EXPECT_EQ(large_block_cache_idle_bytes(), size_t{0});
}

TEST(LargeBlockCache, SmallTensorsAndTheRawInterfaceWork) {
  if (!installed()) GTEST_SKIP() << install_large_block_cache();
  const roformer::ReuseLargeBlocks reuse;
  const torch::Tensor small = torch::ones({1000}, torch::kFloat32) * 2;
  EXPECT_EQ(small.sum().item<float>(), 2000.0f);
  c10::Allocator* allocator = c10::GetCPUAllocator();
  for (size_t n : {size_t{4096}, size_t{40 * kMiB}}) {
    void* p = allocator->raw_allocate(n);
    ASSERT_NE(p, nullptr);
    static_cast<char*>(p)[n - 1] = 7;
    allocator->raw_deallocate(p);
  }
}

TEST(LargeBlockCache, IdleBlocksStayWithin512MiB) {
  if (!installed()) GTEST_SKIP() << install_large_block_cache();
  const roformer::ReuseLargeBlocks reuse;
  std::vector<torch::Tensor> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(bytes(33 * kMiB));  // pages never touched: no memory
  blocks.clear();
  EXPECT_LE(large_block_cache_idle_bytes(), size_t{512} * kMiB);
  EXPECT_GE(large_block_cache_idle_bytes(), size_t{512 - 33} * kMiB);
}

TEST(LargeBlockCache, OutsideAReuseScopeBlocksAreFreedAtOnce) {
  if (!installed()) GTEST_SKIP() << install_large_block_cache();
  torch::Tensor kept;
  {
    const roformer::ReuseLargeBlocks reuse;
    bytes(32 * kMiB);  // freed into the cache
    EXPECT_EQ(large_block_cache_idle_bytes(), size_t{32} * kMiB);
    kept = bytes(32 * kMiB);  // the cache's block, kept past the scope
  }
  EXPECT_EQ(large_block_cache_idle_bytes(), size_t{0});  // the scope's end frees the idle blocks
  // A block of the cache freed outside a scope: freed at once, not kept.
  kept = torch::Tensor();
  EXPECT_EQ(large_block_cache_idle_bytes(), size_t{0});
}

}  // namespace large_block_cache_test
