// bench_calibration: are the intervals of predictions honest? It gives a study n measurements of
// a fully measured space (uniformly random ones, or the ones a bo search picks), forecasts every
// configuration it did not measure exactly as `tunebase predict` and POST /v1/predict do (a
// Session of the default strategy, restored from those measurements), and checks the forecasts
// against the measured times.
//
//   bench_calibration --target FILE [--prior FILE]... [--train N]... [--seeds S]
//                     [--sample random|bo] [--test M]
//
// With --prior (another machine's measurements of the same kernel) the study uses the transfer
// strategy, as a build system that asks at configure time does; --train 0 is then the
// zero-shot forecast. Prints one row per n, pooled over the seeds:
//   - in 68% / in 95%: the share of held-out times inside the interval. A forecast reports the
//     median and the 68% interval [lower, upper]; the 95% interval is read from them as a user
//     would: in log time, 1.96 times each half-width of the 68% one (the predictive is normal
//     in model units, and log time is a monotone map of those);
//   - MLPD: the mean log predictive density of the held-out log times under that two-piece
//     normal (nats; higher is better; it punishes both overconfidence and needless width);
//   - width: the median of upper / lower (how wide an interval a user is handed);
//   - forecast s: the median over the seeds of the wall time from restoring the Session to
//     its forecasts, what `tunebase predict` spends once it has read the study (the model's
//     fit and the interval's cross-validation included).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <numbers>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/measured_target.h"
#include "tuner/prior.h"
#include "tuner/session.h"

namespace {

using namespace tunebase;

// Normal quantiles of the central 68.27% and 95% intervals.
constexpr double kZ68 = 1.0;
constexpr double kZ95 = 1.959963984540054;

struct Score {
  std::size_t points = 0;
  std::size_t in68 = 0;
  std::size_t in95 = 0;
  double log_density = 0.0;
  std::vector<double> width;  // upper / lower
  std::vector<double> seed_in68;
  std::vector<double> seed_seconds;  // restore and forecast, per seed

  void add(const Score& s) {
    points += s.points;
    in68 += s.in68;
    in95 += s.in95;
    log_density += s.log_density;
    width.insert(width.end(), s.width.begin(), s.width.end());
    if (s.points > 0) seed_in68.push_back(static_cast<double>(s.in68) / s.points);
    seed_seconds.insert(seed_seconds.end(), s.seed_seconds.begin(), s.seed_seconds.end());
  }
};

// One held-out time against its forecast, in log time: a two-piece normal with median
// log(mean) and the 68% interval's half-widths as its two standard deviations.
void score(const Forecast& f, double time, Score& s) {
  const double g = std::log(f.mean);
  const double below = std::max(g - std::log(f.lower), 1e-12);
  const double above = std::max(std::log(f.upper) - g, 1e-12);
  const double t = std::log(time);
  const double sd = t < g ? below : above;
  const double u = (t - g) / sd;
  ++s.points;
  if (std::abs(u) <= kZ68) ++s.in68;
  if (std::abs(u) <= kZ95) ++s.in95;
  // log p(t) = log(2 / (sqrt(2 pi) (below + above))) - u^2 / 2
  s.log_density +=
      std::log(2.0 / (std::sqrt(2.0 * std::numbers::pi) * (below + above))) - 0.5 * u * u;
  s.width.push_back(f.upper / f.lower);
}

// The first `n` observations a bo (or, with priors, bo-transfer) search makes on `target`.
std::vector<Observation> searched(const bench::MeasuredTarget& target,
                                  const SessionOptions& options, std::size_t n) {
  Session session(target.replay.space(), options);
  while (session.observations().size() < n) {
    const auto batch = session.propose(1);
    if (batch.empty()) break;
    session.observe(batch.front(), target.replay.lookup(batch.front()));
  }
  return session.observations();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"How often measured times fall inside the intervals of tunebase's predictions"};
  std::string target_path;
  std::vector<std::string> prior_paths;
  std::vector<std::size_t> train_sizes = {10, 20, 50, 100, 200};
  unsigned seeds = 3;
  std::string sample = "random";
  std::size_t test = 4000;
  app.add_option("--target", target_path, "Kernel Tuner cache or T4 file, fully measured")
      ->required();
  app.add_option("--prior", prior_paths, "another machine's file of the same kernel (repeatable)");
  app.add_option("--train", train_sizes, "measurements the study has (repeatable; 0 with priors)");
  app.add_option("--seeds", seeds, "runs per size")->check(CLI::PositiveNumber);
  app.add_option("--sample", sample,
                 "which measurements: random (uniformly) or bo (those a search picks)")
      ->check(CLI::IsMember({"random", "bo"}));
  app.add_option("--test", test, "held-out configurations forecast per run, at most (0: all)");
  CLI11_PARSE(app, argc, argv);

