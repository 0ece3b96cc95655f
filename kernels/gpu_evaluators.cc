#include "kernels/gpu_evaluators.h"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <new>
#include <random>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "gpu_kernel_sources.h"  // generated from kernels/opencl/*.cl and kernels/cuda/*.cu
#include "kernels/gpu_measure.h"
#include "kernels/opencl_backend.h"
#include "kernels/sparse_matrix.h"
#include "kernels/spmv.h"
#ifdef TUNEBASE_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tunebase {
namespace {

using gpu::check_config;
using gpu::check_work_group;
using gpu::Clock;
using gpu::compile_or_fail;
using gpu::failure;
using gpu::measure;
using gpu::with_extra;

constexpr std::int64_t kBytesPerFloat = sizeof(float);

bool is_cuda(const ComputeBackend& backend) { return backend.device().backend == "cuda"; }

const char* source_for(const ComputeBackend& backend, const std::string& kernel) {
  return gpu_kernel_source(backend.device().backend, kernel);
}

std::int64_t int_value(const SearchSpace& space, const Configuration& config,
                       const std::string& name) {
  const auto index = space.index_of(name);
  if (!index) throw InvalidInput("configuration lacks parameter '" + name + "'");
  return static_cast<std::int64_t>(as_double(config.at(*index)));
}

std::string string_value(const SearchSpace& space, const Configuration& config,
                         const std::string& name) {
  const auto index = space.index_of(name);
  if (!index) throw InvalidInput("configuration lacks parameter '" + name + "'");
  return to_string(config.at(*index));
}

std::vector<Value> ints(std::initializer_list<std::int64_t> values) {
  return {values.begin(), values.end()};
}

// A device copy of `v`; an empty vector still gets a (one-byte) buffer to pass as argument.
template <typename T>
std::unique_ptr<DeviceBuffer> upload(ComputeBackend& backend, const std::vector<T>& v) {
  auto buffer = backend.allocate(std::max<std::size_t>(1, v.size() * sizeof(T)));
  if (!v.empty()) backend.write(*buffer, v.data(), v.size() * sizeof(T));
  return buffer;
}

void fill_uniform(std::vector<float>& v, Rng& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto& x : v) x = uniform(rng);
}

}  // namespace

const char* gpu_kernel_source(const std::string& language, const std::string& kernel) {
  using namespace gpu_sources;
  if (language == "opencl" || language == "cuda") {
    const bool cuda = language == "cuda";
    if (kernel == "gemm") return cuda ? kCudaXgemm : kOpenclXgemm;
    if (kernel == "spmv") return cuda ? kCudaSpmv : kOpenclSpmv;
    if (kernel == "conv") return cuda ? kCudaConvolution : kOpenclConvolution;
  }
  throw InvalidInput("no GPU kernel source for '" + kernel + "' in '" + language +
                     "'; kernels: gemm, spmv, conv; languages: opencl, cuda");
}

DeviceLimits device_limits(const DeviceInfo& device, const GpuEvaluatorOptions& options) {
  DeviceLimits limits{device.max_work_group_size, device.local_memory_bytes};
  if (options.max_work_group_size) {
    limits.max_work_group_size = std::min(limits.max_work_group_size, *options.max_work_group_size);
  }
  if (options.local_memory_bytes) {
    limits.local_memory_bytes = std::min(limits.local_memory_bytes, *options.local_memory_bytes);
  }
  if (limits.max_work_group_size < 1 || limits.local_memory_bytes < 0) {
    throw InvalidInput("device limits must be positive: max_work_group_size " +
                       std::to_string(limits.max_work_group_size) + ", local_memory_bytes " +
                       std::to_string(limits.local_memory_bytes));
  }
  return limits;
}

// ------------------------------------------------------------------------------------ GEMM

namespace {
constexpr float kGemmAlpha = 0.75f;
constexpr float kGemmBeta = 0.5f;
// Worst-case rounding of a length-n float dot product is n eps |a||b|; both the device and
// the reference round, hence two of them.
constexpr double kGemmRoundingFactor = 2.0;
}  // namespace

struct GpuGemmEvaluator::Data {
  std::int64_t padded = 0;
  std::vector<float> c0;
  std::vector<float> reference;
  std::vector<float> bound;  // |alpha| |A| |B| + |beta| |C0|
  std::vector<float> result;
  std::unique_ptr<DeviceBuffer> a;
  std::unique_ptr<DeviceBuffer> b;
  std::unique_ptr<DeviceBuffer> c;
};

