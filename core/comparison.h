// Machine against machine: what two or more machines measured of one kernel on one input, and
// how well one machine's best carries over to another (the question transfer learning asks).
// Pure computation on measurements; db/machine_comparison.h reads them from a store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/trial.h"

namespace tunebase {

/// The fewest configurations measured on both machines that a rank correlation is given for.
inline constexpr std::size_t kMinCommonForCorrelation = 3;
/// How many of each machine's best common configurations the top-k overlap compares (fewer
/// when fewer are common).
inline constexpr std::size_t kTopK = 10;
/// Reasons listed of configurations that run on one machine and fail on the other, per
/// direction (each with an example; the rest are counted).
inline constexpr std::size_t kListedFailures = 5;

/// One finished evaluation of a configuration on a machine.
struct MachineTrial {
  std::string config_key;
  nlohmann::json config;
  TrialStatus status = TrialStatus::ok;
  /// The objective; read only when status is ok.
  double value = 0.0;
  std::int64_t trial_id = 0;
};

/// Everything one machine measured (a configuration may appear more than once: several
/// studies, a repeated import).
struct MachineTrials {
  std::string machine;
  std::vector<MachineTrial> trials;
};

/// One configuration of a machine: its best successful value when it ever ran, else its
/// (latest) failure.
struct ConfigResult {
  std::string config_key;
  nlohmann::json config;
  TrialStatus status = TrialStatus::ok;
  double value = 0.0;  ///< the best of its successful trials (status ok)
  std::int64_t trial_id = 0;
};

struct MachineSummary {
  std::string machine;
  std::size_t configurations = 0;  ///< distinct configurations measured (any status)
  std::size_t ok = 0;              ///< of them, those that ran
  std::size_t failed = 0;          ///< of them, those that never ran (failed, timeout, invalid)
  std::optional<ConfigResult> best;
};

/// One machine's best configuration taken to another machine.
struct BestElsewhere {
  std::string from;
  std::string to;
  std::string config_key;
  /// How it did on `to`: ok, a failure status, or none when `to` never measured it.
  std::optional<TrialStatus> status;
  std::optional<double> value;  ///< its value on `to` (status ok)
  /// `to`'s best over this value (minimising; the inverse when maximising): 1 when it is
  /// `to`'s best too, 0.5 when it is twice as slow there.
  std::optional<double> fraction_of_best;
};

/// A configuration that ran on one machine of a pair and failed on the other.
struct FailsOnOne {
  std::string config_key;
  nlohmann::json config;
  std::string runs_on;
  std::string fails_on;
  TrialStatus status = TrialStatus::failed;  ///< on `fails_on`
  std::int64_t trial_id = 0;                 ///< the failed trial
};

struct PairComparison {
  std::string a;
  std::string b;
  std::size_t measured_on_both = 0;  ///< configurations measured on both (any status)
  std::size_t common = 0;            ///< configurations that ran on both
  /// Spearman's rank correlation of the values over the common configurations (ties get
  /// their average rank); none below kMinCommonForCorrelation common configurations or when
  /// one machine's values are all equal.
  std::optional<double> spearman;
  std::size_t top_k = 0;          ///< min(kTopK, common)
  std::size_t top_k_overlap = 0;  ///< of each machine's top_k best common ones, how many are shared
  BestElsewhere a_best_on_b;
  BestElsewhere b_best_on_a;
  std::size_t runs_on_a_fails_on_b = 0;
  std::size_t runs_on_b_fails_on_a = 0;
  /// Every one of the two, those failing on b first, each in config_key order.
  std::vector<FailsOnOne> fails_on_one;
};

struct MachineComparison {
  bool minimize = true;
  std::vector<MachineSummary> machines;  ///< in the order given
  std::vector<PairComparison> pairs;     ///< every pair, in the order given (a before b)
};

/// Compares the machines pairwise. Throws InvalidInput for fewer than two machines or one
/// named twice.
MachineComparison compare_machines(const std::vector<MachineTrials>& machines, bool minimize);

/// Ranks 1..n of `values` in ascending order, ties sharing their average rank.
std::vector<double> average_ranks(const std::vector<double>& values);
/// Spearman's rank correlation: Pearson's correlation of the average ranks. None when fewer
/// than two values or one side is constant.
std::optional<double> spearman_correlation(const std::vector<double>& x,
                                           const std::vector<double>& y);

}  // namespace tunebase
