// The OpenCL back end and GPU kernels on whatever OpenCL device is installed (PoCL on the CI
// machine's CPU). Every kernel is checked against its CPU reference on small sizes for a small
// sample of configurations: a PoCL compile costs about a second, so samples stay short. The
// user's own kernel (SourceKernelEvaluator) is checked against its reference configuration.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/gpu_evaluators.h"
#include "kernels/opencl_backend.h"
#include "kernels/source_kernel.h"
#include "kernels/sparse_matrix.h"

namespace tunebase {
namespace {

// One backend for the whole test program: its program cache spares recompiles across tests.
std::shared_ptr<OpenclBackend> backend_or_null() {
  static std::shared_ptr<OpenclBackend> backend = [] {
    return list_opencl_devices().empty() ? nullptr : std::make_shared<OpenclBackend>(0);
  }();
  return backend;
}

#define TUNEBASE_OPENCL_OR_SKIP(var)                                                   \
  const auto var = backend_or_null();                                                  \
  if (!var) {                                                                          \
    GTEST_SKIP() << "no OpenCL device found (install an ICD such as pocl-opencl-icd)"; \
  }

// One timed launch: the tests check results, not speed.
GpuEvaluatorOptions quick() {
  GpuEvaluatorOptions options;
  options.repeats = 1;
  return options;
}

// Random valid configurations on top of the fixed samples: kDefaultRandomSamples per kernel,
// or $TUNEBASE_GPU_TEST_SAMPLES for a deeper check (e.g. 100 after changing a kernel).
constexpr int kDefaultRandomSamples = 2;
std::vector<Configuration> random_sample(const SearchSpace& space, std::uint64_t seed) {
  int count = kDefaultRandomSamples;
  if (const char* env = std::getenv("TUNEBASE_GPU_TEST_SAMPLES")) count = std::atoi(env);
  Rng rng(seed);
  std::vector<Configuration> sample;
  for (int i = 0; i < count; ++i) sample.push_back(space.sample(rng));
  return sample;
}

Configuration config_with(const SearchSpace& space, const nlohmann::json& values) {
  return space.config_from_json(values, /*fill_defaults=*/true);
}

constexpr char kAxpy[] = R"(
__kernel void axpy(const float a, __global const float* x, __global float* y) {
  const int i = get_global_id(0);
  y[i] = a * x[i] + y[i] + OFFSET;
})";

TEST(OpenclDevices, DescribeEveryDeviceForTheFingerprint) {
  const nlohmann::json devices = opencl_devices();
  ASSERT_TRUE(devices.is_array());
  if (devices.empty()) GTEST_SKIP() << "no OpenCL device found";
  for (const auto& d : devices) {
    EXPECT_EQ(d.at("backend"), "opencl");
    EXPECT_FALSE(d.at("name").get<std::string>().empty());
    EXPECT_FALSE(d.at("vendor").get<std::string>().empty());
    EXPECT_GT(d.at("compute_units").get<std::int64_t>(), 0);
    EXPECT_GT(d.at("local_memory_bytes").get<std::int64_t>(), 0);
    EXPECT_GT(d.at("max_work_group_size").get<std::int64_t>(), 0);
  }
  EXPECT_GE(compute_devices().size(), devices.size());
}

TEST(OpenclBackend, CompilesWithDefinesLaunchesTimesAndCaches) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  constexpr std::size_t kSize = 256;
  std::vector<float> x(kSize), y(kSize, 1.0f);
  for (std::size_t i = 0; i < kSize; ++i) x[i] = static_cast<float>(i);
  auto xb = backend->allocate(kSize * sizeof(float));
  auto yb = backend->allocate(kSize * sizeof(float));
  backend->write(*xb, x.data(), kSize * sizeof(float));
  backend->write(*yb, y.data(), kSize * sizeof(float));

  const std::size_t before = backend->cached_programs();
  auto kernel = backend->compile(kAxpy, "axpy", {{"OFFSET", "0.5f"}});
  EXPECT_EQ(backend->compile(kAxpy, "axpy", {{"OFFSET", "0.5f"}}), kernel);
  EXPECT_EQ(backend->cached_programs(), before + 1);

  const double seconds = backend->launch(*kernel, {kSize}, {64}, {2.0f, xb.get(), yb.get()});
  EXPECT_GE(seconds, 0.0);
  backend->read(*yb, y.data(), kSize * sizeof(float));
  for (std::size_t i = 0; i < kSize; ++i) EXPECT_FLOAT_EQ(y[i], 2.0f * i + 1.5f) << i;

