#include "surrogates/transfer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/error.h"

namespace tunebase::surrogates {
namespace {

// A grid of n x n points in [0,1]^2.
Matrix grid(std::size_t n) {
  Matrix x(static_cast<long>(n * n), 2);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      x(static_cast<long>(i * n + j), 0) = static_cast<double>(i) / static_cast<double>(n - 1);
      x(static_cast<long>(i * n + j), 1) = static_cast<double>(j) / static_cast<double>(n - 1);
    }
  }
  return x;
}

// A bowl with its minimum at (0.7, 0.3).
std::vector<double> bowl(const Matrix& x) {
  std::vector<double> y(static_cast<std::size_t>(x.nr()));
  for (long i = 0; i < x.nr(); ++i) {
    const double a = x(i, 0) - 0.7;
    const double b = x(i, 1) - 0.3;
    y[static_cast<std::size_t>(i)] = a * a + 2.0 * b * b;
  }
  return y;
}

SourceData source(std::string name, const Matrix& x, const std::vector<double>& raw) {
  SourceData s;
  s.name = std::move(name);
  s.x = x;
  s.y = gaussian_copula(raw);
  return s;
}

SourceModelOptions small_options() {
  SourceModelOptions o;
  o.subsample.max_points = 60;
  o.fit.random_starts = 1;
  return o;
}

TEST(GaussianCopula, KeepsOrderAveragesTiesAndGivesNormalQuantiles) {
  const std::vector<double> v = {5.0, 1.0, 3.0, 3.0, 100.0};
  const auto z = gaussian_copula(v);
  ASSERT_EQ(z.size(), v.size());
  EXPECT_LT(z[1], z[2]);
  EXPECT_DOUBLE_EQ(z[2], z[3]);  // tied values share their average rank (2.5 of 5)
  EXPECT_LT(z[3], z[0]);
  EXPECT_LT(z[0], z[4]);
  // rank 1 of 5 -> Phi^-1(1/6); the outlier 100 is just the last quantile, Phi^-1(5/6)
  EXPECT_NEAR(z[1], normal_quantile(1.0 / 6.0), 1e-12);
  EXPECT_NEAR(z[4], -z[1], 1e-12);
  EXPECT_NEAR(z[2], normal_quantile(2.5 / 6.0), 1e-12);
  EXPECT_THROW(gaussian_copula(std::vector<double>{1.0, NAN}), InvalidInput);
  EXPECT_THROW(normal_quantile(1.0), InvalidInput);
}

TEST(RankingLoss, CountsDiscordantPairs) {
  const std::vector<double> y = {1.0, 2.0, 3.0, 4.0};
  EXPECT_EQ(ranking_loss(y, y), 0u);
  const std::vector<double> reversed = {4.0, 3.0, 2.0, 1.0};
  EXPECT_EQ(ranking_loss(reversed, y), 6u);
  const std::vector<double> one_swap = {2.0, 1.0, 3.0, 4.0};
  EXPECT_EQ(ranking_loss(one_swap, y), 1u);
}

TEST(Subsample, KeepsTheBestRegionAndFillsTheRest) {
  const Matrix x = grid(20);  // 400 points
  const auto y = bowl(x);
  SubsampleOptions options;
  options.max_points = 50;
  options.best_fraction = 0.2;
  Rng rng(1);
  const auto keep = subsample_indices(x, y, options, rng);
  ASSERT_EQ(keep.size(), 50u);
  EXPECT_TRUE(std::is_sorted(keep.begin(), keep.end()));
  EXPECT_EQ(std::set<std::size_t>(keep.begin(), keep.end()).size(), keep.size());
  // The 10 best rows are all kept.
  std::vector<std::size_t> order(y.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return y[a] < y[b]; });
  for (std::size_t r = 0; r < 10; ++r) {
    EXPECT_TRUE(std::binary_search(keep.begin(), keep.end(), order[r])) << "rank " << r;
  }
  // Space filling: all four corners of the square are sampled.
  for (std::size_t corner : {std::size_t{0}, std::size_t{19}, std::size_t{380}, std::size_t{399}}) {
    EXPECT_TRUE(std::binary_search(keep.begin(), keep.end(), corner)) << "corner " << corner;
  }
  // Small sources are kept whole.
  options.max_points = 1000;
  EXPECT_EQ(subsample_indices(x, y, options, rng).size(), 400u);
}

