#include "surrogates/gp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "core/error.h"
#include "surrogates/candidate_posterior.h"

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

// A smooth test function on [0,1]^d.
double smooth(const Matrix& x, long i) {
  double s = 0.0;
  for (long j = 0; j < x.nc(); ++j) s += std::sin(3.0 * x(i, j) + static_cast<double>(j));
  return s;
}

std::vector<double> smooth_targets(const Matrix& x) {
  std::vector<double> y(static_cast<std::size_t>(x.nr()));
  for (long i = 0; i < x.nr(); ++i) y[static_cast<std::size_t>(i)] = smooth(x, i);
  return y;
}

GpHyperparameters hyper(CovarianceKind kind, std::vector<double> lengthscales, double s2,
                        double noise, double mean) {
  GpHyperparameters h;
  h.covariance.kind = kind;
  h.covariance.lengthscales = std::move(lengthscales);
  h.covariance.signal_variance = s2;
  h.noise_variance = noise;
  h.mean = mean;
  return h;
}

class LikelihoodGradient : public ::testing::TestWithParam<CovarianceKind> {};

TEST_P(LikelihoodGradient, MatchesCentralFiniteDifferences) {
  Rng rng(7);
  const Matrix x = random_inputs(25, 3, rng);
  std::vector<double> y = smooth_targets(x);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (double& v : y) v += noise(rng);
  const GpHyperparameters h = hyper(GetParam(), {0.3, 0.7, 1.5}, 1.3, 0.05, 0.2);
  const LogLikelihood ll = log_marginal_likelihood(x, y, h, true);
  ASSERT_EQ(ll.gradient.size(), h.parameter_count());
  EXPECT_EQ(ll.jitter, 0.0);
  const std::vector<double> v = h.to_vector();
  constexpr double kStep = 1e-5;
  for (std::size_t k = 0; k < v.size(); ++k) {
    std::vector<double> plus = v;
    std::vector<double> minus = v;
    plus[k] += kStep;
    minus[k] -= kStep;
    const double fd =
        (log_marginal_likelihood(x, y, GpHyperparameters::from_vector(plus, GetParam()), false)
             .value -
         log_marginal_likelihood(x, y, GpHyperparameters::from_vector(minus, GetParam()), false)
             .value) /
        (2.0 * kStep);
    EXPECT_NEAR(ll.gradient[k], fd, 1e-5 * std::max(1.0, std::abs(fd))) << "parameter " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(BothKernels, LikelihoodGradient,
                         ::testing::Values(CovarianceKind::matern52,
                                           CovarianceKind::squared_exponential));

TEST(GpPriors, LogPriorGradientMatchesFiniteDifferences) {
  GpPriors priors;
  const std::vector<double> v = {-1.0, 0.5, 2.0, 0.3, -5.0, 0.7};
  std::vector<double> grad(v.size(), 0.0);
  detail::log_prior(priors, 3, v, grad);
  constexpr double kStep = 1e-6;
  for (std::size_t k = 0; k < v.size(); ++k) {
    std::vector<double> plus = v;
    std::vector<double> minus = v;
    plus[k] += kStep;
    minus[k] -= kStep;
    const double fd =
        (detail::log_prior(priors, 3, plus, {}) - detail::log_prior(priors, 3, minus, {})) /
        (2.0 * kStep);
    EXPECT_NEAR(grad[k], fd, 1e-6);
  }
}

TEST(GaussianProcess, InterpolatesNoiseFreeDataAndVarianceShrinksThere) {
  Rng rng(3);
  const Matrix x = random_inputs(30, 2, rng);
  const std::vector<double> y = smooth_targets(x);
  const GpHyperparameters h = hyper(CovarianceKind::matern52, {0.4, 0.4}, 1.0, 1e-10, 0.0);
  const GaussianProcess gp = GaussianProcess::condition(x, y, h);
  const Prediction at_data = gp.predict(x);
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(at_data.mean[i], y[i], 1e-5);
    EXPECT_LT(at_data.variance[i], 1e-6);
  }
  // Away from the data the variance grows back towards the prior.
  Matrix far(1, 2);
  far = 5.0, 5.0;
  const Prediction away = gp.predict(far);
  EXPECT_NEAR(away.variance[0], 1.0, 1e-6);
  EXPECT_NEAR(away.mean[0], 0.0, 1e-6);
}

TEST(GaussianProcess, FitFindsSmallNoiseAndPredictsHeldOutPoints) {
  Rng rng(11);
  const Matrix x = random_inputs(40, 2, rng);
  const std::vector<double> y = smooth_targets(x);
  GpFitOptions options;
  const GaussianProcess gp = GaussianProcess::fit(x, y, options, rng);
  EXPECT_LT(gp.hyperparameters().noise_variance, 1e-2);
  const Matrix test = random_inputs(50, 2, rng);
  const std::vector<double> truth = smooth_targets(test);
  const Prediction p = gp.predict(test);
  double sse = 0.0;
  for (std::size_t i = 0; i < truth.size(); ++i) sse += std::pow(p.mean[i] - truth[i], 2);
  EXPECT_LT(std::sqrt(sse / static_cast<double>(truth.size())), 0.05);
  // (The prior mode is one of the starts and maximises the prior, so the fitted likelihood
  // cannot be below the mode's.)
  const GpHyperparameters start =
      hyper(CovarianceKind::matern52,
            std::vector<double>(2, std::exp(options.priors.lengthscale_mode(2))),
            std::exp(options.priors.signal_location), std::exp(options.priors.noise_location), 0.0);
  EXPECT_GT(gp.log_marginal_likelihood(), log_marginal_likelihood(x, y, start, false).value);
}

// PETSc's pc_type, one-hot among numeric inputs: a study whose results all have one
// preconditioner knows nothing of the others, and its GP must say so. With the
// dimension-scaled lengthscale prior on the one-hot columns too, the other values correlated
// 0.99 with the measured one and their sd was a fifth of the prior's (0.85 of it now).
TEST(GaussianProcess, AnUnmeasuredCategoricalValueKeepsMostOfThePriorVariance) {
  const SearchSpace space = SearchSpace::from_json(nlohmann::json::parse(R"({
    "parameters": [
      {"name": "levels", "type": "integer", "low": 1, "high": 8},
      {"name": "tol", "type": "real", "low": 0.0, "high": 1.0},
      {"name": "pc", "type": "categorical", "values": ["hypre", "gamg", "ilu", "jacobi"]},
      {"name": "sweeps", "type": "integer", "low": 1, "high": 4}
    ]})"));
  Rng rng(17);
  std::uniform_int_distribution<std::int64_t> levels(1, 8);
  std::uniform_real_distribution<double> tol(0.0, 1.0);
  std::uniform_int_distribution<std::int64_t> sweeps(1, 4);
  std::vector<std::vector<double>> rows;
  std::vector<Configuration> measured;
  for (int i = 0; i < 8; ++i) {
    measured.push_back({levels(rng), tol(rng), std::string("hypre"), sweeps(rng)});
    rows.push_back(space.encode(measured.back()));
  }
  const std::size_t d = space.encoded_dimension();
  const Matrix x = to_matrix(rows, d);
  const std::vector<double> y = smooth_targets(x);
  GpFitOptions options;
  options.priors.one_hot_columns = {false, false, true, true, true, true, false};
  ASSERT_EQ(options.priors.one_hot_columns.size(), d);
  const GaussianProcess gp = GaussianProcess::fit(x, y, options, rng);
  const double prior_sd = std::sqrt(gp.hyperparameters().covariance.signal_variance);
  for (const std::string pc : {"gamg", "ilu", "jacobi"}) {
    for (Configuration c : measured) {
      c[2] = pc;
      const Prediction p = gp.predict(to_matrix({space.encode(c)}, d));
      EXPECT_GE(std::sqrt(p.variance[0]), 0.5 * prior_sd) << space.config_text(c);
    }
  }
  // The measured value is still known where it was measured.
  EXPECT_LT(std::sqrt(gp.predict(x).variance[0]), 0.25 * prior_sd);
}

TEST(GaussianProcess, FitIsReproducibleFromTheSeedAndUsesTheWarmStart) {
  Rng data_rng(5);
  const Matrix x = random_inputs(30, 3, data_rng);
  const std::vector<double> y = smooth_targets(x);
  GpFitOptions options;
  Rng a(99);
  Rng b(99);
  const GaussianProcess first = GaussianProcess::fit(x, y, options, a);
  const GaussianProcess second = GaussianProcess::fit(x, y, options, b);
  EXPECT_EQ(first.hyperparameters(), second.hyperparameters());
  options.warm_start = first.hyperparameters();
  options.random_starts = 0;
  const GaussianProcess warm = GaussianProcess::fit(x, y, options, a);
  EXPECT_GE(warm.log_marginal_likelihood(), first.log_marginal_likelihood() - 1e-3);
}

TEST(GaussianProcess, DuplicatedInputsTakeTheJitterPath) {
  Rng rng(1);
  Matrix x = random_inputs(6, 2, rng);
  // Rows 3..5 duplicate rows 0..2; with zero noise K is exactly singular.
  for (long i = 0; i < 3; ++i) dlib::set_rowm(x, i + 3) = dlib::rowm(x, i);
  std::vector<double> y = {1.0, 2.0, 3.0, 1.2, 2.2, 3.2};
  const GpHyperparameters h = hyper(CovarianceKind::squared_exponential, {0.5, 0.5}, 1.0, 0.0, 0.0);
  const GaussianProcess gp = GaussianProcess::condition(x, y, h);
  EXPECT_GT(gp.jitter(), 0.0);
  const Prediction p = gp.predict(x);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isfinite(p.mean[i]));
    EXPECT_NEAR(p.mean[i], 0.5 * (y[i] + y[i + 3]), 0.05);
  }
  // add_observation of yet another duplicate rebuilds the factor rather than failing.
  GaussianProcess grown = GaussianProcess::condition(
      Matrix(dlib::subm(x, 0, 0, 3, 2)), std::vector<double>(y.begin(), y.begin() + 3), h);
  grown.add_observation(std::vector<double>{x(0, 0), x(0, 1)}, 1.2);
  EXPECT_EQ(grown.size(), 4u);
  EXPECT_GT(grown.jitter(), 0.0);
  EXPECT_TRUE(std::isfinite(grown.predict(x).mean[0]));
}

