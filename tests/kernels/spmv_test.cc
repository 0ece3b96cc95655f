#include "kernels/spmv.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "core/error.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

/// A rows x cols matrix whose row lengths vary from 0 to max_len (every 7th row empty), so
/// that SELL slices need padding and sorting matters.
CsrMatrix irregular_matrix(std::int64_t rows, std::int64_t cols, int max_len, std::uint64_t seed) {
  Rng rng(seed);
  std::uniform_int_distribution<int> length(0, max_len);
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  CsrMatrix a;
  a.rows = rows;
  a.cols = cols;
  a.name = "irregular";
  a.row_ptr.push_back(0);
  std::vector<std::int32_t> all(static_cast<std::size_t>(cols));
  std::iota(all.begin(), all.end(), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const int len = (r % 7 == 3) ? 0 : std::min<int>(length(rng), static_cast<int>(cols));
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<std::int32_t> picked(all.begin(), all.begin() + len);
    std::sort(picked.begin(), picked.end());
    for (auto c : picked) {
      a.col.push_back(c);
      a.val.push_back(value(rng));
    }
    a.row_ptr.push_back(static_cast<std::int64_t>(a.col.size()));
  }
  return a;
}

SpmvOptions fast_options() {
  SpmvOptions o;
  o.warmup = 1;
  o.repeats = 3;
  o.min_sample_seconds = 1e-5;
  return o;
}

std::vector<CsrMatrix> test_matrices() {
  std::vector<CsrMatrix> m;
  m.push_back(laplacian_2d(9));                      // 81 rows: not a multiple of any C
  m.push_back(irregular_matrix(203, 57, 40, 1));     // rectangular, tall, empty rows
  m.push_back(irregular_matrix(37, 150, 120, 2));    // rectangular, wide, long rows
  m.push_back(irregular_matrix(5000, 5000, 12, 3));  // more rows than any sort window
  m.push_back(irregular_matrix(1, 3, 3, 4));         // a single row
  CsrMatrix empty;
  empty.rows = 6;
  empty.cols = 4;
  empty.row_ptr.assign(7, 0);
  empty.name = "all rows empty";
  m.push_back(empty);
  return m;
}

TEST(SpmvSpace, ParametersConstraintsAndDefault) {
  const SearchSpace space = spmv_search_space(2);
  for (const char* name :
       {"format", "slice_size", "sigma", "unroll", "threads", "schedule", "chunk"}) {
    EXPECT_TRUE(space.index_of(name).has_value()) << name;
  }
  const auto count = space.valid_count();
  ASSERT_TRUE(count.has_value());
  // csr: 3 unrolls x (1 single-thread + 3 schedules x 5 chunks); sell: 16 (C, sigma) pairs more
  EXPECT_EQ(*count, 48u + 16u * 48u);
  for (const auto& c : space.valid_configurations()) {
    const auto v = spmv_variant(space, c);
    if (v.format == SpmvFormat::kCsr) {
      EXPECT_EQ(v.slice_size, 8);
      EXPECT_EQ(v.sigma, 1);
    }
    if (v.threads == 1) {
      EXPECT_EQ(v.schedule, LoopSchedule::kStatic);
      EXPECT_EQ(v.chunk, 0);
    }
  }
  const auto def = space.default_configuration();
  ASSERT_TRUE(space.is_valid(def));
  const auto v = spmv_variant(space, def);
  EXPECT_EQ(v.format, SpmvFormat::kCsr);
  EXPECT_EQ(v.threads, 2);
  EXPECT_EQ(v.schedule, LoopSchedule::kStatic);
  EXPECT_EQ(v.chunk, 0);
  EXPECT_EQ(v.unroll, 1);

  const SearchSpace big = spmv_search_space(12);
  const auto& threads = big.parameter(*big.index_of("threads")).values;
  std::vector<std::int64_t> t;
  for (const auto& value : threads) t.push_back(std::get<std::int64_t>(value));
  EXPECT_EQ(t, (std::vector<std::int64_t>{1, 2, 4, 8, 12}));
  EXPECT_GT(*big.valid_count(), 1000u);
  EXPECT_LT(*big.valid_count(), 5000u);
  EXPECT_THROW(spmv_search_space(0), InvalidInput);
}

TEST(SellFormat, LayoutPaddingAndPermutation) {
  const CsrMatrix a = irregular_matrix(203, 57, 40, 1);
  const SellMatrix unsorted = to_sell(a, 8, 1);
  EXPECT_EQ(unsorted.slices(), 26);  // ceil(203 / 8)
  EXPECT_TRUE(unsorted.row_of.empty());
  EXPECT_EQ(unsorted.nnz, a.nnz());
  EXPECT_GE(unsorted.slots(), a.nnz());
  for (std::int64_t s = 0; s < unsorted.slices(); ++s) {
    EXPECT_EQ((unsorted.slice_ptr[s + 1] - unsorted.slice_ptr[s]) % 8, 0);
  }
  const SellMatrix sorted = to_sell(a, 8, 64);
  ASSERT_EQ(sorted.row_of.size(), 203u);
  std::set<std::int32_t> rows(sorted.row_of.begin(), sorted.row_of.end());
  EXPECT_EQ(rows.size(), 203u);
  // Sorting only moves rows inside their window.
  for (std::size_t p = 0; p < sorted.row_of.size(); ++p) {
    EXPECT_EQ(static_cast<std::size_t>(sorted.row_of[p]) / 64, p / 64);
  }
  EXPECT_LT(sorted.slots(), unsorted.slots());
  EXPECT_THROW(to_sell(a, 0, 1), InvalidInput);
  EXPECT_THROW(to_sell(a, 8, 0), InvalidInput);
}

