# NCCL for the multi-GPU communicator. Prefers the nvidia-nccl wheel that LibTorch itself
# loads (same libnccl.so.2 at run time), then the CUDA toolkit, then the system.
# Defines roformer::nccl and ROFORMER_HAVE_NCCL when found.
set(ROFORMER_HAVE_NCCL OFF)
if(ROFORMER_WITH_CUDA)
  set(_nccl_hints "${ROFORMER_VENV_SITE}/nvidia/nccl" "${CUDAToolkit_LIBRARY_ROOT}" "/usr/local/cuda" "/usr")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(roformer::nccl UNKNOWN IMPORTED)
    set_target_properties(roformer::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
    set(ROFORMER_HAVE_NCCL ON)
    message(STATUS "roformer: NCCL ${NCCL_LIBRARY}")
  else()
    message(STATUS "roformer: NCCL not found; multi-GPU data parallel is disabled")
  endif()
endif()
