#include "surrogates/gp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <string>

#include "core/error.h"
#include "surrogates/hyperparameter_search.h"
#include "surrogates/linalg.h"

#ifndef DLIB_USE_BLAS
#error "dlib must be configured with DLIB_USE_BLAS (Debian's dlib/config.h defines it)"
#endif

namespace tunebase::surrogates {
namespace {

// Jitter ladder for near-singular covariance matrices, relative to the mean diagonal.
constexpr double kFirstRelativeJitter = 1e-10;
constexpr double kLastRelativeJitter = 1e-2;
constexpr double kJitterGrowth = 10.0;
// A new pivot below this fraction of its diagonal entry means the point (nearly) duplicates
// earlier ones; the factor is then rebuilt with jitter rather than extended.
constexpr double kMinRelativePivot = 1e-10;
// Candidate-by-observation entries per prediction block (32 MiB of doubles).
constexpr std::size_t kPredictBlockEntries = std::size_t{1} << 22;
constexpr std::size_t kMinPredictBlock = 256;

const double kHalfLog2Pi = 0.5 * std::log(2.0 * std::numbers::pi);

using detail::ColumnVector;

void check_data(const Matrix& x, std::span<const double> y) {
  if (static_cast<std::size_t>(x.nr()) != y.size()) {
    throw InvalidInput("GP data: " + std::to_string(x.nr()) + " input rows but " +
                       std::to_string(y.size()) + " targets");
  }
  if (x.nc() == 0 && x.nr() > 0) throw InvalidInput("GP data: inputs have no columns");
  for (long i = 0; i < x.nr(); ++i) {
    for (long j = 0; j < x.nc(); ++j) {
      if (!std::isfinite(x(i, j))) {
        throw InvalidInput("GP data: input row " + std::to_string(i) + ", column " +
                           std::to_string(j) + " is not finite");
      }
    }
    if (!std::isfinite(y[static_cast<std::size_t>(i)])) {
      throw InvalidInput("GP data: target " + std::to_string(i) + " is not finite");
    }
  }
}

void check_candidates(const Matrix& c, std::size_t d) {
  if (static_cast<std::size_t>(c.nc()) != d) {
    throw InvalidInput("GP prediction: candidates have " + std::to_string(c.nc()) +
                       " columns, the model has dimension " + std::to_string(d));
  }
}

Matrix append_row(const Matrix& m, std::span<const double> row) {
  Matrix out(m.nr() + 1, static_cast<long>(row.size()));
  if (m.nr() > 0) dlib::set_subm(out, 0, 0, m.nr(), m.nc()) = m;
  for (std::size_t j = 0; j < row.size(); ++j) out(m.nr(), static_cast<long>(j)) = row[j];
  return out;
}

// Hyperparameter vector clamped into the optimiser's box.
ColumnVector clamp_into(const std::vector<double>& v, const std::vector<double>& lower,
                        const std::vector<double>& upper) {
  ColumnVector out(static_cast<long>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    out(static_cast<long>(i)) = std::clamp(v[i], lower[i], upper[i]);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// GpHyperparameters

void GpHyperparameters::validate() const {
  covariance.validate();
  if (!(noise_variance >= 0.0) || !std::isfinite(noise_variance)) {
    throw InvalidInput("GP hyperparameters: noise variance " + std::to_string(noise_variance) +
                       " must be non-negative and finite");
  }
  if (!std::isfinite(mean)) throw InvalidInput("GP hyperparameters: mean must be finite");
}

std::vector<double> GpHyperparameters::to_vector() const {
  std::vector<double> v;
  v.reserve(parameter_count());
  for (double l : covariance.lengthscales) v.push_back(std::log(l));
  v.push_back(std::log(covariance.signal_variance));
  v.push_back(std::log(noise_variance));
  v.push_back(mean);
  return v;
}

GpHyperparameters GpHyperparameters::from_vector(std::span<const double> v, CovarianceKind kind) {
  if (v.size() < 4) {
    throw InvalidInput("GP hyperparameter vector needs d + 3 >= 4 entries, got " +
                       std::to_string(v.size()));
  }
  const std::size_t d = v.size() - 3;
  GpHyperparameters h;
  h.covariance.kind = kind;
  h.covariance.lengthscales.resize(d);
  for (std::size_t j = 0; j < d; ++j) h.covariance.lengthscales[j] = std::exp(v[j]);
  h.covariance.signal_variance = std::exp(v[d]);
  h.noise_variance = std::exp(v[d + 1]);
  h.mean = v[d + 2];
  return h;
}

nlohmann::json GpHyperparameters::to_json() const {
  return {{"covariance", std::string(to_string(covariance.kind))},
          {"lengthscales", covariance.lengthscales},
          {"signal_variance", covariance.signal_variance},
          {"noise_variance", noise_variance},
          {"mean", mean}};
}

GpHyperparameters GpHyperparameters::from_json(const nlohmann::json& j) {
  const char* kShape =
      "GP hyperparameters: expected {\"covariance\": \"matern52\"|\"squared_exponential\", "
      "\"lengthscales\": [numbers], \"signal_variance\": number, \"noise_variance\": number, "
      "\"mean\": number}";
  if (!j.is_object()) throw InvalidInput(kShape);
  for (const char* key :
       {"covariance", "lengthscales", "signal_variance", "noise_variance", "mean"}) {
    if (!j.contains(key)) throw InvalidInput(std::string(kShape) + "; missing \"" + key + "\"");
  }
  if (!j["covariance"].is_string() || !j["lengthscales"].is_array() ||
      !j["signal_variance"].is_number() || !j["noise_variance"].is_number() ||
      !j["mean"].is_number()) {
    throw InvalidInput(kShape);
  }
  GpHyperparameters h;
  h.covariance.kind = covariance_kind_from_string(j["covariance"].get<std::string>());
  for (const auto& l : j["lengthscales"]) {
    if (!l.is_number()) throw InvalidInput(std::string(kShape) + "; a lengthscale is not a number");
    h.covariance.lengthscales.push_back(l.get<double>());
  }
  h.covariance.signal_variance = j["signal_variance"].get<double>();
  h.noise_variance = j["noise_variance"].get<double>();
  h.mean = j["mean"].get<double>();
  h.validate();
  return h;
}

double GpPriors::lengthscale_mode(std::size_t dimension) const {
  if (lengthscale_location) return *lengthscale_location;
  return std::numbers::sqrt2 +
         0.5 * std::log(static_cast<double>(std::max<std::size_t>(dimension, 1)));
}

double GpPriors::column_lengthscale_mode(std::size_t column, std::size_t dimension) const {
  if (column < one_hot_columns.size() && one_hot_columns[column]) {
    return categorical_lengthscale_location;
  }
  return lengthscale_mode(dimension);
}

std::vector<double> GpPriors::mode_lengthscales(std::size_t dimension) const {
  std::vector<double> out(dimension);
  for (std::size_t j = 0; j < dimension; ++j) {
    out[j] = std::clamp(std::exp(column_lengthscale_mode(j, dimension)), min_lengthscale,
                        max_lengthscale);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// detail

namespace detail {

double cholesky_with_jitter(Matrix& a) {
  const auto n = static_cast<std::size_t>(a.nr());
  if (n == 0) return 0.0;
  const Matrix original = a;
  if (linalg::cholesky_lower(&a(0, 0), n, n)) return 0.0;
  double mean_diag = 0.0;
  for (std::size_t i = 0; i < n; ++i) mean_diag += original(i, i);
  mean_diag = std::max(mean_diag / static_cast<double>(n), std::numeric_limits<double>::min());
  for (double rel = kFirstRelativeJitter; rel <= kLastRelativeJitter * (1.0 + 1e-9);
       rel *= kJitterGrowth) {
    const double jitter = rel * mean_diag;
    a = original;
    for (std::size_t i = 0; i < n; ++i) a(i, i) += jitter;
    if (linalg::cholesky_lower(&a(0, 0), n, n)) return jitter;
  }
  throw Error("GP: covariance matrix of " + std::to_string(n) +
              " points is not positive definite even with jitter " +
              std::to_string(kLastRelativeJitter) + " x mean diagonal");
}

double half_log_determinant(const Matrix& chol) {
  double s = 0.0;
  for (long i = 0; i < chol.nr(); ++i) s += std::log(chol(i, i));
  return s;
}

double log_prior(const GpPriors& priors, std::size_t dimension, std::span<const double> v,
                 std::span<double> gradient) {
  // log N(v; mu, s^2) up to a constant: -(v - mu)^2 / (2 s^2); derivative -(v - mu) / s^2
  double lp = 0.0;
  auto add = [&](std::size_t i, double mu, double s) {
    const double u = (v[i] - mu) / s;
    lp -= 0.5 * u * u;
    if (!gradient.empty()) gradient[i] -= u / s;
  };
  for (std::size_t j = 0; j < dimension; ++j) {
    add(j, priors.column_lengthscale_mode(j, dimension), priors.lengthscale_scale);
  }
  add(dimension, priors.signal_location, priors.signal_scale);
  add(dimension + 1, priors.noise_location, priors.noise_scale);
  add(dimension + 2, 0.0, priors.mean_scale);
  return lp;
}

void parameter_bounds(const GpPriors& priors, std::size_t dimension, std::vector<double>& lower,
                      std::vector<double>& upper) {
  lower.assign(dimension + 3, 0.0);
  upper.assign(dimension + 3, 0.0);
  for (std::size_t j = 0; j < dimension; ++j) {
    lower[j] = std::log(priors.min_lengthscale);
    upper[j] = std::log(priors.max_lengthscale);
  }
  lower[dimension] = std::log(priors.min_signal_variance);
  upper[dimension] = std::log(priors.max_signal_variance);
  lower[dimension + 1] = std::log(priors.min_noise_variance);
  upper[dimension + 1] = std::log(priors.max_noise_variance);
  lower[dimension + 2] = -priors.max_abs_mean;
  upper[dimension + 2] = priors.max_abs_mean;
}

std::size_t prediction_block(std::size_t observations, std::size_t candidates) {
  const std::size_t block =
      std::max(kMinPredictBlock, kPredictBlockEntries / std::max<std::size_t>(observations, 1));
  return std::max<std::size_t>(std::min(block, candidates), 1);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Likelihood

LogLikelihood log_marginal_likelihood(const Matrix& x, std::span<const double> y,
                                      const GpHyperparameters& h, bool with_gradient) {
  check_data(x, y);
  h.validate();
  const auto n = static_cast<std::size_t>(x.nr());
  const std::size_t d = h.dimension();
  LogLikelihood out;
  out.gradient.assign(h.parameter_count(), 0.0);
  if (n == 0) return out;
  const detail::GramWithDerivatives gram = detail::gram_with_derivatives(h.covariance, x);
  Matrix chol = gram.k;
  for (std::size_t i = 0; i < n; ++i) chol(i, i) += h.noise_variance;
  out.jitter = detail::cholesky_with_jitter(chol);

  std::vector<double> alpha(n);
  for (std::size_t i = 0; i < n; ++i) alpha[i] = y[i] - h.mean;
  linalg::solve_lower_vector(&chol(0, 0), n, n, alpha.data(), false);
  double fit_term = 0.0;
  for (double b : alpha) fit_term += b * b;
  linalg::solve_lower_vector(&chol(0, 0), n, n, alpha.data(), true);
  // log p(y) = -1/2 r^T K^-1 r - sum log L_ii - n/2 log 2 pi
  out.value =
      -0.5 * fit_term - detail::half_log_determinant(chol) - static_cast<double>(n) * kHalfLog2Pi;
  if (!with_gradient) return out;

  // dlog p / dtheta = 1/2 tr((alpha alpha^T - K^-1) dK/dtheta)
  Matrix w = chol;
  linalg::inverse_from_cholesky(&w(0, 0), n, n);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) w(a, b) = alpha[a] * alpha[b] - w(a, b);
  }
  const std::vector<double> cov_grad = detail::contract_derivatives(h.covariance, x, gram, w);
  for (std::size_t j = 0; j <= d; ++j) out.gradient[j] = 0.5 * cov_grad[j];
  // dK/dlog sn2 = sn2 I
  double trace = 0.0;
  for (std::size_t a = 0; a < n; ++a) trace += w(a, a);
  out.gradient[d + 1] = 0.5 * h.noise_variance * trace;
  // dlog p / dm = 1^T alpha
  out.gradient[d + 2] = std::accumulate(alpha.begin(), alpha.end(), 0.0);
  return out;
}

// ---------------------------------------------------------------------------------------------
// GaussianProcess

GaussianProcess GaussianProcess::condition(Matrix x, std::vector<double> y,
                                           const GpHyperparameters& hyperparameters) {
  hyperparameters.validate();
  if (x.nr() == 0) x.set_size(0, static_cast<long>(hyperparameters.dimension()));
  check_data(x, y);
  if (static_cast<std::size_t>(x.nc()) != hyperparameters.dimension()) {
    throw InvalidInput("GP: inputs have " + std::to_string(x.nc()) +
                       " columns but the hyperparameters have " +
                       std::to_string(hyperparameters.dimension()) + " lengthscales");
  }
  GaussianProcess gp;
  gp.hyperparameters_ = hyperparameters;
  gp.x_ = std::move(x);
  gp.y_ = std::move(y);
  gp.refactorize();
  return gp;
}

void GaussianProcess::refactorize() {
  const auto n = static_cast<std::size_t>(x_.nr());
  x_scaled_ = detail::scale_inputs(x_, hyperparameters_.covariance.lengthscales);
  chol_ = hyperparameters_.covariance.gram(x_);
  for (std::size_t i = 0; i < n; ++i) chol_(i, i) += hyperparameters_.noise_variance;
  jitter_ = detail::cholesky_with_jitter(chol_);
  beta_.resize(n);
  for (std::size_t i = 0; i < n; ++i) beta_[i] = y_[i] - hyperparameters_.mean;
  if (n > 0) linalg::solve_lower_vector(&chol_(0, 0), n, n, beta_.data(), false);
  update_weights();
}

void GaussianProcess::update_weights() {
  const std::size_t n = beta_.size();
  alpha_ = beta_;
  if (n > 0) linalg::solve_lower_vector(&chol_(0, 0), n, n, alpha_.data(), true);
}

GaussianProcess GaussianProcess::fit(Matrix x, std::vector<double> y, const GpFitOptions& options,
                                     Rng& rng) {
  check_data(x, y);
  const auto n = static_cast<std::size_t>(x.nr());
  const auto d = static_cast<std::size_t>(x.nc());
  const GpPriors& priors = options.priors;

  GpHyperparameters mode;
  mode.covariance.kind = options.kind;
  mode.covariance.lengthscales = priors.mode_lengthscales(d);
  mode.covariance.signal_variance = std::clamp(
      std::exp(priors.signal_location), priors.min_signal_variance, priors.max_signal_variance);
  mode.noise_variance = std::clamp(std::exp(priors.noise_location), priors.min_noise_variance,
                                   priors.max_noise_variance);
  mode.mean = 0.0;
  if (n == 0) return condition(std::move(x), std::move(y), mode);

  // Hyperparameters from a random subset when the data are large: the likelihood surface is
  // already well determined by a few hundred points, and each evaluation costs O(n^3).
  Matrix fit_x;
  std::vector<double> fit_y;
  const Matrix* xs = &x;
  std::span<const double> ys = y;
  if (options.max_fit_points > 0 && n > options.max_fit_points) {
    std::vector<std::size_t> idx(n);
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(options.max_fit_points);
    std::sort(idx.begin(), idx.end());
    fit_x = select_rows(x, idx);
    for (std::size_t i : idx) fit_y.push_back(y[i]);
    xs = &fit_x;
    ys = fit_y;
  }

  std::vector<double> lower;
  std::vector<double> upper;
  detail::parameter_bounds(priors, d, lower, upper);
  std::vector<std::vector<double>> starts;
  if (options.warm_start && options.warm_start->covariance.kind == options.kind &&
      options.warm_start->dimension() == d) {
    starts.push_back(options.warm_start->to_vector());
  }
  if (options.start_at_prior_mode || starts.empty()) starts.push_back(mode.to_vector());
  {
    std::normal_distribution<double> normal(0.0, 1.0);
    for (std::size_t s = 0; s < options.random_starts; ++s) {
      std::vector<double> v(d + 3);
      for (std::size_t j = 0; j < d; ++j) {
        v[j] = priors.column_lengthscale_mode(j, d) + priors.lengthscale_scale * normal(rng);
      }
      v[d] = priors.signal_location + priors.signal_scale * normal(rng);
      v[d + 1] = priors.noise_location + priors.noise_scale * normal(rng);
      v[d + 2] = priors.mean_scale * normal(rng);
      starts.push_back(std::move(v));
    }
  }

  const ColumnVector lo = clamp_into(lower, lower, upper);
  const ColumnVector hi = clamp_into(upper, lower, upper);
  std::vector<ColumnVector> thetas;
  for (const auto& start : starts) thetas.push_back(clamp_into(start, lower, upper));
  // -(log p(y|theta) + log p(theta)) / n with its gradient
  auto negative_log_posterior = [&] {
    return [&](const ColumnVector& theta, ColumnVector& gradient) {
      const std::vector<double> v(theta.begin(), theta.end());
      const LogLikelihood ll = surrogates::log_marginal_likelihood(
          *xs, ys, GpHyperparameters::from_vector(v, options.kind), true);
      std::vector<double> grad = ll.gradient;
      const double lp = detail::log_prior(priors, d, v, grad);
      const double scale = 1.0 / static_cast<double>(std::max<std::size_t>(ys.size(), 1));
      for (std::size_t i = 0; i < grad.size(); ++i) {
        gradient(static_cast<long>(i)) = -grad[i] * scale;
      }
      return -(ll.value + lp) * scale;
    };
  };
  const detail::Minimum best = detail::minimise_from_starts(
      negative_log_posterior, thetas, lo, hi, options.tolerance, options.max_iterations);
  if (!(best.value < detail::kFailedObjective)) {
    throw Error("GP fit: the likelihood could not be evaluated at any starting point (" +
                std::to_string(n) + " observations)");
  }
  const std::vector<double> v(best.theta.begin(), best.theta.end());
  return condition(std::move(x), std::move(y), GpHyperparameters::from_vector(v, options.kind));
}

void GaussianProcess::add_observation(std::span<const double> x, double y) {
  const std::size_t d = dimension();
  if (x.size() != d || d == 0) {
    throw InvalidInput("GP add_observation: point has " + std::to_string(x.size()) +
                       " coordinates, the model has dimension " + std::to_string(d));
  }
  for (double v : x) {
    if (!std::isfinite(v)) throw InvalidInput("GP add_observation: a coordinate is not finite");
  }
  if (!std::isfinite(y)) throw InvalidInput("GP add_observation: target is not finite");
  const std::size_t n = size();
  const Covariance& cov = hyperparameters_.covariance;

  // New row of the factor: l = L^-1 k(X, x), pivot = sqrt(k(x,x) + sn2 + jitter - l.l)
  std::vector<double> l(n);
  for (std::size_t i = 0; i < n; ++i) {
    l[i] = cov(std::span<const double>(&x_(static_cast<long>(i), 0), d), x);
  }
  if (n > 0) linalg::solve_lower_vector(&chol_(0, 0), n, n, l.data(), false);
  const double diagonal = cov.signal_variance + hyperparameters_.noise_variance + jitter_;
  double pivot2 = diagonal;
  for (double v : l) pivot2 -= v * v;

  x_ = append_row(x_, x);
  y_.push_back(y);
  if (!(pivot2 > kMinRelativePivot * diagonal)) {
    refactorize();
    return;
  }
  std::vector<double> scaled(d);
  for (std::size_t j = 0; j < d; ++j) scaled[j] = x[j] / cov.lengthscales[j];
  x_scaled_ = append_row(x_scaled_, scaled);

  const double pivot = std::sqrt(pivot2);
  Matrix grown(static_cast<long>(n + 1), static_cast<long>(n + 1));
  grown = 0;
  if (n > 0) dlib::set_subm(grown, 0, 0, static_cast<long>(n), static_cast<long>(n)) = chol_;
  for (std::size_t i = 0; i < n; ++i) grown(static_cast<long>(n), static_cast<long>(i)) = l[i];
  grown(static_cast<long>(n), static_cast<long>(n)) = pivot;
  chol_.swap(grown);
  // beta_n = ((y - m) - l.beta) / pivot
  double lb = 0.0;
  for (std::size_t i = 0; i < n; ++i) lb += l[i] * beta_[i];
  beta_.push_back((y - hyperparameters_.mean - lb) / pivot);
  update_weights();
}

void GaussianProcess::add_observations(const Matrix& x, std::span<const double> y) {
  if (static_cast<std::size_t>(x.nr()) != y.size()) {
    throw InvalidInput("GP add_observations: " + std::to_string(x.nr()) + " rows but " +
                       std::to_string(y.size()) + " targets");
  }
  for (long i = 0; i < x.nr(); ++i) {
    add_observation(std::span<const double>(&x(i, 0), static_cast<std::size_t>(x.nc())),
                    y[static_cast<std::size_t>(i)]);
  }
}

void GaussianProcess::truncate(std::size_t n) {
  if (n > size()) {
    throw InvalidInput("GP truncate: keeps " + std::to_string(n) + " observations but has only " +
                       std::to_string(size()));
  }
  if (n == size()) return;
  const long nl = static_cast<long>(n);
  const long d = x_.nc();
  x_ = Matrix(dlib::subm(x_, 0, 0, nl, d));
  x_scaled_ = Matrix(dlib::subm(x_scaled_, 0, 0, nl, d));
  chol_ = Matrix(dlib::subm(chol_, 0, 0, nl, nl));
  y_.resize(n);
  beta_.resize(n);
  update_weights();
}

double GaussianProcess::log_marginal_likelihood() const {
  double fit_term = 0.0;
  for (double b : beta_) fit_term += b * b;
  return -0.5 * fit_term - detail::half_log_determinant(chol_) -
         static_cast<double>(size()) * kHalfLog2Pi;
}

Prediction GaussianProcess::predict(const Matrix& candidates) const {
  const std::size_t d = dimension();
  check_candidates(candidates, d);
  const auto m = static_cast<std::size_t>(candidates.nr());
  const std::size_t n = size();
  const Covariance& cov = hyperparameters_.covariance;
  Prediction out;
  out.mean.assign(m, hyperparameters_.mean);
  out.variance.assign(m, cov.signal_variance);
  if (n == 0 || m == 0) return out;

  const std::size_t block = detail::prediction_block(n, m);
  std::vector<double> kxc(n * block);
  for (std::size_t start = 0; start < m; start += block) {
    const std::size_t b = std::min(block, m - start);
    Matrix cs(static_cast<long>(b), static_cast<long>(d));
    for (std::size_t c = 0; c < b; ++c) {
      for (std::size_t j = 0; j < d; ++j) {
        cs(static_cast<long>(c), static_cast<long>(j)) =
            candidates(static_cast<long>(start + c), static_cast<long>(j)) / cov.lengthscales[j];
      }
    }
    // K(X, C_block): n x b, leading dimension b
    detail::cross_covariance_scaled(cov.kind, cov.signal_variance, x_scaled_, cs, kxc.data(), b);
    // mean = m + K(C, X) alpha
    linalg::gemv(true, n, b, 1.0, kxc.data(), b, alpha_.data(), 1.0, out.mean.data() + start);
    // var = k(c, c) - |L^-1 k(X, c)|^2
    linalg::solve_lower(&chol_(0, 0), n, n, kxc.data(), b, b, false);
    double* var = out.variance.data() + start;
    for (std::size_t i = 0; i < n; ++i) {
      const double* row = kxc.data() + i * b;
      for (std::size_t c = 0; c < b; ++c) var[c] -= row[c] * row[c];
    }
    for (std::size_t c = 0; c < b; ++c) var[c] = std::max(var[c], 0.0);
  }
  return out;
}

JointPrediction GaussianProcess::predict_joint(const Matrix& candidates) const {
  const std::size_t d = dimension();
  check_candidates(candidates, d);
  const auto m = static_cast<std::size_t>(candidates.nr());
  const std::size_t n = size();
  const Covariance& cov = hyperparameters_.covariance;
  JointPrediction out;
  out.covariance = cov.gram(candidates);
  out.mean.assign(m, hyperparameters_.mean);
  if (n == 0 || m == 0) return out;
  Matrix kxc = cov.cross(x_, candidates);
  linalg::gemv(true, n, m, 1.0, &kxc(0, 0), m, alpha_.data(), 1.0, out.mean.data());
  linalg::solve_lower(&chol_(0, 0), n, n, &kxc(0, 0), m, m, false);
  // Sigma = K(C, C) - V^T V with V = L^-1 K(X, C)
  Matrix vtv(static_cast<long>(m), static_cast<long>(m));
  linalg::gram_transposed(&kxc(0, 0), n, m, m, &vtv(0, 0), m);
  out.covariance -= vtv;
  return out;
}

Prediction GaussianProcess::leave_one_out() const {
  const std::size_t n = size();
  Prediction out;
  out.mean.resize(n);
  out.variance.resize(n);
  if (n == 0) return out;
  Matrix inv = chol_;
  linalg::inverse_from_cholesky(&inv(0, 0), n, n);
  for (std::size_t i = 0; i < n; ++i) {
    // mu_-i = y_i - alpha_i / [K^-1]_ii,  var_-i = 1 / [K^-1]_ii
    const double kii = inv(static_cast<long>(i), static_cast<long>(i));
    out.mean[i] = y_[i] - alpha_[i] / kii;
    out.variance[i] = 1.0 / kii;
  }
  return out;
}

Matrix to_matrix(const std::vector<std::vector<double>>& rows, std::size_t dimension) {
  Matrix m(static_cast<long>(rows.size()), static_cast<long>(dimension));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].size() != dimension) {
      throw InvalidInput("row " + std::to_string(i) + " has " + std::to_string(rows[i].size()) +
                         " entries, expected " + std::to_string(dimension));
    }
    for (std::size_t j = 0; j < dimension; ++j) {
      m(static_cast<long>(i), static_cast<long>(j)) = rows[i][j];
    }
  }
  return m;
}

Matrix select_rows(const Matrix& x, std::span<const std::size_t> indices) {
  Matrix out(static_cast<long>(indices.size()), x.nc());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= static_cast<std::size_t>(x.nr())) {
      throw InvalidInput("select_rows: index " + std::to_string(indices[i]) + " but only " +
                         std::to_string(x.nr()) + " rows");
    }
    dlib::set_rowm(out, static_cast<long>(i)) = dlib::rowm(x, static_cast<long>(indices[i]));
  }
  return out;
}

}  // namespace tunebase::surrogates
