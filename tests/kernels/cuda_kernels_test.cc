// The CUDA kernels. NVRTC needs no GPU, so every machine with the toolkit checks that the CUDA
// sources compile for a sample of configurations; running them needs a CUDA device, and those
// tests skip with a clear message without one.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/gpu_evaluators.h"
#include "kernels/source_kernel.h"
#include "kernels/sparse_matrix.h"

namespace tunebase {
namespace {

// The limits of every CUDA GPU since compute capability 2.0 (1024 threads, 48 KiB static
// shared memory per block).
constexpr DeviceLimits kCudaLimits{1024, 48 * 1024};
constexpr int kSampleSize = 4;
// PTX for a virtual architecture: no device needed.
constexpr char kArchitecture[] = "compute_80";

std::vector<Configuration> sample(const SearchSpace& space, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Configuration> configs = {space.default_configuration()};
  for (int i = 0; i < kSampleSize; ++i) configs.push_back(space.sample(rng));
  return configs;
}

void expect_compiles(const std::string& kernel, const KernelBuild& build, const std::string& what) {
  try {
    const std::string ptx = compile_cuda_to_ptx(gpu_kernel_source("cuda", kernel), kernel,
                                                build.defines, kArchitecture);
    EXPECT_NE(ptx.find(".entry " + build.kernel_name), std::string::npos) << what;
  } catch (const CompileError& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

TEST(CudaNvrtc, GemmCompilesForASampleOfConfigurations) {
  const SearchSpace space = GpuGemmEvaluator::make_space(kCudaLimits);
  for (const auto& config : sample(space, 21)) {
    expect_compiles("gemm", GpuGemmEvaluator::build_for(space, config),
                    space.config_to_json(config).dump());
  }
}

TEST(CudaNvrtc, SpmvCompilesForEveryVariant) {
  const SearchSpace space = GpuSpmvEvaluator::make_space(kCudaLimits);
  for (const char* variant : {"csr_scalar", "csr_vector", "sell"}) {
    const Configuration config = space.config_from_json(
        {{"variant", variant}, {"threads_per_row", std::string(variant) == "csr_vector" ? 8 : 1}},
        /*fill_defaults=*/true);
    for (bool permuted : {false, true}) {
      expect_compiles("spmv", GpuSpmvEvaluator::build_for(space, config, permuted), variant);
    }
  }
}

TEST(CudaNvrtc, ConvolutionCompilesForASampleOfConfigurations) {
  const SearchSpace space = GpuConvolutionEvaluator::make_space(kCudaLimits);
  for (const auto& config : sample(space, 23)) {
    expect_compiles("conv", GpuConvolutionEvaluator::build_for(space, config, 1000, 700),
                    space.config_to_json(config).dump());
  }
}

TEST(CudaNvrtc, BrokenDefineGivesTheCompilerLog) {
  const SearchSpace space = GpuGemmEvaluator::make_space(kCudaLimits);
  KernelBuild build = GpuGemmEvaluator::build_for(space, space.default_configuration());
  build.defines["VWM"] = "no_such_width";
  try {
    compile_cuda_to_ptx(gpu_kernel_source("cuda", "gemm"), "gemm", build.defines, kArchitecture);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("no_such_width"), std::string::npos) << e.log();
  }
}

// The user's own kernel as Kernel Tuner users write it for CUDA: y = a x, each thread scaling
// `tile` elements block_size_x apart; skip = 1 leaves the odd elements alone.
constexpr char kCudaScale[] = R"(
extern "C" __global__ void scale(float* y, const float* x, const float a, const int n) {
  const int base = blockIdx.x * block_size_x * tile + threadIdx.x;
  for (int t = 0; t < tile; ++t) {
    const int i = base + t * block_size_x;
    if (i < n && (skip == 0 || i % 2 == 0)) y[i] = a * x[i];
  }
})";

TEST(CudaNvrtc, AnOwnKernelCompilesWithKernelTunersDefines) {
  const std::string ptx = compile_cuda_to_ptx(kCudaScale, "scale",
                                              {{"block_size_x", "32"},
                                               {"tile", "2"},
                                               {"skip", "0"},
                                               {"grid_size_x", "16"},
                                               {"kernel_tuner", "1"}},
                                              kArchitecture);
  EXPECT_NE(ptx.find(".entry scale"), std::string::npos);
}

// ------------------------------------------------------------------- on a CUDA device only

#define TUNEBASE_CUDA_DEVICE_OR_SKIP()                                          \
  if (cuda_device_count() == 0) {                                               \
    GTEST_SKIP() << "no CUDA device present (" << cuda_unavailable_reason()     \
                 << "): CUDA kernels are compiled (see CudaNvrtc) but not run"; \
  }

TEST(CudaDevice, WithoutADeviceTheFactoryExplainsWhy) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_TRUE(cuda_devices().empty());
  EXPECT_FALSE(cuda_unavailable_reason().empty());
  EXPECT_THROW(make_cuda_evaluator("cuda-gemm", {{"size", 64}}), BackendError);
}

TEST(CudaDevice, WithoutADeviceAnOwnKernelSaysWhatRunsHereInstead) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  try {
    make_source_kernel_evaluator(
        "cuda", 0, kCudaScale, SearchSpace::from_kernel_tuner({{"tile", {1}}}, {}),
        kernel_arguments_from_json(
            nlohmann::json::parse(R"([{"type": "float", "size": 4, "output": true}])")),
        {});
    FAIL() << "expected a BackendError";
  } catch (const BackendError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no CUDA device available"), std::string::npos) << message;
    EXPECT_NE(message.find("an OpenCL version of it runs here with --kernel opencl-source"),
              std::string::npos)
        << message;
  }
}

