# LibTorch discovery. Order: a user's Torch_DIR / CMAKE_PREFIX_PATH, else the project's
# .venv (torch from PyPI, via torch.utils.cmake_prefix_path). Decides ROFORMER_WITH_CUDA from
# ROFORMER_CUDA (AUTO: LibTorch has CUDA and nvcc exists) and the CUDA architectures.
# A CUDA build of LibTorch needs the CUDA toolkit at configure time even with ROFORMER_CUDA=OFF
# (its own CMake config looks for it); CPU-only users should point at a CPU LibTorch.

set(ROFORMER_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH "Python with torch (LibTorch source)")
set(ROFORMER_VENV_SITE "")
if(EXISTS "${ROFORMER_PYTHON}")
  execute_process(COMMAND "${ROFORMER_PYTHON}" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
                  OUTPUT_VARIABLE ROFORMER_VENV_SITE OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()

find_path(_roformer_user_torch NAMES TorchConfig.cmake PATHS ${CMAKE_PREFIX_PATH} "${Torch_DIR}"
          PATH_SUFFIXES share/cmake/Torch NO_DEFAULT_PATH NO_CACHE)
if(NOT _roformer_user_torch)
  if(NOT EXISTS "${ROFORMER_PYTHON}")
    message(FATAL_ERROR "LibTorch not found: run scripts/setup.sh (creates .venv/ with torch==2.11.0), "
                        "or pass -DCMAKE_PREFIX_PATH=/path/to/libtorch")
  endif()
  execute_process(COMMAND "${ROFORMER_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${ROFORMER_PYTHON} cannot import torch: run scripts/setup.sh")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
  set(_roformer_user_torch "${_torch_prefix}/Torch")
endif()
get_filename_component(ROFORMER_TORCH_ROOT "${_roformer_user_torch}/../../.." ABSOLUTE)

# Does this LibTorch have CUDA? (libtorch_cuda.so sits next to libtorch.so)
set(_torch_has_cuda OFF)
if(EXISTS "${ROFORMER_TORCH_ROOT}/lib/libtorch_cuda.so")
  set(_torch_has_cuda ON)
endif()
find_program(ROFORMER_NVCC nvcc HINTS /usr/local/cuda/bin "$ENV{CUDA_HOME}/bin")

if(ROFORMER_CUDA STREQUAL "AUTO")
  if(_torch_has_cuda AND ROFORMER_NVCC)
    set(ROFORMER_WITH_CUDA ON)
  else()
    set(ROFORMER_WITH_CUDA OFF)
  endif()
elseif(ROFORMER_CUDA)
  if(NOT _torch_has_cuda)
    message(FATAL_ERROR "ROFORMER_CUDA=ON but LibTorch at ${ROFORMER_TORCH_ROOT} has no CUDA (no libtorch_cuda.so)")
  endif()
  if(NOT ROFORMER_NVCC)
    message(FATAL_ERROR "ROFORMER_CUDA=ON but nvcc was not found: install the CUDA toolkit or set CUDA_HOME")
  endif()
  set(ROFORMER_WITH_CUDA ON)
else()
  set(ROFORMER_WITH_CUDA OFF)
endif()

# Default CUDA architectures for our kernels (LibTorch's CMake takes them as TORCH_CUDA_ARCH_LIST):
#   7.5  Turing: T4, RTX 20xx (the free-tier cloud GPU)
#   8.0  Ampere datacentre: A100, A30
#   8.6  Ampere consumer/workstation: A10, A40, RTX 30xx
#   8.9  Ada: L4, L40S, RTX 40xx
#   9.0  Hopper: H100, H200
#   10.0 Blackwell datacentre: B200, GB200
#   12.0 Blackwell consumer: RTX 50xx; +PTX so newer GPUs can JIT the kernels
set(ROFORMER_CUDA_ARCHS "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX" CACHE STRING "CUDA architectures (TORCH_CUDA_ARCH_LIST syntax)")
if(_torch_has_cuda)
  set(TORCH_CUDA_ARCH_LIST "${ROFORMER_CUDA_ARCHS}")
  if(ROFORMER_NVCC AND NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${ROFORMER_NVCC}")
  endif()
endif()

# CMP0104 OLD: enable_language(CUDA) inside LibTorch's config must not invent a default
# CMAKE_CUDA_ARCHITECTURES (LibTorch ignores it and warns); TORCH_CUDA_ARCH_LIST rules.
# The PyPI wheel builds Kineto into libtorch_cpu.so and ships no libkineto, so LibTorch's config
# warns "library kineto not found" on every configure: its lookup is pointed at libtorch_cpu.so,
# which is linked anyway (a LibTorch that has libkineto is left to find its own).
if(NOT kineto_LIBRARY AND NOT EXISTS "${ROFORMER_TORCH_ROOT}/lib/libkineto.a"
   AND EXISTS "${ROFORMER_TORCH_ROOT}/lib/libtorch_cpu.so")
  set(kineto_LIBRARY "${ROFORMER_TORCH_ROOT}/lib/libtorch_cpu.so" CACHE FILEPATH "Kineto (inside libtorch_cpu.so)" FORCE)
endif()
cmake_policy(PUSH)
cmake_policy(SET CMP0104 OLD)
find_package(Torch REQUIRED)
cmake_policy(POP)
# nvcc's system include directories as "-isystem PATH" (nvcc takes both forms) instead of CMake's
# "-isystem=PATH", which ccache does not rewrite relative to CCACHE_BASEDIR: with it every CUDA
# object missed the cache in a new clone.
if(CMAKE_CUDA_COMPILER_LOADED)
  set(CMAKE_INCLUDE_SYSTEM_FLAG_CUDA "-isystem ")
endif()
message(STATUS "roformer: LibTorch ${Torch_VERSION} at ${ROFORMER_TORCH_ROOT} (CUDA in LibTorch: ${_torch_has_cuda})")
message(STATUS "roformer: CUDA kernels: ${ROFORMER_WITH_CUDA} (archs ${ROFORMER_CUDA_ARCHS})")

if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR "This LibTorch uses the pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0); yaml-cpp, spdlog and "
                      "GoogleTest from Debian use the C++11 ABI. Use a cxx11-ABI LibTorch (PyPI torch >= 2.7 is).")
endif()

# The PyPI LibTorch libraries export their own copies of some std::filesystem functions
# (built with a newer libstdc++); resolved through them, std::filesystem::remove_all crashes.
# Executables therefore list the system libstdc++ first among their DT_NEEDED entries so the
# whole process binds std:: symbols to one implementation.
function(roformer_prefer_system_libstdcxx target)
  target_link_options(${target} BEFORE PRIVATE "LINKER:--push-state,--no-as-needed" -lstdc++ "LINKER:--pop-state")
endfunction()
