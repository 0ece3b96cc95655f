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
#     [MAXIMIZE]              # higher objective is better (default: the direction of the
#                             # kernel's studies when they all take one, else lower)
#     [PREFIX P_]             # macro prefix (default: the kernel name upper-cased, then _)
#     [DEFAULTS k=v ...]      # used, with a warning, when neither source answers (and for
#                             # a parameter the answer lacks)
#     [TIMEOUT seconds]       # the longest wait for the server or the CLI (default 60: a
#                             # prediction for a new machine fits a model, seconds on a busy
#                             # server), retries after a 503's or 429's Retry-After included
#     [REQUIRED]              # no answer is an error, not the defaults (release builds)
#     [RESULT_VARIABLE var])  # set to "measured", "predicted", "kept" or "defaults"
#
# The header holds one `#define <PREFIX><PARAMETER> <value>` per parameter (strings quoted),
# plus <PREFIX>TUNEBASE_SOURCE. It is rewritten only when its content changes, so that an
# unchanged answer does not rebuild the project. When no source can be reached, a header that
# holds an earlier answer (measured or predicted) for the same kernel and machine, defining
# every DEFAULTS parameter, is kept with a warning ("kept"): a configure run while the server is
# down does not untune a build. tunebase's 404 ("nothing measured", "no successful
# measurement") is an answer: the defaults;
# a 404 of a wrong URL (no tunebase error header) is no answer, and keeps the earlier one.
# A server that answers 503 or 429 with Retry-After (busy) is asked again after it, within
# TIMEOUT. The answer's note (a machine not registered: "did you mean ...?"), and the notes
# `tunebase best` prints on stderr, are shown: as warnings when the answer may not be the one
# asked for.
include_guard(GLOBAL)

# Seconds to wait for an answer by default: configure must not hang when the server does.
set(_TUNEBASE_TIMEOUT 60)

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

