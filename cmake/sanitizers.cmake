# ROFORMER_SANITIZE=address;undefined adds ASan/UBSan to project code (the `asan` preset).
# LibTorch itself is not instrumented; see tests/asan.supp for what that implies.
if(ROFORMER_SANITIZE)
  string(REPLACE ";" "," _san "${ROFORMER_SANITIZE}")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${_san}> $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=${_san})
  message(STATUS "roformer: sanitizers ${_san}")
endif()
