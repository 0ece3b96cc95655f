// Shared pieces of the tunebase command line: exit codes, the interrupt flag, output helpers.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

#include "core/failure_reasons.h"
#include "db/store.h"

namespace tunebase::cli {

/// Exit codes, one per error class (mapped in one place: main.cc).
enum ExitCode : int {
  kOk = 0,
  kError = 1,         ///< any other tunebase::Error
  kInvalidInput = 2,  ///< a bad flag, file or value
  kNotFound = 3,      ///< an unknown study, kernel or machine
  kStorage = 4,       ///< the database cannot be used (locked, read-only, not SQLite)
  kConflict = 5,      ///< a request that contradicts the stored state
  kIo = 6,  ///< a file or connection could not be read or written (missing, denied, disk full)
  /// Ctrl-C (128 + SIGINT; SIGTERM gives 143, SIGHUP 129): every finished trial is stored
  kInterrupted = 130,
};

/// The database every command uses without --db.
inline constexpr const char* kDefaultDb = "tunebase.db";

/// This machine's host name ("unknown-host" when it cannot be read): in client ids.
std::string host_name();

/// A failure message (a program's stderr, say) on one line: control characters become spaces.
std::string one_line(std::string text);

/// Why evaluations failed, as `tunebase trials` ends: a line per reason, most frequent first,
/// then one per status of the others; empty when nothing failed.
std::string failure_reasons_text(const FailureBreakdown& breakdown);

/// The largest --budget any command takes: the store's limit.
inline constexpr auto kMaxBudget = static_cast<std::size_t>(db::kMaxStudyBudget);

/// Set by SIGINT/SIGTERM/SIGHUP; long loops finish the current step, store it, and stop.
extern std::atomic<bool> g_interrupted;
/// The signal that set g_interrupted (SIGINT, SIGTERM or SIGHUP): the exit status is 128 + it.
extern std::atomic<int> g_interrupt_signal;
/// Installs the handler: the first signal sets g_interrupted, a second one ends the process.
void install_interrupt_handler();
/// Set while a sweep waits for another writer's lock on its database (defined with the sweep);
/// a second signal then sets g_stop_waiting instead of ending the process without a word, and
/// the sweep ends its wait naming what it could not store.
extern std::atomic<bool> g_waiting_for_database;
extern std::atomic<bool> g_stop_waiting;

/// Whether `study`, as a --study option gives it, is an id: digits only (study names never are).
bool is_study_id(std::string_view study);

/// A study by id (digits) or name; NotFound naming what was asked.
db::StudyRecord resolve_study(const db::Store& store, const std::string& study);

/// Registers a subcommand's options on `app`; the callbacks run it.
void add_sweep_command(CLI::App& app);
void add_query_commands(CLI::App& app);
void add_benchmark_command(CLI::App& app);
/// convergence (apps/convergence.cc): how stored studies reached their best.
void add_convergence_command(CLI::App& app);
/// compare (apps/compare.cc): machine against machine.
void add_compare_command(CLI::App& app);
/// serve, worker, token (apps/serve.cc, apps/worker.cc).
void add_service_commands(CLI::App& app);

}  // namespace tunebase::cli
