// Bayesian optimisation: a space-filling start, then a GP surrogate and an acquisition
// function maximised over the valid configurations.
#pragma once

#include <memory>
#include <vector>

#include "tuner/strategy.h"

namespace tunebase {

/// Predicted objective of a configuration, in the objective's units.
struct Forecast {
  double mean = 0.0;   ///< median of the predictive distribution (mean when not log-transformed)
  double lower = 0.0;  ///< 16th percentile (one standard deviation below, in model space)
  double upper = 0.0;  ///< 84th percentile
  double std = 0.0;    ///< standard deviation in model space (log units for log-transformed)
  double probability_feasible = 1.0;
};

/// Options (JSON, all optional): initial_design (int), acquisition ("log_ei", "ei", "pi",
/// "lcb"), kappa, refit_every (int), covariance ("matern52", "squared_exponential"),
/// candidate_samples (for spaces that are not enumerated), seed.
std::unique_ptr<SearchStrategy> make_bayesian_optimization(const StrategyOptions& options);

/// Strategies that carry a model can forecast configurations; others return nothing.
class ModelBasedStrategy : public SearchStrategy {
 public:
  /// Forecasts for `configs` from the model fitted on `state` (fitted now if needed). Empty
  /// when there is not yet enough data for a model.
  virtual std::vector<Forecast> forecast(const TuningState& state,
                                         const std::vector<Configuration>& configs) = 0;
};

}  // namespace tunebase