TEST(SpmvVariants, EveryConfigurationMatchesTheReference) {
  const auto matrices = test_matrices();
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    const CsrMatrix& a = matrices[i];
    SCOPED_TRACE(a.name + " " + std::to_string(a.rows) + "x" + std::to_string(a.cols));
    SpmvEvaluator evaluator(a, fast_options());
    std::vector<double> reference;
    spmv_reference(a, evaluator.x(), reference);
    // Every configuration on the two irregular matrices with many rows; every kernel and
    // schedule with OpenMP's default chunk on the others (each parallel region costs a
    // thread wake-up, which dominates on a loaded machine).
    const bool full_sweep = i == 1 || i == 3;
    const auto chunk = *evaluator.space().index_of("chunk");
    std::vector<double> y;
    std::size_t checked = 0;
    for (const auto& config : evaluator.space().valid_configurations()) {
      if (!full_sweep && std::get<std::int64_t>(config[chunk]) != 0) continue;
      y.assign(static_cast<std::size_t>(a.rows), std::nan(""));
      evaluator.multiply(config, evaluator.x(), y);
      const auto mismatch = spmv_mismatch(a, evaluator.x(), y, reference, 1e-12);
      EXPECT_FALSE(mismatch.has_value())
          << evaluator.space().config_to_json(config).dump() << ": " << *mismatch;
      ++checked;
    }
    if (full_sweep) {
      EXPECT_EQ(checked, *evaluator.space().valid_count());
    }
  }
}

TEST(SpmvVariants, ThreadsBeyondTheSpaceStillMatch) {
  // The kernels must not assume the team size the space was built for.
  const CsrMatrix a = irregular_matrix(999, 999, 30, 7);
  SpmvOptions options = fast_options();
  options.max_threads = 5;
  SpmvEvaluator evaluator(a, options);
  std::vector<double> reference;
  spmv_reference(a, evaluator.x(), reference);
  Rng rng(3);
  std::vector<double> y;
  for (int i = 0; i < 40; ++i) {
    const auto config = evaluator.space().sample(rng);
    evaluator.multiply(config, evaluator.x(), y);
    EXPECT_FALSE(spmv_mismatch(a, evaluator.x(), y, reference, 1e-12).has_value());
  }
}

TEST(SpmvVariants, SharedMatrixWhenAvailable) {
  TUNEBASE_SHARED_FILE_OR_SKIP(path, "matrices/bcsstk13.mtx");
  SpmvEvaluator evaluator(read_matrix_market(path), fast_options());
  std::vector<double> reference;
  spmv_reference(evaluator.matrix(), evaluator.x(), reference);
  std::vector<double> y;
  Rng rng(11);
  for (int i = 0; i < 30; ++i) {
    const auto config = evaluator.space().sample(rng);
    evaluator.multiply(config, evaluator.x(), y);
    EXPECT_FALSE(spmv_mismatch(evaluator.matrix(), evaluator.x(), y, reference, 1e-12));
  }
}

TEST(SpmvMismatch, EqualInfinitiesMatch) {
  const CsrMatrix a = laplacian_2d(4);
  std::vector<double> x(16, 1.0);
  x[0] = std::numeric_limits<double>::infinity();
  std::vector<double> ref;
  spmv_reference(a, x, ref);
  ASSERT_TRUE(std::isinf(ref[0]) && std::isinf(ref[1]) && ref[1] < 0) << ref[0] << " " << ref[1];
  EXPECT_FALSE(spmv_mismatch(a, x, ref, ref, 1e-12).has_value());
  auto y = ref;
  y[1] = std::nan("");
  const auto wrong = spmv_mismatch(a, x, y, ref, 1e-12);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->rfind("y[1] = nan but the reference gives -inf", 0), 0u) << *wrong;
}

TEST(SpmvMismatch, DetectsWrongNanAndSizes) {
  const CsrMatrix a = laplacian_2d(4);
  std::vector<double> x(16);
  std::iota(x.begin(), x.end(), 1.0);
  std::vector<double> ref;
  spmv_reference(a, x, ref);
  EXPECT_FALSE(spmv_mismatch(a, x, ref, ref, 1e-12).has_value());
  auto y = ref;
  y[5] += 1e-3;
  const auto wrong = spmv_mismatch(a, x, y, ref, 1e-12);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_NE(wrong->find("y[5]"), std::string::npos) << *wrong;
  y = ref;
  y[0] = std::nan("");
  EXPECT_TRUE(spmv_mismatch(a, x, y, ref, 1e-12).has_value());
  y.pop_back();
  EXPECT_TRUE(spmv_mismatch(a, x, y, ref, 1e-12).has_value());
  // Rounding-sized differences pass.
  y = ref;
  y[3] *= 1.0 + 1e-15;
  EXPECT_FALSE(spmv_mismatch(a, x, y, ref, 1e-12).has_value());
}

