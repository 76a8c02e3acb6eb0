# Compiler caching: ccache in front of g++ and nvcc when it is installed. The sloppiness
# settings let ccache cache translation units that use the precompiled LibTorch header. Clones
# in other folders (CI builds a fresh one) share the cache: paths under the checkout are hashed
# relative to it (CCACHE_BASEDIR), and the build directory is not hashed (CCACHE_NOHASHDIR; ccache
# hashes it for -g builds such as the ASan preset, and for every nvcc call, so those missed in
# every new clone; debug info then names the folder that first compiled an object). For nvcc see
# also CMAKE_INCLUDE_SYSTEM_FLAG_CUDA in torch.cmake.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(_roformer_launcher "${CMAKE_COMMAND}" -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" "CCACHE_NOHASHDIR=1" "${CCACHE_PROGRAM}")
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_roformer_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${_roformer_launcher})
  message(STATUS "roformer: ccache enabled (${CCACHE_PROGRAM})")
endif()
