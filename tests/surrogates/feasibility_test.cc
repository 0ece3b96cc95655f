#include "surrogates/feasibility.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"

namespace tunebase::surrogates {
namespace {

Matrix random_inputs(std::size_t n, std::size_t d, Rng& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Matrix x(static_cast<long>(n), static_cast<long>(d));
  for (long i = 0; i < x.nr(); ++i) {
    for (long j = 0; j < x.nc(); ++j) x(i, j) = u(rng);
  }
  return x;
}

// Configurations fail when their first coordinate exceeds 0.7 (e.g. too many threads).
std::vector<bool> feasible_region(const Matrix& x) {
  std::vector<bool> ok(static_cast<std::size_t>(x.nr()));
  for (long i = 0; i < x.nr(); ++i) ok[static_cast<std::size_t>(i)] = x(i, 0) <= 0.7;
  return ok;
}

TEST(FeasibilityModel, SeparatesASimpleFailingRegion) {
  Rng rng(31);
  const Matrix x = random_inputs(80, 3, rng);
  const std::vector<bool> ok = feasible_region(x);
  const FeasibilityModel model = FeasibilityModel::fit(x, ok, FeasibilityFitOptions{}, rng);
  ASSERT_FALSE(model.constant());
  const Matrix test = random_inputs(400, 3, rng);
  const std::vector<bool> truth = feasible_region(test);
  const std::vector<double> p = model.probability(test);
  const std::vector<double> log_p = model.log_probability(test);
  std::size_t correct = 0;
  std::size_t clear_correct = 0;
  std::size_t clear = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    ASSERT_GE(p[i], 0.0);
    ASSERT_LE(p[i], 1.0);
    EXPECT_NEAR(std::log(p[i]), log_p[i], 1e-12);
    correct += (p[i] > 0.5) == truth[i];
    // Away from the boundary the model should be confident and right.
    if (std::abs(test(static_cast<long>(i), 0) - 0.7) > 0.15) {
      ++clear;
      clear_correct += truth[i] ? p[i] > 0.8 : p[i] < 0.2;
    }
  }
  EXPECT_GT(static_cast<double>(correct) / static_cast<double>(p.size()), 0.9);
  EXPECT_GT(static_cast<double>(clear_correct) / static_cast<double>(clear), 0.95);
  // The failing coordinate gets a shorter lengthscale than the irrelevant ones.
  const auto& l = model.covariance().lengthscales;
  EXPECT_LT(l[0], l[1]);
  EXPECT_LT(l[0], l[2]);
}

TEST(FeasibilityModel, LaplaceLikelihoodGradientMatchesFiniteDifferences) {
  Rng rng(5);
  const Matrix x = random_inputs(30, 2, rng);
  std::vector<double> labels;
  for (long i = 0; i < x.nr(); ++i) labels.push_back(x(i, 0) + 0.3 * x(i, 1) < 0.6 ? 1.0 : -1.0);
  Covariance cov;
  cov.kind = CovarianceKind::matern52;
  cov.lengthscales = {0.3, 0.8};
  cov.signal_variance = 2.0;
  const double mean = 0.3;
  const LaplaceLikelihood ll = detail::laplace_log_marginal_likelihood(x, labels, cov, mean, true);
  ASSERT_EQ(ll.gradient.size(), 3u);
  // The mode is found to ~1e-10 in log q, so the step cannot be much smaller than this.
  constexpr double kStep = 1e-4;
  for (std::size_t k = 0; k < 3; ++k) {
    auto at = [&](double delta) {
      Covariance c = cov;
      if (k < 2)
        c.lengthscales[k] *= std::exp(delta);
      else
        c.signal_variance *= std::exp(delta);
      return detail::laplace_log_marginal_likelihood(x, labels, c, mean, false).value;
    };
    const double fd = (at(kStep) - at(-kStep)) / (2.0 * kStep);
    EXPECT_NEAR(ll.gradient[k], fd, 1e-5 * std::max(1.0, std::abs(fd))) << "parameter " << k;
  }
}

TEST(FeasibilityModel, SingleClassIsAConstantBaseRate) {
  Rng rng(2);
  const Matrix x = random_inputs(10, 2, rng);
  const FeasibilityModel all_ok =
      FeasibilityModel::fit(x, std::vector<bool>(10, true), FeasibilityFitOptions{}, rng);
  EXPECT_TRUE(all_ok.constant());
  const std::vector<double> p = all_ok.probability(random_inputs(3, 2, rng));
  EXPECT_NEAR(p[0], 11.0 / 12.0, 1e-12);
  EXPECT_DOUBLE_EQ(p[0], p[2]);
  const FeasibilityModel empty;
  EXPECT_DOUBLE_EQ(empty.probability(random_inputs(2, 2, rng))[1], 1.0);
}

TEST(FeasibilityModel, RejectsMismatchedInputs) {
  Rng rng(3);
  const Matrix x = random_inputs(4, 2, rng);
  EXPECT_THROW(FeasibilityModel::fit(x, std::vector<bool>(3, true), FeasibilityFitOptions{}, rng),
               InvalidInput);
  const FeasibilityModel model =
      FeasibilityModel::fit(x, {true, false, true, false}, FeasibilityFitOptions{}, rng);
  EXPECT_THROW(model.probability(random_inputs(2, 3, rng)), InvalidInput);
}

}  // namespace
}  // namespace tunebase::surrogates
