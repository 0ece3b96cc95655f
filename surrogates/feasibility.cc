#include "surrogates/feasibility.h"

#include <algorithm>
#include <boost/math/special_functions/erf.hpp>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <string>

#include "core/error.h"
#include "surrogates/acquisition.h"
#include "surrogates/hyperparameter_search.h"
#include "surrogates/linalg.h"

namespace tunebase::surrogates {
namespace {

constexpr std::size_t kMaxNewtonIterations = 100;
constexpr std::size_t kMaxStepHalvings = 20;
// Newton stops when the objective Psi improves by less than this (per observation).
constexpr double kNewtonTolerance = 1e-12;

using detail::ColumnVector;

// Derivatives of log Phi(y f) with respect to f, with r = phi(z) / Phi(z), z = y f:
//   d1 = y r,  W = -d2 = r (z + r),  d3 = y r'',  r' = -r (z + r),  r'' = -r' (z + r) - r (1 + r')
struct ProbitTerms {
  double log_p;
  double d1;
  double w;
  double d3;
};

ProbitTerms probit_terms(double y, double f) {
  const double z = y * f;
  const double log_p = log_normal_cdf(z);
  const double r = std::exp(-0.5 * z * z - 0.5 * std::log(2.0 * std::numbers::pi) - log_p);
  const double rp = -r * (z + r);
  const double rpp = -rp * (z + r) - r * (1.0 + rp);
  return {log_p, y * r, -rp, y * rpp};
}

struct LaplaceMode {
  std::vector<double> g;  // f - m at the mode
  std::vector<double> a;  // K^-1 g
  std::vector<double> d1;
  std::vector<double> w;
  std::vector<double> sqrt_w;
  std::vector<double> d3;
  Matrix chol_b;  // chol(I + W^1/2 K W^1/2)
  double log_q = 0.0;
};

std::vector<double> times(const Matrix& k, const std::vector<double>& v) {
  const auto n = static_cast<std::size_t>(k.nr());
  std::vector<double> out(n, 0.0);
  linalg::gemv(false, n, n, 1.0, &k(0, 0), n, v.data(), 0.0, out.data());
  return out;
}

// Psi(g) = -1/2 a^T g + sum log Phi(y (m + g))
double psi(const std::vector<double>& a, const std::vector<double>& g,
           const std::vector<double>& labels, double mean) {
  double s = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    s += -0.5 * a[i] * g[i] + log_normal_cdf(labels[i] * (mean + g[i]));
  }
  return s;
}

// Terms at g, W^1/2 and the factor of B = I + W^1/2 K W^1/2.
void linearise(const Matrix& k, const std::vector<double>& labels, double mean, LaplaceMode& s) {
  const std::size_t n = labels.size();
  s.d1.resize(n);
  s.w.resize(n);
  s.sqrt_w.resize(n);
  s.d3.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const ProbitTerms t = probit_terms(labels[i], mean + s.g[i]);
    s.d1[i] = t.d1;
    s.w[i] = std::max(t.w, 0.0);
    s.sqrt_w[i] = std::sqrt(s.w[i]);
    s.d3[i] = t.d3;
  }
  s.chol_b.set_size(static_cast<long>(n), static_cast<long>(n));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      s.chol_b(static_cast<long>(i), static_cast<long>(j)) =
          s.sqrt_w[i] * k(static_cast<long>(i), static_cast<long>(j)) * s.sqrt_w[j] +
          (i == j ? 1.0 : 0.0);
    }
  }
  detail::cholesky_with_jitter(s.chol_b);
}