SearchSpace GpuGemmEvaluator::make_space(const DeviceLimits& limits) {
  // Values of ../shared/data/gpu/gemm's tune_params, in its order; defaults from CLBlast's
  // gemm_milo T1 file, with STRM = STRN = 0 (the only strides the dataset measured).
  std::vector<Parameter> parameters = {
      ordinal("MWG", ints({16, 32, 64, 128}), Value(std::int64_t{64})),
      ordinal("NWG", ints({16, 32, 64, 128}), Value(std::int64_t{64})),
      ordinal("KWG", ints({32}), Value(std::int64_t{32})),
      ordinal("MDIMC", ints({8, 16, 32}), Value(std::int64_t{32})),
      ordinal("NDIMC", ints({8, 16, 32}), Value(std::int64_t{32})),
      ordinal("MDIMA", ints({8, 16, 32}), Value(std::int64_t{32})),
      ordinal("NDIMB", ints({8, 16, 32}), Value(std::int64_t{32})),
      ordinal("KWI", ints({2}), Value(std::int64_t{2})),
      ordinal("VWM", ints({1, 2, 4, 8}), Value(std::int64_t{2})),
      ordinal("VWN", ints({1, 2, 4, 8}), Value(std::int64_t{2})),
      ordinal("STRM", ints({0}), Value(std::int64_t{0})),
      ordinal("STRN", ints({0}), Value(std::int64_t{0})),
      ordinal("SA", ints({0, 1}), Value(std::int64_t{1})),
      ordinal("SB", ints({0, 1}), Value(std::int64_t{1})),
      ordinal("PRECISION", ints({32}), Value(std::int64_t{32})),
  };
  std::vector<std::string> constraints = {
      // CLBlast's Xgemm divisibility rules: every per-work-item share is a whole number.
      "KWG % KWI == 0",
      "MWG % (MDIMC * VWM) == 0",
      "NWG % (NDIMC * VWN) == 0",
      "MWG % (MDIMA * VWM) == 0",
      "NWG % (NDIMB * VWN) == 0",
      "KWG % ((MDIMC * NDIMC) / MDIMA) == 0",
      "KWG % ((MDIMC * NDIMC) / NDIMB) == 0",
      // This device's limits.
      "MDIMC * NDIMC <= " + std::to_string(limits.max_work_group_size),
      "(SA * KWG * MWG + SB * KWG * NWG) * " + std::to_string(kBytesPerFloat) +
          " <= " + std::to_string(limits.local_memory_bytes),
  };
  return SearchSpace(std::move(parameters), constraints);
}

GpuGemmEvaluator::GpuGemmEvaluator(std::shared_ptr<ComputeBackend> backend, std::int64_t n,
                                   GpuEvaluatorOptions options)
    : backend_(std::move(backend)), options_(options), n_(n), data_(std::make_unique<Data>()) {
  if (!backend_) throw InvalidInput("GEMM evaluator: no compute backend given");
  if (n_ < 1) throw InvalidInput("GEMM size must be positive, got " + std::to_string(n_));
  if (options_.repeats < 1) {
    throw InvalidInput("repeats must be at least 1, got " + std::to_string(options_.repeats));
  }
  space_ = make_space(device_limits(backend_->device(), options_));

  auto& d = *data_;
  d.padded = static_cast<std::int64_t>(round_up(static_cast<std::size_t>(n_), kGemmPadding));
  const auto p = static_cast<std::size_t>(d.padded);
  const auto logical = static_cast<std::size_t>(n_);
  std::vector<float> a(p * p, 0.0f);
  std::vector<float> b(p * p, 0.0f);
  d.c0.assign(p * p, 0.0f);
  Rng rng(options_.seed);
  std::vector<float> values(logical * logical);
  // Zero padding outside the logical n x n block keeps the padded product equal to the real one.
  for (std::vector<float>* m : {&a, &b, &d.c0}) {
    fill_uniform(values, rng);
    for (std::size_t j = 0; j < logical; ++j) {
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(j * logical), logical,
                  m->begin() + static_cast<std::ptrdiff_t>(j * p));
    }
  }
  // B is row-major K x N, i.e. column-major N x K: hence CblasTrans on it.
  const auto ip = static_cast<int>(d.padded);
  d.reference = d.c0;
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, ip, ip, ip, kGemmAlpha, a.data(), ip,
              b.data(), ip, kGemmBeta, d.reference.data(), ip);
  auto absolute = [](std::vector<float> v) {
    for (auto& x : v) x = std::fabs(x);
    return v;
  };
  d.bound = absolute(d.c0);
  const auto abs_a = absolute(a);
  const auto abs_b = absolute(b);
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, ip, ip, ip, std::fabs(kGemmAlpha),
              abs_a.data(), ip, abs_b.data(), ip, std::fabs(kGemmBeta), d.bound.data(), ip);
  d.result.resize(p * p);

  const std::size_t bytes = p * p * sizeof(float);
  d.a = backend_->allocate(bytes);
  d.b = backend_->allocate(bytes);
  d.c = backend_->allocate(bytes);
  backend_->write(*d.a, a.data(), bytes);
  backend_->write(*d.b, b.data(), bytes);
}

GpuGemmEvaluator::~GpuGemmEvaluator() = default;

KernelBuild GpuGemmEvaluator::build_for(const SearchSpace& space, const Configuration& config) {
  return {"xgemm", defines_from(space, config)};
}

std::string GpuGemmEvaluator::kernel_name() const { return backend_->device().backend + "-gemm"; }

nlohmann::json GpuGemmEvaluator::task() const {
  return {{"m", n_}, {"n", n_}, {"k", n_}, {"precision", 32}};
}

