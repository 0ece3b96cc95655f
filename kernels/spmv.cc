#include "kernels/spmv.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <new>
#include <numeric>
#include <random>
#include <sstream>

#include "core/error.h"

namespace tunebase {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::int64_t kMaxRows = std::numeric_limits<std::int32_t>::max();
// Values of the space's parameters. Every SELL sort window is larger than and a multiple of
// every slice size, so that sorting can change a slice's padding.
constexpr std::array kSliceSizes{4, 8, 16, 32};
constexpr std::array kSigmas{1, 64, 512, 4096};
constexpr std::array kUnrolls{1, 2, 4};
constexpr std::array kChunks{0, 16, 64, 256, 1024};
constexpr int kDefaultSliceSize = 8;
// Cap on back-to-back products per timed sample (tiny matrices at min_sample_seconds).
constexpr std::int64_t kMaxInnerRepetitions = 1 << 20;

void set_schedule(LoopSchedule schedule, int chunk) {
  switch (schedule) {
    case LoopSchedule::kStatic:
      omp_set_schedule(omp_sched_static, chunk);
      break;
    case LoopSchedule::kDynamic:
      omp_set_schedule(omp_sched_dynamic, chunk);
      break;
    case LoopSchedule::kGuided:
      omp_set_schedule(omp_sched_guided, chunk);
      break;
  }
}

template <int U>
void csr_kernel(const CsrMatrix& a, const double* x, double* y, int threads) {
  const std::int64_t rows = a.rows;
  const std::int64_t* row_ptr = a.row_ptr.data();
  const std::int32_t* col = a.col.data();
  const double* val = a.val.data();
#pragma omp parallel for num_threads(threads) schedule(runtime)
  for (std::int64_t r = 0; r < rows; ++r) {
    // y_r = sum_k val_k x_col_k, split over U independent partial sums
    double acc[U] = {};
    std::int64_t k = row_ptr[r];
    const std::int64_t end = row_ptr[r + 1];
    for (; k + U <= end; k += U) {
      for (int u = 0; u < U; ++u) acc[u] += val[k + u] * x[col[k + u]];
    }
    for (; k < end; ++k) acc[0] += val[k] * x[col[k]];
    double sum = 0.0;
    for (int u = 0; u < U; ++u) sum += acc[u];
    y[r] = sum;
  }
}

template <int C, int U>
void sell_kernel(const SellMatrix& a, const double* x, double* y, int threads) {
  const std::int64_t slices = a.slices();
  const std::int64_t rows = a.rows;
  const std::int64_t* slice_ptr = a.slice_ptr.data();
  const std::int32_t* col = a.col.data();
  const double* val = a.val.data();
  const std::int32_t* row_of = a.row_of.empty() ? nullptr : a.row_of.data();
#pragma omp parallel for num_threads(threads) schedule(runtime)
  for (std::int64_t s = 0; s < slices; ++s) {
    // lane l of slice s: y_row = sum_j val[(j, l)] x[col[(j, l)]], U columns j per step
    double acc[U][C] = {};
    const std::int64_t begin = slice_ptr[s];
    const std::int64_t width = (slice_ptr[s + 1] - begin) / C;
    const double* v = val + begin;
    const std::int32_t* c = col + begin;
    std::int64_t j = 0;
    for (; j + U <= width; j += U) {
      for (int u = 0; u < U; ++u) {
        const std::int64_t base = (j + u) * C;
#pragma omp simd
        for (int l = 0; l < C; ++l) acc[u][l] += v[base + l] * x[c[base + l]];
      }
    }
    for (; j < width; ++j) {
#pragma omp simd
      for (int l = 0; l < C; ++l) acc[0][l] += v[j * C + l] * x[c[j * C + l]];
    }
    const std::int64_t first = s * C;
    const int lanes = static_cast<int>(std::min<std::int64_t>(C, rows - first));
    for (int l = 0; l < lanes; ++l) {
      double sum = 0.0;
      for (int u = 0; u < U; ++u) sum += acc[u][l];
      y[row_of ? row_of[first + l] : first + l] = sum;
    }
  }
}

using CsrKernel = void (*)(const CsrMatrix&, const double*, double*, int);
using SellKernel = void (*)(const SellMatrix&, const double*, double*, int);

CsrKernel csr_kernel_for(int unroll) {
  switch (unroll) {
    case 1:
      return csr_kernel<1>;
    case 2:
      return csr_kernel<2>;
    case 4:
      return csr_kernel<4>;
    default:
      break;
  }
  throw InvalidInput("spmv: unroll " + std::to_string(unroll) +
                     " is not supported; allowed: 1, 2, 4");
}

template <int C>
SellKernel sell_kernel_for_unroll(int unroll) {
  switch (unroll) {
    case 1:
      return sell_kernel<C, 1>;
    case 2:
      return sell_kernel<C, 2>;
    case 4:
      return sell_kernel<C, 4>;
    default:
      break;
  }
  throw InvalidInput("spmv: unroll " + std::to_string(unroll) +
                     " is not supported; allowed: 1, 2, 4");
}

SellKernel sell_kernel_for(int slice_size, int unroll) {
  switch (slice_size) {
    case 4:
      return sell_kernel_for_unroll<4>(unroll);
    case 8:
      return sell_kernel_for_unroll<8>(unroll);
    case 16:
      return sell_kernel_for_unroll<16>(unroll);
    case 32:
      return sell_kernel_for_unroll<32>(unroll);
    default:
      break;
  }
  throw InvalidInput("spmv: SELL slice size " + std::to_string(slice_size) +
                     " has no compiled kernel; allowed: 4, 8, 16, 32");
}

template <std::size_t N>
std::vector<Value> values_of(const std::array<int, N>& list) {
  return {list.begin(), list.end()};
}

void check_matrix(const CsrMatrix& a) {
  const std::string what = "spmv: matrix '" + a.name + "'";
  if (a.rows < 0 || a.cols < 0) throw InvalidInput(what + " has a negative size");
  if (a.rows > kMaxRows) {
    throw InvalidInput(what + " has " + std::to_string(a.rows) + " rows; at most " +
                       std::to_string(kMaxRows) + " are supported");
  }
  if (a.row_ptr.size() != static_cast<std::size_t>(a.rows) + 1 || a.row_ptr.front() != 0 ||
      a.row_ptr.back() != a.nnz() || a.col.size() != a.val.size()) {
    throw InvalidInput(what +
                       " has inconsistent CSR arrays: row_ptr must hold rows + 1 "
                       "offsets from 0 to nnz, and col and val nnz entries each");
  }
  for (std::size_t r = 0; r + 1 < a.row_ptr.size(); ++r) {
    if (a.row_ptr[r] > a.row_ptr[r + 1]) {
      throw InvalidInput(what + ": row offsets decrease at row " + std::to_string(r));
    }
  }
  for (std::size_t k = 0; k < a.col.size(); ++k) {
    if (a.col[k] < 0 || a.col[k] >= a.cols) {
      throw InvalidInput(what + ": entry " + std::to_string(k) + " has column " +
                         std::to_string(a.col[k]) + ", outside 0.." + std::to_string(a.cols - 1));
    }
  }
}

/// The options with max_threads resolved; throws InvalidInput for values that cannot work.
SpmvOptions checked(SpmvOptions options) {
  if (options.repeats < 1) throw InvalidInput("spmv: repeats must be at least 1");
  if (options.warmup < 1) throw InvalidInput("spmv: warmup must be at least 1 (it is checked)");
  if (!(options.tolerance >= 0.0)) throw InvalidInput("spmv: tolerance must be non-negative");
  if (options.max_threads < 0) throw InvalidInput("spmv: max_threads must be 0 (all) or positive");
  if (options.max_threads == 0) options.max_threads = omp_get_num_procs();
  return options;
}

}  // namespace

