// Device, engine and CUDA switches (see device_setup.h).
#include "roformer/run/device_setup.h"

#include <ATen/Context.h>
#include <torch/nn/module.h>

#include <cstdlib>

#include "roformer/common/errors.h"

namespace roformer::run {

dist::Engine pick_engine(const config::DistConfig& d, const torch::Device& device) {
  if (d.backend == config::DistBackend::nccl) {
    if (!device.is_cuda())
      throw UserError("dist.backend=nccl needs CUDA tensors, but training runs on the CPU; use gloo or auto");
    return dist::Engine::nccl;
  }
  if (d.backend == config::DistBackend::gloo) return dist::Engine::gloo;
  return device.is_cuda() ? dist::Engine::nccl : dist::Engine::gloo;
}

std::unique_ptr<dist::ProcessGroup> open_process_group(const dist::DistEnv& env, const config::DistConfig& d,
                                                       const torch::Device& device) {
  dist::ProcessGroupOptions po;
  po.engine = pick_engine(d, device);
  po.timeout = std::chrono::seconds(d.timeout_s);
  po.cuda_device = device.is_cuda() ? device.index() : 0;
  return std::make_unique<dist::ProcessGroup>(env, po);
}

std::unique_ptr<dist::GradientReducer> make_reducer(torch::nn::Module& module, dist::Communicator& comm,
                                                    const config::DistConfig& d) {
  dist::ReducerOptions ro;
  ro.first_bucket_bytes = static_cast<int64_t>(d.first_bucket_mb * 1024 * 1024);
  ro.bucket_bytes = static_cast<int64_t>(d.bucket_mb * 1024 * 1024);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (auto& p : module.named_parameters()) named.emplace_back(p.key(), p.value());
  return std::make_unique<dist::GradientReducer>(std::move(named), comm, ro);
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

}  // namespace roformer::run
