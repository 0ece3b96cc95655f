# Tunebase.cmake: the best known configuration of a kernel, at configure time.
#
#   include(Tunebase)   # with this folder on CMAKE_MODULE_PATH
#   tunebase_best_config(
#     KERNEL  name            # kernel name as stored in tunebase
#     OUTPUT  path/config.h   # header to write
#     [SERVER http://host:port]  # ask a running `tunebase serve` (GET /v1/best)
#     [TOKEN secret]          # for a server run with --auth-reads (default: $ENV{TUNEBASE_TOKEN})
#     [DB file.db]            # or, without SERVER, run `tunebase best --db FILE --json`
#     [TUNEBASE exe]          # the tunebase program for DB (default: found on PATH)
#     [MACHINE name]          # default: this host's name
#     [TASK id]               # default: any input
#     [MAXIMIZE]              # higher objective is better (default: lower, e.g. time)
#     [PREFIX P_]             # macro prefix (default: the kernel name upper-cased, then _)
#     [DEFAULTS k=v ...]      # used, with a warning, when neither source answers
#     [RESULT_VARIABLE var])  # set to "measured", "predicted" or "defaults"
#
# The header holds one `#define <PREFIX><PARAMETER> <value>` per parameter (strings quoted),
# plus <PREFIX>TUNEBASE_SOURCE. It is rewritten only when its content changes, so that an
# unchanged answer does not rebuild the project.
include_guard(GLOBAL)

# Seconds to wait for the server: configure must not hang when it is down.
set(_TUNEBASE_CONNECT_TIMEOUT 5)
set(_TUNEBASE_TIMEOUT 15)

function(_tunebase_url_encode text out_var)
  set(encoded "")
  string(LENGTH "${text}" length)
  if(length GREATER 0)
    math(EXPR last "${length} - 1")
    foreach(i RANGE ${last})
      string(SUBSTRING "${text}" ${i} 1 c)
      if(c MATCHES "^[A-Za-z0-9._~-]$")
        string(APPEND encoded "${c}")
      else()
        string(HEX "${c}" hex)
        string(TOUPPER "${hex}" hex)
        string(APPEND encoded "%${hex}")
      endif()
    endforeach()
  endif()
  set(${out_var} "${encoded}" PARENT_SCOPE)
endfunction()

function(_tunebase_macro_name prefix name out_var)
  string(TOUPPER "${prefix}${name}" macro)
  string(REGEX REPLACE "[^A-Z0-9_]" "_" macro "${macro}")
  set(${out_var} "${macro}" PARENT_SCOPE)
endfunction()

# A JSON value as C: numbers as they are, booleans as 1/0, strings quoted.
function(_tunebase_c_literal json_value json_type out_var)
  if(json_type STREQUAL "STRING")
    string(REPLACE "\\" "\\\\" v "${json_value}")
    string(REPLACE "\"" "\\\"" v "${v}")
    set(${out_var} "\"${v}\"" PARENT_SCOPE)
  elseif(json_type STREQUAL "BOOLEAN")
    if(json_value)
      set(${out_var} 1 PARENT_SCOPE)
    else()
      set(${out_var} 0 PARENT_SCOPE)
    endif()
  else()
    set(${out_var} "${json_value}" PARENT_SCOPE)
  endif()
endfunction()

