// Feasibility model: the probability that a configuration evaluates without failing.
//
// A Gaussian-process classifier with a probit likelihood and the Laplace approximation
// (Rasmussen and Williams, "Gaussian Processes for Machine Learning", 2006, algorithms 3.1,
// 3.2 and 5.1): latent g ~ GP(m, k), P(feasible | g) = Phi(g). The prior mean m is fixed at
// Phi^-1 of the smoothed feasible fraction, so that unexplored regions get the base rate.
// With the probit link the predictive probability under the Gaussian approximation is exact:
//   P(feasible | x) = Phi(mu(x) / sqrt(1 + var(x))).
// Hyperparameters (ARD lengthscales, signal variance) maximise the Laplace approximation of
// the marginal likelihood plus the same weak priors as the regression GP, with its analytic
// gradient and dlib's box-constrained L-BFGS.
//
// Chosen over a regression GP on 0/1 labels because it yields calibrated probabilities in
// [0,1] that fall smoothly towards the base rate away from the data; multiply them into EI
// (or add log P to log EI: acquisition_scores does that).
//
// When every observation has the same label there is nothing to separate: the model is then
// a constant (the smoothed fraction) and fitting is skipped.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "core/space.h"
#include "surrogates/gp.h"

namespace tunebase::surrogates {

struct FeasibilityFitOptions {
  CovarianceKind kind = CovarianceKind::matern52;
  std::size_t random_starts = 1;
  std::size_t max_iterations = 100;
  double tolerance = 1e-6;
  /// Hyperparameters from a random subset of at most this many observations (stratified so
  /// that failures are kept); the posterior always uses all of them. 0: no limit.
  std::size_t max_fit_points = 300;
  std::optional<Covariance> warm_start;
  /// Lengthscale and signal-variance priors and bounds are used; noise and mean are not.
  GpPriors priors;
};

/// Laplace approximation of log p(labels | X, theta) and its gradient with respect to
/// [log l_1..log l_d, log s2].
struct LaplaceLikelihood {
  double value = 0.0;
  std::vector<double> gradient;
};

class FeasibilityModel {
 public:
  /// No data: every candidate is feasible (probability 1).
  FeasibilityModel() = default;

  /// Fits hyperparameters, then the Laplace posterior. `feasible[i]` is the outcome of row i.
  static FeasibilityModel fit(Matrix x, const std::vector<bool>& feasible,
                              const FeasibilityFitOptions& options, Rng& rng);
  /// The Laplace posterior with fixed covariance hyperparameters.
  static FeasibilityModel condition(Matrix x, const std::vector<bool>& feasible,
                                    const Covariance& covariance);

  /// P(feasible) for every row of `candidates`.
  std::vector<double> probability(const Matrix& candidates) const;
  /// log P(feasible), accurate where the probability is tiny.
  std::vector<double> log_probability(const Matrix& candidates) const;

  /// True when the model is a constant (no data, or a single class).
  bool constant() const { return constant_; }
  const Covariance& covariance() const { return covariance_; }
  std::size_t size() const { return labels_.size(); }
  /// Laplace approximation of the log marginal likelihood at the fitted hyperparameters.
  double log_marginal_likelihood() const { return log_marginal_likelihood_; }

 private:
  void latent(const Matrix& candidates, std::vector<double>& z) const;

  bool constant_ = true;
  double prior_mean_ = 0.0;
  double constant_log_probability_ = 0.0;
  Covariance covariance_;
  Matrix x_scaled_;
  std::vector<double> labels_;  // +1 feasible, -1 failed
  std::vector<double> gradient_log_likelihood_;
  std::vector<double> sqrt_w_;
  Matrix chol_b_;  // chol(I + W^1/2 K W^1/2)
  double log_marginal_likelihood_ = 0.0;
};

namespace detail {
/// The Laplace log marginal likelihood for labels in {+1, -1} with prior mean `mean`.
/// `mode_weights`, when given, starts Newton from a = *mode_weights and receives the mode's a.
LaplaceLikelihood laplace_log_marginal_likelihood(const Matrix& x,
                                                  const std::vector<double>& labels,
                                                  const Covariance& covariance, double mean,
                                                  bool with_gradient,
                                                  std::vector<double>* mode_weights = nullptr);
}  // namespace detail

}  // namespace tunebase::surrogates
