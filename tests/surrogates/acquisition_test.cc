#include "surrogates/acquisition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace tunebase::surrogates {
namespace {

// E[max(best - f, 0)], f ~ N(mean, sd^2), by the trapezoid rule over +-12 sd.
double ei_by_quadrature(double mean, double sd, double best) {
  constexpr int kSteps = 200000;
  const double lo = mean - 12.0 * sd;
  const double hi = mean + 12.0 * sd;
  const double h = (hi - lo) / kSteps;
  double s = 0.0;
  for (int i = 0; i <= kSteps; ++i) {
    const double f = lo + h * i;
    const double w = (i == 0 || i == kSteps) ? 0.5 : 1.0;
    const double density =
        std::exp(-0.5 * std::pow((f - mean) / sd, 2)) / (sd * std::sqrt(2.0 * M_PI));
    s += w * std::max(best - f, 0.0) * density;
  }
  return s * h;
}

TEST(ExpectedImprovement, MatchesTheClosedFormAndQuadrature) {
  // At mean == best, EI = sigma phi(0).
  EXPECT_NEAR(expected_improvement(0.0, 1.0, 0.0), 0.3989422804014327, 1e-15);
  EXPECT_NEAR(expected_improvement(2.0, 4.0, 2.0), 2.0 * 0.3989422804014327, 1e-15);
  for (double mean : {-1.5, -0.3, 0.0, 0.4, 2.5}) {
    for (double sd : {0.1, 0.7, 2.0}) {
      const double best = 0.2;
      const double z = (best - mean) / sd;
      // EI = (best - mean) Phi(z) + sd phi(z)
      const double closed = (best - mean) * 0.5 * std::erfc(-z / std::sqrt(2.0)) +
                            sd * std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
      const double ei = expected_improvement(mean, sd * sd, best);
      EXPECT_NEAR(ei, closed, 1e-14 + 1e-12 * closed) << mean << " " << sd;
      EXPECT_NEAR(ei, ei_by_quadrature(mean, sd, best), 1e-7 + 1e-6 * closed);
    }
  }
  // Zero variance: the plain improvement.
  EXPECT_DOUBLE_EQ(expected_improvement(1.0, 0.0, 3.0), 2.0);
  EXPECT_DOUBLE_EQ(expected_improvement(4.0, 0.0, 3.0), 0.0);
}

TEST(LogExpectedImprovement, EqualsLogOfEiWhereEiIsRepresentable) {
  for (double z = -37.0; z <= 6.0; z += 0.01) {
    const double ei = expected_improvement(0.0, 1.0, z);
    ASSERT_GT(ei, 0.0) << z;
    EXPECT_NEAR(log_expected_improvement(0.0, 1.0, z), std::log(ei),
                1e-11 * std::max(1.0, std::abs(std::log(ei))))
        << "z = " << z;
  }
  // With a scale: log EI = log sigma + log h(z).
  EXPECT_NEAR(log_expected_improvement(1.0, 9.0, -2.0),
              std::log(expected_improvement(1.0, 9.0, -2.0)), 1e-12);
}

TEST(LogExpectedImprovement, IsAccurateAcrossTheBranchPoints) {
  // h(z) near -1 and -20 from both sides agrees with a direct evaluation in long double.
  for (double z :
       {-1.0 - 1e-9, -1.0 + 1e-9, -20.0 - 1e-9, -20.0 + 1e-9, -5.0, -19.99, -20.01, -25.0}) {
    const long double zl = z;
    const long double phi = std::exp(-0.5L * zl * zl) / std::sqrt(2.0L * M_PIl);
    const long double cdf = 0.5L * std::erfc(-zl / std::sqrt(2.0L));
    const long double h = phi + zl * cdf;
    // long double still cancels for very negative z; the reference is good to ~1e-9 at -25.
    EXPECT_NEAR(log_h(z), static_cast<double>(std::log(h)), 1e-9) << z;
  }
}

TEST(LogExpectedImprovement, StaysFiniteAndMonotoneWhereEiUnderflows) {
  EXPECT_EQ(expected_improvement(0.0, 1.0, -40.0), 0.0);
  double previous = -std::numeric_limits<double>::infinity();
  // z from -1e150 up to 10, on a log grid below -1: log EI must increase with z.
  std::vector<double> zs;
  for (double a = 150.0; a > 0.0; a -= 0.05) zs.push_back(-std::pow(10.0, a));
  for (double z = -1.0; z <= 10.0; z += 0.01) zs.push_back(z);
  for (double z : zs) {
    const double v = log_expected_improvement(0.0, 1.0, z);
    ASSERT_TRUE(std::isfinite(v)) << z;
    ASSERT_GT(v, previous) << z;
    previous = v;
  }
  // Asymptotically log h(z) ~ -z^2/2 - log(sqrt(2 pi)) - 2 log|z|.
  const double z = -1e4;
  EXPECT_NEAR(log_h(z), -0.5 * z * z - 0.5 * std::log(2.0 * M_PI) - 2.0 * std::log(-z), 1e-6);
  EXPECT_EQ(log_expected_improvement(3.0, 0.0, 1.0), -std::numeric_limits<double>::infinity());
}

TEST(LogNormalCdf, AccurateDeepInTheTail) {
  for (double z = -37.0; z <= 8.0; z += 0.05) {
    EXPECT_NEAR(log_normal_cdf(z), std::log(normal_cdf(z)), 1e-12 * std::max(1.0, std::abs(z * z)))
        << z;
  }
  // log Phi(z) ~ -z^2/2 - log(-z sqrt(2 pi)) for z -> -inf
  const double z = -1e5;
  EXPECT_NEAR(log_normal_cdf(z), -0.5 * z * z - std::log(-z * std::sqrt(2.0 * M_PI)), 1e-6);
  double previous = -std::numeric_limits<double>::infinity();
  for (double a = 100.0; a > -2.0; a -= 0.1) {
    const double v = log_normal_cdf(-std::pow(10.0, a));
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_GT(v, previous);
    previous = v;
  }
}

TEST(ProbabilityOfImprovementAndLcb, MatchTheirFormulas) {
  EXPECT_NEAR(probability_of_improvement(0.0, 1.0, 0.0), 0.5, 1e-15);
  EXPECT_NEAR(probability_of_improvement(1.0, 4.0, 3.0), normal_cdf(1.0), 1e-15);
  EXPECT_NEAR(log_probability_of_improvement(1.0, 4.0, 3.0), std::log(normal_cdf(1.0)), 1e-15);
  EXPECT_DOUBLE_EQ(probability_of_improvement(1.0, 0.0, 3.0), 1.0);
  EXPECT_DOUBLE_EQ(lower_confidence_bound(1.0, 4.0, 2.0), -3.0);
}

TEST(AcquisitionScores, HigherIsBetterAndFeasibilityWeights) {
  Prediction p;
  p.mean = {0.0, -1.0, 1.0};
  p.variance = {1.0, 1.0, 0.25};
  const double best = -0.5;
  const std::vector<double> log_feasible = {0.0, std::log(0.1), std::log(0.9)};
  AcquisitionOptions options;
  const auto log_ei = acquisition_scores(p, best, options, log_feasible);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(log_ei[i],
                log_expected_improvement(p.mean[i], p.variance[i], best) + log_feasible[i], 1e-12);
  }
  options.kind = Acquisition::expected_improvement;
  const auto ei = acquisition_scores(p, best, options, log_feasible);
  EXPECT_NEAR(ei[1], 0.1 * expected_improvement(-1.0, 1.0, best), 1e-14);
  options.kind = Acquisition::lower_confidence_bound;
  const auto lcb = acquisition_scores(p, best, options, log_feasible);
  EXPECT_EQ(lcb[1], -std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(lcb[0], 2.0);
  options.kind = Acquisition::probability_of_improvement;
  const auto pi = acquisition_scores(p, best, options);
  EXPECT_GT(pi[1], pi[0]);
  EXPECT_THROW(acquisition_scores(p, best, options, std::vector<double>{0.0}), InvalidInput);
  EXPECT_EQ(acquisition_from_string("log_ei"), Acquisition::log_expected_improvement);
  EXPECT_EQ(acquisition_from_string(to_string(Acquisition::lower_confidence_bound)),
            Acquisition::lower_confidence_bound);
  EXPECT_THROW(acquisition_from_string("thompson"), InvalidInput);
}

}  // namespace
}  // namespace tunebase::surrogates
