// The user's own kernel tuned as Kernel Tuner tunes it, on whatever OpenCL device is installed
// (PoCL on the CI machine's CPU): a tiled vector scale whose defines can also make it skip
// elements or fail to compile, checked against its reference configuration.
#include "kernels/source_kernel.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/opencl_backend.h"

namespace tunebase {
namespace {

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
