// Replay evaluator: answers configurations from a measured dataset instead of running them.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/measurements.h"
#include "kernels/evaluator.h"

namespace tunebase {

/// Which numeric field of a replayed file's entries is the objective (Kernel Tuner's
/// `objective` and `objective_higher_is_better`).
struct ReplayObjective {
  /// "time" (milliseconds), or another field every successful entry holds as a number, such
  /// as "GFLOP/s" or "GB/s".
  std::string name = "time";
  /// Unset: maximise a rate (a name ending in "/s", or FLOPS: is_rate_unit), minimise
  /// anything else, as Kernel Tuner's documentation recommends.
  std::optional<bool> minimize;
};

/// Evaluates a configuration by looking it up in a Kernel Tuner cache or T4 results file, as
/// Kernel Tuner's simulation mode does. Used to judge tuning strategies on spaces whose every
/// valid configuration was measured, so the optimum is known.
///
/// - A configuration with a numeric time returns that Measurement (objective = time in ms,
///   raw = the repeated times, metrics such as GFLOP/s kept).
/// - A configuration whose time is a string (`CompilationFailedConfig`, ...) returns a failed
///   Measurement with that string as message (T4: the status its invalidity names).
/// - A configuration absent from the file returns failed "configuration not in <file>".
///
/// With another objective than time (ReplayObjective), a successful entry's objective is that
/// field, its time and times become metrics ("time", "times"), and an entry without a finite
/// number in the field fails, saying so. Failed entries stay failed.
///
/// kernel_name() is the file's kernel name (e.g. "Xgemm"), so that replayed trials and the
/// same file imported into the database belong to one kernel. A file that names no kernel
/// (T4 results) gives "replay:<file name without .json/.gz>", unless a name is passed in.
/// Lookups are const and thread-safe; evaluate() never throws for a configuration.
class ReplayEvaluator : public Evaluator {
 public:
  /// `origin` names the file in messages ("configuration not in <origin>"). InvalidInput when
  /// `objective` names no numeric field of the entries (listing those they have).
  ReplayEvaluator(MeasuredDataset dataset, std::string origin, std::string kernel_name = {},
                  const ReplayObjective& objective = {});
  /// Reads `path` with read_measurements (plain or gzip, Kernel Tuner or T4).
  static ReplayEvaluator from_file(const std::string& path, std::string kernel_name = {},
                                   const ReplayObjective& objective = {});

  std::string kernel_name() const override { return kernel_name_; }
  /// Kernel Tuner caches and T4 files (after conversion) hold times in milliseconds; another
  /// objective's unit is its name ("GFLOP/s"), which then names the study's objective.
  std::string objective_unit() const override { return objective_ == "time" ? "ms" : objective_; }
  bool minimize() const override { return minimize_; }
  /// The field replayed as the objective ("time", "GFLOP/s").
  const std::string& objective_name() const { return objective_; }
  const std::vector<Configuration>* candidates() const override { return &configurations_; }
  /// The file's space: its tune_params (T4: the values seen), no constraints.
  const SearchSpace& space() const override { return dataset_.space; }
  /// {"problem_size": ...} when the file records one, else {}.
  nlohmann::json task() const override;
  Measurement evaluate(const Configuration& config) override { return lookup(config); }

  /// The stored measurement of `config`, or failed "configuration not in <file>". Values
  /// are compared as numbers (2 and 2.0 match). For a file listing a configuration twice the
  /// first entry counts.
  Measurement lookup(const Configuration& config) const;
  /// Same for a configuration given by parameter names {"MWG": 64, ...}; throws InvalidInput
  /// when a parameter of the file is missing or an unknown name is given.
  Measurement lookup_json(const nlohmann::json& named) const {
    return lookup(configuration_of(named));
  }
  /// A configuration given by parameter names as this file's values, in its parameters' order
  /// (the same InvalidInput as lookup_json).
  Configuration configuration_of(const nlohmann::json& named) const;
  /// Whether the file holds an entry (successful or failed) for `config`.
  bool contains(const Configuration& config) const;

  /// Best successful objective in the file (lowest time, highest when maximising): the t* of
  /// tuning-quality metrics.
  /// Throws InvalidInput when the file has no successful entry.
  double optimum() const;
  /// The entry holding the optimum.
  const Observation& best() const;
  /// Every configuration the file holds, failed ones included, in the order of
  /// dataset().entries (Kernel Tuner files: sorted by cache key; T4: file order): the
  /// candidate set of simulation mode (a strategy may propose a failing one and learn that
  /// it fails, as it would on the device).
  const std::vector<Configuration>& configurations() const { return configurations_; }
  std::size_t size() const { return configurations_.size(); }
  std::size_t failed_count() const;

  const std::string& device_name() const { return dataset_.device_name; }
  /// The file's device: replayed results are that device's, not this machine's.
  std::optional<std::string> measured_on() const override { return dataset_.device_name; }
  const std::string& origin() const { return origin_; }
  const MeasuredDataset& dataset() const { return dataset_; }

 private:
  /// Cache key of `config` with each value replaced by the listed value it equals, or
  /// nullopt when a value is outside the file's tune_params.
  std::optional<std::string> canonical_key(const Configuration& config) const;

  MeasuredDataset dataset_;
  std::string origin_;
  std::string kernel_name_;
  std::string objective_;
  bool minimize_ = true;
  std::unordered_map<std::string, std::size_t> index_;  // cache key -> entry position
  std::vector<Configuration> configurations_;
  std::optional<std::size_t> best_;
};

/// A replayed file searched within a space of the user's (Kernel Tuner's simulation mode with
/// restrictions): the candidates are the file's configurations that the space holds and its
/// constraints allow, written in the space's values; each is answered from the file.
class ReplayInSpace : public Evaluator {
 public:
  /// InvalidInput when a parameter of one is not the other's, or when none of the file's
  /// configurations is valid in `space`.
  ReplayInSpace(ReplayEvaluator replay, SearchSpace space);

  std::string kernel_name() const override { return replay_.kernel_name(); }
  std::string objective_unit() const override { return replay_.objective_unit(); }
  bool minimize() const override { return replay_.minimize(); }
  const std::vector<Configuration>* candidates() const override { return &candidates_; }
  const SearchSpace& space() const override { return space_; }
  nlohmann::json task() const override { return replay_.task(); }
  Measurement evaluate(const Configuration& config) override {
    return replay_.lookup_json(space_.config_to_json(config));
  }
  std::optional<std::string> measured_on() const override { return replay_.measured_on(); }
  /// How many of the file's configurations the space leaves out.
  std::size_t left_out() const { return replay_.size() - candidates_.size(); }

 private:
  ReplayEvaluator replay_;
  SearchSpace space_;
  std::vector<Configuration> candidates_;
};

}  // namespace tunebase