std::size_t SellMatrix::matrix_bytes() const {
  return val.size() * sizeof(double) + col.size() * sizeof(std::int32_t) +
         slice_ptr.size() * sizeof(std::int64_t) + row_of.size() * sizeof(std::int32_t);
}

SellMatrix to_sell(const CsrMatrix& a, int slice_size, int sigma) {
  if (slice_size < 1 || sigma < 1) {
    throw InvalidInput("SELL-C-sigma needs C >= 1 and sigma >= 1, got C = " +
                       std::to_string(slice_size) + ", sigma = " + std::to_string(sigma));
  }
  if (a.rows > kMaxRows) {
    throw InvalidInput("SELL-C-sigma: matrix '" + a.name + "' has too many rows (" +
                       std::to_string(a.rows) + ")");
  }
  SellMatrix s;
  s.rows = a.rows;
  s.cols = a.cols;
  s.slice_size = slice_size;
  s.sigma = sigma;
  s.nnz = a.nnz();
  const std::int64_t rows = a.rows;
  auto length = [&](std::int64_t r) {
    return a.row_ptr[static_cast<std::size_t>(r) + 1] - a.row_ptr[static_cast<std::size_t>(r)];
  };
  if (sigma > 1) {
    // Longest rows first inside each window, so that rows of similar length share a slice.
    s.row_of.resize(static_cast<std::size_t>(rows));
    std::iota(s.row_of.begin(), s.row_of.end(), 0);
    for (std::int64_t w = 0; w < rows; w += sigma) {
      const auto begin = s.row_of.begin() + w;
      const auto end = s.row_of.begin() + std::min(rows, w + sigma);
      std::stable_sort(begin, end,
                       [&](std::int32_t p, std::int32_t q) { return length(p) > length(q); });
    }
  }
  auto row_at = [&](std::int64_t position) -> std::int64_t {
    return s.row_of.empty() ? position : s.row_of[static_cast<std::size_t>(position)];
  };
  const std::int64_t slices = (rows + slice_size - 1) / slice_size;
  s.slice_ptr.assign(static_cast<std::size_t>(slices) + 1, 0);
  for (std::int64_t sl = 0; sl < slices; ++sl) {
    std::int64_t width = 0;
    for (std::int64_t p = sl * slice_size; p < std::min(rows, (sl + 1) * slice_size); ++p) {
      width = std::max(width, length(row_at(p)));
    }
    s.slice_ptr[static_cast<std::size_t>(sl) + 1] =
        s.slice_ptr[static_cast<std::size_t>(sl)] + width * slice_size;
  }
  const auto slots = static_cast<std::size_t>(s.slice_ptr.back());
  s.col.resize(slots);
  s.val.resize(slots);
#pragma omp parallel for schedule(static)
  for (std::int64_t sl = 0; sl < slices; ++sl) {
    const std::int64_t begin = s.slice_ptr[static_cast<std::size_t>(sl)];
    const std::int64_t width = (s.slice_ptr[static_cast<std::size_t>(sl) + 1] - begin) / slice_size;
    for (int lane = 0; lane < slice_size; ++lane) {
      const std::int64_t p = sl * slice_size + lane;
      std::int64_t k = 0;
      std::int64_t len = 0;
      // Padding reads x at the row's last column (or column 0), already in cache.
      std::int32_t pad_col = 0;
      if (p < rows) {
        const std::int64_t r = row_at(p);
        k = a.row_ptr[static_cast<std::size_t>(r)];
        len = length(r);
        if (len > 0) pad_col = a.col[static_cast<std::size_t>(k + len - 1)];
      }
      for (std::int64_t j = 0; j < width; ++j) {
        const auto slot = static_cast<std::size_t>(begin + j * slice_size + lane);
        if (j < len) {
          s.col[slot] = a.col[static_cast<std::size_t>(k + j)];
          s.val[slot] = a.val[static_cast<std::size_t>(k + j)];
        } else {
          s.col[slot] = pad_col;
          s.val[slot] = 0.0;
        }
      }
    }
  }
  return s;
}

