// Gaussian-process costs on the GEMM tuning space: 17,956 candidates of dimension 15.
//
// Candidates are the configurations of ../shared/data/gpu/gemm/A100.json.gz, encoded with
// SearchSpace::encode, with their log-times as objective; without the shared data (or with
// TUNEBASE_GP_BENCH_SYNTHETIC=1) a synthetic set of the same shape is used: 15 ordinal
// coordinates on 4-value grids and a smooth objective with noise. The context line "data"
// says which. Observations are a seeded random subset of the candidates.
//
//   BM_Fit/n              hyperparameter optimisation (GpFitOptions defaults) + conditioning
//   BM_Refit/n            warm-started refit (previous optimum, no random starts): the
//                         scheduled refit of a BO loop
//   BM_Predict/n          batched mean and variance for all candidates
//   BM_PosteriorRebuild/n CandidatePosterior after new hyperparameters (full L^-1 K(X, C))
//   BM_PosteriorAdd/n     one new observation: GP rank-one extension + CandidatePosterior rows
//   BM_Proposal/n         add an observation, update the posterior, log EI over all candidates
//                         and the arg max: one BO proposal between refits
//   BM_FeasibilityFit/n   Laplace GP classifier fit (10% failures)
//   BM_FeasibilityPredict/n
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/measurements.h"
#include "surrogates/acquisition.h"
#include "surrogates/candidate_posterior.h"
#include "surrogates/feasibility.h"
#include "surrogates/gp.h"
#include "surrogates/linalg.h"
#include "surrogates/transform.h"

namespace {

using tunebase::Rng;
using namespace tunebase::surrogates;

constexpr std::size_t kSyntheticCandidates = 17956;
constexpr std::size_t kSyntheticDimension = 15;
constexpr std::size_t kSyntheticLevels = 4;
constexpr std::uint64_t kSeed = 2024;
constexpr double kFailureFraction = 0.1;

struct Dataset {
  std::string source;
  Matrix candidates;
  std::vector<double> objective;  // standardised log-time
};

Dataset synthetic() {
  Dataset d;
  d.source = "synthetic 17956 x 15";
  Rng rng(kSeed);
  std::uniform_int_distribution<std::size_t> level(0, kSyntheticLevels - 1);
  std::normal_distribution<double> noise(0.0, 0.05);
  d.candidates.set_size(static_cast<long>(kSyntheticCandidates),
                        static_cast<long>(kSyntheticDimension));
  std::vector<double> raw(kSyntheticCandidates);
  for (std::size_t i = 0; i < kSyntheticCandidates; ++i) {
    double f = 0.0;
    for (std::size_t j = 0; j < kSyntheticDimension; ++j) {
      const double x = static_cast<double>(level(rng)) / (kSyntheticLevels - 1);
      d.candidates(static_cast<long>(i), static_cast<long>(j)) = x;
      f += std::sin(3.0 * x + static_cast<double>(j)) / static_cast<double>(j + 1);
    }
    raw[i] = std::exp(f + noise(rng));
  }
  d.objective = ObjectiveTransform::fit(raw, true).forward(raw);
  return d;
}

std::string shared_gemm_file() {
  std::filesystem::path dir = TUNEBASE_DEFAULT_SHARED_DATA;
  if (const char* env = std::getenv("TUNEBASE_SHARED_DATA"); env && *env) dir = env;
  const auto file = dir / "gpu" / "gemm" / "A100.json.gz";
  return std::filesystem::exists(file) ? file.string() : std::string();
}

Dataset load() {
  if (const char* env = std::getenv("TUNEBASE_GP_BENCH_SYNTHETIC"); env && *env == '1') {
    return synthetic();
  }
  const std::string file = shared_gemm_file();
  if (file.empty()) return synthetic();
  const tunebase::MeasuredDataset m = tunebase::read_measurements(file);
  std::vector<std::vector<double>> rows;
  std::vector<double> times;
  for (const auto& e : m.entries) {
    if (!e.result.ok()) continue;
    rows.push_back(m.space.encode(e.config));
    times.push_back(e.result.objective);
  }
  Dataset d;
  d.source = "gemm/A100.json.gz: " + std::to_string(rows.size()) + " x " +
             std::to_string(m.space.encoded_dimension());
  d.candidates = to_matrix(rows, m.space.encoded_dimension());
  d.objective = ObjectiveTransform::fit(times, true).forward(times);
  return d;
}

const Dataset& data() {
  static const Dataset d = load();
  return d;
}

// The first n of a seeded permutation of the candidates.
struct Observations {
  Matrix x;
  std::vector<double> y;
};

Observations observations(std::size_t n) {
  const Dataset& d = data();
  std::vector<std::size_t> idx(static_cast<std::size_t>(d.candidates.nr()));
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  Rng rng(kSeed + n);
  std::shuffle(idx.begin(), idx.end(), rng);
  idx.resize(n);
  Observations o;
  o.x = select_rows(d.candidates, idx);
  for (std::size_t i : idx) o.y.push_back(d.objective[i]);
  return o;
}

// One fit per size, shared by the benchmarks that need a fitted model.
const GaussianProcess& fitted(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<GaussianProcess>> cache;
  auto& slot = cache[n];
  if (!slot) {
    Observations o = observations(n);
    Rng rng(kSeed);
    slot = std::make_unique<GaussianProcess>(
        GaussianProcess::fit(std::move(o.x), std::move(o.y), GpFitOptions{}, rng));
  }
  return *slot;
}

void BM_Fit(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Observations o = observations(n);
  Rng rng(kSeed);
  for (auto _ : state) {
    GaussianProcess gp = GaussianProcess::fit(o.x, o.y, GpFitOptions{}, rng);
    benchmark::DoNotOptimize(gp);
  }
}

void BM_Refit(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Observations o = observations(n);
  GpFitOptions options;
  options.random_starts = 0;
  options.warm_start = fitted(n).hyperparameters();
  Rng rng(kSeed);
  for (auto _ : state) {
    GaussianProcess gp = GaussianProcess::fit(o.x, o.y, options, rng);
    benchmark::DoNotOptimize(gp);
  }
}

void BM_Predict(benchmark::State& state) {
  const GaussianProcess& gp = fitted(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    Prediction p = gp.predict(data().candidates);
    benchmark::DoNotOptimize(p);
  }
  state.counters["candidates"] = static_cast<double>(data().candidates.nr());
}

void BM_PosteriorRebuild(benchmark::State& state) {
  const GaussianProcess& gp = fitted(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    CandidatePosterior posterior(data().candidates);
    posterior.update(gp);
    benchmark::DoNotOptimize(posterior.variance().data());
    state.counters["MB"] = static_cast<double>(posterior.memory_bytes()) / 1e6;
  }
}

// One BO step between refits: observe the previous proposal, update, score, pick.
void proposal_loop(benchmark::State& state, bool score) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Dataset& d = data();
  const GaussianProcess& base = fitted(n);
  CandidatePosterior posterior(d.candidates);
  posterior.update(base);
  GaussianProcess gp = base;
  Rng rng(kSeed);
  std::uniform_int_distribution<long> pick(0, d.candidates.nr() - 1);
  constexpr std::size_t kStepsBeforeReset = 20;
  std::size_t steps = 0;
  for (auto _ : state) {
    const long next = pick(rng);
    gp.add_observation(std::span<const double>(&d.candidates(next, 0),
                                               static_cast<std::size_t>(d.candidates.nc())),
                       d.objective[static_cast<std::size_t>(next)]);
    posterior.update(gp);
    if (score) {
      const double best = *std::min_element(gp.targets().begin(), gp.targets().end());
      const std::vector<double> s = acquisition_scores(posterior.prediction(), best, {});
      benchmark::DoNotOptimize(std::max_element(s.begin(), s.end()));
    }
    if (++steps == kStepsBeforeReset) {
      // Keep n from drifting: drop the added points (exact, and cheap for both objects).
      state.PauseTiming();
      gp.truncate(n);
      posterior.update(gp);
      steps = 0;
      state.ResumeTiming();
    }
  }
}

