// STREAM-like triad a[i] = b[i] + s * c[i] with OpenMP: the memory bandwidth SpMV is bound by.
//
// Arrays default to kDefaultElements doubles each (3 x 128 MiB, many times any L3); set
// TUNEBASE_STREAM_ELEMENTS to change. Bytes counted as STREAM does: 24 per element (read b and
// c, write a), write-allocate traffic not included.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

constexpr std::int64_t kDefaultElements = std::int64_t{1} << 24;
constexpr double kBytesPerElement = 3 * sizeof(double);
constexpr double kScalar = 3.0;

std::int64_t elements() {
  if (const char* env = std::getenv("TUNEBASE_STREAM_ELEMENTS"); env && *env) {
    return std::stoll(env);
  }
  return kDefaultElements;
}

void BM_StreamTriad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::int64_t n = elements();
  // Uninitialised allocation, then first touch by the threads that will use each page.
  std::unique_ptr<double[]> a(new double[static_cast<std::size_t>(n)]);
  std::unique_ptr<double[]> b(new double[static_cast<std::size_t>(n)]);
  std::unique_ptr<double[]> c(new double[static_cast<std::size_t>(n)]);
  double* pa = a.get();
  double* pb = b.get();
  double* pc = c.get();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    pa[i] = 0.0;
    pb[i] = 1.0;
    pc[i] = 2.0;
  }
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) pa[i] = pb[i] + kScalar * pc[i];
    benchmark::DoNotOptimize(pa);
    benchmark::ClobberMemory();
  }
  if (pa[n / 2] != 1.0 + kScalar * 2.0) state.SkipWithError("triad computed a wrong value");
  // GB/s = 24 n / t / 1e9
  state.counters["GB/s"] = benchmark::Counter(kBytesPerElement * static_cast<double>(n) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MiB/array"] = static_cast<double>(n) * sizeof(double) / (1 << 20);
}

void thread_counts(benchmark::internal::Benchmark* b) {
  const int cores = omp_get_num_procs();
  for (int t = 1; t < cores; t *= 2) b->Arg(t);
  b->Arg(cores);
}

BENCHMARK(BM_StreamTriad)->Apply(thread_counts)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
