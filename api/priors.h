// Transfer learning from the store: what other machines and other inputs measured for the
// same kernel becomes the priors of a study, and the transfer model predicts the best
// configuration for a machine where nothing was measured yet. Used by the service and the CLI;
// lives here because tuner/ knows nothing of the database and db/ nothing of models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/space.h"
#include "db/store.h"
#include "tuner/bo.h"
#include "tuner/prior.h"

namespace tunebase::api {

/// Finished trials that `query` selects (Store::prior_trials), one Prior per (machine, task):
/// source = the machine's name (so one machine's tasks are modelled together), task_features
/// = the task's features (or the numbers of its description when it has none), observations =
/// the trials whose configuration is valid in `space`, failures included. Priors with no
/// successful trial are dropped. Sorted by machine name, then task.
std::vector<Prior> priors_from_store(const db::Store& store, const SearchSpace& space,
                                     const db::PriorQuery& query);

/// What predictions read of a kernel from the store (its studies, their trial counts, its
/// priors as priors_from_store makes them), kept between predictions while the store's data is
/// unchanged: reading and parsing every trial and study of a kernel measured on thousands of
/// inputs cost more than the prediction's model. Everything is dropped when the version moves
/// (any write: a new measurement is in the next prediction). Thread-safe: a reader holds what
/// it got (shared_ptr) after the cache has moved on.
///
/// Holds at most kMaxKernels kernels' study lists and trial counts and kMaxPriorSets sets of
/// priors (each every (machine, input) of one kernel version, objective, unit and direction):
/// about 40 MB for Ginkgo's SpMV timings of 3 machines (8,519 studies, 42,595 trials).
class PriorCache {
 public:
  static constexpr std::size_t kMaxKernels = 8;
  static constexpr std::size_t kMaxPriorSets = 4;

  /// (Store::data_version, Store::changes_made): another value, the data changed. Read it
  /// before what is read at it, so that a write in between makes the entry stale, not wrong.
  using Version = std::pair<std::int64_t, std::int64_t>;
  static Version version_of(const db::Store& store);

  /// Store::list_studies(kernel).
  std::shared_ptr<const std::vector<db::StudyRecord>> studies(const db::Store& store,
                                                              Version version,
                                                              const std::string& kernel);
  /// Store::study_trial_counts({kernel, direction}).
  std::shared_ptr<const std::map<db::StudyId, db::TrialCounts>> study_trial_counts(
      const db::Store& store, Version version, const std::string& kernel, db::Direction direction);
  /// priors_from_store(store, space, query): the kernel version's priors are read once, and
  /// the query's machines, exclusions and task are applied to them here. A query with a limit,
  /// ok_only or exclude_study is read from the store.
  std::vector<Prior> priors(const db::Store& store, Version version, const SearchSpace& space,
                            const db::PriorQuery& query);

  /// How often the store was read for the cache (tests).
  std::size_t reads() const;

 private:
  /// A prior with the task it measured, to apply a query's filters to.
  struct Source {
    std::int64_t task = 0;
    Prior prior;
  };
  using Sources = std::vector<Source>;
  /// The entry of `key` in `entries` at `version`, read by `read` when absent.
  template <typename T, typename Read>
  std::shared_ptr<const T> get(std::unordered_map<std::string, std::shared_ptr<const T>>& entries,
                               std::size_t max_entries, Version version, const std::string& key,
                               Read read);

