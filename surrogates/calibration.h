// Honest predictive intervals: the scale of a model's predictive standard deviations, learned
// from how far its leave-one-out predictions of the observations themselves missed.
//
// A GP whose hyperparameters are maximum-likelihood estimates from a few dozen rugged
// observations is overconfident: on the measured GPU spaces (docs/benchmarks.md, "Calibration
// of predictions") only 26-45% of held-out times fell inside the "68%" interval with 10
// observations. The leave-one-out residuals r_i = (y_i - mu_-i) / sd_-i show it on the
// observations alone: a calibrated model has E[r^2] = 1.
//
// Model: the predictive of a new y is normal with variance s2 * v(x), v the model's
// predictive variance, s2 an unknown scale with a scaled-inverse-chi^2 prior of prior_points
// pseudo-observations at 1. Treating the n leave-one-out residuals as draws of it, the
// posterior of s2 is scaled-inverse-chi^2(nu = prior_points + n, (prior_points + sum r^2) / nu),
// and the predictive is Student-t with nu degrees of freedom and scale sqrt(s2 v).
// (Gelman et al., Bayesian Data Analysis, 3rd ed., section 3.2.)
//
// sum r^2 is winsorised: each r^2 counts at most as (3.5 robust standard deviations)^2, the
// robust s2 being median(r^2) / 0.4549 (the median of chi^2 with one degree of freedom). A
// single result far from the rest (one configuration 8 times slower than every other, r = 20)
// would otherwise set s2 alone and make every interval of the study 50 times wide, where it
// says nothing about the typical configuration a forecast is asked about; normal residuals
// are almost never clipped, and heavy but common tails still widen the interval.
#pragma once

#include <span>

namespace tunebase::surrogates {

struct IntervalScale {
  /// Posterior estimate of s2, (prior_points + sum r^2) / (prior_points + n), r^2 winsorised.
  double variance_scale = 1.0;
  /// nu = prior_points + n.
  double degrees_of_freedom = 0.0;
  /// Half-width of the central interval of `probability` (in (0, 1)), in units of the model's
  /// predictive standard deviation: sqrt(s2) t_nu((1 + probability) / 2).
  double half_width(double probability) const;
};

/// The scale learned from `standardised_residuals` (leave-one-out (y_i - mu_-i) / sd_-i;
/// non-finite ones are left out), with `prior_points` > 0 pseudo-observations of a
/// calibrated model. No residuals: s2 = 1 with prior_points degrees of freedom.
IntervalScale interval_scale(std::span<const double> standardised_residuals, double prior_points);

}  // namespace tunebase::surrogates
