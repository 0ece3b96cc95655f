// Gaussian-process regression: exact inference, hyperparameters by type-II maximum likelihood.
//
// Model: y = f(x) + eps, f ~ GP(mean, k), eps ~ N(0, noise_variance), k a Covariance
// (Matérn-5/2 or squared exponential, ARD). Inputs are rows of a Matrix scaled to [0,1]^d by
// the caller (SearchSpace::encode); targets are usually standardised by ObjectiveTransform.
//
// Fitting and conditioning are separate, so that callers (the BO loop, transfer learning)
// decide when hyperparameters move:
//   - GaussianProcess::fit       optimises hyperparameters (multi-start box L-BFGS on the log
//                                marginal likelihood plus weak priors, analytic gradients);
//   - GaussianProcess::condition conditions on data with given hyperparameters;
//   - add_observation            extends the Cholesky factor by one row, O(n^2), hyperparameters
//                                kept (cheap fantasies for kriging believer / constant liar);
//   - truncate                   drops the most recent observations exactly (removes fantasies).
// A prior mean other than a constant is done by residual fitting: condition on y - m(x) and
// add m(x) back to the predicted means (the stacked-GP scheme of Vizier does exactly that).
//
// Every const member is re-entrant: predict() allocates its own workspace and may be called
// from several threads at once on one object.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <span>
#include <vector>

#include "core/space.h"
#include "surrogates/covariance.h"

namespace tunebase::surrogates {

/// Hyperparameters of GP regression. As a vector (to_vector/from_vector, the optimiser's
/// coordinates and the order of likelihood gradients): [log l_1..log l_d, log s2, log sn2, mean].
struct GpHyperparameters {
  Covariance covariance;
  double noise_variance = 1e-4;
  double mean = 0.0;

  std::size_t dimension() const { return covariance.dimension(); }
  std::size_t parameter_count() const { return dimension() + 3; }
  bool operator==(const GpHyperparameters&) const = default;
  /// Throws InvalidInput unless the covariance is valid, noise >= 0 and the mean finite.
  void validate() const;

  std::vector<double> to_vector() const;
  static GpHyperparameters from_vector(std::span<const double> v, CovarianceKind kind);

  /// {"covariance": "matern52", "lengthscales": [...], "signal_variance": s2,
  ///  "noise_variance": sn2, "mean": m}; from_json validates and throws InvalidInput.
  nlohmann::json to_json() const;
  static GpHyperparameters from_json(const nlohmann::json& j);
};

/// Weak priors (normal densities on the log-parameters) and the optimiser's box.
/// Defaults follow Hvarfner, Hellsten and Nardi (ICML 2024): log l ~ N(sqrt2 + log(d)/2, 3),
/// which scales lengthscales with the dimension, and log sn2 ~ N(-4, 1).
struct GpPriors {
  /// Location of log l (of columns that are not one-hot); unset means sqrt(2) + log(d)/2.
  std::optional<double> lengthscale_location;
  /// Which input columns one-hot encode a categorical parameter (SearchSpace::encode); empty
  /// when none do, and columns past its end are not. Their log l ~ N(categorical location, 3)
  /// instead: the dimension-scaled prior is for numeric inputs, whose lengthscales the data
  /// shorten; a value nobody measured says nothing, so its lengthscale stays at the prior's.
  std::vector<bool> one_hot_columns;
  /// Two values of one categorical parameter differ in two one-hot columns: at l = sqrt2 they
  /// are at scaled distance r = 1 and correlate 0.52 a priori (Matérn-5/2; 0.61 squared
  /// exponential), whatever the dimension, where the 41-column mode l = 26 gave 0.998. As with
  /// the overlap (Hamming) kernels for categoricals of SMAC, CoCaBO and HEBO, kept in the
  /// one-hot ARD form so that spaces without categoricals are modelled exactly as before.
  double categorical_lengthscale_location = 0.5 * std::numbers::ln2;
  double lengthscale_scale = 1.7320508075688772;  // sqrt(3)
  double signal_location = 0.0;                   // log s2, targets standardised
  double signal_scale = 1.5;
  double noise_location = -4.0;  // log sn2
  double noise_scale = 1.0;
  double mean_scale = 1.0;  // mean ~ N(0, mean_scale^2)

  double min_lengthscale = 1e-2;
  double max_lengthscale = 1e3;
  double min_signal_variance = 1e-3;
  double max_signal_variance = 1e2;
  double min_noise_variance = 1e-6;
  double max_noise_variance = 1.0;
  double max_abs_mean = 5.0;