  // Another define is another program.
  EXPECT_NE(backend->compile(kAxpy, "axpy", {{"OFFSET", "1.0f"}}), kernel);
}

TEST(OpenclBackend, BuildErrorCarriesTheCompilerLog) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  try {
    backend->compile(kAxpy, "axpy", {{"OFFSET", "undeclared_name"}});
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.log()).find("undeclared_name"), std::string::npos) << e.log();
    EXPECT_NE(std::string(e.what()).find("axpy"), std::string::npos);
  }
}

TEST(OpenclBackend, WorkGroupBeyondTheDeviceLimitIsALaunchError) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  const auto limit = static_cast<std::size_t>(backend->device().max_work_group_size);
  const std::size_t too_big = limit * 2;
  auto xb = backend->allocate(too_big * sizeof(float));
  auto yb = backend->allocate(too_big * sizeof(float));
  auto kernel = backend->compile(kAxpy, "axpy", {{"OFFSET", "0.0f"}});
  EXPECT_THROW(backend->launch(*kernel, {too_big}, {too_big}, {1.0f, xb.get(), yb.get()}),
               LaunchError);
}

// ------------------------------------------------------------------------------------ GEMM

// A handful of configurations covering local memory on/off, vector widths and work-group
// shapes, plus the default.
std::vector<nlohmann::json> gemm_sample() {
  return {
      nlohmann::json::object(),  // defaults
      {{"MWG", 16},
       {"NWG", 16},
       {"MDIMC", 8},
       {"NDIMC", 8},
       {"MDIMA", 8},
       {"NDIMB", 8},
       {"VWM", 1},
       {"VWN", 2},
       {"SA", 0},
       {"SB", 0}},
      {{"MWG", 128},
       {"NWG", 32},
       {"MDIMC", 16},
       {"NDIMC", 8},
       {"MDIMA", 16},
       {"NDIMB", 8},
       {"VWM", 8},
       {"VWN", 1},
       {"SA", 1},
       {"SB", 0}},
      {{"MWG", 32},
       {"NWG", 64},
       {"MDIMC", 8},
       {"NDIMC", 16},
       {"MDIMA", 32},
       {"NDIMB", 8},
       {"VWM", 1},
       {"VWN", 4},
       {"SA", 0},
       {"SB", 1}},
  };
}

TEST(OpenclGemm, SpaceIsTheDatasetSpacePlusDeviceLimits) {
  // The GEMM dataset measured 17956 of 82944 configurations: exactly those CLBlast allows.
  const SearchSpace space = GpuGemmEvaluator::make_space({1024, 1 << 20});
  EXPECT_EQ(space.cartesian_size(), 82944.0);
  EXPECT_EQ(space.valid_count(), 17956u);
  const SearchSpace small = GpuGemmEvaluator::make_space({64, 1 << 20});
  for (const auto& c : small.valid_configurations()) {
    const auto json = small.config_to_json(c);
    ASSERT_LE(json["MDIMC"].get<int>() * json["NDIMC"].get<int>(), 64);
  }
  EXPECT_LT(small.valid_count(), space.valid_count());
  EXPECT_TRUE(space.is_valid(space.default_configuration()));
}

TEST(OpenclGemm, SampleOfConfigurationsMatchesOpenBlas) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  // 96 is padded to 128: the padding must not leak into the result.
  GpuGemmEvaluator gemm(backend, 96, quick());
  EXPECT_EQ(gemm.kernel_name(), "opencl-gemm");
  EXPECT_EQ(gemm.task()["n"], 96);
  for (const auto& values : gemm_sample()) {
    const Configuration config = config_with(gemm.space(), values);
    ASSERT_TRUE(gemm.space().is_valid(config)) << values.dump();
    const Measurement m = gemm.evaluate(config);
    EXPECT_TRUE(m.ok()) << values.dump() << ": " << m.message;
    EXPECT_GT(m.objective, 0.0);
    EXPECT_EQ(m.raw.size(), 1u);
    EXPECT_GT(m.metrics.value("GFLOP/s", 0.0), 0.0);
  }
  for (const auto& config : random_sample(gemm.space(), 11)) {
    const Measurement m = gemm.evaluate(config);
    EXPECT_TRUE(m.ok()) << gemm.space().config_to_json(config).dump() << ": " << m.message;
  }
}

