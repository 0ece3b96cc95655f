// The replay evaluator, on a small file written here and on the real GPU datasets.
#include "kernels/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

using ::testing::HasSubstr;

const std::string kCache = R"({
  "device_name": "Test GPU", "kernel_name": "vector_add", "problem_size": [1024],
  "tune_params_keys": ["block_size_x", "scale"],
  "tune_params": {"block_size_x": [16, 32, 64], "scale": [0.5, 1.0]},
  "cache": {
    "16,0.5": {"block_size_x": 16, "scale": 0.5, "time": 2.5, "times": [2.0, 3.0]},
    "32,0.5": {"block_size_x": 32, "scale": 0.5, "time": 1.25, "times": [1.0, 1.5],
               "GFLOP/s": 80.0},
    "64,1.0": {"block_size_x": 64, "scale": 1.0, "time": "RuntimeFailedConfig"}
  }})";

Configuration config(std::int64_t bx, double scale) { return {Value(bx), Value(scale)}; }

TEST(ReplayEvaluator, ReturnsTheFilesValuesAndFailures) {
  ReplayEvaluator replay(parse_measurements(kCache, "toy.json"), "toy.json");
  EXPECT_EQ(replay.kernel_name(), "vector_add");
  EXPECT_EQ(replay.device_name(), "Test GPU");
  EXPECT_EQ(replay.task(), (nlohmann::json{{"problem_size", {1024}}}));
  EXPECT_EQ(replay.size(), 3u);
  EXPECT_EQ(replay.configurations().size(), 3u);
  EXPECT_EQ(replay.failed_count(), 1u);
  EXPECT_TRUE(replay.minimize());

  const Measurement fast = replay.evaluate(config(32, 0.5));
  ASSERT_TRUE(fast.ok());
  EXPECT_DOUBLE_EQ(fast.objective, 1.25);
  EXPECT_EQ(fast.raw, (std::vector<double>{1.0, 1.5}));
  EXPECT_DOUBLE_EQ(fast.metrics.at("GFLOP/s").get<double>(), 80.0);

  const Measurement failed = replay.evaluate(config(64, 1.0));
  EXPECT_EQ(failed.status, TrialStatus::failed);
  EXPECT_EQ(failed.message, "RuntimeFailedConfig");

  // In the space but never measured: a failed trial, not an exception.
  const Measurement absent = replay.evaluate(config(16, 1.0));
  EXPECT_EQ(absent.status, TrialStatus::failed);
  EXPECT_EQ(absent.message, "configuration not in toy.json");
  EXPECT_FALSE(replay.contains(config(16, 1.0)));
  // Outside the space, or the wrong length: also simply not in the file.
  EXPECT_EQ(replay.evaluate(config(128, 0.5)).message, "configuration not in toy.json");
  EXPECT_EQ(replay.evaluate({Value(std::int64_t{16})}).status, TrialStatus::failed);

  EXPECT_DOUBLE_EQ(replay.optimum(), 1.25);
  EXPECT_EQ(replay.space().key(replay.best().config), "32,0.5");
}

// Kernel Tuner's simulation mode with restrictions: the file's configurations the space allows,
// in the space's own values, answered from the file.
TEST(ReplayInSpace, SearchesTheFilesConfigurationsTheSpaceAllows) {
  ReplayEvaluator replay(parse_measurements(kCache, "toy.json"), "toy.json");
  const auto space = SearchSpace::from_document(nlohmann::ordered_json::parse(
      R"({"tune_params": {"block_size_x": [16, 32, 64, 128], "scale": [0.5, 1]},
          "restrictions": ["block_size_x >= 32"]})"));
  ReplayInSpace within(replay, space);
  ASSERT_EQ(within.candidates()->size(), 2u);
  EXPECT_EQ(within.left_out(), 1u);
  EXPECT_EQ(within.kernel_name(), "vector_add");
  EXPECT_EQ(within.space().fingerprint(), space.fingerprint());
  const auto& first = within.candidates()->front();
  EXPECT_EQ(space.config_to_json(first), (nlohmann::json{{"block_size_x", 32}, {"scale", 0.5}}));
  EXPECT_DOUBLE_EQ(within.evaluate(first).objective, 1.25);
  EXPECT_EQ(within.evaluate(within.candidates()->back()).message, "RuntimeFailedConfig");

  const auto other = SearchSpace::from_json(nlohmann::json::parse(
      R"({"parameters": [{"name": "block_size_x", "values": [16]}, {"name": "x", "values": [1]}]})"));
  try {
    ReplayInSpace wrong(replay, other);
    FAIL() << "a space of other parameters was taken";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("the space's parameter 'x' is not one of toy.json's"));
  }
  const auto none = SearchSpace::from_document(nlohmann::ordered_json::parse(
      R"({"tune_params": {"block_size_x": [16, 32, 64], "scale": [0.5, 1.0]},
          "restrictions": ["block_size_x > 64"]})"));
  EXPECT_THROW(ReplayInSpace(replay, none), InvalidInput);
}

