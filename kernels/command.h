// Makes any program tunable: a command template is filled in with a configuration and run.
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/space.h"
#include "core/trial.h"
#include "kernels/evaluator.h"

namespace tunebase {

struct CommandOptions {
  /// The longest timeout: a steady-clock deadline in nanoseconds overflows past about 292
  /// years; a year is plenty.
  static constexpr double kMaxTimeoutSeconds = 365.0 * 24 * 3600;
  /// Wall-clock limit of one run, in (0, kMaxTimeoutSeconds]; the whole process group is
  /// killed when it passes.
  double timeout_seconds = 60.0;
  /// ECMAScript regex applied to stdout line by line (a line ends at \n or \r; lines longer
  /// than 4 KiB are not searched); its first capture group (else the whole match) of the last
  /// match is the objective. Unset: the last number printed on stdout.
  std::optional<std::string> objective_regex;
  /// The NAME whose last `NAME: NUMBER` line on stdout is the objective (output_metrics);
  /// unset: objective_regex, else the last number. Excludes objective_regex.
  std::optional<std::string> objective_metric;
  /// Runs per configuration; the objective is the median, every value kept in raw.
  int repeats = 1;
  /// Folder the command runs in; empty keeps the current one.
  std::string working_directory;
  /// Whether lower objective values are better (times) or higher (throughputs).
  bool minimize = true;
  /// Unit of the objective the program prints: "s", "ms", "us" or "ns" are shown as times,
  /// anything else ("GFLOP/s") as a label; empty: a plain number (the program's own unit).
  std::string unit;
  /// The study's task; defaults to {"command": template}.
  nlohmann::json task;
  /// The kernel the measurements are stored under. Studies of one kernel name learn from each
  /// other (another command line is another input), so two different programs should have two
  /// names.
  std::string kernel_name = "command";
  /// Set once this process is being stopped (by SIGINT, SIGTERM or SIGHUP); null: never. A
  /// command that then dies of such a signal (or of SIGKILL, or exits with 128 + one of them)
  /// was stopped with tunebase rather than failing: evaluate() throws EvaluationInterrupted.
  const std::atomic<bool>* stopping = nullptr;
};

/// What one run of a command did.
struct CommandResult {
  int exit_code = -1;  ///< exit status when it exited normally, else -1
  int signal = 0;      ///< signal that ended it, 0 when it exited
  bool timed_out = false;
  double seconds = 0.0;  ///< wall time of the run
  std::string out;       ///< stdout (its last kMaxCapturedBytes when longer)
  std::string err;       ///< stderr (same limit)
};

/// Runs `command` with /bin/sh -c in its own process group, stdin from /dev/null, with
/// `environment` ("NAME=value" entries) added to (or replacing entries of) this process's
/// environment. The group is killed when `timeout_seconds` pass. Throws BackendError when the
/// command line or environment is too long to start, and EvaluatorUnavailable when no command
/// can start (no pipe, no process, no /bin/sh, the working directory gone).
CommandResult run_command(const std::string& command, const std::vector<std::string>& environment,
                          double timeout_seconds, const std::string& working_directory = "");

/// Kills (SIGKILL) the process groups of the commands run_command is running now, and returns
/// how many it killed. Async-signal safe: for a signal handler that stops the process, so that
/// no command outlives it (they run in their own groups, which a terminal's Ctrl-C does not
/// reach).
std::size_t kill_running_commands() noexcept;

/// The last number (integer, decimal or exponent form, optionally signed) in `text` that is
/// not part of a word (the 64 in "x86_64" does not count; "1.5ms" gives 1.5). Nullopt, with
/// the reason in `why` when given, when there is none, when the last number-like word is nan,
/// inf or out of a double's range (an earlier number must not stand in for it), or when a comma
/// after a digit precedes it ("1,234.5", "2,5": a thousands separator or a decimal comma).
std::optional<double> last_number(const std::string& text, std::string* why = nullptr);

/// Exit codes by which a program says how a configuration failed, as Kernel Tuner names it
/// (its exports write them); any other non-zero code is a RuntimeFailedConfig. Chosen clear of
/// the codes programs exit with unasked: 1 (any error: gcc, clang, nvcc, Python), 2 (usage:
/// make, argparse, bash), 3 to 8 (used by many tools of their own accord), 64-78 (sysexits.h),
/// 124-125 (timeout, git bisect), 126-127 (shell) and 128 + a signal.
inline constexpr int kExitCompilationFailed = 80;  ///< failed, "CompilationFailedConfig: ..."
inline constexpr int kExitInvalidConfig = 81;      ///< invalid, "InvalidConfig: ..."

/// The most metrics one run's output gives (output_metrics), and the longest name of one.
inline constexpr std::size_t kMaxOutputMetrics = 32;
inline constexpr std::size_t kMaxMetricNameBytes = 64;

/// What a program reports on stdout besides its objective (Kernel Tuner's observers).
struct OutputMetrics {
  /// Name and value, in the order first printed; a name printed again keeps its last value.
  std::vector<std::pair<std::string, double>> values;
  /// Names left out: those past the first kMaxOutputMetrics, and those longer than
  /// kMaxMetricNameBytes.
  std::set<std::string> dropped;
};

/// The metrics of an output: each line `NAME: NUMBER` or `NAME = NUMBER`, optionally followed
/// by one word of unit ("GFLOP/s: 12.5", "time: 0.4 ms", "iterations=12"). NAME starts with a
/// letter or _ and may hold spaces and punctuation but no : or =; the : is followed by a space
/// (so "10:30:00" is no metric); the number is finite (nan or inf is no metric).
OutputMetrics output_metrics(const std::string& out);

/// Tunes an external program. The template names parameters as `{NAME}`; each is replaced by
/// the configuration's value (shell-quoted when it is not a plain word), and every value is
/// also exported as environment variables NAME and TUNEBASE_NAME. `{{` and `}}` stand for
/// literal braces; braces around anything but a name (awk programs, `${VAR}`) are kept as is.
/// A successful trial's metrics are wall_seconds (the median of the runs' wall times, which wins
/// over a line of that name) and output_metrics of its stdout (each the median over its runs); the
/// message names the metric names dropped. Exit codes kExitCompilationFailed and
/// kExitInvalidConfig fail the trial as a compile failure or an invalid configuration.
class CommandEvaluator : public Evaluator {
 public:
  /// Throws InvalidInput for a placeholder that names no parameter (listing those allowed),
  /// a bad regex, or bad options.
  CommandEvaluator(SearchSpace space, std::string command_template, CommandOptions options = {});

