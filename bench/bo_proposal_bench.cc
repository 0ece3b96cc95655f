// Cost of one proposal of the `bo` strategy (and of `bo-transfer` with two large priors) on
// the GEMM tuning space, through the Session as every caller uses it: model update (scheduled
// refits included, amortised), posterior over all candidates, log EI, arg max.
//
// Data: ../shared/data/gpu/gemm/A100.json.gz (17,956 configurations, 15 parameters) with
// V100 and P100 as priors; without the shared data (or with TUNEBASE_BO_BENCH_SYNTHETIC=1) the
// GEMM space is rebuilt from CLBlast's parameters and constraints with a synthetic objective
// and synthetic priors. The context line "data" says which.
//
//   BM_BoProposal/n        n observations already made (a seeded random subset), then each
//                          iteration proposes one configuration and observes it
//   BM_TransferProposal/n  the same with bo-transfer and two priors of the size of the space,
//                          once the priors' models are fitted (the first proposal, untimed)
// Counters: median_ms and p95_ms over the iterations (the targets are medians).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/measurements.h"
#include "tuner/prior.h"
#include "tuner/session.h"

namespace {

using namespace tunebase;

constexpr std::uint64_t kSeed = 2024;
constexpr int kIterations = 20;

struct Problem {
  std::string source;
  SearchSpace space;
  std::vector<Configuration> candidates;
  std::vector<double> objective;  // per candidate
  std::vector<Prior> priors;
};

// CLBlast's Xgemm parameters and restrictions (as in Kernel Tuner's GEMM example).
SearchSpace gemm_space() {
  nlohmann::json tune = {{"MWG", {16, 32, 64, 128}},
                         {"NWG", {16, 32, 64, 128}},
                         {"KWG", {32}},
                         {"MDIMC", {8, 16, 32}},
                         {"NDIMC", {8, 16, 32}},
                         {"MDIMA", {8, 16, 32}},
                         {"NDIMB", {8, 16, 32}},
                         {"KWI", {2}},
                         {"VWM", {1, 2, 4, 8}},
                         {"VWN", {1, 2, 4, 8}},
                         {"STRM", {0}},
                         {"STRN", {0}},
                         {"SA", {0, 1}},
                         {"SB", {0, 1}},
                         {"PRECISION", {32}}};
  const std::vector<std::string> order = {"MWG",   "NWG",   "KWG", "MDIMC", "NDIMC",
                                          "MDIMA", "NDIMB", "KWI", "VWM",   "VWN",
                                          "STRM",  "STRN",  "SA",  "SB",    "PRECISION"};
  const std::vector<std::string> restrictions = {"KWG % ((MDIMC * NDIMC) / MDIMA) == 0",
                                                 "KWG % ((MDIMC * NDIMC) / NDIMB) == 0",
                                                 "MWG % (MDIMC * VWM) == 0",
                                                 "NWG % (NDIMC * VWN) == 0",
                                                 "MWG % (MDIMA * VWM) == 0",
                                                 "NWG % (NDIMB * VWN) == 0"};
  return SearchSpace::from_kernel_tuner(tune, restrictions, order);
}

// A smooth log-time over the encoded configuration, shifted per machine.
double synthetic_time(const SearchSpace& space, const Configuration& c, double machine) {
  const auto x = space.encode(c);
  double f = 0.0;
  for (std::size_t j = 0; j < x.size(); ++j) {
    f += std::sin(3.0 * x[j] + static_cast<double>(j) + machine) / static_cast<double>(j + 1);
  }
  return std::exp(2.0 + f);
}

Problem synthetic() {
  Problem p;
  p.space = gemm_space();
  p.candidates = p.space.valid_configurations();
  p.source = "synthetic: CLBlast GEMM space, " + std::to_string(p.candidates.size()) +
             " valid configurations";
  for (const auto& c : p.candidates) p.objective.push_back(synthetic_time(p.space, c, 0.0));
  for (double machine : {0.3, -0.4}) {
    Prior prior;
    prior.source = "synthetic " + std::to_string(machine);
    for (const auto& c : p.candidates) {
      prior.observations.push_back({c, Measurement::success(synthetic_time(p.space, c, machine))});
    }
    p.priors.push_back(std::move(prior));
  }
  return p;
}

std::filesystem::path shared_gemm_dir() {
  std::filesystem::path dir = TUNEBASE_DEFAULT_SHARED_DATA;
  if (const char* env = std::getenv("TUNEBASE_SHARED_DATA"); env && *env) dir = env;
  return dir / "gpu" / "gemm";
}

Problem load() {
  if (const char* env = std::getenv("TUNEBASE_BO_BENCH_SYNTHETIC"); env && *env == '1') {
    return synthetic();
  }
  const auto dir = shared_gemm_dir();
  if (!std::filesystem::exists(dir / "A100.json.gz")) return synthetic();
  const MeasuredDataset target = read_measurements((dir / "A100.json.gz").string());
  Problem p;
  p.space = target.space;
  for (const auto& e : target.entries) {
    if (!e.result.ok()) continue;
    p.candidates.push_back(e.config);
    p.objective.push_back(e.result.objective);
  }
  for (const char* name : {"V100.json.gz", "P100.json.gz"}) {
    p.priors.push_back(load_prior((dir / name).string(), p.space));
  }
  p.source = "gemm/A100.json.gz (" + std::to_string(p.candidates.size()) +
             " configurations), priors V100 and P100";
  return p;
}

const Problem& problem() {
  static const Problem p = load();
  return p;
}

void proposal_loop(benchmark::State& state, const std::string& strategy, bool priors) {
  const Problem& p = problem();
  const auto n = static_cast<std::size_t>(state.range(0));
  SessionOptions options;
  options.strategy = strategy;
  options.seed = kSeed;
  options.budget = p.candidates.size();
  options.candidates = p.candidates;
  if (priors) options.priors = p.priors;
  Session session(p.space, options);
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < p.candidates.size(); ++i) index[p.space.key(p.candidates[i])] = i;

  // n observations at random, then one untimed proposal (the first fit, and the priors').
  std::vector<std::size_t> order(p.candidates.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  Rng rng(kSeed + n);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Observation> made;
  for (std::size_t i = 0; i < n; ++i) {
    made.push_back({p.candidates[order[i]], Measurement::success(p.objective[order[i]])});
  }
  session.restore(made, {});
  auto observe = [&](const std::vector<Configuration>& batch) {
    for (const auto& c : batch) {
      session.observe(c, Measurement::success(p.objective[index.at(p.space.key(c))]));
    }
  };
  observe(session.propose(1));

  std::vector<double> times;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const auto batch = session.propose(1);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    times.push_back(1e3 * seconds);
    observe(batch);
  }
  std::sort(times.begin(), times.end());
  state.counters["median_ms"] = times[times.size() / 2];
  state.counters["p95_ms"] = times[std::min(
      times.size() - 1, static_cast<std::size_t>(0.95 * static_cast<double>(times.size())))];
}

void BM_BoProposal(benchmark::State& state) { proposal_loop(state, "bo", false); }
void BM_TransferProposal(benchmark::State& state) { proposal_loop(state, "bo-transfer", true); }

BENCHMARK(BM_BoProposal)
    ->Arg(50)
    ->Arg(100)
    ->Arg(200)
    ->Arg(1000)
    ->Iterations(kIterations)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TransferProposal)
    ->Arg(100)
    ->Iterations(kIterations)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("data", problem().source);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