TEST(GaussianProcess, AddingObservationsEqualsConditioningOnAll) {
  Rng rng(21);
  const Matrix x = random_inputs(30, 4, rng);
  const std::vector<double> y = smooth_targets(x);
  const GpHyperparameters h = hyper(CovarianceKind::matern52, {0.5, 0.8, 1.1, 0.6}, 1.5, 1e-3, 0.1);
  GaussianProcess incremental = GaussianProcess::condition(
      Matrix(dlib::subm(x, 0, 0, 10, 4)), std::vector<double>(y.begin(), y.begin() + 10), h);
  for (long i = 10; i < 30; ++i) {
    incremental.add_observation(std::vector<double>(&x(i, 0), &x(i, 0) + 4),
                                y[static_cast<std::size_t>(i)]);
  }
  const GaussianProcess full = GaussianProcess::condition(x, y, h);
  const Matrix test = random_inputs(200, 4, rng);
  const Prediction a = incremental.predict(test);
  const Prediction b = full.predict(test);
  for (std::size_t i = 0; i < a.mean.size(); ++i) {
    EXPECT_NEAR(a.mean[i], b.mean[i], 1e-9);
    EXPECT_NEAR(a.variance[i], b.variance[i], 1e-9);
  }
  EXPECT_NEAR(incremental.log_marginal_likelihood(), full.log_marginal_likelihood(), 1e-8);
  EXPECT_NEAR(full.log_marginal_likelihood(), log_marginal_likelihood(x, y, h, false).value, 1e-8);

  // truncate() removes fantasies exactly.
  incremental.truncate(12);
  const GaussianProcess prefix = GaussianProcess::condition(
      Matrix(dlib::subm(x, 0, 0, 12, 4)), std::vector<double>(y.begin(), y.begin() + 12), h);
  const Prediction c = incremental.predict(test);
  const Prediction d = prefix.predict(test);
  for (std::size_t i = 0; i < c.mean.size(); ++i) {
    EXPECT_NEAR(c.mean[i], d.mean[i], 1e-9);
    EXPECT_NEAR(c.variance[i], d.variance[i], 1e-9);
  }
  EXPECT_THROW(incremental.truncate(13), InvalidInput);
}