// Rasmussen and Williams, algorithm 3.1 (Newton on Psi), with step halving for safety.
// `start` (weights a, g = K a), when given, is usually the mode at nearby hyperparameters.
LaplaceMode find_mode(const Matrix& k, const std::vector<double>& labels, double mean,
                      const std::vector<double>* start = nullptr) {
  const std::size_t n = labels.size();
  LaplaceMode s;
  s.g.assign(n, 0.0);
  s.a.assign(n, 0.0);
  double current = psi(s.a, s.g, labels, mean);
  if (start != nullptr && start->size() == n) {
    std::vector<double> g = times(k, *start);
    const double warm = psi(*start, g, labels, mean);
    if (warm > current) {
      s.a = *start;
      s.g = std::move(g);
      current = warm;
    }
  }
  for (std::size_t iter = 0; iter < kMaxNewtonIterations; ++iter) {
    linearise(k, labels, mean, s);
    // b = W g + d1;  a = b - W^1/2 L^-T L^-1 (W^1/2 K b);  g = K a
    std::vector<double> b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = s.w[i] * s.g[i] + s.d1[i];
    std::vector<double> t = times(k, b);
    for (std::size_t i = 0; i < n; ++i) t[i] *= s.sqrt_w[i];
    linalg::solve_lower_vector(&s.chol_b(0, 0), n, n, t.data(), false);
    linalg::solve_lower_vector(&s.chol_b(0, 0), n, n, t.data(), true);
    std::vector<double> a(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] - s.sqrt_w[i] * t[i];
    std::vector<double> g = times(k, a);
    double next = psi(a, g, labels, mean);
    for (std::size_t h = 0; h < kMaxStepHalvings && !(next >= current); ++h) {
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = 0.5 * (a[i] + s.a[i]);
        g[i] = 0.5 * (g[i] + s.g[i]);
      }
      next = psi(a, g, labels, mean);
    }
    if (!(next >= current)) break;
    s.a = std::move(a);
    s.g = std::move(g);
    const double gain = next - current;
    current = next;
    if (gain < kNewtonTolerance * static_cast<double>(n)) break;
  }
  linearise(k, labels, mean, s);
  // log q = Psi(g) - sum log L_ii
  s.log_q = psi(s.a, s.g, labels, mean) - detail::half_log_determinant(s.chol_b);
  return s;
}

void check_inputs(const Matrix& x, std::size_t labels) {
  if (static_cast<std::size_t>(x.nr()) != labels) {
    throw InvalidInput("feasibility model: " + std::to_string(x.nr()) + " input rows but " +
                       std::to_string(labels) + " outcomes");
  }
  for (long i = 0; i < x.nr(); ++i) {
    for (long j = 0; j < x.nc(); ++j) {
      if (!std::isfinite(x(i, j))) {
        throw InvalidInput("feasibility model: input row " + std::to_string(i) + " is not finite");
      }
    }
  }
}

}  // namespace

namespace detail {

LaplaceLikelihood laplace_log_marginal_likelihood(const Matrix& x,
                                                  const std::vector<double>& labels,
                                                  const Covariance& cov, double mean,
                                                  bool with_gradient,
                                                  std::vector<double>* mode_weights) {
  check_inputs(x, labels.size());
  cov.validate();
  const std::size_t n = labels.size();
  const std::size_t d = cov.dimension();
  LaplaceLikelihood out;
  out.gradient.assign(d + 1, 0.0);
  if (n == 0) return out;
  const GramWithDerivatives gram = gram_with_derivatives(cov, x);
  const LaplaceMode s = find_mode(gram.k, labels, mean, mode_weights);
  if (mode_weights != nullptr) *mode_weights = s.a;
  out.value = s.log_q;
  if (!with_gradient) return out;

  // Rasmussen and Williams, algorithm 5.1.
  // R = W^1/2 L^-T L^-1 W^1/2 = Z^T Z with Z = L^-1 diag(W^1/2)
  Matrix z(static_cast<long>(n), static_cast<long>(n));
  z = 0;
  for (std::size_t i = 0; i < n; ++i) z(static_cast<long>(i), static_cast<long>(i)) = s.sqrt_w[i];
  linalg::solve_lower(&s.chol_b(0, 0), n, n, &z(0, 0), n, n, false);
  Matrix r(static_cast<long>(n), static_cast<long>(n));
  linalg::gram_transposed(&z(0, 0), n, n, n, &r(0, 0), n);
  // C = L^-1 (W^1/2 K);  s2 = dlog q / df = 1/2 diag((K^-1 + W)^-1) o d3
  //                          = 1/2 (diag K - diag C^T C) o d3
  // (the book prints -1/2 here; with W = -d2 log p, dW/df = -d3 flips it, as GPML's
  // infLaplace.m has it and the finite-difference test confirms)
  Matrix c(static_cast<long>(n), static_cast<long>(n));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      c(static_cast<long>(i), static_cast<long>(j)) =
          s.sqrt_w[i] * gram.k(static_cast<long>(i), static_cast<long>(j));
    }
  }
  linalg::solve_lower(&s.chol_b(0, 0), n, n, &c(0, 0), n, n, false);
  std::vector<double> s2(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    for (std::size_t i = 0; i < n; ++i)
      s2[i] += c(static_cast<long>(k), static_cast<long>(i)) *
               c(static_cast<long>(k), static_cast<long>(i));
  }
  for (std::size_t i = 0; i < n; ++i) {
    s2[i] = 0.5 * (gram.k(static_cast<long>(i), static_cast<long>(i)) - s2[i]) * s.d3[i];
  }
  // s1_j = 1/2 a^T C_j a - 1/2 tr(R C_j): contraction with 1/2 (a a^T - R)
  Matrix w1(static_cast<long>(n), static_cast<long>(n));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      w1(static_cast<long>(i), static_cast<long>(j)) =
          0.5 * (s.a[i] * s.a[j] - r(static_cast<long>(i), static_cast<long>(j)));
    }
  }
  const std::vector<double> s1 = contract_derivatives(cov, x, gram, w1);
  // b_j = C_j d1;  s3_j = b_j - K R b_j
  Matrix b = apply_derivatives(cov, x, gram, s.d1);
  const std::size_t p = d + 1;
  Matrix rb(static_cast<long>(n), static_cast<long>(p));
  linalg::gemm(false, false, n, p, n, 1.0, &r(0, 0), n, &b(0, 0), p, 0.0, &rb(0, 0), p);
  linalg::gemm(false, false, n, p, n, -1.0, &gram.k(0, 0), n, &rb(0, 0), p, 1.0, &b(0, 0), p);
  for (std::size_t j = 0; j < p; ++j) {
    double implicit = 0.0;
    for (std::size_t i = 0; i < n; ++i)
      implicit += s2[i] * b(static_cast<long>(i), static_cast<long>(j));
    out.gradient[j] = s1[j] + implicit;
  }
  return out;
}

}  // namespace detail

