// What this binary was built with: version, git revision, build type, and whether the CUDA
// kernels and NCCL were compiled in (and for which architectures). No LibTorch here.
#pragma once

#include <string>

namespace roformer {

struct BuildInfo {
  std::string version;
  std::string git_revision;
  std::string build_type;
  bool cuda_kernels = false;
  std::string cuda_archs;    // e.g. "7.5;8.0;9.0;12.0+PTX"
  std::string cuda_toolkit;  // nvcc version the kernels were compiled with
  bool nccl = false;
  std::string torch_build_version;  // the LibTorch version CMake found
  std::string source_dir;           // the checkout it was built from (scripts, configs, .venv)
};

const BuildInfo& build_info();

}  // namespace roformer
