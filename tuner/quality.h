// Tuning-quality metrics on targets with a known optimum (DESIGN.md "How we judge tuning
// quality", issue 3 part 5) and a plot of them.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tunebase {

/// Fractions of the optimum whose evaluations-to-reach are reported (JSON keys "0.90"...).
inline constexpr std::array<double, 3> kQualityLevels = {0.90, 0.95, 0.99};
/// A level as the JSON reports name it: "0.90".
std::string level_key(double level);
/// Evaluation counts after which the fraction reached is reported (JSON keys "10"...).
inline constexpr std::array<std::size_t, 4> kQualityCheckpoints = {10, 25, 50, 100};

/// What one seed of a tuning run produced.
struct RunTrace {
  /// Objective of each evaluation in the order made; NaN (or any non-finite value) for a
  /// failed one.
  std::vector<double> objectives;
  /// Wall time of each proposal (one propose call), milliseconds.
  std::vector<double> suggest_ms;
};

/// Median and quartiles over seeds. NaN when there was nothing to summarise.
struct Quartiles {
  double median = std::numeric_limits<double>::quiet_NaN();
  double q1 = std::numeric_limits<double>::quiet_NaN();
  double q3 = std::numeric_limits<double>::quiet_NaN();
};

/// The metrics of one strategy on one target over several seeds.
struct QualityReport {
  struct Level {
    double level = 0.0;
    /// Evaluations to first reach `level` of the optimum; a seed that never does counts as
    /// the budget.
    Quartiles evaluations;
    /// Share of seeds (0..1) that never reached it within the budget.
    double never = 0.0;
  };
  struct Checkpoint {
    std::size_t evaluations = 0;
    /// Fraction of optimum after that many evaluations (a shorter run gives its last value).
    Quartiles fraction;
  };

  std::string strategy;
  std::string target;
  std::size_t budget = 0;
  std::size_t seeds = 0;
  double optimum = 0.0;
  bool minimize = true;
  std::vector<Level> evals_to;          ///< one per kQualityLevels
  std::vector<Checkpoint> fraction_at;  ///< one per kQualityCheckpoints
  double suggest_ms_median = std::numeric_limits<double>::quiet_NaN();
  double suggest_ms_p95 = std::numeric_limits<double>::quiet_NaN();
  /// Fraction of optimum after k = 1..budget evaluations, over the seeds (curve[k-1]).
  std::vector<Quartiles> curve;

  /// {"strategy", "target", "budget", "seeds", "optimum", "minimize",
  ///  "evals_to": {"0.90"|"0.95"|"0.99": {"median","q1","q3","never"}},
  ///  "fraction_at": {"10"|"25"|"50"|"100": {"median","q1","q3"}} (null past the budget),
  ///  "suggest_ms": {"median","p95"}}. Undefined values (no proposals timed) are null.
  nlohmann::json to_json() const;
};

/// The q-quantile (0 <= q <= 1) by linear interpolation between the closest order
/// statistics, numpy's default: h = (n-1) q, x[floor h] + (h - floor h)(x[floor h + 1] -
/// x[floor h]). Throws InvalidInput for an empty list or q outside [0, 1].
double quantile(std::vector<double> values, double q);
Quartiles quartiles(const std::vector<double>& values);

/// Best objective among the first k evaluations, b_k, for k = 1..n (failures skipped);
/// NaN until the first success.
std::vector<double> best_so_far(const std::vector<double>& objectives, bool minimize = true);
/// Fraction of optimum after each evaluation: t*/b_k when minimising, b_k/t* when
/// maximising; 0 before the first success. Throws InvalidInput unless t* is finite and > 0.
std::vector<double> fraction_of_optimum(const std::vector<double>& objectives, double optimum,
                                        bool minimize = true);
/// The 1-based evaluation at which `fractions` first reaches `level` (within a relative
/// 1e-12, so that t*/b_k = 0.95 computed in floating point counts), or nullopt.
std::optional<std::size_t> evaluations_to_reach(const std::vector<double>& fractions, double level);

/// Metrics of `runs` (one per seed), each cut to its first `budget` evaluations. Throws
/// InvalidInput for no runs, a zero budget or a non-positive optimum.
QualityReport quality_report(std::string strategy, std::string target, double optimum,
                             std::size_t budget, const std::vector<RunTrace>& runs,
                             bool minimize = true);

/// SVG plot of median fraction of optimum against evaluations, with the q1-q3 band shaded,
/// one colour per report (strategy), a legend, labelled axes with ticks, and `title`.
/// Hand-written SVG text (no plotting library): each strategy is one <path> (its median)
/// plus one <polygon> (its band).
/// `y_label` names the vertical axis (a single run's curve has no band to speak of).
std::string quality_svg(const std::vector<QualityReport>& reports, const std::string& title,
                        const std::string& y_label = "fraction of optimum (median, q1-q3 shaded)");

}  // namespace tunebase