TEST(OpenclGemm, WrongResultIsAFailedMeasurement) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  // The kernel believes its tiles are half as tall as the launch assumes: half of C is never
  // written, and validation must notice (128: no padding, every row is checked).
  GpuEvaluatorOptions options = quick();
  options.defines = {{"MWG", "32"}};
  GpuGemmEvaluator gemm(backend, 128, options);
  const Measurement m = gemm.evaluate(config_with(
      gemm.space(), {{"MWG", 64}, {"MDIMC", 16}, {"NDIMC", 16}, {"MDIMA", 16}, {"NDIMB", 16}}));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("wrong result"), std::string::npos) << m.message;
}

TEST(OpenclGemm, BrokenDefineIsAFailedMeasurementWithTheBuildLog) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  GpuEvaluatorOptions options = quick();
  options.defines = {{"VWM", "no_such_width"}};
  GpuGemmEvaluator gemm(backend, 64, options);
  const Measurement m = gemm.evaluate(gemm.space().default_configuration());
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("compile failed"), std::string::npos) << m.message;
  EXPECT_NE(m.message.find("no_such_width"), std::string::npos) << m.message;
  EXPECT_FALSE(std::isfinite(m.objective));
}

TEST(OpenclGemm, ConfigurationBreakingTheDeviceLimitFailsCleanly) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  GpuEvaluatorOptions options = quick();
  options.max_work_group_size = 64;
  GpuGemmEvaluator gemm(backend, 64, options);
  // 16 x 16 = 256 work-items: outside the narrowed space, refused without launching.
  SearchSpace unrestricted = GpuGemmEvaluator::make_space({1024, 1 << 20});
  const Configuration config =
      config_with(unrestricted, {{"MDIMC", 16}, {"NDIMC", 16}, {"MDIMA", 16}, {"NDIMB", 16}});
  ASSERT_FALSE(gemm.space().is_valid(config));
  const Measurement m = gemm.evaluate(config);
  EXPECT_EQ(m.status, TrialStatus::invalid);
  EXPECT_NE(m.message.find("MDIMC * NDIMC <= 64"), std::string::npos) << m.message;
}

TEST(OpenclGemm, LaunchesBeyondTheTimeLimitAreATimeout) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  GpuEvaluatorOptions options = quick();
  options.time_limit_seconds = 1e-9;
  GpuGemmEvaluator gemm(backend, 64, options);
  const Measurement m = gemm.evaluate(gemm.space().default_configuration());
  EXPECT_EQ(m.status, TrialStatus::timeout) << m.message;
  EXPECT_EQ(m.raw.size(), 1u);  // the checked warm-up launch
}

// ------------------------------------------------------------------------------------ SpMV

// Rows of very different lengths, some empty, so that SELL's sorting and padding matter.
CsrMatrix irregular_matrix(std::int64_t rows, std::uint64_t seed) {
  Rng rng(seed);
  std::uniform_int_distribution<int> length(0, 40);
  std::uniform_int_distribution<std::int32_t> column(0, static_cast<std::int32_t>(rows) - 1);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  CsrMatrix a;
  a.rows = a.cols = rows;
  a.name = "irregular";
  a.row_ptr.push_back(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int32_t> cols;
    const int n = r % 7 == 3 ? 0 : length(rng);
    for (int k = 0; k < n; ++k) cols.push_back(column(rng));
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    for (auto c : cols) {
      a.col.push_back(c);
      a.val.push_back(value(rng));
    }
    a.row_ptr.push_back(static_cast<std::int64_t>(a.col.size()));
  }
  return a;
}

TEST(OpenclSpmv, EveryVariantMatchesTheReference) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  if (!backend->device().double_precision) GTEST_SKIP() << "device has no double precision";
  const std::vector<nlohmann::json> sample = {
      {{"variant", "csr_scalar"}, {"block_size", 64}, {"threads_per_row", 1}},
      {{"variant", "csr_vector"}, {"block_size", 128}, {"threads_per_row", 4}},
      {{"variant", "csr_vector"}, {"block_size", 32}, {"threads_per_row", 32}},
      {{"variant", "sell"}, {"block_size", 32}, {"threads_per_row", 1}, {"sigma", 1}},
      {{"variant", "sell"}, {"block_size", 64}, {"threads_per_row", 1}, {"sigma", 512}},
  };
  for (CsrMatrix matrix : {irregular_matrix(1000, 7), laplacian_3d(6)}) {
    const std::string name = matrix.name;
    GpuSpmvEvaluator spmv(backend, std::move(matrix), quick());
    EXPECT_EQ(spmv.kernel_name(), "opencl-spmv");
    for (const auto& values : sample) {
      const Measurement m = spmv.evaluate(config_with(spmv.space(), values));
      EXPECT_TRUE(m.ok()) << name << " " << values.dump() << ": " << m.message;
    }
    for (const auto& config : random_sample(spmv.space(), 12)) {
      const Measurement m = spmv.evaluate(config);
      EXPECT_TRUE(m.ok()) << name << " " << spmv.space().config_to_json(config).dump() << ": "
                          << m.message;
    }
  }
}

