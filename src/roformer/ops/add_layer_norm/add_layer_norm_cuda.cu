// CUDA entry points of the fused residual add + LayerNorm op (kernels and launch plan:
// add_layer_norm_cuda_kernels.cuh). No LibTorch headers here.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "roformer/ops/add_layer_norm/add_layer_norm_cuda_kernels.cuh"
#include "roformer/ops/add_layer_norm/add_layer_norm_kernels.h"

namespace roformer::ops {
namespace {

void launch(const AddLayerNormLaunch& p, void* stream, bool backward) {
  add_layer_norm_launch(p, cuda_elem::StreamLauncher{static_cast<cudaStream_t>(stream)}, backward);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("add_layer_norm ") + (backward ? "backward" : "forward") +
                             " kernel launch: " + cudaGetErrorString(err));
}

}  // namespace

int64_t add_layer_norm_cuda_rows_per_block(int64_t rows) {
  return add_layer_norm_backward_rows_per_warp(rows);
}

void add_layer_norm_forward_cuda(const AddLayerNormLaunch& launch_desc, void* stream) {
  launch(launch_desc, stream, /*backward=*/false);
}

void add_layer_norm_backward_cuda(const AddLayerNormLaunch& launch_desc, void* stream) {
  launch(launch_desc, stream, /*backward=*/true);
}

}  // namespace roformer::ops
