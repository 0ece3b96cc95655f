// The in-process tuning sweep: Session + Evaluator + Store, with a progress bar.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "db/store.h"
#include "kernels/evaluator.h"
#include "kernels/replay.h"
#include "tuner/prior.h"

namespace tunebase::cli {

/// The budget of a new study swept without --budget.
inline constexpr std::size_t kDefaultSweepBudget = 30;

struct SweepOptions {
  std::string study_name;  ///< resume when it exists; empty: a new study with a generated name
  std::string strategy;    ///< empty: bo-transfer when there are priors, else bo
  /// Options of a new study's strategy (as the API's strategy_options; none: {}); a resumed
  /// study keeps its own.
  std::optional<nlohmann::json> strategy_options;
  /// Evaluations in the study. None: a resumed study keeps its stored budget, a new one gets
  /// kDefaultSweepBudget (an exhaustive one, every configuration). Given for a resumed study,
  /// it replaces the stored budget.
  std::optional<std::size_t> budget;
  /// The random seed of a new study (none: 0); a resumed study keeps its own.
  std::optional<std::uint64_t> seed;
  std::string machine_name;  ///< empty: this host's name
  /// Learn from what other machines and tasks measured for this kernel (priors from the store).
  /// A resumed study keeps its own choice, and its --prior-machine list.
  bool transfer = true;
  /// Only these machines' measurements become priors; empty: all.
  std::vector<std::string> prior_machines;
  /// Measurement files (Kernel Tuner cache, T4) used as further priors.
  std::vector<std::string> prior_files;
  bool measure_default = true;
  bool progress = true;
};

/// Where a space's default configuration comes from, for a sweep's summary: the baseline of its
/// speedup is only as meaningful as that.
struct DefaultOrigin {
  /// "declared" (the space gives every default), "first_values" (it gives none, as a Kernel
  /// Tuner cache or a T4 file: each parameter's first value) or "partly_declared".
  std::string kind;
  /// For people: "first value of each parameter: the space declares no defaults".
  std::string text;
};
DefaultOrigin default_origin(const SearchSpace& space);

struct SweepSummary {
  db::StudyId study;
  std::string study_name;
  std::size_t evaluated = 0;    ///< in this run
  std::size_t total = 0;        ///< in the study
  std::size_t failed = 0;       ///< in the study
  std::size_t failed_here = 0;  ///< in this run
  std::string last_failure;     ///< the message of this run's last failed evaluation
  /// Live leases of other clients (a server's workers) when the sweep ended: their results
  /// may still come.
  std::size_t leased_elsewhere = 0;
  /// The sweep was not interrupted, but the study stays active for the leases of other clients.
  bool left_active = false;
  bool interrupted = false;
  /// Why the sweep ended before its budget when it was not interrupted; empty otherwise.
  std::string stopped;
  std::optional<Observation> best;
  std::optional<Observation> default_result;
  DefaultOrigin default_from;
  nlohmann::json best_config;
  std::string best_config_text;  ///< best_config with its parameters in declared order
  std::string best_options;      ///< kernel_options_text of best_config
  std::string unit = "s";        ///< of the objective
  bool minimize = true;
  /// How the objective was measured (Evaluator::measurement_settings, kept by the study).
  nlohmann::json measurement = nlohmann::json::object();

  /// How many times better the best is than the default configuration (default / best when
  /// minimising, best / default when maximising); none without two positive objectives.
  std::optional<double> speedup() const;
  std::string strategy;
  /// Prior sources (machine or file names) and their number of measurements.
  struct PriorSource {
    std::string source;  ///< a machine, or a file
    std::size_t measurements = 0;
    std::size_t inputs = 0;  ///< tasks measured there
  };
  std::vector<PriorSource> priors;
  /// The transfer ensemble's last weights ({"<source>": w, "target": w}), when it has them.
  nlohmann::json weights;
};

/// Tunes `evaluator` until the study holds `budget` trials, the candidates run out, or Ctrl-C.
/// Every finished trial is stored before the next starts.
SweepSummary run_sweep(Evaluator& evaluator, db::Store& store, const SweepOptions& options);

/// The client id of this process's sweep leases: "sweep@HOST:PID pid:[NAMESPACE]". It says
/// where the sweep ran, so that a lease left by a sweep that died is recognised (below).
std::string sweep_client_id();
/// Takes back, at once, the live leases of `study` held by sweeps of this host whose process
/// no longer runs (killed, crashed): their configurations are proposed again instead of after
/// the lease's hour. Returns how many. A lease of another host, or of a process that runs, is
/// left to expire.
std::size_t release_leases_of_ended_sweeps(db::Store& store, db::StudyId study);
/// "note: took back N leases ..." on stderr, when N > 0.
void note_leases_taken_back(std::size_t n);

/// Refuses (InvalidInput) a prior whose successes are, for 90% or more of the configurations
/// both measured, the same times as `target`'s: the measurements it is to find, named
/// `target_name` ("the target") in the message.
void refuse_prior_of_the_target(const ReplayEvaluator& target, const SearchSpace& space,
                                bool space_differs, const Prior& prior, const std::string& file,
                                const std::string& target_name);

/// The note a sweep prints before it measures on a busy machine (a load average of at least
/// half the cores: other processes take a core or more from the measurements); empty when the
/// machine is not busy.
std::string busy_machine_note(double load_average, unsigned cores);

/// The JSON object of an --options argument: InvalidInput naming `option` otherwise.
nlohmann::json parse_strategy_options(const std::string& text, const std::string& option);

/// How a command's evaluator measures (Evaluator::measurement_settings) against how the trials
/// of the study it would add to were (`study_settings`: the study's settings): "its trials were
/// measured with rtol 1e-08, ..., this worker measures with rtol 0.001, ...: give the options
/// the study was made with (...)", `command` naming the command; empty when they agree. A study
/// that keeps none was measured with the evaluator's defaults (made before studies kept them,
/// or over the API without them). Sweep (resuming) and worker (joining) refuse a study that
/// differs: trials solved to another tolerance or timed by another clock would not compare.
std::string measurement_mismatch(const nlohmann::json& study_settings, const Evaluator& evaluator,
                                 const std::string& command);

/// What a command's --maximize (`minimize` false) and --unit say against the objective of the
/// study they would add to ("it maximizes its objective: add --maximize; its objective is in
/// ms: give --unit ms"); empty when they agree. A study without a unit (`study_unit` empty,
/// created over the API) takes numbers in any. Sweep (resuming) and worker (joining) refuse
/// a study that differs: its stored numbers would mean another thing.
std::string objective_mismatch(bool study_minimizes, const std::string& study_unit, bool minimize,
                               const std::string& unit);
/// "12.3 us", "4.56 ms", "1.23 s": a time for people.
std::string format_seconds(double s);
/// A value in `unit` ("s", "ms", or anything else, printed as a plain number) for people.
std::string format_objective(double value, const std::string& unit);
/// What a configuration of `kernel` means on the kernel's own command line, when that says
/// more than the parameters: PETSc's options ("-ksp_type gmres -pc_type icc ..."); empty for
/// other kernels, or a configuration not valid in `space`.
std::string kernel_options_text(const std::string& kernel, const SearchSpace& space,
                                const nlohmann::json& config);

}  // namespace tunebase::cli