SearchSpace spmv_search_space(int max_threads) {
  if (max_threads < 1) {
    throw InvalidInput("spmv: max_threads must be at least 1, got " + std::to_string(max_threads));
  }
  std::vector<Value> threads;
  for (int t = 1; t < max_threads; t *= 2) threads.emplace_back(std::int64_t{t});
  threads.emplace_back(std::int64_t{max_threads});
  std::vector<Parameter> parameters{
      categorical("format", {std::string("csr"), std::string("sell")}, std::string("csr")),
      ordinal("slice_size", values_of(kSliceSizes), std::int64_t{kDefaultSliceSize}),
      ordinal("sigma", values_of(kSigmas), std::int64_t{1}, true),
      ordinal("unroll", values_of(kUnrolls), std::int64_t{1}),
      ordinal("threads", threads, std::int64_t{max_threads}),
      categorical("schedule",
                  {std::string("static"), std::string("dynamic"), std::string("guided")},
                  std::string("static")),
      ordinal("chunk", values_of(kChunks), std::int64_t{0}),
  };
  std::vector<std::string> constraints{
      // SELL-only parameters stay at their defaults for CSR.
      "format == 'sell' or (slice_size == " + std::to_string(kDefaultSliceSize) +
          " and sigma == 1)",
      "sigma == 1 or sigma % slice_size == 0",
      // One thread runs the loop in order whatever the schedule.
      "threads > 1 or (schedule == 'static' and chunk == 0)",
  };
  return SearchSpace(std::move(parameters), constraints);
}

