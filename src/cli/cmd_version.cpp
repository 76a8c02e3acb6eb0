// `roformer version`: project version and git revision, LibTorch version, CUDA kernels and
// architectures, visible GPUs, NCCL version and intra-op threads.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <iostream>

#include "cli/commands.h"
#include "roformer/common/build_info.h"
#include "roformer/common/host_memory.h"
#include "roformer/distributed/nccl_version.h"

namespace roformer::cli {

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
              << "host allocator    " << tune_host_allocator() << "\n";
    exit_code = 0;
  });
}

}  // namespace roformer::cli
