// `roformer version`: project version and git revision, LibTorch version, CUDA kernels and
// architectures, visible GPUs, NCCL version, intra-op threads, the host allocator and the CPU
// kernels' vector width.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <iostream>
#include <string>

#include "cli/commands.h"
#include "roformer/common/build_info.h"
#include "roformer/common/host_memory.h"
#include "roformer/common/large_block_cache.h"
#include "roformer/distributed/nccl_version.h"
#include "roformer/ops/common/cpu_vectors.h"

namespace roformer::cli {
namespace {

// The CPU kernels' vector width and why.
std::string cpu_vectors_text() {
  if (ops::cpu_vector_bytes() == 64) return "64 bytes (AVX-512)";
  return ops::wide_cpu_vectors_available() ? "32 bytes (ROFORMER_CPU_VECTOR_BYTES=32; the CPU has AVX-512)"
                                           : "32 bytes";
}

}  // namespace

void add_version_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("version", "Print versions, CUDA/NCCL build facts, GPUs and threads");
  cmd->callback([&exit_code] {
    const BuildInfo& b = build_info();
    std::cout << "roformer          " << b.version << " (" << b.git_revision << ", " << b.build_type << ")\n"
              << "libtorch          " << TORCH_VERSION << "\n"
              << "cuda kernels      "
              << (b.cuda_kernels ? "compiled with CUDA " + b.cuda_toolkit + " for archs " + b.cuda_archs
                                 : std::string("not compiled (CPU only)"))
              << "\n"
              << "visible gpus      " << static_cast<int>(torch::cuda::device_count()) << "\n"
              << "nccl              " << dist::nccl_version_text() << "\n"
              << "intra-op threads  " << at::get_num_threads() << "\n"
              << "host allocator    " << tune_host_allocator() << "\n"
              << "large blocks      " << install_large_block_cache() << "\n"
              << "cpu vectors       " << cpu_vectors_text() << "\n";
    exit_code = 0;
  });
}

}  // namespace roformer::cli