TEST(OpenclSpmv, WrongResultIsAFailedMeasurementSaidOnce) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  if (!backend->device().double_precision) GTEST_SKIP() << "device has no double precision";
  // The kernel gives each row 8 lanes where the launch assumes 4: the work-groups cover half
  // of the rows.
  GpuEvaluatorOptions options = quick();
  options.defines = {{"THREADS_PER_ROW", "8"}};
  GpuSpmvEvaluator spmv(backend, laplacian_3d(6), options);
  const Measurement m = spmv.evaluate(config_with(
      spmv.space(), {{"variant", "csr_vector"}, {"block_size", 128}, {"threads_per_row", 4}}));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_EQ(m.message.rfind("wrong result: y[", 0), 0u) << m.message;
  EXPECT_EQ(m.message.find("wrong result: wrong result"), std::string::npos) << m.message;
}

// The OpenCL backend with device memory (or host memory) that runs out when a test says.
class ExhaustibleBackend final : public ComputeBackend {
 public:
  explicit ExhaustibleBackend(std::shared_ptr<ComputeBackend> inner) : inner_(std::move(inner)) {}

  /// Allocations that still succeed; negative: no limit.
  int allocations_left = -1;
  /// What the first refused allocation throws: std::bad_alloc, else BackendError.
  bool host_runs_out = false;

  const DeviceInfo& device() const override { return inner_->device(); }
  std::shared_ptr<CompiledKernel> compile(const std::string& source, const std::string& kernel_name,
                                          const Defines& defines) override {
    return inner_->compile(source, kernel_name, defines);
  }
  std::size_t cached_programs() const override { return inner_->cached_programs(); }
  std::unique_ptr<DeviceBuffer> allocate(std::size_t bytes) override {
    if (allocations_left == 0) {
      if (host_runs_out) throw std::bad_alloc();
      throw BackendError("out of device memory (as the test asked)");
    }
    if (allocations_left > 0) --allocations_left;
    return inner_->allocate(bytes);
  }
  void write(DeviceBuffer& buffer, const void* host, std::size_t bytes) override {
    inner_->write(buffer, host, bytes);
  }
  void read(const DeviceBuffer& buffer, void* host, std::size_t bytes) override {
    inner_->read(buffer, host, bytes);
  }
  double launch(CompiledKernel& kernel, const NdRange& global, const NdRange& local,
                const std::vector<KernelArg>& args) override {
    return inner_->launch(kernel, global, local, args);
  }

 private:
  std::shared_ptr<ComputeBackend> inner_;
};

TEST(OpenclSpmv, ASellLayoutThatDoesNotFitIsAFailedTrialAndIsUploadedAgainNextTime) {
  TUNEBASE_OPENCL_OR_SKIP(opencl);
  if (!opencl->device().double_precision) GTEST_SKIP() << "device has no double precision";
  const auto backend = std::make_shared<ExhaustibleBackend>(opencl);
  GpuSpmvEvaluator spmv(backend, laplacian_3d(6), quick());
  const Configuration sell =
      config_with(spmv.space(),
                  {{"variant", "sell"}, {"block_size", 32}, {"threads_per_row", 1}, {"sigma", 1}});
  backend->allocations_left = 2;  // of the layout's four buffers
  const Measurement full = spmv.evaluate(sell);
  EXPECT_EQ(full.status, TrialStatus::failed);
  EXPECT_NE(full.message.find("out of device memory"), std::string::npos) << full.message;
  // Memory freed (another process ended): the layout is uploaded whole, not launched half-built.
  backend->allocations_left = -1;
  const Measurement freed = spmv.evaluate(sell);
  EXPECT_TRUE(freed.ok()) << freed.message;
}

TEST(OpenclSpmv, HostOutOfMemoryForASellLayoutIsAFailedTrial) {
  TUNEBASE_OPENCL_OR_SKIP(opencl);
  if (!opencl->device().double_precision) GTEST_SKIP() << "device has no double precision";
  const auto backend = std::make_shared<ExhaustibleBackend>(opencl);
  GpuSpmvEvaluator spmv(backend, laplacian_3d(6), quick());
  backend->allocations_left = 0;
  backend->host_runs_out = true;
  const Measurement m = spmv.evaluate(
      config_with(spmv.space(),
                  {{"variant", "sell"}, {"block_size", 64}, {"threads_per_row", 1}, {"sigma", 1}}));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("out of memory"), std::string::npos) << m.message;
}