Measurement GpuGemmEvaluator::evaluate(const Configuration& config) {
  const auto start = Clock::now();
  if (auto invalid = check_config(space_, config, start)) return *invalid;
  auto value = [&](const char* name) { return int_value(space_, config, name); };
  const std::int64_t mwg = value("MWG"), nwg = value("NWG");
  const std::int64_t mdimc = value("MDIMC"), ndimc = value("NDIMC");
  auto& d = *data_;

  std::optional<Measurement> failed;
  const KernelBuild build = build_for(space_, config);
  auto kernel = compile_or_fail(*backend_, source_for(*backend_, "gemm"), build.kernel_name,
                                with_extra(build.defines, options_.defines), failed, start);
  if (!kernel) return *failed;
  if (auto too_big = check_work_group(*kernel, mdimc * ndimc, backend_->device(), start)) {
    return *too_big;
  }

  const auto p = static_cast<std::size_t>(d.padded);
  const NdRange local = {static_cast<std::size_t>(mdimc), static_cast<std::size_t>(ndimc)};
  const NdRange global = {p / static_cast<std::size_t>(mwg) * local[0],
                          p / static_cast<std::size_t>(nwg) * local[1]};
  const auto size = static_cast<std::int32_t>(d.padded);
  const std::vector<KernelArg> args = {size,      size,      size,      kGemmAlpha,
                                       kGemmBeta, d.a.get(), d.b.get(), d.c.get()};
  bool first = true;
  auto launch = [&] {
    if (first) backend_->write(*d.c, d.c0.data(), p * p * sizeof(float));
    return backend_->launch(*kernel, global, local, args);
  };
  auto check = [&]() -> std::string {
    first = false;
    backend_->read(*d.c, d.result.data(), p * p * sizeof(float));
    const auto logical = static_cast<std::size_t>(n_);
    const double tolerance =
        kGemmRoundingFactor * static_cast<double>(d.padded) * std::numeric_limits<float>::epsilon();
    std::size_t wrong = 0;
    std::string first_wrong;
    for (std::size_t j = 0; j < logical; ++j) {
      for (std::size_t i = 0; i < logical; ++i) {
        const std::size_t at = j * p + i;
        const double allowed = tolerance * d.bound[at] + std::numeric_limits<float>::min();
        const double difference = std::fabs(static_cast<double>(d.result[at]) - d.reference[at]);
        if (!(difference <= allowed)) {  // NaN counts as wrong
          if (wrong++ == 0) {
            std::ostringstream s;
            s << "C(" << i << "," << j << ") = " << d.result[at] << ", OpenBLAS gives "
              << d.reference[at] << " (allowed difference " << allowed << ")";
            first_wrong = s.str();
          }
        }
      }
    }
    if (wrong == 0) return "";
    return first_wrong + "; " + std::to_string(wrong) + " of " + std::to_string(logical * logical) +
           " elements differ";
  };
  const double flops = 2.0 * std::pow(static_cast<double>(n_), 3);
  return measure(launch, check, options_, flops, start);
}

// ------------------------------------------------------------------------------------ SpMV

namespace {
const std::vector<std::string> kSpmvVariants = {"csr_scalar", "csr_vector", "sell"};
// SELL copies of the matrix kept on the device (each as large as the matrix plus padding).
constexpr std::size_t kMaxSellLayouts = 4;
}  // namespace

struct GpuSpmvEvaluator::Data {
  std::vector<double> x;
  std::vector<double> reference;
  std::vector<double> y;
  std::unique_ptr<DeviceBuffer> row_ptr;
  std::unique_ptr<DeviceBuffer> col;
  std::unique_ptr<DeviceBuffer> val;
  std::unique_ptr<DeviceBuffer> x_buffer;
  std::unique_ptr<DeviceBuffer> y_buffer;
  // SELL-C-sigma copies on the device, per (C, sigma).
  struct Sell {
    std::unique_ptr<DeviceBuffer> slice_ptr;
    std::unique_ptr<DeviceBuffer> row_of;
    std::unique_ptr<DeviceBuffer> col;
    std::unique_ptr<DeviceBuffer> val;
    bool permuted = false;
  };
  std::map<std::pair<int, int>, Sell> sell;
  std::deque<std::pair<int, int>> sell_order;  // oldest first
};

SearchSpace GpuSpmvEvaluator::make_space(const DeviceLimits& limits) {
  std::vector<Value> variants(kSpmvVariants.begin(), kSpmvVariants.end());
  std::vector<Parameter> parameters = {
      categorical("variant", variants, Value(std::string("csr_vector"))),
      ordinal("block_size", ints({32, 64, 128, 256, 512}), Value(std::int64_t{128}), true),
      ordinal("threads_per_row", ints({1, 2, 4, 8, 16, 32}), Value(std::int64_t{8}), true),
      ordinal("sigma", ints({1, 512, 4096}), Value(std::int64_t{1}), true),
  };
  std::vector<std::string> constraints = {
      // One work-item per row except in the vector variant, which needs at least two.
      "variant == 'csr_vector' or threads_per_row == 1",
      "variant != 'csr_vector' or threads_per_row > 1",
      "block_size % threads_per_row == 0",
      // Only SELL sorts rows.
      "variant == 'sell' or sigma == 1",
      "sigma == 1 or sigma % block_size == 0",
      "block_size <= " + std::to_string(limits.max_work_group_size),
  };
  return SearchSpace(std::move(parameters), constraints);
}