TEST(GaussianProcess, LeaveOneOutEqualsRefitWithoutThePoint) {
  Rng rng(4);
  const Matrix x = random_inputs(15, 2, rng);
  const std::vector<double> y = smooth_targets(x);
  const GpHyperparameters h = hyper(CovarianceKind::matern52, {0.3, 0.6}, 1.0, 0.01, 0.0);
  const GaussianProcess gp = GaussianProcess::condition(x, y, h);
  const Prediction loo = gp.leave_one_out();
  for (long i = 0; i < 15; i += 4) {
    Matrix rest(14, 2);
    std::vector<double> ry;
    for (long r = 0, k = 0; r < 15; ++r) {
      if (r == i) continue;
      dlib::set_rowm(rest, k++) = dlib::rowm(x, r);
      ry.push_back(y[static_cast<std::size_t>(r)]);
    }
    const Prediction p = GaussianProcess::condition(rest, ry, h).predict(Matrix(dlib::rowm(x, i)));
    EXPECT_NEAR(loo.mean[static_cast<std::size_t>(i)], p.mean[0], 1e-8);
    EXPECT_NEAR(loo.variance[static_cast<std::size_t>(i)], p.variance[0] + h.noise_variance, 1e-8);
  }
}

TEST(GaussianProcess, JointPredictionAgreesWithMarginals) {
  Rng rng(8);
  const Matrix x = random_inputs(12, 3, rng);
  const GaussianProcess gp = GaussianProcess::condition(
      x, smooth_targets(x), hyper(CovarianceKind::matern52, {0.5, 0.5, 0.5}, 2.0, 1e-4, 0.0));
  const Matrix test = random_inputs(7, 3, rng);
  const JointPrediction joint = gp.predict_joint(test);
  const Prediction marginal = gp.predict(test);
  for (long i = 0; i < 7; ++i) {
    EXPECT_NEAR(joint.mean[static_cast<std::size_t>(i)], marginal.mean[static_cast<std::size_t>(i)],
                1e-10);
    EXPECT_NEAR(joint.covariance(i, i), marginal.variance[static_cast<std::size_t>(i)], 1e-10);
    EXPECT_NEAR(joint.covariance(i, 0), joint.covariance(0, i), 1e-12);
  }
}