  std::string kernel_name() const override { return options_.kernel_name; }
  const SearchSpace& space() const override { return space_; }
  nlohmann::json task() const override;
  /// Runs the command for `config`. Its first run throws EvaluatorUnavailable (no trial is
  /// stored) when the shell cannot run the program the template names (exit code 127 "not
  /// found" or 126 "Permission denied", in the shell's own words): no configuration could be
  /// measured until --cmd is fixed. A program that ran before, or whose name a parameter
  /// fills in, fails as the configuration's trial.
  Measurement evaluate(const Configuration& config) override;
  bool minimize() const override { return options_.minimize; }
  /// The unit the user named (CommandOptions::unit): a number a program prints has none we
  /// could know.
  std::string objective_unit() const override { return options_.unit; }

  /// The command line a configuration runs.
  std::string command_for(const Configuration& config) const;
  /// The "NAME=value" and "TUNEBASE_NAME=value" entries a configuration exports.
  std::vector<std::string> environment_for(const Configuration& config) const;

 private:
  /// A piece of the template: literal text, or the index of a parameter.
  struct Piece {
    std::string text;
    std::optional<std::size_t> parameter;
  };

  /// What one run's stdout gives: the objective, or why there is none.
  struct Objective {
    std::optional<double> value;
    std::string why;
    /// No number (or regex match) at all, rather than one that is not an objective.
    bool found_nothing = false;
  };
  Objective objective_of(const std::string& out) const;

  /// The program the shell could not run at all, when `run` failed so and the program's name
  /// is not filled in from `config` (which would make it this configuration's failure).
  std::optional<std::string> program_that_cannot_run(const CommandResult& run,
                                                     const Configuration& config) const;

  SearchSpace space_;
  std::string template_;
  CommandOptions options_;
  std::vector<Piece> pieces_;
  std::optional<std::regex> regex_;
  /// Whether a run of the command has ended: a program that cannot run at the first run is the
  /// set-up's fault; one that could run before says something of the configuration.
  std::atomic<bool> ran_before_{false};
};

}  // namespace tunebase
