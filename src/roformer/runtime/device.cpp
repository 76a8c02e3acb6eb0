// Device and thread selection (see device.h).
#include "roformer/runtime/device.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#ifdef ROFORMER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

#include "roformer/common/cpu_availability.h"
#include "roformer/common/errors.h"
#include "roformer/common/log.h"

namespace roformer::runtime {

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

int apply_threads(int64_t requested, int64_t processes_per_node, bool strict) {
  int64_t threads = requested;
  const int64_t machine_cpus = std::max(1u, std::thread::hardware_concurrency());
  if (threads > 8 * machine_cpus) {  // an OpenMP pool this oversubscribed spends its time waiting at barriers
    const std::string what = "train.threads=" + std::to_string(threads) + " is more than eight times this machine's " +
                             std::to_string(machine_cpus) + " CPUs";
    if (strict)
      throw UserError(what + "; use at most " + std::to_string(machine_cpus) + ", or 0 for the CPUs others leave free");
    log::warn(what, " (the checkpoint was trained elsewhere?); using ", machine_cpus);
    threads = machine_cpus;
  }
  if (threads <= 0) {
    const int64_t ppn = std::max<int64_t>(1, processes_per_node);
    if (ppn > 1) {
      // The node's ranks start together and share its CPUs evenly (what one of them sees busy
      // may be a sibling starting up), as before the probe existed.
      threads = std::max<int64_t>(1, machine_cpus / ppn);
    } else {
      // One process leaves the CPUs other processes keep busy: an OpenMP pool spinning on a core
      // a neighbour uses collapses (0.26-0.33x of its alone speed beside one on 2 cores).
      const CpuAvailability cpus = sample_cpu_availability();
      threads = cpus.free();
      if (threads < cpus.allowed)
        log::info("intra-op threads: ", threads, " of ", cpus.allowed, " CPUs (other processes kept ",
                  std::lround(cpus.busy * 10) / 10.0, " busy); train.threads sets the count");
    }
  }
  at::set_num_threads(static_cast<int>(threads));
  return static_cast<int>(threads);
}

double peak_memory_gib(const torch::Device& device) {
#ifdef ROFORMER_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<double>(
               stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak) /
           (1024.0 * 1024.0 * 1024.0);
  }
#endif
  return 0;
}

void reset_peak_memory(const torch::Device& device) {
#ifdef ROFORMER_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
}

}  // namespace roformer::runtime
