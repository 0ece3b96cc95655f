// Bayesian optimisation: a space-filling start, then a GP surrogate and an acquisition
// function maximised over the valid configurations. With priors (measurements of the same
// kernel on other machines or inputs) the surrogate is a transfer model instead and there is no
// space-filling start: the first proposal already comes from what the priors know.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tuner/strategy.h"

namespace tunebase {

/// Predicted objective of a configuration, in the objective's units.
struct Forecast {
  double mean = 0.0;   ///< median of the predictive distribution (mean when not log-transformed)
  double lower = 0.0;  ///< 16th percentile (one standard deviation below, in model space)
  double upper = 0.0;  ///< 84th percentile (bounds are clamped to the finite doubles)
  double std = 0.0;    ///< standard deviation in model space (log units for log-transformed)
  /// Whether the model works on the log of the objective (all values seen are positive): then
  /// std is in log units (about the relative uncertainty), else in the objective's unit.
  bool log_scale = false;
  double probability_feasible = 1.0;
  /// Predicted from priors alone: the study has no successful observation yet (zero-shot).
  bool from_priors = false;
  /// The study's successes all had one value and no priors spoke: they show no spread, so
  /// lower .. upper (that value) is no estimate of how far the objective may lie.
  bool interval_unknown = false;
};

/// How much a parameter moves the objective, by the study's model: the inverse of its ARD
/// lengthscale (the shortest of a categorical's one-hot columns), as a share of all tuned
/// parameters' (as Ax reports feature importances); a parameter with one value is left out.
/// Inputs are scaled to [0, 1], so shares compare.
struct ParameterRelevance {
  std::string name;
  double share = 0.0;
};

/// How a model-based strategy uses priors.
enum class TransferMode {
  none,     ///< plain `bo`: priors are ignored
  stacked,  ///< stacked residual GPs (Vizier)
  rgpe,     ///< ranking-weighted ensemble of per-source GPs (RGPE)
};

/// Options (JSON, all optional): initial_design (int, default 5), acquisition ("log_ei", "ei",
/// "pi", "lcb"), kappa, min_feasible (candidates the feasibility model gives less than this
/// probability of succeeding rank after every other, and score -inf with lcb; default 0.5),
/// refit_every (int), refit_below
/// (int), covariance ("matern52", "squared_exponential"), output ("copula", the default, or "log":
/// how objective values become model values), lengthscale_location (mode of the log-lengthscale
/// prior of numeric parameters; default the GP module's dimension-scaled one; categoricals' one-hot
/// columns keep GpPriors::categorical_lengthscale_location), short_start (log lengthscale of an
/// extra optimiser start at every refit, default 0; null: none), local_every / local_radius (every
/// local_every-th proposal stays within local_radius encoded coordinates of the best configuration;
/// 0: never; defaults 2 and 1), candidate_samples (spaces that are not enumerated),
/// max_model_points (successes the GP is conditioned on at most, default 1500; past it, a subset
/// that keeps the best; fantasies of pending configurations and of a batch's earlier picks count
/// against it, the most recent 16 to 128 of them), seed. Transfer: rgpe_samples, prior_points
/// (subsample size of a prior, default 384), prior_best_fraction (share of it given to the prior's
/// best), prior_best (prior-best: how many of the priors' best configurations to try first, default
/// 10), consensus_first (how many configurations the priors agree on are proposed before the
/// model's choices; default 1 for transfer strategies, 0 for prior-best).
std::unique_ptr<SearchStrategy> make_bayesian_optimization(const StrategyOptions& options,
                                                           TransferMode mode = TransferMode::none,
                                                           std::string name = "bo");

/// Strategies that carry a model can forecast configurations; others return nothing.
class ModelBasedStrategy : public SearchStrategy {
 public:
  /// Forecasts for `configs` from the model fitted on `state` (fitted now if needed). Empty
  /// when there is not yet enough data for a model. With priors in `state` (and a transfer
  /// strategy) this works with no observation at all: the forecasts are then from_priors.
  virtual std::vector<Forecast> forecast(const TuningState& state,
                                         const std::vector<Configuration>& configs) = 0;
  /// Every parameter's relevance, most relevant first; empty until the model's
  /// hyperparameters were fitted to the state's own observations.
  virtual std::vector<ParameterRelevance> relevance(const TuningState& state) = 0;
};

}  // namespace tunebase
