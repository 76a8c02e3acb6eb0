// What this binary was built with: version, git revision, build type, and whether the CUDA
// kernels and NCCL were compiled in (and for which architectures), and the Python our services
// run with. No LibTorch here.
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

// The Python that runs our Python services (the Hugging Face tokenizer, the TensorBoard writer):
// $ROFORMER_PYTHON, else the checkout's .venv/bin/python, else python3 on PATH.
std::string service_python();

// service_python(), checked to be an executable where it is a path; otherwise a UserError:
// "<needs>, but '<python>' (ROFORMER_PYTHON, else the checkout's .venv) is not an executable; set
// ROFORMER_PYTHON to one<or_else>". `needs` says what wants it, e.g. "train.tensorboard needs Python
// with the tensorboard package"; `or_else` offers another way out (", or train.tensorboard=false").
std::string checked_service_python(const std::string& needs, const std::string& or_else = "");

}  // namespace roformer
