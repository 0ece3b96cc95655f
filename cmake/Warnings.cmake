# tunebase_warnings(target): the project's warning set, as errors when TUNEBASE_WERROR is on.
function(tunebase_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                         -Wnon-virtual-dtor -Wno-unknown-pragmas)
  if(TUNEBASE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# tunebase_library(name SOURCES...): one library per module folder, headers included as "module/x.h".
function(tunebase_library name)
  add_library(${name} ${ARGN})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  tunebase_warnings(${name})
endfunction()