TEST(OpenclSpmv, SpaceTiesParametersToTheirVariant) {
  const SearchSpace space = GpuSpmvEvaluator::make_space({256, 1 << 16});
  for (const auto& c : space.valid_configurations()) {
    const auto j = space.config_to_json(c);
    const std::string variant = j["variant"];
    EXPECT_EQ(variant == "csr_vector", j["threads_per_row"].get<int>() > 1) << j.dump();
    EXPECT_TRUE(variant == "sell" || j["sigma"] == 1) << j.dump();
    EXPECT_LE(j["block_size"].get<int>(), 256);
  }
}

// ----------------------------------------------------------------------------- convolution

TEST(OpenclConvolution, SpaceIsTheDatasetSpace) {
  // convolution_hub holds 4362 configurations: exactly those its restrictions allow.
  const SearchSpace space = GpuConvolutionEvaluator::make_space({1024, 1 << 20});
  EXPECT_EQ(space.valid_count(), 4362u);
  EXPECT_TRUE(space.is_valid(space.default_configuration()));
}

TEST(OpenclConvolution, SampleOfConfigurationsMatchesTheReference) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  // Sizes that no tile divides, so that the edge guards are exercised.
  GpuConvolutionEvaluator conv(backend, 70, 45, quick());
  EXPECT_EQ(conv.kernel_name(), "opencl-conv");
  const std::vector<nlohmann::json> sample = {
      nlohmann::json::object(),  // defaults: 16 x 16 with padded local memory
      {{"block_size_x", 48},
       {"block_size_y", 2},
       {"tile_size_x", 3},
       {"tile_size_y", 2},
       {"use_shmem", 0},
       {"use_padding", 0},
       {"read_only", 1}},
      {{"block_size_x", 32},
       {"block_size_y", 4},
       {"tile_size_x", 1},
       {"tile_size_y", 4},
       {"use_shmem", 1},
       {"use_padding", 0}},
  };
  for (const auto& values : sample) {
    const Measurement m = conv.evaluate(config_with(conv.space(), values));
    EXPECT_TRUE(m.ok()) << values.dump() << ": " << m.message;
  }
  for (const auto& config : random_sample(conv.space(), 13)) {
    const Measurement m = conv.evaluate(config);
    EXPECT_TRUE(m.ok()) << conv.space().config_to_json(config).dump() << ": " << m.message;
  }
}

TEST(OpenclConvolution, WrongResultIsAFailedMeasurement) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  // The kernel believes each work-item computes one row where the launch assumes two: of the
  // 45 rows the two work-groups in y cover 32, and rows 32 to 44 (13 x 70 pixels) keep their
  // poison.
  GpuEvaluatorOptions options = quick();
  options.defines = {{"TILE_SIZE_Y", "1"}};
  GpuConvolutionEvaluator conv(backend, 70, 45, options);
  const Measurement m = conv.evaluate(config_with(conv.space(), {{"tile_size_y", 2}}));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_EQ(m.message.rfind("wrong result: pixel (0,32) = ", 0), 0u) << m.message;
  EXPECT_NE(m.message.find("; 910 of 3150 pixels differ"), std::string::npos) << m.message;
}

// -------------------------------------------------------------------------------- factory

TEST(OpenclFactory, OptionsTheKernelDoesNotReadAreRefused) {
  // Refused before any device is opened.
  for (const char* kernel : {"opencl-gemm", "opencl-conv"}) {
    try {
      make_opencl_evaluator(kernel, {{"matrix", "a.mtx"}, {"size", 64}});
      FAIL() << kernel << ": no error";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("does not read a matrix file; it takes size"),
                std::string::npos)
          << e.what();
    }
  }
  try {
    make_opencl_evaluator("opencl-spmv", {{"matrix", "a.mtx"}, {"size", 5}});
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("not both"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_cuda_evaluator("cuda-gemm", {{"matrix", "a.mtx"}}), InvalidInput);
}

std::unique_ptr<Evaluator> make_opencl_or_cuda(const std::string& kernel,
                                               const nlohmann::json& options) {
  return kernel.starts_with("cuda") ? make_cuda_evaluator(kernel, options)
                                    : make_opencl_evaluator(kernel, options);
}