TEST(ReplayEvaluator, MatchesNumbersWhateverTheirType) {
  ReplayEvaluator replay(parse_measurements(kCache, "toy.json"), "toy.json");
  // 32.0 for 32 and the integer 1 for 1.0 name the same configurations.
  EXPECT_TRUE(replay.evaluate({Value(32.0), Value(0.5)}).ok());
  EXPECT_EQ(replay.evaluate({Value(std::int64_t{64}), Value(std::int64_t{1})}).message,
            "RuntimeFailedConfig");
  EXPECT_DOUBLE_EQ(replay.lookup_json({{"scale", 0.5}, {"block_size_x", 16}}).objective, 2.5);
  EXPECT_THROW(replay.lookup_json({{"block_size_x", 16}}), InvalidInput);
  EXPECT_THROW(replay.lookup_json({{"block_size_x", 16}, {"scale", 0.5}, {"x", 1}}), InvalidInput);
}

TEST(ReplayEvaluator, FileWithoutKernelNameOrSuccesses) {
  const std::string t4 = R"({"schema_version": "1.0.0", "results": [
    {"configuration": {"bx": 16}, "invalidity": "compile", "correctness": 0, "times": {}}]})";
  ReplayEvaluator replay(parse_measurements(t4, "/data/A100_T4.json.gz"), "/data/A100_T4.json.gz");
  EXPECT_EQ(replay.kernel_name(), "replay:A100_T4");
  EXPECT_EQ(replay.task(), nlohmann::json::object());
  EXPECT_THROW(replay.optimum(), InvalidInput);
  ReplayEvaluator named(parse_measurements(t4, "x"), "x", "convolution_kernel");
  EXPECT_EQ(named.kernel_name(), "convolution_kernel");
}

// Kernel Tuner's objective="GFLOP/s", objective_higher_is_better=True: the field is the
// objective, a rate is maximised, and its best need not be the fastest configuration.
const std::string kRates = R"({
  "device_name": "Test GPU", "kernel_name": "stencil",
  "tune_params_keys": ["bx"], "tune_params": {"bx": [16, 32, 64, 128]},
  "cache": {
    "16": {"bx": 16, "time": 1.0, "times": [1.0, 1.0], "GFLOP/s": 50.0, "timestamp": "t"},
    "32": {"bx": 32, "time": 2.0, "times": [2.0, 2.0], "GFLOP/s": 90.0},
    "64": {"bx": 64, "time": "CompilationFailedConfig"},
    "128": {"bx": 128, "time": 0.5}
  }})";

TEST(ReplayEvaluator, TunesAnotherFieldAndMaximisesARate) {
  ReplayEvaluator replay(parse_measurements(kRates, "rates.json"), "rates.json", {},
                         ReplayObjective{.name = "GFLOP/s", .minimize = std::nullopt});
  EXPECT_FALSE(replay.minimize());
  EXPECT_EQ(replay.objective_unit(), "GFLOP/s");
  EXPECT_EQ(replay.objective_name(), "GFLOP/s");
  EXPECT_DOUBLE_EQ(replay.optimum(), 90.0);
  EXPECT_EQ(replay.space().key(replay.best().config), "32");

  const Measurement m = replay.evaluate({Value(std::int64_t{16})});
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m.objective, 50.0);
  // The time is kept, as a metric: the raw values are the objective's, and times are not.
  EXPECT_TRUE(m.raw.empty());
  EXPECT_DOUBLE_EQ(m.metrics.at("time").get<double>(), 1.0);
  EXPECT_EQ(m.metrics.at("times"), (nlohmann::json{1.0, 1.0}));
  // A failure string stays the failure; a success without the field fails, saying why.
  EXPECT_EQ(replay.evaluate({Value(std::int64_t{64})}).message, "CompilationFailedConfig");
  const Measurement none = replay.evaluate({Value(std::int64_t{128})});
  EXPECT_EQ(none.status, TrialStatus::failed);
  EXPECT_THAT(none.message, HasSubstr("no number in 'GFLOP/s'"));

  // --minimize overrides the rate's direction; time stays the default objective.
  const ReplayEvaluator lowest(parse_measurements(kRates, "rates.json"), "rates.json", {},
                               ReplayObjective{.name = "GFLOP/s", .minimize = true});
  EXPECT_TRUE(lowest.minimize());
  EXPECT_DOUBLE_EQ(lowest.optimum(), 50.0);
  const ReplayEvaluator time(parse_measurements(kRates, "rates.json"), "rates.json");
  EXPECT_TRUE(time.minimize());
  EXPECT_EQ(time.objective_unit(), "ms");
  EXPECT_DOUBLE_EQ(time.optimum(), 0.5);
}

TEST(ReplayEvaluator, UnknownObjectiveListsTheNumericFields) {
  try {
    ReplayEvaluator(parse_measurements(kRates, "rates.json"), "rates.json", {},
                    ReplayObjective{.name = "GFLOPS", .minimize = std::nullopt});
    FAIL() << "an unknown objective was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("objective 'GFLOPS' is not a numeric field of rates.json"));
    EXPECT_THAT(e.what(), HasSubstr("time, GFLOP/s"));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("timestamp")));  // a string
  }
  // A parameter is no objective either.
  EXPECT_THROW(ReplayEvaluator(parse_measurements(kRates, "r"), "r", {},
                               ReplayObjective{.name = "bx", .minimize = std::nullopt}),
               InvalidInput);
}

