// Evaluators of our GPU kernels (tiled SGEMM, SpMV, 2D convolution) on any ComputeBackend:
// OpenCL (PoCL on this CPU, a GPU driver elsewhere) or CUDA. Every measured configuration is
// checked against a CPU reference; compile errors, launch errors and wrong results become
// failed measurements carrying the back end's message, and the sweep goes on.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/space.h"
#include "core/trial.h"
#include "kernels/compute_backend.h"
#include "kernels/evaluator.h"
#include "kernels/sparse_matrix.h"

namespace tunebase {

/// Options common to the GPU evaluators. Each evaluator's objective is the median device
/// time of one launch in milliseconds (from the back end's events); metrics add GFLOP/s and
/// wall_time_ms, the median host-side time of a launch (enqueue, run, wait), which shows the
/// launch overhead that matters for small problems.
struct GpuEvaluatorOptions {
  /// Timed launches after the checked warm-up launch; the objective is their median.
  int repeats = 5;
  /// Seed of the random inputs.
  std::uint64_t seed = 42;
  /// Seconds the timed launches of one configuration may take (0: no limit). When the
  /// checked warm-up launch shows that the repeats would exceed it, the configuration is
  /// reported as a timeout (its warm-up time in raw) instead of being timed.
  double time_limit_seconds = 0.0;
  /// Limits to tune for instead of the device's own (smaller values only narrow the space):
  /// to share a space with a smaller GPU, or to exercise the limit checks in tests.
  std::optional<std::int64_t> max_work_group_size;
  std::optional<std::int64_t> local_memory_bytes;
  /// Extra -D defines for every compile, as Kernel Tuner's `defines`; a name that is also a
  /// parameter overrides the configuration's value (experiments, tests of failure paths).
  Defines defines;
};

/// What an evaluator compiles for one configuration: the kernel's name in the source and its
/// -D defines (before GpuEvaluatorOptions::defines). With gpu_kernel_source() this lets a
/// configuration be compiled without running it, e.g. by NVRTC on a machine without a GPU.
struct KernelBuild {
  std::string kernel_name;
  Defines defines;
};

/// The embedded source of kernel "gemm", "spmv" or "conv" in language "opencl" or "cuda".
/// Throws InvalidInput for anything else.
const char* gpu_kernel_source(const std::string& language, const std::string& kernel);

/// The limits a space is built for: the device's, lowered by the options.
struct DeviceLimits {
  std::int64_t max_work_group_size = 0;
  std::int64_t local_memory_bytes = 0;
};
DeviceLimits device_limits(const DeviceInfo& device, const GpuEvaluatorOptions& options);

/// SGEMM C = alpha A B + beta C on n x n matrices with A column-major, B row-major and C
/// column-major (see kernels/opencl/xgemm.cl), tuned over CLBlast Xgemm's parameters with the
/// value lists of ../shared/data/gpu/gemm (MWG NWG KWG MDIMC NDIMC MDIMA NDIMB KWI VWM VWN
/// STRM STRN SA SB PRECISION) and its divisibility constraints, plus the device limits. n is
/// padded with zeros to a multiple of kGemmPadding; GFLOP/s count the logical 2 n^3 flops.
/// The objective is the median kernel time in milliseconds (Kernel Tuner's unit). The
/// reference is OpenBLAS cblas_sgemm; an element fails when it differs from it by more than
/// 2 n eps (|alpha| |A| |B| + |beta| |C|), the worst-case float rounding of both.
class GpuGemmEvaluator final : public Evaluator {
 public:
  static constexpr std::int64_t kGemmPadding = 128;

  GpuGemmEvaluator(std::shared_ptr<ComputeBackend> backend, std::int64_t n,
                   GpuEvaluatorOptions options = {});
  ~GpuGemmEvaluator() override;

  /// "<backend>-gemm", e.g. "opencl-gemm".
  std::string kernel_name() const override;
  std::string objective_unit() const override { return "ms"; }
  const SearchSpace& space() const override { return space_; }
  /// {"m": n, "n": n, "k": n, "precision": 32}.
  nlohmann::json task() const override;
  Measurement evaluate(const Configuration& config) override;

  /// The space for these limits: the GEMM dataset's parameters, values and constraints, plus
  /// `MDIMC * NDIMC <= max_work_group_size` and the local-memory use of SA / SB.
  /// Its defaults are CLBlast's gemm_milo defaults with STRM = STRN = 0.
  static SearchSpace make_space(const DeviceLimits& limits);
  /// Kernel "xgemm"; every parameter is a define of the same name.
  static KernelBuild build_for(const SearchSpace& space, const Configuration& config);