TEST(OpenclFactory, BuildsEvaluatorsByNameAndRejectsUnknownInput) {
  EXPECT_THROW(make_opencl_evaluator("opencl-fft", {}), InvalidInput);
  EXPECT_THROW(make_opencl_evaluator("opencl-gemm", {{"sise", 64}}), InvalidInput);
  EXPECT_THROW(make_opencl_evaluator("opencl-gemm", {{"size", "big"}}), InvalidInput);
  // A size past the machine's memory is refused before anything is allocated (it ended in
  // std::bad_alloc), for CUDA too, whose device need not exist for that.
  for (const char* kernel : {"opencl-gemm", "opencl-conv", "cuda-gemm"}) {
    try {
      make_opencl_or_cuda(kernel, {{"size", 1000000000}});
      ADD_FAILURE() << kernel << " took a size of 10^9";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("(1000000000 x 1000000000) needs about"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("give a size of at most"), std::string::npos);
    }
  }
  TUNEBASE_OPENCL_OR_SKIP(backend);
  auto gemm =
      make_opencl_evaluator("opencl-gemm", {{"size", 64}, {"repeats", 1}, {"time_limit", 30}});
  EXPECT_EQ(gemm->kernel_name(), "opencl-gemm");
  EXPECT_EQ(gemm->task()["n"], 64);
  auto spmv = make_opencl_evaluator("opencl-spmv", {{"size", 5}, {"matrix", nullptr}});
  EXPECT_EQ(spmv->kernel_name(), "opencl-spmv");
  auto conv = make_opencl_evaluator("opencl-conv", {{"size", 40}});
  EXPECT_EQ(conv->task()["image_width"], 40);
}

// ------------------------------------------------------------------ the user's own kernel

// y = a x, each work-item scaling `tile` elements block_size_x apart. skip = 1 leaves the odd
// elements alone; broken = 1 does not compile.
constexpr char kScale[] = R"(
__kernel void scale(__global float* y, __global const float* x, const float a, const int n) {
  const int base = get_group_id(0) * block_size_x * tile + get_local_id(0);
  for (int t = 0; t < tile; ++t) {
    const int i = base + t * block_size_x;
    if (i < n && (skip == 0 || i % 2 == 0)) y[i] = a * x[i];
  }
#if broken
  y[0] = undeclared_name;
#endif
})";

constexpr std::int64_t kSize = 1000;  // not a multiple of any tile: the grid rounds up

SearchSpace scale_space() {
  return SearchSpace::from_kernel_tuner(
      {{"block_size_x", {16, 32, 64}}, {"tile", {1, 2, 4}}, {"skip", {0, 1}}, {"broken", {0, 1}}},
      {}, {"block_size_x", "tile", "skip", "broken"});
}

std::vector<KernelArgumentSpec> scale_arguments() {
  return kernel_arguments_from_json(nlohmann::json::parse(R"([
    {"type": "float", "size": 1000, "output": true},
    {"type": "float", "size": 1000, "fill": "iota"},
    {"type": "float", "value": 2.0},
    {"type": "int32", "value": 1000}])"));
}

SourceKernelOptions scale_options() {
  SourceKernelOptions options;
  options.kernel_name = "scale";
  options.problem_size = {kSize};
  options.grid_div[0] = std::vector<std::string>{"block_size_x", "tile"};
  options.gpu.repeats = 1;
  return options;
}

std::unique_ptr<SourceKernelEvaluator> scale_evaluator(std::shared_ptr<ComputeBackend> backend,
                                                       SourceKernelOptions options) {
  return std::make_unique<SourceKernelEvaluator>(std::move(backend), kScale, scale_space(),
                                                 scale_arguments(), std::move(options));
}

Configuration scale_config(const SearchSpace& space, int block, int tile, int skip, int broken) {
  return space.config_from_json(
      {{"block_size_x", block}, {"tile", tile}, {"skip", skip}, {"broken", broken}});
}

TEST(SourceKernel, TiledConfigurationsMeasureAndPassVerification) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  auto evaluator = scale_evaluator(backend, scale_options());
  const auto& space = evaluator->space();
  EXPECT_EQ(evaluator->kernel_name(), "scale");
  EXPECT_EQ(evaluator->objective_unit(), "ms");
  EXPECT_EQ(evaluator->task(), nlohmann::json::parse(R"({"problem_size": [1000]})"));
  EXPECT_EQ(space.config_to_json(evaluator->reference()),
            nlohmann::json::parse(R"({"block_size_x": 16, "tile": 1, "skip": 0, "broken": 0})"));
  const std::vector<std::pair<int, int>> block_and_tile = {{16, 1}, {32, 2}, {64, 4}};
  for (const auto& [block, tile] : block_and_tile) {
    const auto m = evaluator->evaluate(scale_config(space, block, tile, 0, 0));
    EXPECT_EQ(m.status, TrialStatus::ok) << block << " x " << tile << ": " << m.message;
    EXPECT_GE(m.objective, 0.0);
    EXPECT_TRUE(m.metrics.contains("wall_time_ms"));
    EXPECT_FALSE(m.metrics.contains("GFLOP/s"));  // the kernel's work is not known
  }
}