TEST(GaussianProcess, PredictFromSeveralThreadsGivesTheSameAnswers) {
  Rng rng(13);
  const Matrix x = random_inputs(150, 5, rng);
  const GaussianProcess gp = GaussianProcess::condition(
      x, smooth_targets(x),
      hyper(CovarianceKind::matern52, {0.4, 0.5, 0.6, 0.7, 0.8}, 1.0, 1e-3, 0.0));
  const Matrix candidates = random_inputs(3000, 5, rng);
  const Prediction reference = gp.predict(candidates);
  constexpr int kThreads = 4;
  std::vector<Prediction> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep)
        results[static_cast<std::size_t>(t)] = gp.predict(candidates);
    });
  }
  for (auto& th : threads) th.join();
  for (const Prediction& r : results) {
    ASSERT_EQ(r.mean.size(), reference.mean.size());
    for (std::size_t i = 0; i < r.mean.size(); ++i) {
      EXPECT_NEAR(r.mean[i], reference.mean[i], 1e-12);
      EXPECT_NEAR(r.variance[i], reference.variance[i], 1e-12);
    }
  }
}

TEST(CandidatePosterior, TracksTheGpThroughAdditionsFantasiesAndRefits) {
  Rng rng(17);
  const Matrix x = random_inputs(40, 3, rng);
  const std::vector<double> y = smooth_targets(x);
  const Matrix candidates = random_inputs(500, 3, rng);
  GpHyperparameters h = hyper(CovarianceKind::matern52, {0.4, 0.6, 0.9}, 1.2, 1e-3, 0.0);
  GaussianProcess gp = GaussianProcess::condition(
      Matrix(dlib::subm(x, 0, 0, 20, 3)), std::vector<double>(y.begin(), y.begin() + 20), h);
  CandidatePosterior posterior(candidates);
  auto expect_matches = [&](const GaussianProcess& model) {
    const Prediction p = model.predict(candidates);
    for (std::size_t i = 0; i < p.mean.size(); ++i) {
      ASSERT_NEAR(posterior.mean()[i], p.mean[i], 1e-9);
      ASSERT_NEAR(posterior.variance()[i], p.variance[i], 1e-9);
    }
  };
  posterior.update(gp);
  expect_matches(gp);
  EXPECT_EQ(posterior.full_recomputations(), 1u);

  for (long i = 20; i < 30; ++i) {
    gp.add_observation(std::vector<double>(&x(i, 0), &x(i, 0) + 3), y[static_cast<std::size_t>(i)]);
    posterior.update(gp);
  }
  expect_matches(gp);
  EXPECT_EQ(posterior.observation_count(), 30u);

  // Kriging believer: a fantasy at the predicted mean, then back to the real data.
  GaussianProcess fantasy = gp;
  const Matrix pick = Matrix(dlib::rowm(candidates, 3));
  fantasy.add_observation(std::vector<double>{pick(0, 0), pick(0, 1), pick(0, 2)},
                          posterior.mean()[3]);
  posterior.update(fantasy);
  expect_matches(fantasy);
  EXPECT_LT(posterior.variance()[3], 1e-2);
  posterior.update(gp);
  expect_matches(gp);
  EXPECT_EQ(posterior.full_recomputations(), 1u);

  // New hyperparameters: one full recomputation.
  h.covariance.lengthscales = {0.3, 0.3, 0.3};
  const GaussianProcess refit = GaussianProcess::condition(gp.inputs(), gp.targets(), h);
  posterior.update(refit);
  expect_matches(refit);
  EXPECT_EQ(posterior.full_recomputations(), 2u);
}