function(tunebase_best_config)
  cmake_parse_arguments(TB "MAXIMIZE" "KERNEL;OUTPUT;SERVER;TOKEN;DB;TUNEBASE;MACHINE;TASK;PREFIX;RESULT_VARIABLE"
                        "DEFAULTS" ${ARGN})
  if(NOT TB_KERNEL OR NOT TB_OUTPUT)
    message(FATAL_ERROR "tunebase_best_config needs KERNEL <name> and OUTPUT <header>")
  endif()
  if(TB_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tunebase_best_config: unknown arguments ${TB_UNPARSED_ARGUMENTS}; "
                        "allowed: KERNEL OUTPUT SERVER TOKEN DB TUNEBASE MACHINE TASK MAXIMIZE PREFIX "
                        "DEFAULTS RESULT_VARIABLE")
  endif()
  if(NOT DEFINED TB_PREFIX)
    set(TB_PREFIX "${TB_KERNEL}_")
  endif()
  if(NOT TB_MACHINE)
    cmake_host_system_information(RESULT TB_MACHINE QUERY HOSTNAME)
  endif()
  set(direction minimize)
  if(TB_MAXIMIZE)
    set(direction maximize)
  endif()

  set(answer "")
  set(why "")
  if(TB_SERVER)
    _tunebase_url_encode("${TB_KERNEL}" kernel_q)
    _tunebase_url_encode("${TB_MACHINE}" machine_q)
    set(url "${TB_SERVER}/v1/best?kernel=${kernel_q}&machine=${machine_q}&direction=${direction}")
    if(TB_TASK)
      string(APPEND url "&task=${TB_TASK}")
    endif()
    set(reply_file "${CMAKE_CURRENT_BINARY_DIR}/tunebase_best_${TB_KERNEL}.json")
    if(NOT DEFINED TB_TOKEN)
      set(TB_TOKEN "$ENV{TUNEBASE_TOKEN}")
    endif()
    set(auth "")
    if(TB_TOKEN)
      set(auth HTTPHEADER "Authorization: Bearer ${TB_TOKEN}")
    endif()
    file(DOWNLOAD "${url}" "${reply_file}" STATUS status LOG transfer_log ${auth}
         TIMEOUT ${_TUNEBASE_TIMEOUT} INACTIVITY_TIMEOUT ${_TUNEBASE_CONNECT_TIMEOUT})
    list(GET status 0 code)
    if(code EQUAL 0 AND EXISTS "${reply_file}")
      file(READ "${reply_file}" answer)
    else()
      list(GET status 1 text)
      set(why "server ${TB_SERVER} did not answer GET /v1/best (${text})")
      # file(DOWNLOAD) keeps no body of an HTTP error, so the server's reason is not here: name
      # the status the log shows and the URL that tells the reason.
      string(REGEX MATCHALL "HTTP/[0-9.]+ [0-9][0-9][0-9][^\r\n]*" http_lines "${transfer_log}")
      if(http_lines)
        list(GET http_lines -1 http_line)
        string(REGEX REPLACE "^HTTP/[0-9.]+ " "" http_line "${http_line}")
        string(CONCAT why "server ${TB_SERVER} answered HTTP ${http_line} to GET ${url} "
                          "(that URL's body says why)")
      endif()
      if(EXISTS "${reply_file}")
        file(READ "${reply_file}" body)
        string(JSON message ERROR_VARIABLE json_error GET "${body}" error message)
        if(NOT json_error)
          string(APPEND why ": ${message}")
        endif()
      endif()
    endif()
    file(REMOVE "${reply_file}")
  elseif(TB_DB)
    if(NOT TB_TUNEBASE)
      find_program(TB_TUNEBASE tunebase)
    endif()
    if(NOT TB_TUNEBASE)
      set(why "DB ${TB_DB} given but no tunebase program (pass TUNEBASE <path> or put it on PATH)")
    else()
      set(command "${TB_TUNEBASE}" best --kernel "${TB_KERNEL}" --machine "${TB_MACHINE}"
                  --db "${TB_DB}" --json)
      if(TB_TASK)
        list(APPEND command --task "${TB_TASK}")
      endif()
      if(TB_MAXIMIZE)
        list(APPEND command --maximize)
      endif()
      execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                      ERROR_VARIABLE err TIMEOUT ${_TUNEBASE_TIMEOUT})
      if(rc EQUAL 0)
        set(answer "${out}")
      else()
        string(STRIP "${err}" err)
        set(why "`tunebase best --db ${TB_DB}` failed (${rc}): ${err}")
      endif()
    endif()
  else()
    set(why "neither SERVER nor DB was given")
  endif()

  set(lines "")
  set(source "")
  if(answer)
    string(JSON config ERROR_VARIABLE json_error GET "${answer}" config)
    if(json_error)
      set(why "the answer is not a tunebase best-known reply: ${json_error}")
    else()
      string(JSON source ERROR_VARIABLE ignored GET "${answer}" source)
      if(NOT source)
        set(source measured)
      endif()
      string(JSON objective ERROR_VARIABLE ignored GET "${answer}" objective)
      string(JSON n LENGTH "${config}")
      if(n GREATER 0)
        math(EXPR last "${n} - 1")
        foreach(i RANGE ${last})
          string(JSON name MEMBER "${config}" ${i})
          string(JSON value GET "${config}" "${name}")
          string(JSON type TYPE "${config}" "${name}")
          _tunebase_macro_name("${TB_PREFIX}" "${name}" macro)
          _tunebase_c_literal("${value}" "${type}" literal)
          string(APPEND lines "#define ${macro} ${literal}\n")
        endforeach()
      endif()
      message(STATUS "tunebase: ${TB_KERNEL} on ${TB_MACHINE}: ${source} best configuration "
                     "(objective ${objective})")
    endif()
  endif()

  if(NOT source)
    message(WARNING "tunebase: no best configuration of ${TB_KERNEL} for machine ${TB_MACHINE}: "
                    "${why}. Using the defaults given to tunebase_best_config.")
    set(source defaults)
    foreach(pair IN LISTS TB_DEFAULTS)
      if(NOT pair MATCHES "^([^=]+)=(.*)$")
        message(FATAL_ERROR "tunebase_best_config: DEFAULTS entries are name=value, got \"${pair}\"")
      endif()
      _tunebase_macro_name("${TB_PREFIX}" "${CMAKE_MATCH_1}" macro)
      string(APPEND lines "#define ${macro} ${CMAKE_MATCH_2}\n")
    endforeach()
  endif()

  _tunebase_macro_name("${TB_PREFIX}" "TUNEBASE_SOURCE" source_macro)
  string(MAKE_C_IDENTIFIER "${TB_KERNEL}_config_h" guard)
  string(TOUPPER "${guard}" guard)
  # Quoted pieces: a list (set, then ${content} unquoted) would drop every ';', those of string
  # values included.
  string(CONCAT content "// Generated by tunebase_best_config (cmake/Tunebase.cmake); do not edit.\n"
                "// Kernel ${TB_KERNEL}, machine ${TB_MACHINE}: ${source}.\n"
                "#ifndef ${guard}\n#define ${guard}\n"
                "#define ${source_macro} \"${source}\"\n"
                "${lines}"
                "#endif\n")
  set(staged "${CMAKE_CURRENT_BINARY_DIR}/tunebase_staged_${TB_KERNEL}.h")
  file(WRITE "${staged}" "${content}")
  configure_file("${staged}" "${TB_OUTPUT}" COPYONLY)
  if(TB_RESULT_VARIABLE)
    set(${TB_RESULT_VARIABLE} "${source}" PARENT_SCOPE)
  endif()
endfunction()
