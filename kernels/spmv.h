// A tunable OpenMP sparse matrix-vector product (y = A x) in CSR and SELL-C-sigma storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/space.h"
#include "core/trial.h"
#include "kernels/evaluator.h"
#include "kernels/sparse_matrix.h"

namespace tunebase {

/// SELL-C-sigma storage (Kreutzer et al. 2014): rows are sorted by length inside windows of
/// sigma rows, grouped into slices of C rows, and each slice is padded to its longest row and
/// stored column by column, so that the C rows of a slice are processed in SIMD lanes.
struct SellMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  int slice_size = 1;  ///< C
  int sigma = 1;       ///< sorting window in rows; 1 keeps the original order
  /// Offset of each slice's first slot; slices + 1 entries. Slot of (lane, j) in slice s is
  /// slice_ptr[s] + j * C + lane.
  std::vector<std::int64_t> slice_ptr;
  std::vector<std::int32_t> col;  ///< column of each slot (padding repeats a valid column)
  std::vector<double> val;        ///< value of each slot (0 for padding)
  /// Original row of each sorted row position; empty when sigma == 1 (identity).
  std::vector<std::int32_t> row_of;
  std::int64_t nnz = 0;  ///< stored entries of the CSR matrix, padding excluded

  std::int64_t slices() const { return static_cast<std::int64_t>(slice_ptr.size()) - 1; }
  std::int64_t slots() const { return static_cast<std::int64_t>(val.size()); }
  /// Bytes of the arrays one product reads (values, columns, slice offsets, permutation).
  std::size_t matrix_bytes() const;
};

/// Converts to SELL-C-sigma. Throws InvalidInput when C < 1 or sigma < 1.
SellMatrix to_sell(const CsrMatrix& a, int slice_size, int sigma);

enum class SpmvFormat { kCsr, kSell };
enum class LoopSchedule { kStatic, kDynamic, kGuided };

/// One variant of the product, as a configuration of spmv_search_space() selects it.
struct SpmvVariant {
  SpmvFormat format = SpmvFormat::kCsr;
  int slice_size = 8;  ///< SELL only
  int sigma = 1;       ///< SELL only
  int threads = 1;
  LoopSchedule schedule = LoopSchedule::kStatic;
  /// Rows (CSR) or slices (SELL) per scheduling chunk; 0 leaves OpenMP's default.
  int chunk = 0;
  /// Independent accumulators per row (CSR) or slice columns per step (SELL).
  int unroll = 1;
};

/// The parameters of the SpMV space: format, slice_size, sigma, unroll, threads, schedule,
/// chunk. Threads take the powers of two below `max_threads` and `max_threads` itself.
SearchSpace spmv_search_space(int max_threads);
/// Reads a configuration of spmv_search_space() by parameter name.
SpmvVariant spmv_variant(const SearchSpace& space, const Configuration& config);

/// y = A x with the variant's storage, threads, schedule and unrolling. `y` holds a.rows
/// values and `x` a.cols; the SELL overload takes the matrix already converted.
void spmv_csr(const CsrMatrix& a, const double* x, double* y, const SpmvVariant& variant);
void spmv_sell(const SellMatrix& a, const double* x, double* y, const SpmvVariant& variant);

/// Checks y against the reference row by row: |y_i - ref_i| <= tolerance * sum_j |a_ij x_j|
/// (plus the smallest normal double, for rows that sum to zero); equal values (infinities
/// included) and nan where the reference has nan match. Returns a message naming the first
/// differing row ("y[3] = ... but the reference gives ..."), or nullopt when y matches.
std::optional<std::string> spmv_mismatch(const CsrMatrix& a, const std::vector<double>& x,
                                         const std::vector<double>& y,
                                         const std::vector<double>& reference, double tolerance);

struct SpmvOptions {
  /// Untimed products before the timed ones (the first one is also checked).
  int warmup = 2;
  /// Timed samples; each is kept in Measurement::raw (seconds per product).
  int repeats = 10;
  /// Each sample averages enough back-to-back products to last at least this long, so that
  /// small matrices are not timed at the clock's resolution.
  double min_sample_seconds = 1e-3;
  /// Relative tolerance of the check against spmv_reference (see spmv_mismatch).
  double tolerance = 1e-10;
  /// Largest thread count in the space; 0 = every hardware thread OpenMP sees.
  int max_threads = 0;
  /// Seed of the input vector x (uniform in [-1, 1]).
  std::uint64_t seed = 42;
  /// Converted matrices kept for reuse; the least recently used are dropped beyond this.
  std::size_t max_cached_bytes = std::size_t{2} << 30;
};

/// Tunes y = A x on this machine's CPU cores. The objective is the median time of one product
/// in seconds; metrics report GFLOP/s (2 nnz / t) and effective GB/s (matrix arrays, x and y
/// read or written once per product). Every variant's y is checked against spmv_reference; a
/// mismatch is a failed measurement.
class SpmvEvaluator : public Evaluator {
 public:
  /// Throws InvalidInput when the matrix is inconsistent (offsets, column indices).
  explicit SpmvEvaluator(CsrMatrix matrix, SpmvOptions options = {});
  ~SpmvEvaluator() override;

  std::string kernel_name() const override { return "spmv"; }
  const SearchSpace& space() const override { return space_; }
  /// {"matrix": name, "features": matrix_features(A)}.
  nlohmann::json task() const override { return task_; }
  Measurement evaluate(const Configuration& config) override;

  /// y = A x once with the variant `config` selects (conversions cached), for benchmarks and
  /// tests. Throws InvalidInput when x has the wrong size or config is not in space().
  void multiply(const Configuration& config, const std::vector<double>& x, std::vector<double>& y);

  /// Bytes one product of `config` moves: every array of its stored matrix (padding
  /// included), x read once and y written once. The basis of the GB/s metric.
  std::size_t bytes_per_product(const Configuration& config);

  const CsrMatrix& matrix() const { return matrix_; }
  /// The input vector evaluate() multiplies.
  const std::vector<double>& x() const { return x_; }
  const SpmvOptions& options() const { return options_; }

 private:
  struct CachedSell {
    std::shared_ptr<const SellMatrix> matrix;
    std::uint64_t last_used = 0;
  };

  std::shared_ptr<const SellMatrix> sell(int slice_size, int sigma);
  void run(const SpmvVariant& variant, const SellMatrix* sell, const double* x, double* y) const;
  std::size_t bytes_moved(const SpmvVariant& variant, const SellMatrix* sell) const;

  CsrMatrix matrix_;
  SpmvOptions options_;
  SearchSpace space_;
  nlohmann::json task_;
  std::vector<double> x_;
  std::vector<double> reference_;
  std::vector<double> y_;
  std::map<std::pair<int, int>, CachedSell> cache_;
  std::size_t cached_bytes_ = 0;
  std::uint64_t use_counter_ = 0;
};

}  // namespace tunebase
