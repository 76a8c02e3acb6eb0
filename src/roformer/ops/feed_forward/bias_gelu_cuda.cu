// CUDA entry points of the fused bias + GELU op (kernels and launch plan:
// bias_gelu_cuda_kernels.cuh). No LibTorch headers here.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "roformer/ops/feed_forward/bias_gelu_cuda_kernels.cuh"
#include "roformer/ops/feed_forward/bias_gelu_kernels.h"

namespace roformer::ops {
namespace {

void launch(const BiasGeluLaunch& p, void* stream, bool backward) {
  bias_gelu_launch(p, cuda_elem::StreamLauncher{static_cast<cudaStream_t>(stream)}, backward);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("bias_gelu kernel launch: ") + cudaGetErrorString(err));
}

}  // namespace

void bias_gelu_forward_cuda(const BiasGeluLaunch& launch_desc, void* stream) {
  launch(launch_desc, stream, /*backward=*/false);
}

void bias_gelu_backward_cuda(const BiasGeluLaunch& launch_desc, void* stream) {
  launch(launch_desc, stream, /*backward=*/true);
}

}  // namespace roformer::ops