TEST(SpmvEvaluator, EvaluateReportsTimesAndMetrics) {
  SpmvEvaluator evaluator(laplacian_2d(60), fast_options());
  EXPECT_EQ(evaluator.kernel_name(), "spmv");
  EXPECT_TRUE(evaluator.minimize());
  const auto task = evaluator.task();
  EXPECT_EQ(task["matrix"], "laplacian_2d_60");
  EXPECT_EQ(task["features"]["rows"], 3600);

  const auto& space = evaluator.space();
  auto sell = space.default_configuration();
  sell[*space.index_of("format")] = std::string("sell");
  sell[*space.index_of("slice_size")] = std::int64_t{16};
  sell[*space.index_of("sigma")] = std::int64_t{512};
  sell[*space.index_of("unroll")] = std::int64_t{2};
  ASSERT_TRUE(space.is_valid(sell));
  for (const auto& config : {space.default_configuration(), sell}) {
    const Measurement m = evaluator.evaluate(config);
    ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
    ASSERT_EQ(m.raw.size(), 3u);
    EXPECT_DOUBLE_EQ(m.objective, median(m.raw));
    EXPECT_GT(m.objective, 0.0);
    EXPECT_GE(m.cost_seconds, m.objective);
    EXPECT_GT(m.metrics["GFLOP/s"].get<double>(), 0.0);
    EXPECT_GT(m.metrics["GB/s"].get<double>(), 0.0);
    // GFLOP/s = 2 nnz / t
    EXPECT_NEAR(m.metrics["GFLOP/s"].get<double>(),
                2.0 * static_cast<double>(evaluator.matrix().nnz()) / m.objective * 1e-9, 1e-9);
  }
  const Measurement m = evaluator.evaluate(sell);
  EXPECT_GE(m.metrics["padding_ratio"].get<double>(), 1.0);
}

TEST(SpmvEvaluator, InvalidConfigurationIsATrialNotAnException) {
  SpmvEvaluator evaluator(laplacian_2d(5), fast_options());
  auto config = evaluator.space().default_configuration();
  config[*evaluator.space().index_of("slice_size")] = std::int64_t{32};  // csr with C = 32
  const Measurement m = evaluator.evaluate(config);
  EXPECT_EQ(m.status, TrialStatus::invalid);
  EXPECT_FALSE(m.message.empty());
  std::vector<double> y;
  EXPECT_THROW(evaluator.multiply(config, evaluator.x(), y), InvalidInput);
  EXPECT_THROW(evaluator.multiply(evaluator.space().default_configuration(), {1.0}, y),
               InvalidInput);
}

TEST(SpmvEvaluator, RejectsInconsistentMatricesAndOptions) {
  CsrMatrix bad = laplacian_2d(3);
  bad.col[4] = 9;
  EXPECT_THROW(SpmvEvaluator(bad, fast_options()), InvalidInput);
  CsrMatrix short_ptr = laplacian_2d(3);
  short_ptr.row_ptr.pop_back();
  EXPECT_THROW(SpmvEvaluator(short_ptr, fast_options()), InvalidInput);
  SpmvOptions options = fast_options();
  options.repeats = 0;
  EXPECT_THROW(SpmvEvaluator(laplacian_2d(3), options), InvalidInput);
  CsrMatrix empty;
  empty.name = "empty";
  empty.row_ptr = {0};
  try {
    SpmvEvaluator e(empty, fast_options());
    FAIL() << "a 0 x 0 matrix was taken";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("matrix 'empty' is 0 x 0: an empty product has nothing "
                                         "to tune"),
              std::string::npos)
        << e.what();
  }
}

TEST(SpmvEvaluator, ConversionCacheStaysWithinItsBudget) {
  SpmvOptions options = fast_options();
  options.max_cached_bytes = 1;  // keeps only the conversion in use
  SpmvEvaluator evaluator(laplacian_2d(20), options);
  std::vector<double> reference;
  spmv_reference(evaluator.matrix(), evaluator.x(), reference);
  std::vector<double> y;
  const auto threads = *evaluator.space().index_of("threads");
  for (const auto& config : evaluator.space().valid_configurations()) {
    if (std::get<std::int64_t>(config[threads]) != 1) continue;  // one per kernel variant
    evaluator.multiply(config, evaluator.x(), y);
    ASSERT_FALSE(spmv_mismatch(evaluator.matrix(), evaluator.x(), y, reference, 1e-12));
  }
}

}  // namespace
}  // namespace tunebase