TEST(ReplayEvaluator, MissingFileIsAnIoError) {
  testing::TempDir dir;
  EXPECT_THROW(ReplayEvaluator::from_file(dir.file("nothing.json.gz")), IoError);
}

// ------------------------------------------------------------------ real datasets

struct Counts {
  std::size_t entries = 0;
  std::size_t failed = 0;
  std::map<std::string, std::size_t> messages;
  double best = std::numeric_limits<double>::infinity();
};

Counts count(const MeasuredDataset& d) {
  Counts c;
  c.entries = d.entries.size();
  for (const auto& e : d.entries) {
    if (e.result.ok()) {
      c.best = std::min(c.best, e.result.objective);
    } else {
      ++c.failed;
      ++c.messages[e.result.message];
    }
  }
  return c;
}

TEST(RealData, GemmA100) {
  TUNEBASE_SHARED_FILE_OR_SKIP(path, "gpu/gemm/A100.json.gz");
  const ReplayEvaluator replay = ReplayEvaluator::from_file(path);
  const Counts c = count(replay.dataset());
  EXPECT_EQ(c.entries, 17956u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_NEAR(c.best, 8.51811, 1e-5);  // the file holds 8.518112; README rounds to 6 digits
  EXPECT_EQ(replay.optimum(), c.best);
  EXPECT_EQ(replay.kernel_name(), "Xgemm");
  EXPECT_EQ(replay.device_name(), "A100-PCIE-40GB");
  EXPECT_EQ(replay.space().dimension(), 15u);
  EXPECT_DOUBLE_EQ(replay.space().cartesian_size(), 82944.0);
  EXPECT_EQ(replay.configurations().size(), 17956u);
  EXPECT_EQ(replay.dataset().entries.front().result.raw.size(), 32u);
}

TEST(RealData, ConvolutionHubA100AndItsT4TwinAgree) {
  TUNEBASE_SHARED_FILE_OR_SKIP(kt_path, "gpu/convolution_hub/A100.json.gz");
  TUNEBASE_SHARED_FILE_OR_SKIP(t4_path, "gpu/convolution_hub/A100_T4.json.gz");
  ReplayEvaluator kt = ReplayEvaluator::from_file(kt_path);
  const ReplayEvaluator t4 = ReplayEvaluator::from_file(t4_path, kt.kernel_name());

  const Counts k = count(kt.dataset());
  EXPECT_EQ(k.entries, 4362u);
  EXPECT_EQ(k.failed, 161u);
  EXPECT_EQ(k.messages.at("RuntimeFailedConfig"), 155u);
  EXPECT_EQ(k.messages.at("CompilationFailedConfig"), 6u);
  EXPECT_NEAR(k.best, 0.5536, 1e-6);  // README rounds to 6 digits
  EXPECT_EQ(kt.dataset().format, "kernel_tuner");
  EXPECT_EQ(kt.dataset().entries.front().result.metrics.count("GFLOP/s"), 1u);

  const Counts t = count(t4.dataset());
  EXPECT_EQ(t4.dataset().format, "t4");
  EXPECT_EQ(t.entries, k.entries);
  EXPECT_EQ(t.failed, k.failed);
  EXPECT_EQ(t.messages, k.messages);
  EXPECT_DOUBLE_EQ(t.best, k.best);
  // Same parameters in the same order with the same values: one kernel version.
  EXPECT_EQ(t4.space().fingerprint(), kt.space().fingerprint());

  // Replay answers every configuration of the cache file exactly as the file says.
  for (const auto& entry : kt.dataset().entries) {
    const Measurement m = kt.evaluate(entry.config);
    ASSERT_EQ(m.status, entry.result.status);
    if (entry.result.ok()) {
      ASSERT_EQ(m.objective, entry.result.objective);
    } else {
      ASSERT_EQ(m.message, entry.result.message);
    }
    const Measurement twin = t4.lookup(entry.config);
    ASSERT_EQ(twin.status, entry.result.status) << kt.space().key(entry.config);
    if (entry.result.ok()) {
      ASSERT_DOUBLE_EQ(twin.objective, entry.result.objective);
    }
  }
}

TEST(RealData, DedispersionT4TwinAgrees) {
  TUNEBASE_SHARED_FILE_OR_SKIP(kt_path, "gpu/dedispersion/A6000.json.gz");
  TUNEBASE_SHARED_FILE_OR_SKIP(t4_path, "gpu/dedispersion/A6000_T4.json.gz");
  const Counts k = count(read_measurements(kt_path));
  const Counts t = count(read_measurements(t4_path));
  EXPECT_EQ(k.entries, 11130u);
  EXPECT_EQ(t.entries, 11130u);
  EXPECT_EQ(k.failed, 0u);
  EXPECT_EQ(t.failed, 0u);
  EXPECT_NEAR(k.best, 84.2181, 1e-4);
  EXPECT_DOUBLE_EQ(t.best, k.best);
}

}  // namespace
}  // namespace tunebase
