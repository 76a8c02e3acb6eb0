// Kernel entry points of the fused residual add + LayerNorm op (no LibTorch types):
// add_layer_norm.cpp fills an AddLayerNormLaunch and calls the kernel for the tensors' device.
#pragma once

#include "roformer/ops/add_layer_norm/add_layer_norm_math.h"

namespace roformer::ops {

// CPU kernels (add_layer_norm_cpu.cpp), parallel over rows with at::parallel_for.
void add_layer_norm_forward_cpu(const AddLayerNormLaunch& launch);
void add_layer_norm_backward_cpu(const AddLayerNormLaunch& launch);

#ifdef ROFORMER_WITH_CUDA
// CUDA kernels (add_layer_norm_cuda.cu) on `stream` (a cudaStream_t passed as void*), one warp
// per row. add_layer_norm_cuda_rows_per_block picks the backward's partial-sum blocks for a
// row count (it depends on nothing else, so results do not vary between GPUs).
int64_t add_layer_norm_cuda_rows_per_block(int64_t rows);
void add_layer_norm_forward_cuda(const AddLayerNormLaunch& launch, void* stream);
void add_layer_norm_backward_cuda(const AddLayerNormLaunch& launch, void* stream);
#endif

}  // namespace roformer::ops