  try {
    const auto target = bench::read_measured_target(target_path);
    const auto& space = target.replay.space();
    const auto& configs = target.replay.configurations();
    SessionOptions options;
    options.strategy = "auto";
    options.candidates = configs;
    for (const auto& p : prior_paths) options.priors.push_back(load_prior(p, space));
    std::sort(train_sizes.begin(), train_sizes.end());
    options.budget = train_sizes.back();

    std::printf("%s%s%s: %zu configurations, %zu ran; %s measurements, %u seeds\n",
                target_path.c_str(), prior_paths.empty() ? "" : " with priors ",
                prior_paths.empty() ? "" : prior_paths.front().c_str(), configs.size(),
                target.ok.size(), sample.c_str(), seeds);
    std::unordered_map<std::string, std::size_t> index;  // key -> position in configs
    for (std::size_t i = 0; i < configs.size(); ++i) index[space.key(configs[i])] = i;
    std::vector<Score> totals(train_sizes.size());
    for (unsigned seed = 1; seed <= seeds; ++seed) {
      options.seed = seed;
      std::vector<Observation> sequence;
      if (sample == "bo") {
        sequence = searched(target, options, train_sizes.back());
      } else {
        std::vector<std::size_t> order(configs.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::mt19937_64 shuffle_rng(seed);
        std::shuffle(order.begin(), order.end(), shuffle_rng);
        order.resize(std::min(order.size(), train_sizes.back()));
        for (std::size_t i : order)
          sequence.push_back({configs[i], target.replay.lookup(configs[i])});
      }
      for (std::size_t k = 0; k < train_sizes.size(); ++k) {
        const std::size_t n = std::min(train_sizes[k], sequence.size());
        const std::vector<Observation> known(sequence.begin(),
                                             sequence.begin() + static_cast<long>(n));
        std::vector<std::size_t> held_out;  // indices into target.ok
        {
          std::vector<bool> measured(configs.size(), false);
          for (const auto& o : known) measured[index.at(space.key(o.config))] = true;
          for (std::size_t j = 0; j < target.ok.size(); ++j) {
            if (!measured[target.ok[j]]) held_out.push_back(j);
          }
          std::mt19937_64 pick(seed * 7919 + n);
          std::shuffle(held_out.begin(), held_out.end(), pick);
          if (test > 0 && held_out.size() > test) held_out.resize(test);
        }
        std::vector<Configuration> asked;
        for (std::size_t j : held_out) asked.push_back(configs[target.ok[j]]);
        const auto start = std::chrono::steady_clock::now();
        Session session(space, options);
        session.restore(known, {});
        const auto forecasts = session.forecast(asked);
        Score s;
        s.seed_seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        for (std::size_t i = 0; i < forecasts.size(); ++i) {
          score(forecasts[i], target.time[held_out[i]], s);
        }
        totals[k].add(s);
      }
      std::fprintf(stderr, "seed %u done\n", seed);
    }
    std::printf(
        "| n | forecasts | in 68%% (seeds: min..max) | in 95%% | MLPD | width upper/lower "
        "(median) | forecast s (median) |\n|---|---|---|---|---|---|---|\n");
    for (std::size_t k = 0; k < train_sizes.size(); ++k) {
      const Score& s = totals[k];
      if (s.points == 0) {
        std::printf("| %zu | no model | | | | | |\n", train_sizes[k]);
        continue;
      }
      const auto [lo, hi] = std::minmax_element(s.seed_in68.begin(), s.seed_in68.end());
      const double points = static_cast<double>(s.points);
      std::printf("| %zu | %zu | %.2f (%.2f..%.2f) | %.2f | %.2f | %.2f | %.3f |\n", train_sizes[k],
                  s.points, s.in68 / points, *lo, *hi, s.in95 / points, s.log_density / points,
                  median(s.width), median(s.seed_seconds));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_calibration: %s\n", e.what());
    return 1;
  }
  return 0;
}