TEST(GpHyperparameters, JsonRoundTripAndValidation) {
  const GpHyperparameters h =
      hyper(CovarianceKind::squared_exponential, {0.1, 2.0}, 1.5, 1e-3, -0.2);
  EXPECT_EQ(GpHyperparameters::from_json(h.to_json()), h);
  nlohmann::json bad = h.to_json();
  bad["lengthscales"] = {0.1, -1.0};
  EXPECT_THROW(GpHyperparameters::from_json(bad), InvalidInput);
  bad = h.to_json();
  bad.erase("mean");
  EXPECT_THROW(GpHyperparameters::from_json(bad), InvalidInput);
  bad = h.to_json();
  bad["covariance"] = "cubic";
  EXPECT_THROW(GpHyperparameters::from_json(bad), InvalidInput);
}

TEST(GaussianProcess, RejectsInconsistentShapes) {
  Rng rng(2);
  const Matrix x = random_inputs(5, 2, rng);
  const GpHyperparameters h = hyper(CovarianceKind::matern52, {0.5, 0.5}, 1.0, 1e-3, 0.0);
  EXPECT_THROW(GaussianProcess::condition(x, {1.0, 2.0}, h), InvalidInput);
  const GaussianProcess gp = GaussianProcess::condition(x, smooth_targets(x), h);
  EXPECT_THROW(gp.predict(random_inputs(3, 3, rng)), InvalidInput);
  GaussianProcess copy = gp;
  EXPECT_THROW(copy.add_observation(std::vector<double>{0.1}, 1.0), InvalidInput);
  EXPECT_THROW(copy.add_observation(std::vector<double>{0.1, NAN}, 1.0), InvalidInput);
  std::vector<double> y = smooth_targets(x);
  y[2] = INFINITY;
  GpFitOptions options;
  EXPECT_THROW(GaussianProcess::fit(x, y, options, rng), InvalidInput);
}

TEST(GaussianProcess, EmptyModelPredictsThePrior) {
  const GpHyperparameters h = hyper(CovarianceKind::matern52, {0.5, 0.5}, 2.0, 1e-3, 0.7);
  GaussianProcess gp = GaussianProcess::condition(Matrix(), {}, h);
  Matrix c(2, 2);
  c = 0.1, 0.2, 0.3, 0.4;
  const Prediction p = gp.predict(c);
  EXPECT_DOUBLE_EQ(p.mean[1], 0.7);
  EXPECT_DOUBLE_EQ(p.variance[1], 2.0);
  gp.add_observation(std::vector<double>{0.1, 0.2}, 1.0);
  EXPECT_EQ(gp.size(), 1u);
  EXPECT_LT(gp.predict(c).variance[0], 0.01);
}

}  // namespace
}  // namespace tunebase::surrogates
