# ROFORMER_SANITIZE=address;undefined adds ASan/UBSan to project code (the `asan` preset).
# LibTorch itself is not instrumented (its code runs unchecked); no suppressions are needed.
if(ROFORMER_SANITIZE)
  string(REPLACE ";" "," _san "${ROFORMER_SANITIZE}")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${_san}> $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=${_san})
  message(STATUS "roformer: sanitizers ${_san}")
endif()