SpmvVariant spmv_variant(const SearchSpace& space, const Configuration& config) {
  if (config.size() != space.dimension()) {
    throw InvalidInput("spmv: configuration has " + std::to_string(config.size()) +
                       " values but the space has " + std::to_string(space.dimension()) +
                       " parameters");
  }
  auto get = [&](const char* name) -> const Value& {
    const auto i = space.index_of(name);
    if (!i) throw InvalidInput(std::string("spmv: the space has no parameter '") + name + "'");
    return config[*i];
  };
  auto get_int = [&](const char* name) { return static_cast<int>(as_double(get(name))); };
  auto get_string = [&](const char* name) {
    const auto* s = std::get_if<std::string>(&get(name));
    if (!s) throw InvalidInput(std::string("spmv: parameter '") + name + "' must be a string");
    return *s;
  };
  SpmvVariant v;
  const auto format = get_string("format");
  if (format == "csr") {
    v.format = SpmvFormat::kCsr;
  } else if (format == "sell") {
    v.format = SpmvFormat::kSell;
  } else {
    throw InvalidInput("spmv: unknown format '" + format + "'; allowed: csr, sell");
  }
  const auto schedule = get_string("schedule");
  if (schedule == "static") {
    v.schedule = LoopSchedule::kStatic;
  } else if (schedule == "dynamic") {
    v.schedule = LoopSchedule::kDynamic;
  } else if (schedule == "guided") {
    v.schedule = LoopSchedule::kGuided;
  } else {
    throw InvalidInput("spmv: unknown schedule '" + schedule +
                       "'; allowed: static, dynamic, guided");
  }
  v.slice_size = get_int("slice_size");
  v.sigma = get_int("sigma");
  v.unroll = get_int("unroll");
  v.threads = get_int("threads");
  v.chunk = get_int("chunk");
  if (v.threads < 1) throw InvalidInput("spmv: threads must be at least 1");
  return v;
}

void spmv_csr(const CsrMatrix& a, const double* x, double* y, const SpmvVariant& variant) {
  const CsrKernel kernel = csr_kernel_for(variant.unroll);
  set_schedule(variant.schedule, variant.chunk);
  kernel(a, x, y, variant.threads);
}

void spmv_sell(const SellMatrix& a, const double* x, double* y, const SpmvVariant& variant) {
  const SellKernel kernel = sell_kernel_for(a.slice_size, variant.unroll);
  set_schedule(variant.schedule, variant.chunk);
  kernel(a, x, y, variant.threads);
}

