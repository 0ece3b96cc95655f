# tunebase_warnings(target): the project's warning set, as errors when TUNEBASE_WERROR is on.
function(tunebase_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                         -Wnon-virtual-dtor -Wno-unknown-pragmas)
  if(TUNEBASE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  # GCC 12 reports false -Wrestrict / -Wstringop-overflow positives inside libstdc++'s string
  # code at -O3 (GCC bugs 105329, 105651); they stay warnings, never errors.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-error=restrict -Wno-error=stringop-overflow)
  endif()
endfunction()

# tunebase_library(name SOURCES...): one library per module folder, headers included as "module/x.h".
function(tunebase_library name)
  add_library(${name} ${ARGN})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  tunebase_warnings(${name})
endfunction()