TEST(CudaDevice, KernelsMatchTheirReferences) {
  TUNEBASE_CUDA_DEVICE_OR_SKIP();
  auto backend = std::make_shared<CudaBackend>(0);
  GpuEvaluatorOptions options;
  options.repeats = 1;
  GpuGemmEvaluator gemm(backend, 200, options);
  EXPECT_EQ(gemm.kernel_name(), "cuda-gemm");
  for (const auto& config : sample(gemm.space(), 31)) {
    const Measurement m = gemm.evaluate(config);
    EXPECT_TRUE(m.ok()) << gemm.space().config_to_json(config).dump() << ": " << m.message;
  }
  GpuSpmvEvaluator spmv(backend, laplacian_3d(12), options);
  for (const auto& config : spmv.space().valid_configurations()) {
    const Measurement m = spmv.evaluate(config);
    EXPECT_TRUE(m.ok()) << spmv.space().config_to_json(config).dump() << ": " << m.message;
  }
  GpuConvolutionEvaluator conv(backend, 300, 170, options);
  for (const auto& config : sample(conv.space(), 33)) {
    const Measurement m = conv.evaluate(config);
    EXPECT_TRUE(m.ok()) << conv.space().config_to_json(config).dump() << ": " << m.message;
  }
}

TEST(CudaDevice, AnOwnKernelIsMeasuredAndVerified) {
  TUNEBASE_CUDA_DEVICE_OR_SKIP();
  SourceKernelOptions options;
  options.kernel_name = "scale";
  options.problem_size = {1000};
  options.grid_div[0] = std::vector<std::string>{"block_size_x", "tile"};
  options.gpu.repeats = 1;
  const auto space = SearchSpace::from_kernel_tuner(
      {{"block_size_x", {32, 64}}, {"tile", {1, 2}}, {"skip", {0, 1}}}, {},
      {"block_size_x", "tile", "skip"});
  auto evaluator = make_source_kernel_evaluator(
      "cuda", 0, kCudaScale, space, kernel_arguments_from_json(nlohmann::json::parse(R"([
        {"type": "float", "size": 1000, "output": true},
        {"type": "float", "size": 1000, "fill": "iota"},
        {"type": "float", "value": 2.0}, {"type": "int32", "value": 1000}])")),
      options);
  const auto ok =
      evaluator->evaluate(space.config_from_json({{"block_size_x", 64}, {"tile", 2}, {"skip", 0}}));
  EXPECT_TRUE(ok.ok()) << ok.message;
  const auto wrong =
      evaluator->evaluate(space.config_from_json({{"block_size_x", 64}, {"tile", 2}, {"skip", 1}}));
  EXPECT_NE(wrong.message.find("at element 1: 0 instead of 2"), std::string::npos) << wrong.message;
}

}  // namespace
}  // namespace tunebase
