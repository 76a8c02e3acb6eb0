// A CUDA smoke test compiled by nvcc into roformer_core (rope_cuda.cu): proves the CUDA
// toolchain, the architecture list and the link against LibTorch's CUDA runtime work.
// Only declared when the build has CUDA kernels (ROFORMER_WITH_CUDA).
#pragma once

#include <string>

namespace roformer::ops {

// Number of CUDA devices the runtime sees (0 without a driver or GPU).
int cuda_device_count();

// Computes y = a*x + y on `n` elements on the current GPU and returns the max abs error
// against the host result. Throws std::runtime_error naming the CUDA error on failure.
double cuda_selftest(int n);

}  // namespace roformer::ops
