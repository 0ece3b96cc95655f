// bench_predictability: can a GP surrogate see a fully measured space's best configurations
// coming? It fits the GP of the `bo` strategy (Matérn-5/2 ARD on the encoded inputs, log-time
// standardised) on a random share of the file's measurements, with the best configurations held
// out, and ranks every unmeasured configuration by predicted mean and by log expected
// improvement. A top configuration the model ranks in the thousands even after it has seen
// half of the space is a needle: a search finds it by luck, not by modelling (issue 3's
// convolution A100 target).
//
//   bench_predictability --target FILE [--train N]... [--seeds S] [--level 0.9]
//                        [--sample random|best]
//
// Prints one row per training size and seed: the fraction of optimum the model predicts for the
// held-out top configurations (median over them) and the rank of the first of them among all
// unmeasured configurations, by predicted mean and by log EI (1: the next proposal).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/measured_target.h"
#include "surrogates/acquisition.h"
#include "surrogates/gp.h"
#include "surrogates/transform.h"

namespace {

using namespace tunebase;

// How many of `scores` rank strictly ahead of scores[i] (0 = first).
std::size_t rank_of(const std::vector<double>& scores, std::size_t i, bool higher_is_better) {
  std::size_t ahead = 0;
  for (double s : scores) {
    if (higher_is_better ? s > scores[i] : s < scores[i]) ++ahead;
  }
  return ahead;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"How well a GP fitted on part of a measured space predicts its best configurations"};
  std::string target;
  std::vector<std::size_t> train_sizes = {100, 300, 1000, 2500};
  unsigned seeds = 3;
  double level = 0.9;
  std::string sample = "random";
  app.add_option("--target", target, "Kernel Tuner cache or T4 file, fully measured")->required();
  app.add_option("--train", train_sizes, "measurements the model is fitted on (repeatable)");
  app.add_option("--seeds", seeds, "random training sets per size")->check(CLI::PositiveNumber);
  app.add_option("--level", level,
                 "configurations within this fraction of the optimum are held out")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--sample", sample,
                 "training set: random, or best (the best below the level, what a search that "
                 "found every other good configuration knows)")
      ->check(CLI::IsMember({"random", "best"}));
  CLI11_PARSE(app, argc, argv);

  try {
    const auto measured = bench::read_measured_target(target);
    const auto& space = measured.replay.space();
    const auto& time = measured.time;
    std::vector<std::vector<double>> x;
    for (std::size_t i : measured.ok)
      x.push_back(space.encode(measured.replay.configurations()[i]));
    const double best = *std::min_element(time.begin(), time.end());
    std::vector<std::size_t> top;  // indices into x / time
    for (std::size_t i = 0; i < time.size(); ++i) {
      if (best / time[i] >= level) top.push_back(i);
    }
    const std::size_t dim = x.front().size();
    std::printf(
        "%s: %zu measured configurations, %zu within %.2f of the optimum (held out), %s "
        "training sets\n",
        target.c_str(), time.size(), top.size(), level, sample.c_str());
    std::printf(
        "| trained on | seed | noise variance | predicted fraction of the top (median) | "
        "first top by mean | first top by log EI | unmeasured |\n|---|---|---|---|---|---|---|\n");
    for (const std::size_t n : train_sizes) {
      if (n + top.size() >= time.size()) {
        std::printf("| %zu | - | more than the space holds |\n", n);
        continue;
      }
      for (unsigned seed = 1; seed <= seeds; ++seed) {
        std::vector<std::size_t> rest;
        for (std::size_t i = 0; i < time.size(); ++i) {
          if (std::find(top.begin(), top.end(), i) == top.end()) rest.push_back(i);
        }
        std::mt19937_64 shuffle_rng(seed);
        std::shuffle(rest.begin(), rest.end(), shuffle_rng);
        if (sample == "best") {
          std::stable_sort(rest.begin(), rest.end(),
                           [&](std::size_t a, std::size_t b) { return time[a] < time[b]; });
        }
        const std::vector<std::size_t> train(rest.begin(), rest.begin() + static_cast<long>(n));
        std::vector<std::size_t> unmeasured(rest.begin() + static_cast<long>(n), rest.end());
        unmeasured.insert(unmeasured.end(), top.begin(), top.end());

        std::vector<std::vector<double>> train_x;
        std::vector<double> train_time;
        for (std::size_t i : train) {
          train_x.push_back(x[i]);
          train_time.push_back(time[i]);
        }
        const auto transform = surrogates::ObjectiveTransform::fit(train_time, true);
        const auto y = transform.forward(train_time);
        surrogates::GpFitOptions options;
        options.max_fit_points = 1000;
        Rng rng(seed);
        const auto gp =
            surrogates::GaussianProcess::fit(surrogates::to_matrix(train_x, dim), y, options, rng);
        std::vector<std::vector<double>> rows;
        for (std::size_t i : unmeasured) rows.push_back(x[i]);
        const auto prediction = gp.predict(surrogates::to_matrix(rows, dim));
        const double incumbent = *std::min_element(y.begin(), y.end());
        const auto ei = surrogates::acquisition_scores(prediction, incumbent, {}, {});

        std::vector<double> predicted;
        std::size_t by_mean = unmeasured.size();
        std::size_t by_ei = unmeasured.size();
        for (std::size_t j = unmeasured.size() - top.size(); j < unmeasured.size(); ++j) {
          predicted.push_back(best / transform.inverse(prediction.mean[j]));
          by_mean = std::min(by_mean, rank_of(prediction.mean, j, false) + 1);
          by_ei = std::min(by_ei, rank_of(ei, j, true) + 1);
        }
        std::sort(predicted.begin(), predicted.end());
        const std::size_t half = predicted.size() / 2;
        const double median = predicted.size() % 2 == 1
                                  ? predicted[half]
                                  : 0.5 * (predicted[half - 1] + predicted[half]);
        std::printf("| %zu | %u | %.2g | %.3f | %zu | %zu | %zu |\n", n, seed,
                    gp.hyperparameters().noise_variance, median, by_mean, by_ei, unmeasured.size());
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_predictability: %s\n", e.what());
    return 1;
  }
  return 0;
}