TEST(SourceKernel, GridIsTheProblemSizeDividedByGridDivTimesTheBlock) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  auto evaluator = scale_evaluator(backend, scale_options());
  const auto launch = evaluator->launch_for(scale_config(evaluator->space(), 32, 2, 0, 0));
  // grid = ceil(1000 / (32 * 2)) = 16 work-groups of 32
  EXPECT_EQ(launch.global, (NdRange{16 * 32, 1, 1}));
  EXPECT_EQ(launch.local, (NdRange{32, 1, 1}));
  EXPECT_EQ(launch.defines.at("grid_size_x"), "16");
  EXPECT_EQ(launch.defines.at("block_size_y"), "1");
  EXPECT_EQ(launch.defines.at("tile"), "2");
  EXPECT_EQ(launch.defines.at("kernel_tuner"), "1");

  // Without grid_div_x the grid divides by block_size_x alone, as Kernel Tuner's default.
  auto options = scale_options();
  options.grid_div[0].reset();
  auto by_block = scale_evaluator(backend, options);
  EXPECT_EQ(by_block->launch_for(scale_config(by_block->space(), 32, 2, 0, 0)).global,
            (NdRange{32 * 32, 1, 1}));
}

// out = in^T for a rows x cols matrix, tile_y rows per work-item, with block sizes named bx, by.
constexpr char kTranspose[] = R"(
__kernel void transpose(__global float* out, __global const float* in, const int rows,
                        const int cols) {
  const int x = get_global_id(0);
  for (int t = 0; t < tile_y; ++t) {
    const int y = get_group_id(1) * by * tile_y + t * by + get_local_id(1);
    if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
  }
})";

TEST(SourceKernel, TwoDimensionsTakeTheirBlockSizeNamesAndGridDivisors) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  const auto space = SearchSpace::from_kernel_tuner(
      {{"bx", {8, 16}}, {"by", {1, 4}}, {"tile_y", {1, 2}}}, {}, {"bx", "by", "tile_y"});
  SourceKernelOptions options;
  options.kernel_name = "transpose";
  options.problem_size = {60, 50};  // x: columns, y: rows
  options.grid_div[1] = std::vector<std::string>{"by", "tile_y"};
  options.block_size_names = {"bx", "by", "bz"};
  options.gpu.repeats = 1;
  SourceKernelEvaluator evaluator(backend, kTranspose, space,
                                  kernel_arguments_from_json(nlohmann::json::parse(R"([
    {"type": "float", "size": 3000, "output": true},
    {"type": "float", "size": 3000, "fill": "random"},
    {"type": "int32", "value": 50}, {"type": "int32", "value": 60}])")),
                                  options);
  const auto config = space.config_from_json({{"bx", 16}, {"by", 4}, {"tile_y", 2}});
  const auto launch = evaluator.launch_for(config);
  // x: ceil(60 / 16) = 4 groups of 16; y: ceil(50 / (4 * 2)) = 7 groups of 4; z: 1 of 1
  EXPECT_EQ(launch.global, (NdRange{64, 28, 1}));
  EXPECT_EQ(launch.local, (NdRange{16, 4, 1}));
  EXPECT_EQ(launch.defines.at("grid_size_y"), "7");
  EXPECT_EQ(launch.defines.at("bz"), "1");
  EXPECT_EQ(launch.defines.count("block_size_x"), 0u);
  for (const auto& c : space.valid_configurations()) {
    const auto m = evaluator.evaluate(c);
    EXPECT_EQ(m.status, TrialStatus::ok) << space.config_text(c) << ": " << m.message;
  }
}

TEST(SourceKernel, AConfigurationThatSkipsElementsFailsVerificationSayingWhere) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  auto evaluator = scale_evaluator(backend, scale_options());
  const auto m = evaluator->evaluate(scale_config(evaluator->space(), 32, 2, 1, 0));
  EXPECT_EQ(m.status, TrialStatus::failed);
  // Element 1 stays 0 where the reference scaled x[1] = 1 by 2.
  EXPECT_NE(m.message.find("wrong result: output argument 0 differs from the reference "
                           "configuration's at element 1: 0 instead of 2"),
            std::string::npos)
      << m.message;
  EXPECT_NE(m.message.find("500 of 1000 elements differ"), std::string::npos) << m.message;
}

