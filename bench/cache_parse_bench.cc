// Reading a Kernel Tuner cache: its JSON parsed (depth and duplicate-key checks included) and
// its entries turned into measurements, as `tunebase import` and POST /v1/import do.
//
//   BM_ParseCache/n   a generated cache of n entries (3 parameters, one time each)
//
// The time per entry should not grow with n: the checks once ran inside nlohmann's callback
// parser, which rescans an object's members whenever a member object closes (quadratic: a
// 144,000-entry cache took minutes).
#include <benchmark/benchmark.h>

#include <string>

#include "core/measurements.h"

namespace {

std::string generated_cache(int n) {
  std::string text = R"({"device_name": "Generated", "kernel_name": "k", "problem_size": [1],)"
                     R"( "tune_params_keys": ["a", "b", "c"], "tune_params": {"a": [)";
  const int side = 64;
  for (int i = 0; i < side; ++i) text += (i ? "," : "") + std::to_string(i);
  text += R"(], "b": [)";
  for (int i = 0; i < side; ++i) text += (i ? "," : "") + std::to_string(i);
  text += R"(], "c": [)";
  const int depth = (n + side * side - 1) / (side * side);
  for (int i = 0; i < depth; ++i) text += (i ? "," : "") + std::to_string(i);
  text += R"(]}, "cache": {)";
  for (int k = 0; k < n; ++k) {
    const int a = k % side;
    const int b = (k / side) % side;
    const int c = k / (side * side);
    const auto key = std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c);
    text += (k ? "," : "") + std::string("\"") + key + R"(": {"a": )" + std::to_string(a) +
            R"(, "b": )" + std::to_string(b) + R"(, "c": )" + std::to_string(c) + R"(, "time": )" +
            std::to_string(1.0 + 0.001 * k) + "}";
  }
  return text + "}}";
}

void BM_ParseCache(benchmark::State& state) {
  const auto text = generated_cache(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto dataset = tunebase::parse_measurements(text, "generated cache");
    benchmark::DoNotOptimize(dataset.entries.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_ParseCache)
    ->Arg(18000)
    ->Arg(36000)
    ->Arg(72000)
    ->Arg(144000)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