GpuSpmvEvaluator::GpuSpmvEvaluator(std::shared_ptr<ComputeBackend> backend, CsrMatrix matrix,
                                   GpuEvaluatorOptions options)
    : backend_(std::move(backend)),
      options_(options),
      matrix_(std::move(matrix)),
      data_(std::make_unique<Data>()) {
  if (!backend_) throw InvalidInput("SpMV evaluator: no compute backend given");
  if (!backend_->device().double_precision) {
    throw BackendError("SpMV runs in double precision, which " + backend_->device().name +
                       " does not support");
  }
  if (options_.repeats < 1) {
    throw InvalidInput("repeats must be at least 1, got " + std::to_string(options_.repeats));
  }
  const auto& a = matrix_;
  if (a.rows < 1 || a.nnz() > std::numeric_limits<std::int32_t>::max() ||
      a.rows >= std::numeric_limits<std::int32_t>::max() ||
      a.row_ptr.size() != static_cast<std::size_t>(a.rows) + 1 || a.col.size() != a.val.size()) {
    throw InvalidInput("SpMV matrix '" + a.name + "' must have 1 to 2^31-1 rows and entries " +
                       "with consistent row offsets; it has " + std::to_string(a.rows) +
                       " rows and " + std::to_string(a.nnz()) + " entries");
  }
  space_ = make_space(device_limits(backend_->device(), options_));

  auto& d = *data_;
  d.x.resize(static_cast<std::size_t>(a.cols));
  Rng rng(options_.seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (auto& v : d.x) v = uniform(rng);
  d.reference.resize(static_cast<std::size_t>(a.rows));
  spmv_reference(a, d.x, d.reference);
  d.y.resize(d.reference.size());

  std::vector<std::int32_t> row_ptr(a.row_ptr.begin(), a.row_ptr.end());
  d.row_ptr = upload(*backend_, row_ptr);
  d.col = upload(*backend_, a.col);
  d.val = upload(*backend_, a.val);
  d.x_buffer = upload(*backend_, d.x);
  d.y_buffer = backend_->allocate(d.y.size() * sizeof(double));
}

GpuSpmvEvaluator::~GpuSpmvEvaluator() = default;

KernelBuild GpuSpmvEvaluator::build_for(const SearchSpace& space, const Configuration& config,
                                        bool permuted) {
  return {"spmv_" + string_value(space, config, "variant"),
          {{"BLOCK_SIZE", std::to_string(int_value(space, config, "block_size"))},
           {"THREADS_PER_ROW", std::to_string(int_value(space, config, "threads_per_row"))},
           {"SELL_PERMUTED", permuted ? "1" : "0"}}};
}

std::string GpuSpmvEvaluator::kernel_name() const { return backend_->device().backend + "-spmv"; }

nlohmann::json GpuSpmvEvaluator::task() const {
  return {{"matrix", matrix_.name}, {"features", matrix_features(matrix_)}};
}

Measurement GpuSpmvEvaluator::evaluate(const Configuration& config) {
  const auto start = Clock::now();
  if (auto invalid = check_config(space_, config, start)) return *invalid;
  const std::string variant = string_value(space_, config, "variant");
  const auto block_size = static_cast<int>(int_value(space_, config, "block_size"));
  const auto threads_per_row = static_cast<int>(int_value(space_, config, "threads_per_row"));
  const auto sigma = static_cast<int>(int_value(space_, config, "sigma"));
  auto& d = *data_;
  const auto rows = static_cast<std::int32_t>(matrix_.rows);

  std::vector<KernelArg> args;
  std::size_t groups = 0;
  bool permuted = false;
  try {
    if (variant == "sell") {
      const std::pair<int, int> key{block_size, sigma};
      auto it = d.sell.find(key);
      if (it == d.sell.end()) {
        if (d.sell.size() >= kMaxSellLayouts) {
          d.sell.erase(d.sell_order.front());
          d.sell_order.pop_front();
        }
        const SellMatrix s = to_sell(matrix_, block_size, sigma);
        if (s.slots() > std::numeric_limits<std::int32_t>::max()) {
          return failure(TrialStatus::failed,
                         "SELL-" + std::to_string(block_size) + "-" + std::to_string(sigma) +
                             " needs " + std::to_string(s.slots()) +
                             " slots, more than 32-bit indices address",
                         start);
        }
        // Cached only once every buffer is on the device: an upload that fails (device memory
        // full) must leave no entry whose missing buffers the next evaluation would launch with.
        Data::Sell sell;
        std::vector<std::int32_t> slice_ptr(s.slice_ptr.begin(), s.slice_ptr.end());
        sell.slice_ptr = upload(*backend_, slice_ptr);
        sell.row_of = upload(*backend_, s.row_of);
        sell.col = upload(*backend_, s.col);
        sell.val = upload(*backend_, s.val);
        sell.permuted = !s.row_of.empty();
        it = d.sell.emplace(key, std::move(sell)).first;
        d.sell_order.push_back(key);
      }
      const auto& sell = it->second;
      permuted = sell.permuted;
      args = {rows,           sell.slice_ptr.get(), sell.row_of.get(), sell.col.get(),
              sell.val.get(), d.x_buffer.get(),     d.y_buffer.get()};
      groups = (static_cast<std::size_t>(rows) + block_size - 1) / block_size;
    } else {
      args = {rows, d.row_ptr.get(), d.col.get(), d.val.get(), d.x_buffer.get(), d.y_buffer.get()};
      const int rows_per_group =
          variant == "csr_vector" ? block_size / threads_per_row : block_size;
      groups = (static_cast<std::size_t>(rows) + rows_per_group - 1) / rows_per_group;
    }
  } catch (const BackendError& e) {
    return failure(TrialStatus::failed, e.what(), start);
  } catch (const std::bad_alloc&) {
    // As the CPU evaluator: a layout too large for this host's memory fails this configuration.
    return failure(TrialStatus::failed,
                   "out of memory converting matrix '" + matrix_.name + "' for this configuration",
                   start);
  }

  std::optional<Measurement> failed;
  const KernelBuild build = build_for(space_, config, permuted);
  auto kernel = compile_or_fail(*backend_, source_for(*backend_, "spmv"), build.kernel_name,
                                with_extra(build.defines, options_.defines), failed, start);
  if (!kernel) return *failed;
  if (auto too_big = check_work_group(*kernel, block_size, backend_->device(), start)) {
    return *too_big;
  }

  const NdRange local = {static_cast<std::size_t>(block_size)};
  const NdRange global = {groups * static_cast<std::size_t>(block_size)};
  auto launch = [&] { return backend_->launch(*kernel, global, local, args); };
  auto check = [&]() -> std::string {
    backend_->read(*d.y_buffer, d.y.data(), d.y.size() * sizeof(double));
    const auto mismatch = spmv_mismatch(matrix_, d.x, d.y, d.reference, kTolerance);
    return mismatch ? *mismatch : "";
  };
  // Start from a poisoned y so that rows a variant forgets are caught.
  std::vector<double> poison(d.y.size(), std::numeric_limits<double>::quiet_NaN());
  try {
    backend_->write(*d.y_buffer, poison.data(), poison.size() * sizeof(double));
  } catch (const BackendError& e) {
    return failure(TrialStatus::failed, e.what(), start);
  }
  const double flops = 2.0 * static_cast<double>(matrix_.nnz());
  return measure(launch, check, options_, flops, start);
}

// ----------------------------------------------------------------------------- convolution

namespace {
constexpr std::int64_t kFilterSize = 15;  // the convolution dataset's filter_width/height
constexpr std::int64_t kDatasetSharedFloats = 12 * 1024;
// Worst-case rounding of a float sum of k products is k eps sum |a b|; device and CPU both round.
constexpr double kConvolutionRoundingFactor = 2.0;
}  // namespace

struct GpuConvolutionEvaluator::Data {
  std::int64_t input_width = 0;
  std::int64_t input_height = 0;
  std::vector<float> filter;
  std::vector<float> reference;
  std::vector<float> bound;  // sum |in| |filter| per output pixel
  std::vector<float> output;
  std::unique_ptr<DeviceBuffer> input_buffer;
  std::unique_ptr<DeviceBuffer> output_buffer;
  std::unique_ptr<DeviceBuffer> filter_buffer;
};

SearchSpace GpuConvolutionEvaluator::make_space(const DeviceLimits& limits) {
  // convolution_hub's tune_params and T1 defaults, in its order.
  std::vector<Value> block_x;
  for (std::int64_t b = 16; b <= 256; b += 16) block_x.emplace_back(b);
  std::vector<Parameter> parameters = {
      ordinal("block_size_x", block_x, Value(std::int64_t{16})),
      ordinal("block_size_y", ints({1, 2, 4, 8, 16}), Value(std::int64_t{16})),
      ordinal("tile_size_x", ints({1, 2, 3, 4}), Value(std::int64_t{1})),
      ordinal("tile_size_y", ints({1, 2, 3, 4}), Value(std::int64_t{1})),
      ordinal("read_only", ints({0, 1}), Value(std::int64_t{0})),
      ordinal("use_padding", ints({0, 1}), Value(std::int64_t{1})),
      ordinal("use_shmem", ints({0, 1}), Value(std::int64_t{1})),
      ordinal("use_cmem", ints({1}), Value(std::int64_t{1})),
      ordinal("filter_height", ints({kFilterSize}), Value(kFilterSize)),
      ordinal("filter_width", ints({kFilterSize}), Value(kFilterSize)),
  };
  const std::string tile_floats =
      "((block_size_x * tile_size_x + (filter_width - 1)) * "
      "(block_size_y * tile_size_y + (filter_height - 1)))";
  std::vector<std::string> constraints = {
      // The dataset's own restrictions.
      "use_padding == 0 or block_size_x % 32 != 0",
      "block_size_x * block_size_y <= 1024",
      "use_padding == 0 or use_shmem != 0",
      "use_shmem == 0 or " + tile_floats + " < " + std::to_string(kDatasetSharedFloats),
      // This device's limits (padding adds under one bank width per row).
      "block_size_x * block_size_y <= " + std::to_string(limits.max_work_group_size),
      "use_shmem == 0 or (" + tile_floats + " + 32 * (block_size_y * tile_size_y + " +
          "filter_height - 1)) * " + std::to_string(kBytesPerFloat) +
          " <= " + std::to_string(limits.local_memory_bytes),
  };
  return SearchSpace(std::move(parameters), constraints);
}

GpuConvolutionEvaluator::GpuConvolutionEvaluator(std::shared_ptr<ComputeBackend> backend,
                                                 std::int64_t width, std::int64_t height,
                                                 GpuEvaluatorOptions options)
    : backend_(std::move(backend)),
      options_(options),
      width_(width),
      height_(height),
      data_(std::make_unique<Data>()) {
  if (!backend_) throw InvalidInput("convolution evaluator: no compute backend given");
  if (width_ < 1 || height_ < 1) {
    throw InvalidInput("convolution image must be at least 1 x 1, got " + std::to_string(width_) +
                       " x " + std::to_string(height_));
  }
  if (options_.repeats < 1) {
    throw InvalidInput("repeats must be at least 1, got " + std::to_string(options_.repeats));
  }
  space_ = make_space(device_limits(backend_->device(), options_));

  auto& d = *data_;
  d.input_width = width_ + kFilterSize - 1;
  d.input_height = height_ + kFilterSize - 1;
  Rng rng(options_.seed);
  std::vector<float> input(static_cast<std::size_t>(d.input_width * d.input_height));
  fill_uniform(input, rng);
  d.filter.resize(static_cast<std::size_t>(kFilterSize * kFilterSize));
  fill_uniform(d.filter, rng);

  // out[y][x] = sum_{i,j} in[y + i][x + j] * filter[i][j], accumulated in double.
  const auto pixels = static_cast<std::size_t>(width_ * height_);
  d.reference.resize(pixels);
  d.bound.resize(pixels);
  for (std::int64_t y = 0; y < height_; ++y) {
    for (std::int64_t x = 0; x < width_; ++x) {
      double sum = 0.0;
      double magnitude = 0.0;
      for (std::int64_t i = 0; i < kFilterSize; ++i) {
        for (std::int64_t j = 0; j < kFilterSize; ++j) {
          const double product =
              static_cast<double>(
                  input[static_cast<std::size_t>((y + i) * d.input_width + x + j)]) *
              d.filter[static_cast<std::size_t>(i * kFilterSize + j)];
          sum += product;
          magnitude += std::fabs(product);
        }
      }
      d.reference[static_cast<std::size_t>(y * width_ + x)] = static_cast<float>(sum);
      d.bound[static_cast<std::size_t>(y * width_ + x)] = static_cast<float>(magnitude);
    }
  }
  d.output.resize(pixels);
  d.input_buffer = backend_->allocate(input.size() * sizeof(float));
  backend_->write(*d.input_buffer, input.data(), input.size() * sizeof(float));
  d.output_buffer = backend_->allocate(pixels * sizeof(float));
  d.filter_buffer = backend_->allocate(d.filter.size() * sizeof(float));
  backend_->write(*d.filter_buffer, d.filter.data(), d.filter.size() * sizeof(float));
}

GpuConvolutionEvaluator::~GpuConvolutionEvaluator() = default;

KernelBuild GpuConvolutionEvaluator::build_for(const SearchSpace& space,
                                               const Configuration& config, std::int64_t width,
                                               std::int64_t height) {
  // Upper-case names: OpenCL C reserves read_only as an image access qualifier.
  KernelBuild build{"convolution", {}};
  for (const auto& [name, text] : defines_from(space, config)) {
    std::string upper = name;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    build.defines[upper] = text;
  }
  build.defines["IMAGE_WIDTH"] = std::to_string(width);
  build.defines["IMAGE_HEIGHT"] = std::to_string(height);
  return build;
}

std::string GpuConvolutionEvaluator::kernel_name() const {
  return backend_->device().backend + "-conv";
}

nlohmann::json GpuConvolutionEvaluator::task() const {
  return {{"image_width", width_}, {"image_height", height_}};
}

Measurement GpuConvolutionEvaluator::evaluate(const Configuration& config) {
  const auto start = Clock::now();
  if (auto invalid = check_config(space_, config, start)) return *invalid;
  auto value = [&](const char* name) {
    return static_cast<std::size_t>(int_value(space_, config, name));
  };
  const std::size_t bx = value("block_size_x"), by = value("block_size_y");
  const std::size_t tx = value("tile_size_x"), ty = value("tile_size_y");
  auto& d = *data_;

  std::optional<Measurement> failed;
  const KernelBuild build = build_for(space_, config, width_, height_);
  auto kernel = compile_or_fail(*backend_, source_for(*backend_, "conv"), build.kernel_name,
                                with_extra(build.defines, options_.defines), failed, start);
  if (!kernel) return *failed;
  if (auto too_big = check_work_group(*kernel, static_cast<std::int64_t>(bx * by),
                                      backend_->device(), start)) {
    return *too_big;
  }

  const NdRange local = {bx, by};
  const NdRange global = {round_up(static_cast<std::size_t>(width_), bx * tx) / tx,
                          round_up(static_cast<std::size_t>(height_), by * ty) / ty};
  std::vector<KernelArg> args = {d.output_buffer.get(), d.input_buffer.get()};
  if (is_cuda(*backend_) && value("use_cmem") == 1) {
    // CUDA kernel parameters live in constant memory: the filter travels by value.
    const auto* bytes = reinterpret_cast<const unsigned char*>(d.filter.data());
    args.emplace_back(ByValue{{bytes, bytes + d.filter.size() * sizeof(float)}});
  } else {
    args.emplace_back(d.filter_buffer.get());
  }
  auto launch = [&] { return backend_->launch(*kernel, global, local, args); };
  auto check = [&]() -> std::string {
    backend_->read(*d.output_buffer, d.output.data(), d.output.size() * sizeof(float));
    const double tolerance = kConvolutionRoundingFactor * kFilterSize * kFilterSize *
                             std::numeric_limits<float>::epsilon();
    std::size_t wrong = 0;
    std::string first_wrong;
    for (std::size_t i = 0; i < d.output.size(); ++i) {
      const double allowed = tolerance * d.bound[i] + std::numeric_limits<float>::min();
      if (!(std::fabs(static_cast<double>(d.output[i]) - d.reference[i]) <= allowed)) {
        if (wrong++ == 0) {
          std::ostringstream s;
          s << "pixel (" << i % static_cast<std::size_t>(width_) << ","
            << i / static_cast<std::size_t>(width_) << ") = " << d.output[i] << ", CPU reference "
            << d.reference[i] << " (allowed difference " << allowed << ")";
          first_wrong = s.str();
        }
      }
    }
    if (wrong == 0) return "";
    return first_wrong + "; " + std::to_string(wrong) + " of " + std::to_string(d.output.size()) +
           " pixels differ";
  };
  // Stale results from an earlier configuration must not pass the check.
  std::vector<float> poison(d.output.size(), std::numeric_limits<float>::quiet_NaN());
  try {
    backend_->write(*d.output_buffer, poison.data(), poison.size() * sizeof(float));
  } catch (const BackendError& e) {
    return failure(TrialStatus::failed, e.what(), start);
  }
  const double flops = 2.0 * static_cast<double>(width_ * height_ * kFilterSize * kFilterSize);
  return measure(launch, check, options_, flops, start);
}

// -------------------------------------------------------------------------------- factory

namespace {

const std::vector<std::string> kFactoryOptions = {"device",
                                                  "size",
                                                  "matrix",
                                                  "repeats",
                                                  "seed",
                                                  "time_limit",
                                                  "max_work_group_size",
                                                  "local_memory_bytes"};

std::optional<std::int64_t> optional_int(const nlohmann::json& options, const std::string& key) {
  if (!options.contains(key) || options[key].is_null()) return std::nullopt;
  const auto& v = options[key];
  if (!v.is_number_integer()) {
    throw InvalidInput("option '" + key + "' must be an integer, got " + v.dump());
  }
  return v.get<std::int64_t>();
}

struct FactoryInput {
  std::size_t device = 0;
  std::optional<std::int64_t> size;
  std::optional<std::string> matrix;
  GpuEvaluatorOptions options;
};

FactoryInput parse_factory_options(const nlohmann::json& options) {
  FactoryInput in;
  if (options.is_null()) return in;
  if (!options.is_object()) {
    throw InvalidInput("evaluator options must be a JSON object, got " + options.dump());
  }
  for (const auto& [key, value] : options.items()) {
    if (std::find(kFactoryOptions.begin(), kFactoryOptions.end(), key) == kFactoryOptions.end()) {
      std::string allowed;
      for (const auto& k : kFactoryOptions) allowed += (allowed.empty() ? "" : ", ") + k;
      throw InvalidInput("unknown GPU evaluator option '" + key + "'; allowed: " + allowed);
    }
  }
  if (auto device = optional_int(options, "device")) {
    if (*device < 0) throw InvalidInput("option 'device' must be >= 0");
    in.device = static_cast<std::size_t>(*device);
  }
  in.size = optional_int(options, "size");
  if (in.size && *in.size < 1) {
    throw InvalidInput("option 'size' must be positive, got " + std::to_string(*in.size));
  }
  if (options.contains("matrix") && !options["matrix"].is_null()) {
    if (!options["matrix"].is_string()) throw InvalidInput("option 'matrix' must be a file path");
    in.matrix = options["matrix"].get<std::string>();
  }
  if (auto repeats = optional_int(options, "repeats")) {
    if (*repeats < 1) throw InvalidInput("option 'repeats' must be at least 1");
    in.options.repeats = static_cast<int>(*repeats);
  }
  if (auto seed = optional_int(options, "seed"))
    in.options.seed = static_cast<std::uint64_t>(*seed);
  if (options.contains("time_limit") && !options["time_limit"].is_null()) {
    const auto& limit = options["time_limit"];
    if (!limit.is_number() || limit.get<double>() < 0) {
      throw InvalidInput("option 'time_limit' must be a number of seconds >= 0, got " +
                         limit.dump());
    }
    in.options.time_limit_seconds = limit.get<double>();
  }
  in.options.max_work_group_size = optional_int(options, "max_work_group_size");
  in.options.local_memory_bytes = optional_int(options, "local_memory_bytes");
  return in;
}

// An option the kernel would not read must not pass silently: GEMM and convolution take a
// size, SpMV a matrix file or the size of a generated Laplacian, not both.
void check_kernel_options(const std::string& kernel, const std::string& which,
                          const FactoryInput& in) {
  const std::string common =
      "device, repeats, seed, time_limit, max_work_group_size, "
      "local_memory_bytes";
  if (which != "spmv" && in.matrix) {
    throw InvalidInput(kernel + " does not read a matrix file; it takes size, " + common);
  }
  if (which == "spmv" && in.matrix && in.size) {
    throw InvalidInput(kernel +
                       " takes either a matrix file or the size of a generated Laplacian, not "
                       "both; its other options: " +
                       common);
  }
}

constexpr std::int64_t kDefaultGemmSize = 1024;
constexpr std::int64_t kDefaultImageSize = 1024;
constexpr std::int64_t kDefaultLaplacianGrid = 64;

// Bytes per element of an n x n problem, counted generously: the host's inputs, output and
// reference result, and the device's copies (on PoCL the device's memory is the host's too).
constexpr double kGemmBytesPerElement = 7 * sizeof(float);
constexpr double kConvBytesPerPixel = 6 * sizeof(float);

// A size whose arrays would not fit in half this machine's memory is refused before they are
// made (it ended in std::bad_alloc, or in swapping for minutes): unlike a matrix, which is
// what it is, a square problem can be asked smaller, and the largest that fits is said.
void check_square_fits_in_memory(const std::string& which, std::int64_t size,
                                 double bytes_per_element) {
  const auto memory = static_cast<double>(physical_memory_bytes());
  if (!(memory > 0)) return;
  const double n = static_cast<double>(size);
  const double needed = bytes_per_element * n * n;
  if (needed <= 0.5 * memory) return;
  const auto largest = static_cast<std::int64_t>(std::sqrt(0.5 * memory / bytes_per_element));
  char text[160];
  std::snprintf(text, sizeof text, "about %.3g GB, more than half this machine's %.3g GB",
                needed / 1e9, memory / 1e9);
  throw InvalidInput("the " + which + " kernel's size " + std::to_string(size) + " (" +
                     std::to_string(size) + " x " + std::to_string(size) + ") needs " + text +
                     "; give a size of at most " + std::to_string(largest));
}

void check_problem_fits(const std::string& which, const FactoryInput& in) {
  if (which == "gemm") {
    check_square_fits_in_memory("gemm", in.size.value_or(kDefaultGemmSize), kGemmBytesPerElement);
  } else if (which == "conv") {
    check_square_fits_in_memory("convolution", in.size.value_or(kDefaultImageSize),
                                kConvBytesPerPixel);
  }
}

std::unique_ptr<Evaluator> make_gpu_evaluator(std::shared_ptr<ComputeBackend> backend,
                                              const std::string& which, const FactoryInput& in) {
  if (which == "gemm") {
    return std::make_unique<GpuGemmEvaluator>(std::move(backend),
                                              in.size.value_or(kDefaultGemmSize), in.options);
  }
  if (which == "conv") {
    const auto size = in.size.value_or(kDefaultImageSize);
    return std::make_unique<GpuConvolutionEvaluator>(std::move(backend), size, size, in.options);
  }
  // spmv
  CsrMatrix matrix = in.matrix ? read_matrix_market(*in.matrix)
                               : laplacian_3d(in.size.value_or(kDefaultLaplacianGrid));
  return std::make_unique<GpuSpmvEvaluator>(std::move(backend), std::move(matrix), in.options);
}

// "opencl-gemm" -> "gemm" when the prefix matches and the rest is a known kernel.
std::string kernel_suffix(const std::string& kernel, const std::string& prefix) {
  static const std::vector<std::string> kKinds = {"gemm", "spmv", "conv"};
  for (const auto& kind : kKinds) {
    if (kernel == prefix + "-" + kind) return kind;
  }
  throw InvalidInput("unknown GPU kernel '" + kernel + "'; allowed: " + prefix + "-gemm, " +
                     prefix + "-spmv, " + prefix + "-conv");
}

}  // namespace

nlohmann::json compute_devices() {
  nlohmann::json devices = opencl_devices();
#ifdef TUNEBASE_HAVE_CUDA
  for (auto& device : cuda_devices()) devices.push_back(std::move(device));
#endif
  return devices;
}

std::unique_ptr<Evaluator> make_opencl_evaluator(const std::string& kernel,
                                                 const nlohmann::json& options) {
  const std::string which = kernel_suffix(kernel, "opencl");
  const FactoryInput in = parse_factory_options(options);
  check_kernel_options(kernel, which, in);
  check_problem_fits(which, in);
  return make_gpu_evaluator(std::make_shared<OpenclBackend>(in.device), which, in);
}

std::unique_ptr<Evaluator> make_cuda_evaluator(const std::string& kernel,
                                               const nlohmann::json& options) {
  const std::string which = kernel_suffix(kernel, "cuda");
  const FactoryInput in = parse_factory_options(options);
  check_kernel_options(kernel, which, in);
  check_problem_fits(which, in);
#ifdef TUNEBASE_HAVE_CUDA
  return make_gpu_evaluator(std::make_shared<CudaBackend>(static_cast<int>(in.device)), which, in);
#else
  (void)which;
  throw BackendError("kernel '" + kernel + "' needs CUDA, but tunebase was built without it " +
                     "(configure with -DTUNEBASE_WITH_CUDA=ON where nvcc is installed)");
#endif
}

}  // namespace tunebase