 private:
  struct Data;
  std::shared_ptr<ComputeBackend> backend_;
  GpuEvaluatorOptions options_;
  std::int64_t n_;
  SearchSpace space_;
  std::unique_ptr<Data> data_;
};

/// y = A x in double precision for a sparse matrix: CSR with one work-item per row
/// (csr_scalar), CSR with threads_per_row work-items per row and block_size / threads_per_row
/// rows per work-group (csr_vector), and SELL-C-sigma with C = block_size (sell). Checked
/// against spmv_reference with spmv_mismatch (relative tolerance 1e-10). The objective is
/// the median kernel time in milliseconds; metrics report GFLOP/s (2 nnz / t).
class GpuSpmvEvaluator final : public Evaluator {
 public:
  static constexpr double kTolerance = 1e-10;

  /// Throws BackendError when the device has no double precision, InvalidInput when the
  /// matrix has more entries than 32-bit indices address.
  GpuSpmvEvaluator(std::shared_ptr<ComputeBackend> backend, CsrMatrix matrix,
                   GpuEvaluatorOptions options = {});
  ~GpuSpmvEvaluator() override;

  std::string kernel_name() const override;
  std::string objective_unit() const override { return "ms"; }
  const SearchSpace& space() const override { return space_; }
  /// {"matrix": name, "features": matrix_features(A)}.
  nlohmann::json task() const override;
  Measurement evaluate(const Configuration& config) override;

  /// Parameters variant (csr_scalar, csr_vector, sell), block_size, threads_per_row, sigma,
  /// with the constraints that tie each to its variant and block_size <= the device limit.
  static SearchSpace make_space(const DeviceLimits& limits);
  /// Kernel "spmv_<variant>" with BLOCK_SIZE, THREADS_PER_ROW and SELL_PERMUTED (whether the
  /// SELL rows were sorted, i.e. sigma > 1 changed the order).
  static KernelBuild build_for(const SearchSpace& space, const Configuration& config,
                               bool permuted);
  const CsrMatrix& matrix() const { return matrix_; }

 private:
  struct Data;
  std::shared_ptr<ComputeBackend> backend_;
  GpuEvaluatorOptions options_;
  CsrMatrix matrix_;
  SearchSpace space_;
  std::unique_ptr<Data> data_;
};

/// 2D convolution of a width x height image with a 15 x 15 filter, tuned over the parameters
/// and values of ../shared/data/gpu/convolution_hub (block_size_x/y, tile_size_x/y, read_only,
/// use_padding, use_shmem, use_cmem, filter_height, filter_width) and its constraints, with
/// the device's work-group and local-memory limits. Checked against a double-precision CPU
/// loop; the objective is the median kernel time in milliseconds, metrics GFLOP/s.
class GpuConvolutionEvaluator final : public Evaluator {
 public:
  GpuConvolutionEvaluator(std::shared_ptr<ComputeBackend> backend, std::int64_t width,
                          std::int64_t height, GpuEvaluatorOptions options = {});
  ~GpuConvolutionEvaluator() override;

  std::string kernel_name() const override;
  std::string objective_unit() const override { return "ms"; }
  const SearchSpace& space() const override { return space_; }
  /// {"image_width": w, "image_height": h}.
  nlohmann::json task() const override;
  Measurement evaluate(const Configuration& config) override;

  static SearchSpace make_space(const DeviceLimits& limits);
  /// Kernel "convolution"; each parameter is a define named in upper case (OpenCL C reserves
  /// read_only), plus IMAGE_WIDTH and IMAGE_HEIGHT.
  static KernelBuild build_for(const SearchSpace& space, const Configuration& config,
                               std::int64_t width, std::int64_t height);

 private:
  struct Data;
  std::shared_ptr<ComputeBackend> backend_;
  GpuEvaluatorOptions options_;
  std::int64_t width_;
  std::int64_t height_;
  SearchSpace space_;
  std::unique_ptr<Data> data_;
};

/// Every compute device tunebase can use, for the machine fingerprint: opencl_devices(), plus
/// the CUDA devices when built with CUDA (each entry's "backend" says which).
nlohmann::json compute_devices();

/// The evaluators above on OpenCL device `options["device"]` (default 0), by kernel name:
/// "opencl-gemm" (options "size": n, default 1024), "opencl-spmv" ("matrix": a Matrix Market
/// file, else "size": the grid of laplacian_3d, default 64), "opencl-conv" ("size": image
/// width and height, default 1024). Further options: "repeats", "seed", "time_limit" (seconds),
/// "max_work_group_size", "local_memory_bytes"; null values count as absent. Throws
/// InvalidInput for an unknown kernel or option, an option the kernel does not read ("matrix"
/// for gemm and conv; "size" beside "matrix" for spmv), BackendError when there is no OpenCL
/// device.
std::unique_ptr<Evaluator> make_opencl_evaluator(const std::string& kernel,
                                                 const nlohmann::json& options);

/// The same on CUDA device options["device"]: "cuda-gemm", "cuda-spmv", "cuda-conv". Throws
/// BackendError when tunebase was built without CUDA or no CUDA device is present.
std::unique_ptr<Evaluator> make_cuda_evaluator(const std::string& kernel,
                                               const nlohmann::json& options);

}  // namespace tunebase