TEST(SourceKernel, AConfigurationThatDoesNotCompileFailsWithTheBuildLog) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  auto evaluator = scale_evaluator(backend, scale_options());
  const auto m = evaluator->evaluate(scale_config(evaluator->space(), 16, 1, 0, 1));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("compile failed"), std::string::npos) << m.message;
  EXPECT_NE(m.message.find("undeclared_name"), std::string::npos) << m.message;
}

TEST(SourceKernel, AWorkGroupTooLargeIsAFailedMeasurement) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  const auto too_big = backend->device().max_work_group_size * 2;
  auto space = SearchSpace::from_kernel_tuner(
      {{"block_size_x", {16, too_big}}, {"tile", {1}}, {"skip", {0}}, {"broken", {0}}}, {},
      {"block_size_x", "tile", "skip", "broken"});
  SourceKernelEvaluator evaluator(backend, kScale, space, scale_arguments(), scale_options());
  const auto m = evaluator.evaluate(
      space.config_from_json({{"block_size_x", too_big}, {"tile", 1}, {"skip", 0}, {"broken", 0}}));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("work-group of " + std::to_string(too_big)), std::string::npos)
      << m.message;
}

TEST(SourceKernel, AReferenceThatFailsIsAnErrorSayingSo) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  auto options = scale_options();
  options.reference = scale_config(scale_space(), 16, 1, 0, 1);
  try {
    scale_evaluator(backend, options);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("the reference configuration {\"block_size_x\":16,\"tile\":1,"
                           "\"skip\":0,\"broken\":1} of kernel scale failed"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("undeclared_name"), std::string::npos) << message;
  }
}

TEST(SourceKernel, AGridDivisorNamingNoParameterIsRefused) {
  TUNEBASE_OPENCL_OR_SKIP(backend);
  auto options = scale_options();
  options.grid_div[0] = std::vector<std::string>{"block_size_x", "tile_x"};
  try {
    scale_evaluator(backend, options);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "grid_div_x 'tile_x' names tile_x, which is not a parameter of the space"),
              std::string::npos)
        << e.what();
  }
}

void expect_refused(const std::string& arguments, const std::string& expected) {
  try {
    kernel_arguments_from_json(nlohmann::json::parse(arguments));
    ADD_FAILURE() << arguments << " was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(SourceKernelArguments, BadArgumentsSayWhatIsWrongAndWhatIsAllowed) {
  expect_refused(R"([{"type": "float16", "size": 4}])",
                 "argument 0: unknown type \"float16\"; allowed: float32, float, float64");
  expect_refused(R"([{"type": "float", "size": 4}, {"type": "int32", "size": 4, "fil": "ones"}])",
                 "argument 1: unknown field \"fil\"; an array is {\"type\", \"size\", \"fill\", "
                 "\"output\"}, a scalar {\"type\", \"value\"}");
  expect_refused(R"([{"type": "int32", "value": 1.5}])",
                 "argument 0's \"value\" must be a number that is a int32, got 1.5");
  expect_refused(R"([{"type": "uint8", "size": 4, "fill": 300}])",
                 "argument 0's \"fill\" must be a number that is a uint8, got 300");
  expect_refused(R"([{"type": "float", "size": 4, "fill": "randn"}])",
                 "unknown \"fill\" \"randn\"; allowed: random, zeros, ones, iota or a number");
  expect_refused(R"([{"type": "float", "size": 0}])", "needs a \"size\" of at least 1 element");
  expect_refused(R"([{"type": "float", "size": 4, "value": 1}])",
                 "has both \"size\" and \"value\"");
  expect_refused(R"([{"size": 4}])", "argument 0 has no \"type\"");
  expect_refused(R"({"type": "float"})", "must be a JSON array with one entry per kernel argument");
}

TEST(SourceKernelArguments, ArraysAndScalarsAreRead) {
  const auto args = kernel_arguments_from_json(nlohmann::json::parse(R"([
    {"type": "double", "size": 8, "fill": "random", "output": true},
    {"type": "uint32", "size": 3, "fill": 7},
    {"type": "int64", "value": -5}])"));
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[0].type, ArgumentType::float64);
  EXPECT_TRUE(args[0].output);
  EXPECT_EQ(args[0].fill, "random");
  EXPECT_EQ(args[1].fill_value, 7.0);
  EXPECT_FALSE(args[1].output);
  EXPECT_FALSE(args[2].is_array);
  EXPECT_EQ(args[2].value, -5.0);
}

}  // namespace
}  // namespace tunebase