void BM_PosteriorAdd(benchmark::State& state) { proposal_loop(state, false); }
void BM_Proposal(benchmark::State& state) { proposal_loop(state, true); }

void BM_FeasibilityFit(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Observations o = observations(n);
  // The slowest tenth of the observations "fail".
  std::vector<double> sorted = o.y;
  std::sort(sorted.begin(), sorted.end());
  const double cut = sorted[static_cast<std::size_t>((1.0 - kFailureFraction) * (n - 1))];
  std::vector<bool> ok(n);
  for (std::size_t i = 0; i < n; ++i) ok[i] = o.y[i] < cut;
  Rng rng(kSeed);
  for (auto _ : state) {
    FeasibilityModel m = FeasibilityModel::fit(o.x, ok, FeasibilityFitOptions{}, rng);
    benchmark::DoNotOptimize(m);
  }
}

void BM_FeasibilityPredict(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Observations o = observations(n);
  std::vector<bool> ok(n);
  for (std::size_t i = 0; i < n; ++i) ok[i] = o.y[i] < 1.0;
  Rng rng(kSeed);
  const FeasibilityModel m = FeasibilityModel::fit(o.x, ok, FeasibilityFitOptions{}, rng);
  for (auto _ : state) {
    std::vector<double> lp = m.log_probability(data().candidates);
    benchmark::DoNotOptimize(lp);
  }
}

BENCHMARK(BM_Fit)->Arg(50)->Arg(100)->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Refit)->Arg(50)->Arg(100)->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Predict)->Arg(50)->Arg(100)->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PosteriorRebuild)
    ->Arg(50)
    ->Arg(100)
    ->Arg(200)
    ->Arg(1000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PosteriorAdd)->Arg(50)->Arg(100)->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Proposal)->Arg(50)->Arg(100)->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FeasibilityFit)->Arg(100)->Arg(300)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FeasibilityPredict)->Arg(100)->Arg(300)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("blas", linalg::blas_configuration());
  benchmark::AddCustomContext("data", data().source);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