# CMake's string(JSON GET) writes a real with 17 significant digits (0.3 as 0.29999999999999999).
# The answer's own text holds each number as its writer wrote it (tunebase: the shortest text
# that reads back to the same double): the first number token of `answer` that CMake reads as
# the same double as `value` is that text. Else `value` as CMake wrote it.
function(_tunebase_number_text answer value out_var)
  set(${out_var} "${value}" PARENT_SCOPE)
  string(REGEX MATCHALL "-?[0-9]+[.eE][-+.0-9eE]*" tokens "${answer}")
  foreach(token IN LISTS tokens)
    string(JSON same ERROR_VARIABLE not_a_number GET "[${token}]" 0)
    if(NOT not_a_number AND same STREQUAL value)
      set(${out_var} "${token}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
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

# The notes `tunebase best` prints on stderr, each line "note: ...": a machine name the database
# does not hold (a prediction as for a new machine, perhaps "did you mean ...?") as a warning,
# anything else (the direction its studies take) as a status line.
function(_tunebase_show_cli_notes text prefix)
  string(STRIP "${text}" rest)
  while(NOT rest STREQUAL "")
    string(FIND "${rest}" "\n" end)
    if(end EQUAL -1)
      set(line "${rest}")
      set(rest "")
    else()
      string(SUBSTRING "${rest}" 0 ${end} line)
      math(EXPR end "${end} + 1")
      string(SUBSTRING "${rest}" ${end} -1 rest)
    endif()
    string(STRIP "${line}" line)
    string(REGEX REPLACE "^note: " "" line "${line}")
    if(line MATCHES "did you mean|as for a new machine")
      message(WARNING "${prefix}${line}")
    elseif(NOT line STREQUAL "")
      message(STATUS "${prefix}${line}")
    endif()
  endwhile()
endfunction()

function(tunebase_best_config)
  cmake_parse_arguments(
    TB "MAXIMIZE;REQUIRED"
    "KERNEL;OUTPUT;SERVER;TOKEN;DB;TUNEBASE;MACHINE;TASK;PREFIX;TIMEOUT;RESULT_VARIABLE" "DEFAULTS"
    ${ARGN})
  if(NOT TB_KERNEL OR NOT TB_OUTPUT)
    message(FATAL_ERROR "tunebase_best_config needs KERNEL <name> and OUTPUT <header>")
  endif()
  if(TB_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tunebase_best_config: unknown arguments ${TB_UNPARSED_ARGUMENTS}; "
                        "allowed: KERNEL OUTPUT SERVER TOKEN DB TUNEBASE MACHINE TASK MAXIMIZE PREFIX "
                        "DEFAULTS TIMEOUT REQUIRED RESULT_VARIABLE")
  endif()
  if(TB_TASK AND NOT TB_TASK MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "tunebase_best_config: TASK is a task id (a positive integer; tunebase "
                        "studies shows them), got \"${TB_TASK}\"")
  endif()
  if(NOT DEFINED TB_TIMEOUT)
    set(TB_TIMEOUT ${_TUNEBASE_TIMEOUT})
  elseif(NOT TB_TIMEOUT MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "tunebase_best_config: TIMEOUT is a whole number of seconds, got "
                        "\"${TB_TIMEOUT}\"")
  endif()
  # DEFAULTS as name;value pairs, checked before anything is asked.
  set(default_names "")
  foreach(pair IN LISTS TB_DEFAULTS)
    if(NOT pair MATCHES "^([^=]+)=(.*)$")
      message(FATAL_ERROR "tunebase_best_config: DEFAULTS entries are name=value, got \"${pair}\"")
    endif()
    list(APPEND default_names "${CMAKE_MATCH_1}")
    set(default_value_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endforeach()
  if(NOT DEFINED TB_PREFIX)
    set(TB_PREFIX "${TB_KERNEL}_")
  endif()
  if(NOT TB_MACHINE)
    cmake_host_system_information(RESULT TB_MACHINE QUERY HOSTNAME)
  endif()
  set(answer "")
  set(why "")
  set(cli_notes "")  # what `tunebase best` said on stderr beside its answer
  # No source could be reached (as against one that answered that it knows nothing): only then
  # is an earlier answer kept.
  set(unreachable FALSE)
  if(TB_SERVER)
    _tunebase_url_encode("${TB_KERNEL}" kernel_q)
    _tunebase_url_encode("${TB_MACHINE}" machine_q)
    set(url "${TB_SERVER}/v1/best?kernel=${kernel_q}&machine=${machine_q}")
    # Without MAXIMIZE the server takes the kernel's studies' direction, as `tunebase best` does.
    if(TB_MAXIMIZE)
      string(APPEND url "&direction=maximize")
    endif()
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
    # A busy server (503: too many questions to models wait, or its database is locked; 429 from
    # a rate-limiting proxy) says in Retry-After when to ask again: wait that long and ask again
    # while an answer can still come within TIMEOUT, the bound on the whole wait. Many
    # configures at once for a new machine (CI) each ask for a prediction and fill the server's
    # queue of questions to models.
    string(TIMESTAMP started "%s" UTC)
    math(EXPR deadline "${started} + ${TB_TIMEOUT}")
    set(retries 0)
    set(gave_up "")
    while(TRUE)
      string(TIMESTAMP now "%s" UTC)
      math(EXPR left "${deadline} - ${now}")
      if(left LESS 1)
        set(left 1)
      endif()
      file(REMOVE "${reply_file}")
      file(DOWNLOAD "${url}" "${reply_file}" STATUS status LOG transfer_log ${auth}
           TIMEOUT ${left})
      list(GET status 0 code)
      if(code EQUAL 0)
        break()
      endif()
      string(REGEX MATCHALL "HTTP/[0-9.]+ [0-9][0-9][0-9]" http_codes "${transfer_log}")
      if(NOT http_codes)
        break()
      endif()
      list(GET http_codes -1 http_code)
      if(NOT http_code MATCHES " (503|429)$")
        break()
      endif()
      # Seconds only; an HTTP date there is not waited for.
      if(NOT transfer_log MATCHES "[Rr]etry-[Aa]fter: *([0-9]+)")
        set(gave_up "; it sent no Retry-After in seconds, so it was not asked again")
        break()
      endif()
      set(wait ${CMAKE_MATCH_1})
      if(wait LESS 1)
        set(wait 1)  # no tight loop of questions against a server that is busy
      endif()
      string(TIMESTAMP now "%s" UTC)
      math(EXPR asked_again_at "${now} + ${wait}")
      if(NOT asked_again_at LESS deadline)
        string(CONCAT gave_up "; not asked again after its Retry-After of ${wait} s: the "
                              "answer could not come within TIMEOUT ${TB_TIMEOUT} s")
        break()
      endif()
      math(EXPR retries "${retries} + 1")
      string(REGEX REPLACE "^HTTP/[0-9.]+ " "" http_code "${http_code}")
      message(STATUS "tunebase: ${TB_SERVER} is busy (HTTP ${http_code}); asking again in "
                     "${wait} s, as its Retry-After says (retry ${retries}, TIMEOUT "
                     "${TB_TIMEOUT} s)")
      execute_process(COMMAND "${CMAKE_COMMAND}" -E sleep ${wait})
    endwhile()
    if(retries GREATER 0)
      string(TIMESTAMP now "%s" UTC)
      math(EXPR waited "${now} - ${started}")
      string(PREPEND gave_up "; asked again ${retries} times after its Retry-After, for ${waited} "
                             "s in all (TIMEOUT ${TB_TIMEOUT} s)")
    endif()
    if(code EQUAL 0 AND EXISTS "${reply_file}")
      file(READ "${reply_file}" answer)
      if(retries GREATER 0)
        message(STATUS "tunebase: ${TB_SERVER} answered after ${retries} retries")
      endif()
    else()
      list(GET status 1 text)
      string(CONCAT why "server ${TB_SERVER} did not answer GET /v1/best within TIMEOUT "
                        "${TB_TIMEOUT} s or at all (${text})")
      set(unreachable TRUE)
      # file(DOWNLOAD) keeps no body of an HTTP error, so the server's reason is not here: name
      # the status the log shows and the URL that tells the reason.
      # A transfer that failed after a 200 status line (a timeout) keeps curl's reason.
      string(REGEX MATCHALL "HTTP/[0-9.]+ [0-9][0-9][0-9][^\r\n]*" http_lines "${transfer_log}")
      if(http_lines)
        list(GET http_lines -1 http_line)
        string(REGEX REPLACE "^HTTP/[0-9.]+ " "" http_line "${http_line}")
        if(http_line MATCHES "^[45]")
          # A tunebase server names its error and says why in headers (X-Tunebase-Error,
          # X-Tunebase-Message), as the body it sends too.
          set(error_code "")
          set(error_message "")
          if(transfer_log MATCHES "[Xx]-[Tt]unebase-[Ee]rror: *([a-z_]+)")
            set(error_code "${CMAKE_MATCH_1}")
          endif()
          if(transfer_log MATCHES "[Xx]-[Tt]unebase-[Mm]essage: *([^\r\n]*)")
            set(error_message "${CMAKE_MATCH_1}")
          endif()
          # tunebase's "nothing known" (not_found) and a bad question (invalid_input) are
          # answers; 401, 5xx, and a 404 of another server or path (a wrong URL) are not.
          if(error_code MATCHES "^(not_found|invalid_input)$")
            set(unreachable FALSE)
          endif()
          if(error_message)
            string(CONCAT why "server ${TB_SERVER} answered HTTP ${http_line} to GET ${url}: "
                              "${error_message}")
          elseif(error_code)
            string(CONCAT why "server ${TB_SERVER} answered HTTP ${http_line} (${error_code}) "
                              "to GET ${url} (that URL's body says why)")
          else()
            string(CONCAT why "server ${TB_SERVER} answered HTTP ${http_line} to GET ${url}, "
                              "not as a tunebase server does (is SERVER the server's base URL, "
                              "http://host:port?)")
          endif()
        endif()
      endif()
      if(EXISTS "${reply_file}")
        file(READ "${reply_file}" body)
        string(JSON message ERROR_VARIABLE json_error GET "${body}" error message)
        if(NOT json_error)
          string(APPEND why ": ${message}")
        endif()
      endif()
      string(APPEND why "${gave_up}")
    endif()
    file(REMOVE "${reply_file}")
  elseif(TB_DB)
    if(NOT TB_TUNEBASE)
      find_program(TB_TUNEBASE tunebase)
    endif()
    if(NOT TB_TUNEBASE)
      set(why "DB ${TB_DB} given but no tunebase program (pass TUNEBASE <path> or put it on PATH)")
      set(unreachable TRUE)
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
                      ERROR_VARIABLE err TIMEOUT ${TB_TIMEOUT})
      if(rc EQUAL 0)
        set(answer "${out}")
        set(cli_notes "${err}")
      else()
        string(STRIP "${err}" err)
        set(why "`tunebase best --db ${TB_DB}` failed (${rc}): ${err}")
        if(NOT EXISTS "${TB_DB}" OR NOT rc MATCHES "^[0-9]+$")
          set(unreachable TRUE)  # no database there, or the program timed out or crashed
        endif()
      endif()
    endif()
  else()
    set(why "neither SERVER nor DB was given")
  endif()

  set(lines "")
  set(source "")
  if(answer)
    string(JSON config ERROR_VARIABLE json_error GET "${answer}" config)
    if(NOT json_error)
      string(JSON config_type ERROR_VARIABLE json_error TYPE "${answer}" config)
      if(NOT json_error AND NOT config_type STREQUAL "OBJECT")
        set(json_error "its config is not an object")
      endif()
    endif()
    if(json_error)
      set(why "the answer is not a tunebase best-known reply: ${json_error}")
    else()
      string(JSON source ERROR_VARIABLE ignored GET "${answer}" source)
      if(NOT source)
        set(source measured)
      endif()
      string(JSON objective ERROR_VARIABLE ignored GET "${answer}" objective)
      _tunebase_number_text("${answer}" "${objective}" objective)
      string(JSON unit ERROR_VARIABLE unit_error GET "${answer}" unit)
      if(unit_error OR unit STREQUAL "null")
        set(unit "")
      endif()
      set(value_text "objective ${objective}")
      if(unit)
        string(APPEND value_text " ${unit}")
      endif()
      string(JSON lower ERROR_VARIABLE no_interval GET "${answer}" lower)
      string(JSON upper ERROR_VARIABLE no_interval GET "${answer}" upper)
      if(NOT no_interval)
        _tunebase_number_text("${answer}" "${lower}" lower)
        _tunebase_number_text("${answer}" "${upper}" upper)
        string(APPEND value_text ", 68% interval ${lower} .. ${upper}")
      endif()
      set(answered_macros "")
      string(JSON n LENGTH "${config}")
      if(n GREATER 0)
        math(EXPR last "${n} - 1")
        foreach(i RANGE ${last})
          string(JSON name MEMBER "${config}" ${i})
          string(JSON value GET "${config}" "${name}")
          string(JSON type TYPE "${config}" "${name}")
          if(type STREQUAL "NUMBER")
            _tunebase_number_text("${answer}" "${value}" value)
          endif()
          _tunebase_macro_name("${TB_PREFIX}" "${name}" macro)
          _tunebase_c_literal("${value}" "${type}" literal)
          string(APPEND lines "#define ${macro} ${literal}\n")
          list(APPEND answered_macros "${macro}")
        endforeach()
      endif()
      message(STATUS "tunebase: ${TB_KERNEL} on ${TB_MACHINE}: ${source} best configuration "
                     "(${value_text})")
      # The answer's note (GET /v1/best, and `tunebase best --json` of a measurement): a machine
      # not registered ("did you mean ...?"), an input measured nowhere, studies of both
      # directions. Each says the answer may not be the one asked for.
      string(JSON note ERROR_VARIABLE no_note GET "${answer}" note)
      if(NOT no_note AND NOT note STREQUAL "")
        message(WARNING "tunebase: ${TB_KERNEL} on ${TB_MACHINE}: ${note}")
      endif()
      _tunebase_show_cli_notes("${cli_notes}" "tunebase: ${TB_KERNEL} on ${TB_MACHINE}: ")
      # A parameter the answer lacks (a study of a narrower space) keeps its default.
      # By macro name: Kernel Tuner's BLOCK_SIZE answers DEFAULTS block_size.
      foreach(name IN LISTS default_names)
        _tunebase_macro_name("${TB_PREFIX}" "${name}" macro)
        if(NOT macro IN_LIST answered_macros)
          message(WARNING "tunebase: the ${source} configuration of ${TB_KERNEL} has no "
                          "parameter ${name}; using its default ${default_value_${name}}")
          string(APPEND lines "#define ${macro} ${default_value_${name}}\n")
        endif()
      endforeach()
    endif()
  endif()

  if(NOT source)
    set(reason "tunebase: no best configuration of ${TB_KERNEL} for machine ${TB_MACHINE}: ${why}")
    if(TB_REQUIRED)
      message(FATAL_ERROR "${reason} (REQUIRED: no defaults)")
    endif()
    # With no source reachable, an earlier answer for this kernel and machine in the header is
    # worth more than the defaults (when it defines every DEFAULTS parameter).
    _tunebase_macro_name("${TB_PREFIX}" "TUNEBASE_SOURCE" source_macro)
    if(unreachable AND EXISTS "${TB_OUTPUT}")
      string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" kernel_re "${TB_KERNEL}")
      string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" machine_re "${TB_MACHINE}")
      file(STRINGS "${TB_OUTPUT}" earlier
           REGEX "^// Kernel ${kernel_re}, machine ${machine_re}: (measured|predicted)\\.$")
      file(STRINGS "${TB_OUTPUT}" defines REGEX "^#define ")
      foreach(name IN LISTS default_names)
        _tunebase_macro_name("${TB_PREFIX}" "${name}" macro)
        if(NOT defines MATCHES "#define ${macro} ")
          set(earlier "")
        endif()
      endforeach()
      if(earlier)
        message(WARNING "${reason}. Keeping the answer of an earlier configure in ${TB_OUTPUT}.")
        if(TB_RESULT_VARIABLE)
          set(${TB_RESULT_VARIABLE} kept PARENT_SCOPE)
        endif()
        return()
      endif()
    endif()
    message(WARNING "${reason}. Using the defaults given to tunebase_best_config.")
    set(source defaults)
    foreach(name IN LISTS default_names)
      _tunebase_macro_name("${TB_PREFIX}" "${name}" macro)
      string(APPEND lines "#define ${macro} ${default_value_${name}}\n")
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