FeasibilityModel FeasibilityModel::condition(Matrix x, const std::vector<bool>& feasible,
                                             const Covariance& covariance) {
  check_inputs(x, feasible.size());
  FeasibilityModel model;
  const std::size_t n = feasible.size();
  const auto ok = static_cast<std::size_t>(std::count(feasible.begin(), feasible.end(), true));
  // smoothed base rate p = (n_ok + 1) / (n + 2); the prior mean is Phi^-1(p) = -sqrt2 erfc^-1(2p)
  const double base_rate = (static_cast<double>(ok) + 1.0) / (static_cast<double>(n) + 2.0);
  model.constant_log_probability_ = std::log(base_rate);
  model.prior_mean_ = -std::numbers::sqrt2 * boost::math::erfc_inv(2.0 * base_rate);
  model.covariance_ = covariance;
  model.labels_.resize(n);
  for (std::size_t i = 0; i < n; ++i) model.labels_[i] = feasible[i] ? 1.0 : -1.0;
  model.constant_ = ok == 0 || ok == n;
  if (model.constant_) return model;
  covariance.validate();
  if (static_cast<std::size_t>(x.nc()) != covariance.dimension()) {
    throw InvalidInput("feasibility model: inputs have " + std::to_string(x.nc()) +
                       " columns but the covariance has " + std::to_string(covariance.dimension()) +
                       " lengthscales");
  }
  const Matrix k = covariance.gram(x);
  LaplaceMode s = find_mode(k, model.labels_, model.prior_mean_);
  model.x_scaled_ = detail::scale_inputs(x, covariance.lengthscales);
  model.gradient_log_likelihood_ = std::move(s.d1);
  model.sqrt_w_ = std::move(s.sqrt_w);
  model.chol_b_ = std::move(s.chol_b);
  model.log_marginal_likelihood_ = s.log_q;
  return model;
}

