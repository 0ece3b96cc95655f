// SpMV: what a user gets without tuning (csr, all cores, static) against a few other variants,
// on a 7-point 3D Laplacian with n^3 >= 1M rows and, when TUNEBASE_MATRIX names a Matrix
// Market file, on that matrix too. Counters: GFLOP/s (2 nnz per product) and effective GB/s
// (SpmvEvaluator::bytes_per_product: the stored matrix with its padding, x and y once).
//
//   TUNEBASE_LAPLACIAN_N=100 TUNEBASE_MATRIX=path/to/A.mtx bench_spmv
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/spmv.h"

namespace {

constexpr std::int64_t kDefaultLaplacianN = 100;

/// Variants to compare, as JSON objects; unnamed parameters take the space's defaults.
const std::vector<std::pair<std::string, nlohmann::json>>& variants() {
  static const std::vector<std::pair<std::string, nlohmann::json>> list{
      {"default", nlohmann::json::object()},
      {"csr_1thread", {{"threads", 1}}},
      {"csr_unroll4", {{"unroll", 4}}},
      {"csr_dynamic256", {{"schedule", "dynamic"}, {"chunk", 256}}},
      {"sell_C8_sigma1", {{"format", "sell"}, {"slice_size", 8}, {"sigma", 1}}},
      {"sell_C32_sigma4096_unroll2",
       {{"format", "sell"}, {"slice_size", 32}, {"sigma", 4096}, {"unroll", 2}}},
      {"sell_C4_sigma64_unroll4",
       {{"format", "sell"}, {"slice_size", 4}, {"sigma", 64}, {"unroll", 4}}},
  };
  return list;
}

void register_matrix(const std::shared_ptr<tunebase::SpmvEvaluator>& evaluator) {
  const auto& a = evaluator->matrix();
  for (const auto& [label, json] : variants()) {
    const auto config = evaluator->space().config_from_json(json, /*fill_defaults=*/true);
    const std::string name = "spmv/" + a.name + "/" + label;
    benchmark::RegisterBenchmark(
        name.c_str(),
        [evaluator, config](benchmark::State& state) {
          const auto& m = evaluator->matrix();
          std::vector<double> y(static_cast<std::size_t>(m.rows));
          evaluator->multiply(config, evaluator->x(), y);  // conversion happens here, untimed
          for (auto _ : state) {
            evaluator->multiply(config, evaluator->x(), y);
            benchmark::DoNotOptimize(y.data());
            benchmark::ClobberMemory();
          }
          // GFLOP/s = 2 nnz / t; GB/s = bytes per product / t
          state.counters["GFLOP/s"] =
              benchmark::Counter(2.0 * static_cast<double>(m.nnz()) * 1e-9,
                                 benchmark::Counter::kIsIterationInvariantRate);
          state.counters["GB/s"] =
              benchmark::Counter(static_cast<double>(evaluator->bytes_per_product(config)) * 1e-9,
                                 benchmark::Counter::kIsIterationInvariantRate);
        })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

void BM_ReadMatrixMarket(benchmark::State& state, const std::string& path) {
  std::int64_t entries = 0;
  for (auto _ : state) {
    const auto a = tunebase::read_matrix_market(path);
    entries = a.nnz();
    benchmark::DoNotOptimize(a.val.data());
  }
  state.counters["Mentries/s"] = benchmark::Counter(static_cast<double>(entries) * 1e-6,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tunebase::SpmvOptions options;
  std::int64_t n = kDefaultLaplacianN;
  if (const char* env = std::getenv("TUNEBASE_LAPLACIAN_N"); env && *env) n = std::stoll(env);
  register_matrix(std::make_shared<tunebase::SpmvEvaluator>(tunebase::laplacian_3d(n), options));
  if (const char* path = std::getenv("TUNEBASE_MATRIX"); path && *path) {
    benchmark::RegisterBenchmark("read_matrix_market", BM_ReadMatrixMarket, std::string(path))
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    register_matrix(
        std::make_shared<tunebase::SpmvEvaluator>(tunebase::read_matrix_market(path), options));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
