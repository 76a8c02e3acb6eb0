// Device and thread selection (see device.h).
#include "roformer/model/device.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <algorithm>
#include <string>
#include <thread>

#include "roformer/common/errors.h"

namespace roformer::model {

torch::Device pick_device(config::DeviceKind kind, int local_rank, bool strict) {
  const bool cuda = torch::cuda::is_available();
  if (kind == config::DeviceKind::cuda && !cuda && strict)
    throw UserError("train.device=cuda but no CUDA GPU is visible; use train.device=cpu or auto");
  if (kind == config::DeviceKind::cpu || !cuda) return torch::kCPU;
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (local_rank >= gpus)
    throw UserError("LOCAL_RANK=" + std::to_string(local_rank) + " but this node has " + std::to_string(gpus) +
                    " GPU(s); start at most one rank per GPU, or set train.device=cpu");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

int apply_threads(int64_t requested, int64_t processes_per_node) {
  const int64_t cores = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t threads =
      requested > 0 ? requested : std::max<int64_t>(1, cores / std::max<int64_t>(1, processes_per_node));
  at::set_num_threads(static_cast<int>(threads));
  return static_cast<int>(threads);
}

}  // namespace roformer::model
