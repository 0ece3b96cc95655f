#include "surrogates/acquisition.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "core/error.h"

namespace tunebase::surrogates {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
const double kHalfLog2Pi = 0.5 * std::log(2.0 * std::numbers::pi);
// Below z = -kAsymptoticFrom the Mills-ratio series is used: its terms shrink at least by
// (2k + 1) / z^2 <= 1/16 over the first few, reaching double precision within kMaxSeriesTerms.
constexpr double kAsymptoticFrom = 20.0;
constexpr int kMaxSeriesTerms = 40;
// log h(z) is computed directly above this z (no cancellation in phi(z) + z Phi(z) there).
constexpr double kDirectLogHFrom = -1.0;
constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();

double log_normal_pdf(double z) { return -0.5 * z * z - kHalfLog2Pi; }

// sum_k>=0 c_k (-u)^k with c_k = (2k-1)!! for offset 0 (c_0 = 1) or (2k+1)!! for offset 1,
// u = 1/x^2: the bracket of the asymptotic expansions
//   x R(x)     ~ 1 - u + 3u^2 - 15u^3 + ...       (offset 0)
//   x^2 (1 - x R(x)) ~ 1 - 3u + 15u^2 - ...       (offset 1)
// where R(x) = Phi(-x) / phi(x) is Mills' ratio.
double mills_series(double x, int offset) {
  const double u = 1.0 / (x * x);
  double term = 1.0;
  double sum = 1.0;
  for (int k = 1; k < kMaxSeriesTerms; ++k) {
    term *= -static_cast<double>(2 * (k + offset) - 1) * u;
    sum += term;
    if (std::abs(term) < 1e-17 * std::abs(sum)) break;
  }
  return sum;
}

}  // namespace

double normal_pdf(double z) { return std::exp(log_normal_pdf(z)); }

double normal_cdf(double z) { return 0.5 * std::erfc(-z * kInvSqrt2); }

double log_normal_cdf(double z) {
  if (z > 0.0) {
    // log Phi(z) = log1p(-Phi(-z)), exact near 0 for large z
    return std::log1p(-0.5 * std::erfc(z * kInvSqrt2));
  }
  if (z >= -kAsymptoticFrom) return std::log(0.5 * std::erfc(-z * kInvSqrt2));
  const double x = -z;
  // log Phi(-x) = log phi(x) + log R(x),  R(x) = (1/x)(1 - 1/x^2 + 3/x^4 - ...)
  return log_normal_pdf(x) - std::log(x) + std::log(mills_series(x, 0));
}

double log_h(double z) {
  if (std::isnan(z)) return z;
  if (z > kDirectLogHFrom) return std::log(normal_pdf(z) + z * normal_cdf(z));
  const double x = -z;
  if (x <= kAsymptoticFrom) {
    // h(z) = phi(z) (1 - x R(x)),  R(x) = Phi(-x) / phi(x)
    const double mills = normal_cdf(z) / normal_pdf(z);
    return log_normal_pdf(z) + std::log1p(-x * mills);
  }
  // 1 - x R(x) = (1/x^2)(1 - 3/x^2 + 15/x^4 - ...)
  return log_normal_pdf(z) - 2.0 * std::log(x) + std::log(mills_series(x, 1));
}

double expected_improvement(double mean, double variance, double best) {
  if (!(variance > 0.0)) return std::max(best - mean, 0.0);
  const double sigma = std::sqrt(variance);
  const double z = (best - mean) / sigma;
  // EI = sigma (phi(z) + z Phi(z))
  if (z > kDirectLogHFrom) return sigma * (normal_pdf(z) + z * normal_cdf(z));
  return sigma * std::exp(log_h(z));
}

double log_expected_improvement(double mean, double variance, double best) {
  if (!(variance > 0.0)) {
    const double gain = best - mean;
    return gain > 0.0 ? std::log(gain) : kNegativeInfinity;
  }
  const double sigma = std::sqrt(variance);
  // log EI = log sigma + log h((best - mean) / sigma)
  return std::log(sigma) + log_h((best - mean) / sigma);
}

double probability_of_improvement(double mean, double variance, double best) {
  if (!(variance > 0.0)) return mean < best ? 1.0 : 0.0;
  // PI = Phi((best - mean) / sigma)
  return normal_cdf((best - mean) / std::sqrt(variance));
}

double log_probability_of_improvement(double mean, double variance, double best) {
  if (!(variance > 0.0)) return mean < best ? 0.0 : kNegativeInfinity;
  return log_normal_cdf((best - mean) / std::sqrt(variance));
}

double lower_confidence_bound(double mean, double variance, double kappa) {
  // LCB = mean - kappa sigma
  return mean - kappa * std::sqrt(std::max(variance, 0.0));
}

std::string_view to_string(Acquisition a) {
  switch (a) {
    case Acquisition::log_expected_improvement:
      return "log_ei";
    case Acquisition::expected_improvement:
      return "ei";
    case Acquisition::lower_confidence_bound:
      return "lcb";
    case Acquisition::probability_of_improvement:
      return "pi";
  }
  return "unknown";
}

Acquisition acquisition_from_string(std::string_view text) {
  if (text == "log_ei" || text == "log_expected_improvement" || text == "logei") {
    return Acquisition::log_expected_improvement;
  }
  if (text == "ei" || text == "expected_improvement") return Acquisition::expected_improvement;
  if (text == "lcb" || text == "lower_confidence_bound") {
    return Acquisition::lower_confidence_bound;
  }
  if (text == "pi" || text == "probability_of_improvement") {
    return Acquisition::probability_of_improvement;
  }
  throw InvalidInput("unknown acquisition function '" + std::string(text) +
                     "'; allowed: log_ei, ei, lcb, pi");
}

std::vector<double> acquisition_scores(const Prediction& prediction, double best,
                                       const AcquisitionOptions& options,
                                       std::span<const double> log_feasibility) {
  const std::size_t m = prediction.mean.size();
  if (prediction.variance.size() != m) {
    throw InvalidInput("acquisition: " + std::to_string(m) + " means but " +
                       std::to_string(prediction.variance.size()) + " variances");
  }
  if (!log_feasibility.empty() && log_feasibility.size() != m) {
    throw InvalidInput("acquisition: " + std::to_string(m) + " candidates but " +
                       std::to_string(log_feasibility.size()) + " feasibility values");
  }
  const bool weighted = !log_feasibility.empty();
  const double log_min_feasible = std::log(options.min_feasible_probability);
  std::vector<double> score(m);
  for (std::size_t i = 0; i < m; ++i) {
    const double mu = prediction.mean[i];
    const double var = prediction.variance[i];
    const double lp = weighted ? log_feasibility[i] : 0.0;
    switch (options.kind) {
      case Acquisition::log_expected_improvement:
        score[i] = log_expected_improvement(mu, var, best) + lp;
        break;
      case Acquisition::expected_improvement:
        score[i] = expected_improvement(mu, var, best) * std::exp(lp);
        break;
      case Acquisition::probability_of_improvement:
        score[i] = probability_of_improvement(mu, var, best) * std::exp(lp);
        break;
      case Acquisition::lower_confidence_bound:
        score[i] = (weighted && lp < log_min_feasible)
                       ? kNegativeInfinity
                       : -lower_confidence_bound(mu, var, options.kappa);
        break;
    }
  }
  return score;
}

}  // namespace tunebase::surrogates
