# Compiler caching: ccache in front of g++ and nvcc when it is installed. The sloppiness
# settings let ccache cache translation units that use the precompiled LibTorch header.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(_roformer_launcher "${CMAKE_COMMAND}" -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" "${CCACHE_PROGRAM}")
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_roformer_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${_roformer_launcher})
  message(STATUS "roformer: ccache enabled (${CCACHE_PROGRAM})")
endif()