  mutable std::shared_mutex mutex_;
  Version version_{-1, -1};
  std::size_t reads_ = 0;
  std::unordered_map<std::string, std::shared_ptr<const std::vector<db::StudyRecord>>> studies_;
  std::unordered_map<std::string, std::shared_ptr<const std::map<db::StudyId, db::TrialCounts>>>
      counts_;
  std::unordered_map<std::string, std::shared_ptr<const Sources>> priors_;
};

/// The priors of tuning `kernel` on (machine, task): its version's trials on every other
/// (machine, task) with the same objective and direction, measured alike (`settings`'
/// "measurement", db::measurement_of), restricted by `settings` ({"transfer": false} for none;
/// "prior_machines": [names]). None when transfer is off.
std::optional<db::PriorQuery> target_prior_query(const db::KernelRecord& kernel,
                                                 db::MachineId machine, db::TaskId task,
                                                 const std::string& objective,
                                                 db::Direction direction,
                                                 const nlohmann::json& settings);

/// Throws InvalidInput for the first of `names` that is not a registered machine, listing the
/// known ones: restricting priors to a machine that does not exist would silently turn
/// transfer off.
void require_prior_machines(const db::Store& store, const std::vector<std::string>& names);

/// Whether `query` selects at least one successful trial (one row read, not all).
bool has_priors(const db::Store& store, std::optional<db::PriorQuery> query);

/// The query of the priors a study uses (target_prior_query of its kernel, machine, task and
/// settings); none when it takes none.
std::optional<db::PriorQuery> study_prior_query(const db::StudyRecord& study);

/// Task features of a stored task: its features, or the numbers of its description.
nlohmann::json task_features_of(const db::TaskRecord& task);

/// Remembers the fitted prior models saved in `store` (their hyperparameters), so that this
/// process conditions on them instead of fitting again. Returns how many were loaded.
std::size_t load_fitted_models(const db::Store& store);
/// Saves the hyperparameters of every prior model fitted in this process to `store` (no-op on
/// a read-only store or when nothing new was fitted since the last save).
void save_fitted_models(db::Store& store);

/// A prediction rests on at most this many inputs of each source (machine), those nearest to
/// the input asked about (nearest_inputs): a GP per source is fitted on them for each input
/// asked about, so its cost stays bounded however many inputs were measured. 30 SpMV matrices
/// of 5 formats are 150 points, fitted whole (below the 384 a prior is subsampled to) in about
/// 0.2 s; on 49 held-out matrices of MI100, 30 chose the fastest format more often than 50 or
/// all 2,776 (78%, 71%, 59%).
inline constexpr std::size_t kMaxPredictionInputsPerSource = 30;

/// A configuration predicted to be the best on a (machine, task) with no measurement there.
struct PredictedBest {
  nlohmann::json config;
  Forecast forecast;
  std::size_t trials = 0;    ///< prior measurements the prediction rests on
  std::size_t machines = 0;  ///< machines they come from (the target's own among them when
                             ///< it measured other inputs)
  std::size_t inputs = 0;    ///< (machine, input) sources: more than machines when one
                             ///< machine measured several inputs
  /// From the target machine's own measurements of other inputs only (it measured enough of
  /// them: kMinOwnInputs); other machines' are left out.
  bool this_machine_only = false;
  /// Configurations that failed on the target, left out of the candidates.
  std::size_t failed_here = 0;
  std::string kernel_version;
  std::string model;
  /// {"<source>": weight} of the transfer model (equal with no target observation).
  nlohmann::json weights = nlohmann::json::object();
  /// The unit of the sources' objective values when they all give the same one ("ms").
  std::string unit;
  /// Chosen from the sources' measurements (else by the model's mean): how many of
  /// `sources` ran it, and its mean quantile among their successes (0: each one's best).
  bool from_measurements = false;
  std::size_t sources = 0;
  std::size_t sources_that_ran_it = 0;
  double mean_quantile = 0.0;
  /// The input's features outside the range of every input the prediction rests on, each as
  /// "name value, measured inputs low .. high" (none when a source measured this input).
  std::vector<std::string> features_outside;
};

/// A note on the input's features outside every measured input's range (empty when none
/// are), as GET /v1/best and `tunebase best` say it.
std::string features_outside_note(const PredictedBest& p);

/// What GET /v1/best and `tunebase best --json` answer for a prediction.
nlohmann::json predicted_best_json(const std::string& kernel, const std::string& machine,
                                   const PredictedBest& p);

/// The best configuration of `kernel_name` predicted for `machine` (null: a machine the store
/// does not know) and `task` (null: any input) by the transfer model (`bo-transfer`) on every
/// other machine's and task's measurements: zero-shot. The kernel version is the one the
/// task's latest study used (the latest version without a task or study). None when the
/// kernel is unknown or nothing usable was measured elsewhere. When some sources measured
/// this input, the configuration is their consensus (consensus_best), not failed on the
/// target already, and the model forecasts its objective. Sources of other inputs: the lowest
/// (or highest) predicted objective among the configurations they ran successfully that are
/// more likely to run than to fail; with none, among the valid configurations (a sample when
/// there are too many).
/// An input that is not stored (a matrix never measured) is given by `input_features` and the
/// kernel version its space has, with no `task`: the model carries the other inputs'
/// measurements to it by its features. A machine that measured the kernel on at least 3 other
/// inputs is predicted from those alone, not from other machines (not even their measurements
/// of this input): this_machine_only. Of each machine, the kMaxPredictionInputsPerSource
/// inputs nearest to this one are used (`inputs` counts them). With a `cache`, what it holds of
/// the store at its current version is not read again.
std::optional<PredictedBest> predict_best(const db::Store& store, const std::string& kernel_name,
                                          std::optional<db::MachineId> machine,
                                          std::optional<db::TaskId> task, db::Direction direction,
                                          const std::string& objective,
                                          const nlohmann::json& input_features = {},
                                          const std::string& input_version = {},
                                          PriorCache* cache = nullptr);

}  // namespace tunebase::api