std::optional<std::string> spmv_mismatch(const CsrMatrix& a, const std::vector<double>& x,
                                         const std::vector<double>& y,
                                         const std::vector<double>& reference, double tolerance) {
  if (y.size() != static_cast<std::size_t>(a.rows) || reference.size() != y.size()) {
    return "y has " + std::to_string(y.size()) + " entries, expected " + std::to_string(a.rows);
  }
  for (std::size_t r = 0; r < y.size(); ++r) {
    // bound_r = tolerance * sum_j |a_rj x_j|: rounding grows with the magnitudes summed
    double magnitude = 0.0;
    for (auto k = static_cast<std::size_t>(a.row_ptr[r]);
         k < static_cast<std::size_t>(a.row_ptr[r + 1]); ++k) {
      magnitude += std::abs(a.val[k] * x[static_cast<std::size_t>(a.col[k])]);
    }
    const double bound = tolerance * magnitude + std::numeric_limits<double>::min();
    // Equal infinities match: their difference is nan.
    const bool same = y[r] == reference[r] || (std::isnan(y[r]) && std::isnan(reference[r]));
    if (!same && !(std::abs(y[r] - reference[r]) <= bound)) {
      std::ostringstream message;
      message.precision(17);
      message << "y[" << r << "] = " << y[r] << " but the reference gives " << reference[r]
              << " (allowed difference " << bound << ")";
      return message.str();
    }
  }
  return std::nullopt;
}