  double lengthscale_mode(std::size_t dimension) const;
  /// Location of log l of `column` among `dimension`: the categorical location for a one-hot
  /// column, lengthscale_mode(dimension) for the others.
  double column_lengthscale_mode(std::size_t column, std::size_t dimension) const;
  /// exp(column_lengthscale_mode) of every column, clamped to the lengthscale bounds.
  std::vector<double> mode_lengthscales(std::size_t dimension) const;
};

struct GpFitOptions {
  CovarianceKind kind = CovarianceKind::matern52;
  /// Optimiser starts drawn from the priors, besides the prior mode and the warm start.
  std::size_t random_starts = 2;
  /// Start from the prior mode too (a scheduled refit may want only the warm start).
  bool start_at_prior_mode = true;
  /// L-BFGS iterations per start.
  std::size_t max_iterations = 200;
  /// Stop a start when the objective (log posterior per observation) improves by less.
  double tolerance = 1e-6;
  /// Hyperparameters are estimated on a random subset of at most this many observations
  /// (the posterior always uses all of them); 0 means no limit.
  std::size_t max_fit_points = 400;
  /// Usually the previous optimum; ignored unless its kind and dimension match.
  std::optional<GpHyperparameters> warm_start;
  GpPriors priors;
};

/// Marginal predictive distribution of f at each candidate (mean and variance of the latent
/// function; add noise_variance for a new observation's variance).
struct Prediction {
  std::vector<double> mean;
  std::vector<double> variance;
};

/// Joint predictive distribution of f at a few points (for sampling, e.g. RGPE).
struct JointPrediction {
  std::vector<double> mean;
  Matrix covariance;
};

/// log p(y | X, theta) and its gradient in GpHyperparameters::to_vector order.
struct LogLikelihood {
  double value = 0.0;
  std::vector<double> gradient;
  double jitter = 0.0;  ///< added to the diagonal to make the factorisation succeed
};

class GaussianProcess {
 public:
  /// Empty; only useful as a placeholder to assign to.
  GaussianProcess() = default;

  /// Optimises hyperparameters on (x, y), then conditions on all of it. Throws InvalidInput
  /// for mismatched shapes, non-finite values, or x without columns.
  static GaussianProcess fit(Matrix x, std::vector<double> y, const GpFitOptions& options,
                             Rng& rng);
  /// Conditions on (x, y) with fixed hyperparameters (any number of rows, 0 included).
  static GaussianProcess condition(Matrix x, std::vector<double> y,
                                   const GpHyperparameters& hyperparameters);

  /// Adds one observation keeping the hyperparameters: extends the Cholesky factor by a row
  /// in O(n^2). A near-duplicate whose pivot vanishes triggers a full refactorisation with
  /// more jitter instead.
  void add_observation(std::span<const double> x, double y);
  void add_observations(const Matrix& x, std::span<const double> y);
  /// Keeps the first n observations (the leading block of a Cholesky factor is the factor of
  /// the leading block, so this is exact). Throws InvalidInput when n > size().
  void truncate(std::size_t n);

  /// Means and latent variances for every row of `candidates`, computed in blocks with
  /// matrix products and one triangular solve per block.
  Prediction predict(const Matrix& candidates) const;
  JointPrediction predict_joint(const Matrix& candidates) const;
  /// Leave-one-out predictive mean and variance of each observation y_i (noise included):
  /// mu_i = y_i - alpha_i / [K^-1]_ii, var_i = 1 / [K^-1]_ii. O(n^3).
  Prediction leave_one_out() const;

  /// log p(y | X, theta) at the current hyperparameters (no priors).
  double log_marginal_likelihood() const;

  const GpHyperparameters& hyperparameters() const { return hyperparameters_; }
  std::size_t size() const { return y_.size(); }
  std::size_t dimension() const { return hyperparameters_.dimension(); }
  /// Jitter on the diagonal on top of the noise variance (0 unless needed).
  double jitter() const { return jitter_; }
  const Matrix& inputs() const { return x_; }
  const std::vector<double>& targets() const { return y_; }
  /// Lower Cholesky factor L of K + (noise + jitter) I.
  const Matrix& cholesky() const { return chol_; }
  /// beta = L^-1 (y - mean).
  const std::vector<double>& whitened_residuals() const { return beta_; }
  /// alpha = K^-1 (y - mean).
  const std::vector<double>& weights() const { return alpha_; }

 private:
  void refactorize();
  void update_weights();

  GpHyperparameters hyperparameters_;
  Matrix x_;
  Matrix x_scaled_;  // x_ / lengthscales
  std::vector<double> y_;
  Matrix chol_;
  std::vector<double> beta_;
  std::vector<double> alpha_;
  double jitter_ = 0.0;
};

/// log p(y | X, theta) with its analytic gradient when `with_gradient`.
LogLikelihood log_marginal_likelihood(const Matrix& x, std::span<const double> y,
                                      const GpHyperparameters& hyperparameters, bool with_gradient);

/// Converts rows (as SearchSpace::encode returns them) into a Matrix; all rows must have
/// `dimension` entries (InvalidInput otherwise).
Matrix to_matrix(const std::vector<std::vector<double>>& rows, std::size_t dimension);
/// Rows of `x` at `indices` (e.g. the observed or the still-unmeasured candidates).
Matrix select_rows(const Matrix& x, std::span<const std::size_t> indices);

namespace detail {

/// Cholesky of the symmetric positive (semi)definite `a` in place, adding jitter to the
/// diagonal, escalating from 1e-10 to 1e-2 times the mean diagonal, until it succeeds.
/// Returns the jitter added; throws Error when even the largest fails.
double cholesky_with_jitter(Matrix& a);

/// Sum of log L_ii.
double half_log_determinant(const Matrix& chol);

/// log prior density of a GpHyperparameters vector (up to a constant), gradient added into
/// `gradient` when non-empty.
double log_prior(const GpPriors& priors, std::size_t dimension, std::span<const double> v,
                 std::span<double> gradient);

/// Box of the optimiser in to_vector coordinates.
void parameter_bounds(const GpPriors& priors, std::size_t dimension, std::vector<double>& lower,
                      std::vector<double>& upper);

/// Number of candidates per block in batched prediction against n observations.
std::size_t prediction_block(std::size_t observations, std::size_t candidates);

}  // namespace detail
}  // namespace tunebase::surrogates
