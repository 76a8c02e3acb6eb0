// Device, engine and CUDA switches (see device_setup.h).
#include "roformer/train/device_setup.h"

#include <ATen/Context.h>

#include <cstdlib>

#include "roformer/common/errors.h"

namespace roformer::train {

dist::Engine pick_engine(const config::DistConfig& d, const torch::Device& device) {
  if (d.backend == config::DistBackend::nccl) {
    if (!device.is_cuda())
      throw UserError("dist.backend=nccl needs CUDA tensors, but training runs on the CPU; use gloo or auto");
    return dist::Engine::nccl;
  }
  if (d.backend == config::DistBackend::gloo) return dist::Engine::gloo;
  return device.is_cuda() ? dist::Engine::nccl : dist::Engine::gloo;
}

std::string apply_cuda_switches(const config::TrainConfig& t, const torch::Device& device) {
  if (!device.is_cuda()) return "";
  auto& ctx = at::globalContext();
  ctx.setAllowTF32CuBLAS(t.tf32 && !t.deterministic);
  ctx.setAllowTF32CuDNN(t.tf32 && !t.deterministic);
  if (!t.deterministic) return t.tf32 ? "TF32 matmuls" : "fp32 matmuls";
  // cuBLAS reads this when its first handle is created, which has not happened yet here.
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  ctx.setDeterministicAlgorithms(true, /*warn_only=*/false);
  // The fused attention backward passes accumulate with atomics; the math backend does not.
  ctx.setSDPUseFlash(false);
  ctx.setSDPUseMemEfficient(false);
  ctx.setSDPUseCuDNN(false);
  return "deterministic kernels (CUBLAS_WORKSPACE_CONFIG, math SDPA, no TF32)";
}

}  // namespace roformer::train