// A server asked about ever new inputs fits a model for each: the cache keeps the most
// recently used, not every one.
TEST(SourceModelCache, KeepsAtMostItsLimitDroppingTheLeastRecentlyUsed) {
  SourceModelCache cache(2);
  const Matrix x = grid(6);
  const auto options = small_options();
  const auto a = source("a", x, bowl(x));
  const auto b = source("b", x, bowl(x));
  const auto c = source("c", x, bowl(x));
  cache.model(a, options);
  cache.model(b, options);
  cache.model(a, options);  // a is now more recent than b
  cache.model(c, options);  // b goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.fit_count(), 3u);
  cache.model(a, options);
  EXPECT_EQ(cache.fit_count(), 3u);  // still there
  cache.model(b, options);
  EXPECT_EQ(cache.fit_count(), 4u);  // fitted again
  EXPECT_EQ(cache.size(), 2u);
}

TEST(SourceModelCache, FitsOncePerSourceAndRestoresSavedHyperparameters) {
  SourceModelCache cache;
  const Matrix x = grid(12);
  const auto data = source("bowl", x, bowl(x));
  const auto options = small_options();
  const auto a = cache.model(data, options);
  const auto b = cache.model(data, options);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(cache.fit_count(), 1u);
  EXPECT_EQ(cache.hit_count(), 1u);
  EXPECT_EQ(a->points(), 60u);
  EXPECT_EQ(a->source_size(), 144u);

  // Another source is another fit; concurrent requests for it fit it once.
  const auto other = source("shifted", x, [&] {
    auto y = bowl(x);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += 0.1 * x(static_cast<long>(i), 0);
    return y;
  }());
  std::thread t1([&] { cache.model(other, options); });
  std::thread t2([&] { cache.model(other, options); });
  t1.join();
  t2.join();
  EXPECT_EQ(cache.fit_count(), 2u);

  // Two machines with the same data (after the copula, times that differ by a factor) are
  // two sources: each model keeps its own name for the weights users read.
  const auto twin = cache.model(source("twin", x, bowl(x)), options);
  EXPECT_EQ(twin->name(), "twin");
  EXPECT_EQ(cache.model(data, options)->name(), "bowl");
  EXPECT_EQ(cache.fit_count(), 3u);

  // Saved hyperparameters: a fresh cache conditions instead of fitting, same predictions.
  const nlohmann::json saved = cache.to_json();
  ASSERT_EQ(saved.size(), 3u);
  SourceModelCache restored;
  restored.load(nlohmann::json::parse(saved.dump()));
  const auto c = restored.model(data, options);
  EXPECT_EQ(restored.fit_count(), 0u);
  EXPECT_EQ(restored.restore_count(), 1u);
  const Matrix probe = grid(5);
  const auto pa = a->predict(probe);
  const auto pc = c->predict(probe);
  for (std::size_t i = 0; i < pa.mean.size(); ++i) {
    EXPECT_NEAR(pa.mean[i], pc.mean[i], 1e-9);
    EXPECT_NEAR(pa.variance[i], pc.variance[i], 1e-9);
  }
  EXPECT_THROW(restored.load(nlohmann::json{{"not hex", {{"hyperparameters", 1}}}}), InvalidInput);

  // Candidate predictions are computed once per (model, candidate set).
  const auto p1 = cache.candidate_prediction(*a, probe, 7);
  const auto p2 = cache.candidate_prediction(*a, probe, 7);
  EXPECT_EQ(p1.get(), p2.get());
}

