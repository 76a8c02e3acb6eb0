// CUDA entry points of roformer_core's RoPE op (kernels and launch plan: rope_cuda_kernels.cuh)
// and the toolchain smoke test. No LibTorch headers here.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "roformer/ops/common/cuda_selftest.h"
#include "roformer/ops/rope/rope_cuda_kernels.cuh"
#include "roformer/ops/rope/rope_kernels.h"

namespace roformer::ops {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

__global__ void axpy_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

void rope_cuda(const RopeLaunch& launch, void* stream) {
  rope_launch(launch, cuda_elem::StreamLauncher{static_cast<cudaStream_t>(stream)});
  check(cudaGetLastError(), "rope kernel launch");
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

double cuda_selftest(int n) {
  std::vector<float> x(n), y(n), expect(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * static_cast<float>(i);
    y[i] = 1.0f - static_cast<float>(i % 7);
    expect[i] = 3.0f * x[i] + y[i];
  }
  float *dx = nullptr, *dy = nullptr;
  check(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&dy, n * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  axpy_kernel<<<(n + 255) / 256, 256>>>(n, 3.0f, dx, dy);
  check(cudaGetLastError(), "axpy_kernel launch");
  check(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(dx);
  cudaFree(dy);
  double err = 0;
  for (int i = 0; i < n; ++i) err = std::fmax(err, std::fabs(static_cast<double>(y[i]) - expect[i]));
  return err;
}

}  // namespace roformer::ops