FeasibilityModel FeasibilityModel::fit(Matrix x, const std::vector<bool>& feasible,
                                       const FeasibilityFitOptions& options, Rng& rng) {
  check_inputs(x, feasible.size());
  const std::size_t n = feasible.size();
  const auto d = static_cast<std::size_t>(x.nc());
  const GpPriors& priors = options.priors;
  Covariance mode;
  mode.kind = options.kind;
  mode.lengthscales = priors.mode_lengthscales(d);
  mode.signal_variance = std::clamp(std::exp(priors.signal_location), priors.min_signal_variance,
                                    priors.max_signal_variance);
  const auto ok = static_cast<std::size_t>(std::count(feasible.begin(), feasible.end(), true));
  if (d == 0 || ok == 0 || ok == n) return condition(std::move(x), feasible, mode);

  // Stratified subset for the hyperparameters: failures are rare and carry the signal.
  std::vector<std::size_t> good;
  std::vector<std::size_t> bad;
  for (std::size_t i = 0; i < n; ++i) (feasible[i] ? good : bad).push_back(i);
  std::vector<std::size_t> chosen;
  if (options.max_fit_points > 0 && n > options.max_fit_points) {
    std::shuffle(good.begin(), good.end(), rng);
    std::shuffle(bad.begin(), bad.end(), rng);
    const std::size_t take_bad = std::min(
        bad.size(), std::max(options.max_fit_points / 2, options.max_fit_points - good.size()));
    const std::size_t take_good = std::min(good.size(), options.max_fit_points - take_bad);
    chosen.assign(bad.begin(), bad.begin() + static_cast<long>(take_bad));
    chosen.insert(chosen.end(), good.begin(), good.begin() + static_cast<long>(take_good));
    std::sort(chosen.begin(), chosen.end());
  } else {
    chosen.resize(n);
    std::iota(chosen.begin(), chosen.end(), std::size_t{0});
  }
  const Matrix fit_x = select_rows(x, chosen);
  std::vector<double> fit_labels;
  for (std::size_t i : chosen) fit_labels.push_back(feasible[i] ? 1.0 : -1.0);
  const double base_rate = (static_cast<double>(ok) + 1.0) / (static_cast<double>(n) + 2.0);
  const double mean = -std::numbers::sqrt2 * boost::math::erfc_inv(2.0 * base_rate);

  ColumnVector lo(static_cast<long>(d + 1));
  ColumnVector hi(static_cast<long>(d + 1));
  for (std::size_t j = 0; j < d; ++j) {
    lo(static_cast<long>(j)) = std::log(priors.min_lengthscale);
    hi(static_cast<long>(j)) = std::log(priors.max_lengthscale);
  }
  lo(static_cast<long>(d)) = std::log(priors.min_signal_variance);
  hi(static_cast<long>(d)) = std::log(priors.max_signal_variance);
  auto to_theta = [&](const Covariance& c) {
    ColumnVector t(static_cast<long>(d + 1));
    for (std::size_t j = 0; j < d; ++j) t(static_cast<long>(j)) = std::log(c.lengthscales[j]);
    t(static_cast<long>(d)) = std::log(c.signal_variance);
    return ColumnVector(dlib::clamp(t, lo, hi));
  };
  std::vector<ColumnVector> starts;
  if (options.warm_start && options.warm_start->kind == options.kind &&
      options.warm_start->dimension() == d) {
    starts.push_back(to_theta(*options.warm_start));
  }
  starts.push_back(to_theta(mode));
  std::normal_distribution<double> normal(0.0, 1.0);
  for (std::size_t s = 0; s < options.random_starts; ++s) {
    ColumnVector t(static_cast<long>(d + 1));
    for (std::size_t j = 0; j < d; ++j) {
      t(static_cast<long>(j)) =
          priors.column_lengthscale_mode(j, d) + priors.lengthscale_scale * normal(rng);
    }
    t(static_cast<long>(d)) = priors.signal_location + priors.signal_scale * normal(rng);
    starts.push_back(ColumnVector(dlib::clamp(t, lo, hi)));
  }
  // -(log q(y|theta) + log p(theta)) / n with its gradient; the Newton iteration for the
  // Laplace mode starts from the mode at the previous point of the same descent.
  auto negative_log_posterior = [&] {
    return [&, mode_weights = std::vector<double>()](const ColumnVector& theta,
                                                     ColumnVector& gradient) mutable {
      Covariance cov;
      cov.kind = options.kind;
      cov.lengthscales.resize(d);
      for (std::size_t j = 0; j < d; ++j) {
        cov.lengthscales[j] = std::exp(theta(static_cast<long>(j)));
      }
      cov.signal_variance = std::exp(theta(static_cast<long>(d)));
      const LaplaceLikelihood ll = detail::laplace_log_marginal_likelihood(
          fit_x, fit_labels, cov, mean, true, &mode_weights);
      // log N(theta; mu, s^2): lengthscales and signal variance
      double lp = 0.0;
      std::vector<double> grad = ll.gradient;
      for (std::size_t j = 0; j <= d; ++j) {
        const double mu = j < d ? priors.column_lengthscale_mode(j, d) : priors.signal_location;
        const double sd = j < d ? priors.lengthscale_scale : priors.signal_scale;
        const double u = (theta(static_cast<long>(j)) - mu) / sd;
        lp -= 0.5 * u * u;
        grad[j] -= u / sd;
      }
      const double scale = 1.0 / static_cast<double>(fit_labels.size());
      for (std::size_t j = 0; j <= d; ++j) gradient(static_cast<long>(j)) = -grad[j] * scale;
      return -(ll.value + lp) * scale;
    };
  };
  const ColumnVector best = detail::minimise_from_starts(negative_log_posterior, starts, lo, hi,
                                                         options.tolerance, options.max_iterations)
                                .theta;
  Covariance fitted = mode;
  for (std::size_t j = 0; j < d; ++j) fitted.lengthscales[j] = std::exp(best(static_cast<long>(j)));
  fitted.signal_variance = std::exp(best(static_cast<long>(d)));
  return condition(std::move(x), feasible, fitted);
}