TEST(Rgpe, MisleadingSourceLosesItsWeightAndAFaithfulOneKeepsIt) {
  SourceModelCache cache;
  const Matrix x = grid(12);
  const auto y = bowl(x);
  std::vector<double> reversed(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) reversed[i] = -y[i];
  const auto faithful = cache.model(source("faithful", x, y), small_options());
  const auto misleading = cache.model(source("reversed", x, reversed), small_options());

  // Ten target observations of the bowl at random grid points.
  Rng rng(3);
  std::vector<std::size_t> rows(static_cast<std::size_t>(x.nr()));
  std::iota(rows.begin(), rows.end(), std::size_t{0});
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(10);
  const Matrix xt = select_rows(x, rows);
  std::vector<double> yt;
  for (std::size_t r : rows) yt.push_back(y[r]);
  const auto zt = gaussian_copula(yt);
  Rng fit_rng(4);
  GpFitOptions fit;
  const auto target = GaussianProcess::fit(xt, zt, fit, fit_rng).hyperparameters();

  RgpeOptions options;
  const auto both =
      rgpe_weights({faithful.get(), misleading.get()}, xt, &target, xt, zt, options, rng);
  ASSERT_EQ(both.weights.size(), 3u);
  EXPECT_NEAR(both.weights[0] + both.weights[1] + both.weights[2], 1.0, 1e-12);
  EXPECT_GT(both.weights[0], 0.5);
  EXPECT_LT(both.weights[1], 0.05);
  EXPECT_TRUE(both.dropped[1]);  // its losses are far above the target's own

  // Alone with the target, the reversed source still gets (almost) nothing.
  const auto alone = rgpe_weights({misleading.get()}, xt, &target, xt, zt, options, rng);
  EXPECT_LT(alone.weights[0], 0.05);
  EXPECT_GT(alone.weights[1], 0.95);

  // Before the target can rank anything, sources share the weight.
  const auto early = rgpe_weights({faithful.get(), misleading.get()},
                                  select_rows(xt, std::vector<std::size_t>{0, 1}), nullptr,
                                  select_rows(xt, std::vector<std::size_t>{0, 1}),
                                  std::vector<double>{zt[0], zt[1]}, options, rng);
  EXPECT_DOUBLE_EQ(early.weights[0], 0.5);
  EXPECT_DOUBLE_EQ(early.weights[1], 0.5);
  EXPECT_DOUBLE_EQ(early.weights[2], 0.0);
}

TEST(Rgpe, WeightedEnsembleCombinesMeansAndVariances) {
  Prediction a{{1.0, 2.0}, {0.5, 0.5}};
  Prediction b{{3.0, 4.0}, {1.0, 2.0}};
  const std::vector<double> w = {0.25, 0.75};
  const auto e = weighted_ensemble({&a, &b}, w);
  // mean = sum w mu; var = sum w^2 var
  EXPECT_DOUBLE_EQ(e.mean[0], 0.25 * 1.0 + 0.75 * 3.0);
  EXPECT_DOUBLE_EQ(e.variance[1], 0.0625 * 0.5 + 0.5625 * 2.0);
  EXPECT_THROW(weighted_ensemble({&a}, w), InvalidInput);
}

TEST(Stacked, TopLevelFitsTheResidualsOfTheLevelsBelow) {
  SourceModelCache cache;
  const Matrix x = grid(10);
  const auto y = bowl(x);
  // Two sources: the bowl, and the bowl plus a tilt; the second level learns the tilt.
  std::vector<double> tilted(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) tilted[i] = y[i] + 0.3 * x(static_cast<long>(i), 1);
  const auto base = source("base", x, y);
  const auto top = source("tilted", x, tilted);
  const auto stack = StackedPrior::build({base, top}, small_options(), cache);
  ASSERT_EQ(stack.levels().size(), 2u);
  EXPECT_EQ(cache.fit_count(), 2u);
  // The stack's mean reproduces the top source (in its copula units) at its points.
  const auto p = stack.predict(x);
  double worst = 0.0;
  for (std::size_t i = 0; i < top.y.size(); ++i)
    worst = std::max(worst, std::abs(p.mean[i] - top.y[i]));
  EXPECT_LT(worst, 0.35);
  // Built again: every level comes from the cache.
  StackedPrior::build({base, top}, small_options(), cache);
  EXPECT_EQ(cache.fit_count(), 2u);
}

TEST(Stacked, UncertaintyMovesFromThePriorToTheTargetWithData) {
  const Prediction prior{{0.0}, {0.01}};
  const Prediction residual{{1.0}, {1.0}};
  // beta = n / (n + 10): var = var_r^beta var_p^(1 - beta)
  EXPECT_NEAR(stack_predictions(prior, residual, 0).variance[0], 0.01, 1e-12);
  EXPECT_NEAR(stack_predictions(prior, residual, 10).variance[0], 0.1, 1e-12);
  EXPECT_GT(stack_predictions(prior, residual, 1000).variance[0], 0.9);
  EXPECT_DOUBLE_EQ(stack_predictions(prior, residual, 3).mean[0], 1.0);
}

}  // namespace
}  // namespace tunebase::surrogates
