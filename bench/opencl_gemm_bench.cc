// OpenCL SGEMM (kernels/opencl/xgemm.cl) on the first OpenCL device against OpenBLAS sgemm on
// this machine's cores, for n = 1024 and 2048: the space's default configuration and a tuned
// one. Tuning here is a plain random search at n = 1024 (the default plus
// TUNEBASE_BENCH_GEMM_SAMPLES random valid configurations, 40 unless set), or the JSON
// configuration in TUNEBASE_BENCH_GEMM_CONFIG (e.g. the best of a `tunebase sweep`).
// OpenCL times are the device's event times of single launches; each launch is also checked
// against OpenBLAS by the evaluator. Counter GFLOP/s = 2 n^3 / t.
//
//   nice bench_opencl_gemm --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/gpu_evaluators.h"
#include "kernels/opencl_backend.h"

namespace {

using tunebase::Configuration;
using tunebase::GpuGemmEvaluator;

constexpr std::int64_t kTuningSize = 1024;
constexpr int kDefaultSamples = 40;
constexpr int kTuningRepeats = 3;
constexpr std::uint64_t kSearchSeed = 2024;
const std::vector<std::int64_t> kSizes = {1024, 2048};

double gemm_flops(std::int64_t n) { return 2.0 * static_cast<double>(n) * n * n; }

// Best configuration of a random search (or the one given in the environment).
Configuration tuned_configuration(const std::shared_ptr<tunebase::OpenclBackend>& backend) {
  tunebase::GpuEvaluatorOptions options;
  options.repeats = kTuningRepeats;
  GpuGemmEvaluator gemm(backend, kTuningSize, options);
  const auto& space = gemm.space();
  if (const char* given = std::getenv("TUNEBASE_BENCH_GEMM_CONFIG")) {
    return space.config_from_json(nlohmann::json::parse(given), /*fill_defaults=*/true);
  }
  int samples = kDefaultSamples;
  if (const char* env = std::getenv("TUNEBASE_BENCH_GEMM_SAMPLES")) samples = std::atoi(env);

  tunebase::Rng rng(kSearchSeed);
  std::vector<Configuration> candidates = {space.default_configuration()};
  for (int i = 0; i < samples; ++i) candidates.push_back(space.sample(rng));
  Configuration best = candidates.front();
  double best_ms = std::numeric_limits<double>::infinity();
  int failed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& config : candidates) {
    const auto m = gemm.evaluate(config);
    if (!m.ok()) {
      ++failed;
      continue;
    }
    if (m.objective < best_ms) {
      best_ms = m.objective;
      best = config;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "random search at n = " << kTuningSize << ": " << candidates.size()
            << " configurations (" << failed << " failed) in " << seconds << " s; best " << best_ms
            << " ms = " << gemm_flops(kTuningSize) / (best_ms * 1e-3) * 1e-9
            << " GFLOP/s: " << space.config_to_json(best).dump() << "\n";
  return best;
}

void BM_OpenblasSgemm(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const auto size = static_cast<std::size_t>(n) * n;
  std::vector<float> a(size), b(size), c(size);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto* v : {&a, &b, &c}) {
    for (auto& x : *v) x = uniform(rng);
  }
  for (auto _ : state) {
    // Same operation and layouts as the OpenCL kernel: A column-major, B row-major.
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, n, n, n, 0.75f, a.data(), n, b.data(), n,
                0.5f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(gemm_flops(n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void register_opencl(const std::shared_ptr<tunebase::OpenclBackend>& backend,
                     const std::string& label, const nlohmann::json& config_json) {
  for (const std::int64_t n : kSizes) {
    const std::string name = "opencl_sgemm/" + label + "/" + std::to_string(n);
    benchmark::RegisterBenchmark(
        name.c_str(),
        [backend, config_json, n](benchmark::State& state) {
          tunebase::GpuEvaluatorOptions options;
          options.repeats = 1;
          GpuGemmEvaluator gemm(backend, n, options);
          const auto config = gemm.space().config_from_json(config_json);
          double wall_ms = 0.0;
          for (auto _ : state) {
            const auto m = gemm.evaluate(config);
            if (!m.ok()) {
              state.SkipWithError(m.message.c_str());
              break;
            }
            state.SetIterationTime(m.objective * 1e-3);
            wall_ms += m.metrics.value("wall_time_ms", 0.0);
          }
          state.counters["GFLOP/s"] = benchmark::Counter(
              gemm_flops(n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
          state.counters["wall_ms"] =
              benchmark::Counter(wall_ms, benchmark::Counter::kAvgIterations);
        })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (const std::int64_t n : kSizes) {
    benchmark::RegisterBenchmark("openblas_sgemm", BM_OpenblasSgemm)
        ->Arg(n)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  if (tunebase::list_opencl_devices().empty()) {
    std::cerr << "no OpenCL device: only OpenBLAS is measured\n";
  } else {
    auto backend = std::make_shared<tunebase::OpenclBackend>(0);
    std::cerr << "OpenCL device: " << backend->device().name << " (" << backend->device().platform
              << ")\n";
    const auto default_space =
        GpuGemmEvaluator::make_space(tunebase::device_limits(backend->device(), {}));
    register_opencl(backend, "default",
                    default_space.config_to_json(default_space.default_configuration()));
    const Configuration best = tuned_configuration(backend);
    register_opencl(backend, "tuned", default_space.config_to_json(best));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