void FeasibilityModel::latent(const Matrix& candidates, std::vector<double>& z) const {
  const auto m = static_cast<std::size_t>(candidates.nr());
  const std::size_t n = labels_.size();
  const std::size_t d = covariance_.dimension();
  if (static_cast<std::size_t>(candidates.nc()) != d) {
    throw InvalidInput("feasibility model: candidates have " + std::to_string(candidates.nc()) +
                       " columns, the model has dimension " + std::to_string(d));
  }
  z.assign(m, prior_mean_);
  std::vector<double> var(m, covariance_.signal_variance);
  const std::size_t block = detail::prediction_block(n, m);
  std::vector<double> kxc(n * block);
  for (std::size_t start = 0; start < m; start += block) {
    const std::size_t b = std::min(block, m - start);
    Matrix cs(static_cast<long>(b), static_cast<long>(d));
    for (std::size_t c = 0; c < b; ++c) {
      for (std::size_t j = 0; j < d; ++j) {
        cs(static_cast<long>(c), static_cast<long>(j)) =
            candidates(static_cast<long>(start + c), static_cast<long>(j)) /
            covariance_.lengthscales[j];
      }
    }
    detail::cross_covariance_scaled(covariance_.kind, covariance_.signal_variance, x_scaled_, cs,
                                    kxc.data(), b);
    // mu = m + k*^T d1;  var = k** - |L^-1 (W^1/2 k*)|^2
    linalg::gemv(true, n, b, 1.0, kxc.data(), b, gradient_log_likelihood_.data(), 1.0,
                 z.data() + start);
    for (std::size_t i = 0; i < n; ++i) {
      double* row = kxc.data() + i * b;
      for (std::size_t c = 0; c < b; ++c) row[c] *= sqrt_w_[i];
    }
    linalg::solve_lower(&chol_b_(0, 0), n, n, kxc.data(), b, b, false);
    for (std::size_t i = 0; i < n; ++i) {
      const double* row = kxc.data() + i * b;
      for (std::size_t c = 0; c < b; ++c) var[start + c] -= row[c] * row[c];
    }
  }
  // P(feasible) = Phi(mu / sqrt(1 + var))
  for (std::size_t c = 0; c < m; ++c) z[c] /= std::sqrt(1.0 + std::max(var[c], 0.0));
}

std::vector<double> FeasibilityModel::log_probability(const Matrix& candidates) const {
  const auto m = static_cast<std::size_t>(candidates.nr());
  if (constant_) return std::vector<double>(m, constant_log_probability_);
  std::vector<double> z;
  latent(candidates, z);
  for (double& v : z) v = log_normal_cdf(v);
  return z;
}

std::vector<double> FeasibilityModel::probability(const Matrix& candidates) const {
  std::vector<double> p = log_probability(candidates);
  for (double& v : p) v = std::exp(v);
  return p;
}

}  // namespace tunebase::surrogates
