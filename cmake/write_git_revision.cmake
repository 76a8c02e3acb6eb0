# Run at build time (cmake -P): writes OUT (a .cpp defining roformer_git_revision()) with the
# current `git describe`, touching the file only when the revision changed.
execute_process(COMMAND git describe --always --dirty --abbrev=12
                WORKING_DIRECTORY "${SRC}" OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR rev STREQUAL "")
  set(rev "unknown")
endif()
set(text "// Generated at build time by cmake/write_git_revision.cmake.\nconst char* roformer_git_revision() { return \"${rev}\"; }\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
