// bench_format_selection: how well the fastest SpMV storage format of a matrix on one machine
// is predicted from its features and its timings on the other machines (Ginkgo's SuiteSparse
// SpMV data, `sparse/spmv/*.csv`), on matrices held out by cross-validation, next to always
// choosing CSR.
//
//   bench_format_selection [--data DIR] [--target MACHINE]... [--trees N] [--folds K] [--seed S]
//
// Prints one table per target machine: accuracy (pick == fastest), mean / geometric-mean /
// 95th-percentile slowdown t(pick) / t(fastest), and picks of formats that failed there.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "kernels/format_selection.h"

#ifndef TUNEBASE_DEFAULT_SHARED_DATA
#define TUNEBASE_DEFAULT_SHARED_DATA "../shared/data"
#endif

int main(int argc, char** argv) {
  CLI::App app{"SpMV format selection across machines (cross-validated over matrices)"};
  std::string data_dir = std::string(TUNEBASE_DEFAULT_SHARED_DATA) + "/sparse/spmv";
  std::vector<std::string> targets;
  tunebase::FormatSelectionOptions options;
  options.trees = 50;
  app.add_option("--data", data_dir, "folder of <machine>.csv SpMV timing files");
  app.add_option("--target", targets, "machine(s) to predict for (default: every machine)");
  app.add_option("--trees", options.trees, "trees per random forest")->check(CLI::PositiveNumber);
  app.add_option("--folds", options.folds, "cross-validation folds")->check(CLI::Range(2, 100));
  app.add_option("--seed", options.seed, "seed of the fold split and the forests");
  CLI11_PARSE(app, argc, argv);

  try {
    const tunebase::SpmvDataset data = tunebase::read_spmv_dataset(data_dir);
    std::printf(
        "SpMV format selection: %zu machines, %zu matrices, %d-fold CV over matrices, "
        "%zu trees, seed %llu\n",
        data.machines.size(), data.matrices.size(), options.folds, options.trees,
        static_cast<unsigned long long>(options.seed));
    if (targets.empty()) targets = data.machines;
    for (const auto& name : targets) {
      const auto start = std::chrono::steady_clock::now();
      const auto report =
          tunebase::evaluate_format_selection(data, data.machine_index(name), options);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("\n%s: %zu held-out matrices, %zu candidate formats (%.0f s)\n",
                  report.target.c_str(), report.matrices, report.candidate_formats.size(), seconds);
      std::printf(
          "| method | accuracy | mean slowdown | geomean slowdown | p95 slowdown | "
          "failed picks |\n|---|---|---|---|---|---|\n");
      for (const auto& s : report.scores) {
        std::printf("| %s | %.3f | %.3f | %.3f | %.2f | %zu |\n", s.method.c_str(), s.accuracy,
                    s.mean_slowdown, s.geomean_slowdown, s.p95_slowdown, s.unavailable_picks);
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_format_selection: %s\n", e.what());
    return 1;
  }
  return 0;
}
