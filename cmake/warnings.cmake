# Warning flags for project code (third-party headers come in as system includes and stay
# quiet). roformer_warnings is an interface target every project target links.
add_library(roformer_warnings INTERFACE)
target_compile_options(roformer_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow=local -Wnon-virtual-dtor -Wno-unused-parameter -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${ROFORMER_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${ROFORMER_WERROR}>>:-Werror=all-warnings>)
