// CUDA translation unit of roformer_core. It will hold the fused RoPE kernels; today it holds
// the smoke test that proves nvcc, the architecture list and the CUDA runtime link work.
// Deliberately free of LibTorch headers so nvcc stays fast.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "roformer/ops/cuda_selftest.h"

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

std::string cuda_compiled_archs() {
#ifdef __CUDA_ARCH_LIST__
#define ROFORMER_STR2(...) #__VA_ARGS__
#define ROFORMER_STR(...) ROFORMER_STR2(__VA_ARGS__)
  return ROFORMER_STR(__CUDA_ARCH_LIST__);
#else
  return "unknown";
#endif
}

}  // namespace roformer::ops
