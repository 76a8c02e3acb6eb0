// CUDA entry point of tile attention (kernels and launch plan: tile_attention_cuda_kernels.cuh).
// No LibTorch headers here.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "roformer/ops/tile_attention/tile_attention_cuda_kernels.cuh"
#include "roformer/ops/tile_attention/tile_attention_cuda_launch.h"

namespace roformer::ops {

void tile_attention_cuda(const TileCudaLaunch& launch, void* stream) {
  tile_attention_launch(launch, cuda_elem::StreamLauncher{static_cast<cudaStream_t>(stream)});
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("tile attention kernel launch: ") + cudaGetErrorString(err));
}

}  // namespace roformer::ops