SpmvEvaluator::SpmvEvaluator(CsrMatrix matrix, SpmvOptions options)
    : matrix_(std::move(matrix)),
      options_(checked(options)),
      space_(spmv_search_space(options_.max_threads)) {
  check_matrix(matrix_);
  if (matrix_.rows == 0 || matrix_.cols == 0) {
    throw InvalidInput("spmv: matrix '" + matrix_.name + "' is " + std::to_string(matrix_.rows) +
                       " x " + std::to_string(matrix_.cols) +
                       ": an empty product has nothing to tune; give a matrix with rows and "
                       "columns");
  }
  task_ = {{"matrix", matrix_.name}, {"features", matrix_features(matrix_)}};
  Rng rng(options_.seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  x_.resize(static_cast<std::size_t>(matrix_.cols));
  for (auto& v : x_) v = uniform(rng);
  spmv_reference(matrix_, x_, reference_);
  y_.resize(static_cast<std::size_t>(matrix_.rows));
}

SpmvEvaluator::~SpmvEvaluator() = default;

std::shared_ptr<const SellMatrix> SpmvEvaluator::sell(int slice_size, int sigma) {
  const auto key = std::make_pair(slice_size, sigma);
  ++use_counter_;
  if (auto it = cache_.find(key); it != cache_.end()) {
    it->second.last_used = use_counter_;
    return it->second.matrix;
  }
  auto converted = std::make_shared<const SellMatrix>(to_sell(matrix_, slice_size, sigma));
  cached_bytes_ += converted->matrix_bytes();
  cache_[key] = {converted, use_counter_};
  while (cached_bytes_ > options_.max_cached_bytes && cache_.size() > 1) {
    auto oldest = std::min_element(cache_.begin(), cache_.end(), [](const auto& p, const auto& q) {
      return p.second.last_used < q.second.last_used;
    });
    cached_bytes_ -= oldest->second.matrix->matrix_bytes();
    cache_.erase(oldest);
  }
  return converted;
}

void SpmvEvaluator::run(const SpmvVariant& variant, const SellMatrix* sell, const double* x,
                        double* y) const {
  if (sell) {
    spmv_sell(*sell, x, y, variant);
  } else {
    spmv_csr(matrix_, x, y, variant);
  }
}

std::size_t SpmvEvaluator::bytes_moved(const SpmvVariant& variant, const SellMatrix* sell) const {
  // x read once and y written once, plus every array of the stored matrix
  const std::size_t vectors =
      static_cast<std::size_t>(matrix_.cols + matrix_.rows) * sizeof(double);
  if (variant.format == SpmvFormat::kSell && sell) return sell->matrix_bytes() + vectors;
  return matrix_.val.size() * sizeof(double) + matrix_.col.size() * sizeof(std::int32_t) +
         matrix_.row_ptr.size() * sizeof(std::int64_t) + vectors;
}

std::size_t SpmvEvaluator::bytes_per_product(const Configuration& config) {
  space_.check(config);
  const SpmvVariant variant = spmv_variant(space_, config);
  std::shared_ptr<const SellMatrix> converted;
  if (variant.format == SpmvFormat::kSell) converted = sell(variant.slice_size, variant.sigma);
  return bytes_moved(variant, converted.get());
}

void SpmvEvaluator::multiply(const Configuration& config, const std::vector<double>& x,
                             std::vector<double>& y) {
  space_.check(config);
  if (static_cast<std::int64_t>(x.size()) != matrix_.cols) {
    throw InvalidInput("spmv: x has " + std::to_string(x.size()) + " entries but matrix '" +
                       matrix_.name + "' has " + std::to_string(matrix_.cols) + " columns");
  }
  const SpmvVariant variant = spmv_variant(space_, config);
  std::shared_ptr<const SellMatrix> converted;
  if (variant.format == SpmvFormat::kSell) converted = sell(variant.slice_size, variant.sigma);
  y.resize(static_cast<std::size_t>(matrix_.rows));
  run(variant, converted.get(), x.data(), y.data());
}

Measurement SpmvEvaluator::evaluate(const Configuration& config) {
  const auto start = Clock::now();
  if (!space_.is_valid(config)) {
    return Measurement::failure(
        TrialStatus::invalid,
        "configuration " + space_.config_to_json(config).dump() + " is not in the spmv space",
        seconds_since(start));
  }
  try {
    const SpmvVariant variant = spmv_variant(space_, config);
    std::shared_ptr<const SellMatrix> converted;
    if (variant.format == SpmvFormat::kSell) converted = sell(variant.slice_size, variant.sigma);
    const SellMatrix* sell_matrix = converted.get();

    // A kernel that skips rows must not pass on a previous variant's y.
    std::fill(y_.begin(), y_.end(), std::numeric_limits<double>::quiet_NaN());
    run(variant, sell_matrix, x_.data(), y_.data());
    if (auto mismatch = spmv_mismatch(matrix_, x_, y_, reference_, options_.tolerance)) {
      return Measurement::failure(TrialStatus::failed, "wrong result: " + *mismatch,
                                  seconds_since(start));
    }
    double single = 0.0;
    for (int w = 1; w < options_.warmup; ++w) {
      const auto t = Clock::now();
      run(variant, sell_matrix, x_.data(), y_.data());
      single = seconds_since(t);
    }
    if (single <= 0.0) {
      const auto t = Clock::now();
      run(variant, sell_matrix, x_.data(), y_.data());
      single = seconds_since(t);
    }
    const auto inner = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::ceil(options_.min_sample_seconds / std::max(single, 1e-9))),
        1, kMaxInnerRepetitions);

    std::vector<double> raw;
    raw.reserve(static_cast<std::size_t>(options_.repeats));
    for (int r = 0; r < options_.repeats; ++r) {
      const auto t = Clock::now();
      for (std::int64_t i = 0; i < inner; ++i) run(variant, sell_matrix, x_.data(), y_.data());
      raw.push_back(seconds_since(t) / static_cast<double>(inner));
    }
    // Races show up only sometimes: check the last timed product too.
    if (auto mismatch = spmv_mismatch(matrix_, x_, y_, reference_, options_.tolerance)) {
      return Measurement::failure(TrialStatus::failed, "wrong result after timing: " + *mismatch,
                                  seconds_since(start));
    }
    const double time = median(raw);
    const auto bytes = bytes_moved(variant, sell_matrix);
    Measurement m = Measurement::success(time, std::move(raw), seconds_since(start));
    // GFLOP/s = 2 nnz / t; GB/s = bytes moved / t
    m.metrics["GFLOP/s"] = 2.0 * static_cast<double>(matrix_.nnz()) / time * 1e-9;
    m.metrics["GB/s"] = static_cast<double>(bytes) / time * 1e-9;
    m.metrics["bytes"] = bytes;
    m.metrics["products_per_sample"] = inner;
    if (sell_matrix && sell_matrix->nnz > 0) {
      m.metrics["padding_ratio"] =
          static_cast<double>(sell_matrix->slots()) / static_cast<double>(sell_matrix->nnz);
    }
    return m;
  } catch (const std::bad_alloc&) {
    return Measurement::failure(
        TrialStatus::failed,
        "out of memory converting matrix '" + matrix_.name + "' for this configuration",
        seconds_since(start));
  }
}

}  // namespace tunebase
