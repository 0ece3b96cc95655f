// Acquisition functions on a Gaussian predictive distribution, for MINIMISATION: `best` is
// the lowest (transformed) objective seen so far and improvement means going below it.
// Maximise an objective by negating it before the transform.
//
// With z = (best - mean) / sigma:
//   EI  = sigma h(z),  h(z) = phi(z) + z Phi(z)
//   PI  = Phi(z)
//   LCB = mean - kappa sigma                  (lower is more promising)
// log EI follows Ament et al., "Unexpected Improvements to Expected Improvement for Bayesian
// Optimization" (NeurIPS 2023): log h(z) is evaluated so that it stays finite, accurate and
// monotone far into the region where EI itself underflows to 0 (z << -40).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "surrogates/gp.h"

namespace tunebase::surrogates {

double normal_pdf(double z);
double normal_cdf(double z);
/// log Phi(z), accurate for very negative z (asymptotic Mills-ratio series below -20).
double log_normal_cdf(double z);
/// log h(z) with h(z) = phi(z) + z Phi(z) = E[max(z + N(0,1), 0)].
double log_h(double z);

/// E[max(best - f, 0)] for f ~ N(mean, variance); max(best - mean, 0) when variance is 0.
double expected_improvement(double mean, double variance, double best);
/// log of expected_improvement, finite wherever variance > 0.
double log_expected_improvement(double mean, double variance, double best);
/// P(f < best).
double probability_of_improvement(double mean, double variance, double best);
double log_probability_of_improvement(double mean, double variance, double best);
/// mean - kappa * sqrt(variance).
double lower_confidence_bound(double mean, double variance, double kappa);

enum class Acquisition {
  log_expected_improvement,  ///< default
  expected_improvement,
  lower_confidence_bound,
  probability_of_improvement,
};
std::string_view to_string(Acquisition a);
/// "log_ei"/"log_expected_improvement", "ei", "lcb", "pi" and the long names; InvalidInput
/// otherwise.
Acquisition acquisition_from_string(std::string_view text);

struct AcquisitionOptions {
  Acquisition kind = Acquisition::log_expected_improvement;
  /// Exploration weight of the lower confidence bound.
  double kappa = 2.0;
  /// Lower confidence bound with a feasibility model: candidates below this P(feasible) score
  /// -infinity (LCB is not a probability-weighted quantity, so it is not multiplied). The bo
  /// strategy also ranks such candidates after every other, whatever the acquisition.
  double min_feasible_probability = 0.5;
};

/// One score per candidate, HIGHER IS BETTER for every kind:
///   log EI + log P(feasible),  EI * P(feasible),  PI * P(feasible),  -(LCB).
/// `log_feasibility` is empty (all feasible) or has one entry per candidate
/// (FeasibilityModel::log_probability). Throws InvalidInput on size mismatches.
std::vector<double> acquisition_scores(const Prediction& prediction, double best,
                                       const AcquisitionOptions& options,
                                       std::span<const double> log_feasibility = {});

}  // namespace tunebase::surrogates
