// OpenCL SpMV (kernels/opencl/spmv.cl, double precision) on the first OpenCL device against
// our CPU SpMV (kernels/spmv.h, OpenMP) on the same matrices: a 7-point 3D Laplacian with
// TUNEBASE_LAPLACIAN_N^3 rows (100 unless set) and the Matrix Market files listed in
// TUNEBASE_MATRICES (comma-separated). Each side is shown with its default configuration and
// its best one: every configuration of the OpenCL space (45), and the CPU default plus
// TUNEBASE_BENCH_CPU_SAMPLES random configurations of the CPU space (30 unless set); the CPU
// side also shows single-threaded CSR.
// OpenCL times are device event times of single launches; counter GFLOP/s = 2 nnz / t.
//
//   TUNEBASE_MATRICES=../shared/data/matrices/bayer10.mtx nice bench_opencl_spmv
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/gpu_evaluators.h"
#include "kernels/opencl_backend.h"
#include "kernels/sparse_matrix.h"
#include "kernels/spmv.h"

namespace {

using tunebase::Configuration;
using tunebase::Evaluator;

constexpr std::int64_t kDefaultLaplacianN = 100;
constexpr int kDefaultCpuSamples = 30;
constexpr std::uint64_t kSearchSeed = 7;

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

// Lowest-objective configuration among `candidates` (failures skipped).
Configuration best_of(Evaluator& evaluator, const std::vector<Configuration>& candidates) {
  Configuration best = candidates.front();
  double best_objective = std::numeric_limits<double>::infinity();
  int failed = 0;
  for (const auto& config : candidates) {
    const auto m = evaluator.evaluate(config);
    if (!m.ok()) {
      ++failed;
      continue;
    }
    if (m.objective < best_objective) {
      best_objective = m.objective;
      best = config;
    }
  }
  std::cerr << evaluator.kernel_name() << ": best of " << candidates.size() << " (" << failed
            << " failed): " << evaluator.space().config_to_json(best).dump() << "\n";
  return best;
}

// One OpenCL launch per iteration, timed by the device's events; wall_ms adds the host-side
// enqueue and wait, which dominate on small matrices.
void BM_OpenclSpmv(benchmark::State& state, const std::shared_ptr<tunebase::GpuSpmvEvaluator>& spmv,
                   const Configuration& config) {
  double wall_ms = 0.0;
  for (auto _ : state) {
    const auto m = spmv->evaluate(config);
    if (!m.ok()) {
      state.SkipWithError(m.message.c_str());
      break;
    }
    state.SetIterationTime(m.objective * 1e-3);
    wall_ms += m.metrics.value("wall_time_ms", 0.0);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(spmv->matrix().nnz()) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["wall_ms"] = benchmark::Counter(wall_ms, benchmark::Counter::kAvgIterations);
}

void register_opencl(const std::shared_ptr<tunebase::GpuSpmvEvaluator>& spmv,
                     const std::string& label, const Configuration& config) {
  const std::string name = "opencl_spmv/" + spmv->matrix().name + "/" + label;
  benchmark::RegisterBenchmark(name.c_str(), BM_OpenclSpmv, spmv, config)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

void register_cpu(const std::shared_ptr<tunebase::SpmvEvaluator>& spmv, const std::string& label,
                  const Configuration& config) {
  const std::string name = "cpu_spmv/" + spmv->matrix().name + "/" + label;
  benchmark::RegisterBenchmark(name.c_str(),
                               [spmv, config](benchmark::State& state) {
                                 const auto& a = spmv->matrix();
                                 std::vector<double> y(static_cast<std::size_t>(a.rows));
                                 spmv->multiply(config, spmv->x(), y);  // converts, untimed
                                 for (auto _ : state) {
                                   spmv->multiply(config, spmv->x(), y);
                                   benchmark::DoNotOptimize(y.data());
                                   benchmark::ClobberMemory();
                                 }
                                 state.counters["GFLOP/s"] = benchmark::Counter(
                                     2.0 * static_cast<double>(a.nnz()) * 1e-9,
                                     benchmark::Counter::kIsIterationInvariantRate);
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

void register_matrix(const std::shared_ptr<tunebase::OpenclBackend>& backend,
                     const tunebase::CsrMatrix& matrix) {
  tunebase::GpuEvaluatorOptions gpu_options;
  gpu_options.repeats = 3;
  auto gpu = std::make_shared<tunebase::GpuSpmvEvaluator>(backend, matrix, gpu_options);
  const auto& gpu_space = gpu->space();
  register_opencl(gpu, "default", gpu_space.default_configuration());
  register_opencl(gpu, "tuned", best_of(*gpu, gpu_space.valid_configurations()));

  auto cpu = std::make_shared<tunebase::SpmvEvaluator>(matrix);
  const auto& cpu_space = cpu->space();
  tunebase::Rng rng(kSearchSeed);
  std::vector<Configuration> candidates = {cpu_space.default_configuration()};
  for (int i = 0; i < env_int("TUNEBASE_BENCH_CPU_SAMPLES", kDefaultCpuSamples); ++i) {
    candidates.push_back(cpu_space.sample(rng));
  }
  register_cpu(cpu, "default", cpu_space.default_configuration());
  // One thread: immune to OpenMP threads waiting for each other on a busy machine.
  register_cpu(cpu, "csr_1thread", cpu_space.config_from_json({{"threads", 1}}, true));
  register_cpu(cpu, "tuned", best_of(*cpu, candidates));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (tunebase::list_opencl_devices().empty()) {
    std::cerr << "no OpenCL device: nothing to compare\n";
    return 0;
  }
  auto backend = std::make_shared<tunebase::OpenclBackend>(0);
  std::cerr << "OpenCL device: " << backend->device().name << "\n";
  register_matrix(backend, tunebase::laplacian_3d(env_int("TUNEBASE_LAPLACIAN_N",
                                                          static_cast<int>(kDefaultLaplacianN))));
  if (const char* list = std::getenv("TUNEBASE_MATRICES")) {
    std::stringstream paths(list);
    for (std::string path; std::getline(paths, path, ',');) {
      if (!path.empty()) register_matrix(backend, tunebase::read_matrix_market(path));
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
