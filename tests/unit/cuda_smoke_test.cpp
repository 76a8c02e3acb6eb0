// GPU smoke test of the CUDA translation unit in roformer_core. Skips cleanly (with the
// reason) when the build has no CUDA kernels or no GPU is visible.
#include <gtest/gtest.h>

#ifdef ROFORMER_WITH_CUDA
#include "roformer/ops/common/cuda_selftest.h"

namespace cuda_smoke_test {

#endif

TEST(CudaSmoke, KernelRunsOnTheGpu) {
#ifndef ROFORMER_WITH_CUDA
  GTEST_SKIP() << "built without CUDA kernels (ROFORMER_CUDA=OFF)";
#else
  if (roformer::ops::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible";
  EXPECT_EQ(roformer::ops::cuda_selftest(1 << 20), 0.0);
#endif
}

}  // namespace cuda_smoke_test
