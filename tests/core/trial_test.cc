// Results as evaluators give them and as they are stored.
#include "core/trial.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tunebase {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// An evaluator that says ok without a number lost the evaluation in a sweep: the store
// refuses such a result, and the sweep ended on the error.
TEST(Storable, AnOkWithoutAFiniteObjectiveIsAFailureThatSaysSo) {
  for (double value : {kNaN, kInf, -kInf}) {
    auto m = Measurement::success(value, {1.0, value}, 2.0);
    m.message = "parsed from stdout";
    const auto stored = storable(m);
    EXPECT_EQ(stored.status, TrialStatus::failed) << value;
    EXPECT_NE(stored.message.find("no finite objective"), std::string::npos) << stored.message;
    EXPECT_NE(stored.message.find("parsed from stdout"), std::string::npos) << stored.message;
    EXPECT_EQ(stored.raw, std::vector<double>{1.0}) << "raw values that are not numbers stay";
    EXPECT_EQ(stored.cost_seconds, 2.0);
  }
}

TEST(Storable, KeepsAGoodResultAndFailureAsTheyAre) {
  const auto ok = Measurement::success(3.0, {3.0, 2.9, 3.1}, 0.5);
  EXPECT_TRUE(same_result(storable(ok), ok));
  const auto failed = Measurement::failure(TrialStatus::timeout, "ran past 10 s", 10.0);
  const auto stored = storable(failed);
  EXPECT_TRUE(same_result(stored, failed));
  EXPECT_EQ(stored.status, TrialStatus::timeout);
}

TEST(Storable, ACostThatIsNoDurationIsZero) {
  for (double cost : {kNaN, kInf, -1.0}) {
    EXPECT_EQ(storable(Measurement::success(1.0, {}, cost)).cost_seconds, 0.0) << cost;
  }
}

// Every listing and export of a study carries its results' messages: a program's whole output
// is cut to its start and its end (where it says why it failed), never mid-character.
TEST(Storable, ALongMessageKeepsItsStartAndItsEnd) {
  std::string output = "`bench` exited with code 1; stderr: ";
  while (output.size() < 3 * kMaxMessageBytes) output += "warning: \u00e9t\u00e9 unused variable\n";
  output += "error: out of memory";
  const auto stored = storable(Measurement::failure(TrialStatus::failed, output));
  EXPECT_LE(stored.message.size(), kMaxMessageBytes);
  EXPECT_TRUE(stored.message.starts_with("`bench` exited with code 1; stderr: "));
  EXPECT_TRUE(stored.message.ends_with("error: out of memory")) << stored.message.substr(0, 100);
  EXPECT_NE(stored.message.find(" bytes cut ...]"), std::string::npos);
  EXPECT_NO_THROW((void)nlohmann::json(stored.message).dump()) << "cut inside a character";
  // At the limit, nothing is cut.
  const std::string full(kMaxMessageBytes, 'x');
  EXPECT_EQ(storable(Measurement::failure(TrialStatus::failed, full)).message, full);
}

TEST(Storable, MetricsOverTheLimitAreLeftOutSayingSo) {
  auto m = Measurement::success(1.0);
  m.metrics = {{"trace", std::string(kMaxMetricsBytes, 't')}};
  const auto stored = storable(m);
  EXPECT_TRUE(stored.ok());
  EXPECT_TRUE(stored.metrics.empty());
  EXPECT_NE(stored.message.find("its metrics (65548 bytes as JSON) were left out"),
            std::string::npos)
      << stored.message;
  m.metrics = {{"GFLOP/s", 9.5}};
  EXPECT_EQ(storable(m).metrics, m.metrics);
}

// The API takes at most kMaxRawValues raw values: a worker run with many repeats sends an even
// sample of them, in order, and says so; its objective is what the evaluator gave.
TEST(Storable, RawValuesOverTheLimitAreThinnedEvenlySayingSo) {
  const std::size_t taken = 3 * kMaxRawValues + 1;
  std::vector<double> raw(taken);
  for (std::size_t i = 0; i < taken; ++i) raw[i] = static_cast<double>(i);
  auto m = Measurement::success(42.0, raw, 1.0);
  m.message = "ran";
  const auto stored = storable(m);
  ASSERT_EQ(stored.raw.size(), kMaxRawValues);
  EXPECT_EQ(stored.raw.front(), 0.0);
  EXPECT_GT(stored.raw.back(), static_cast<double>(taken - 5)) << "the sample spans them all";
  EXPECT_TRUE(std::is_sorted(stored.raw.begin(), stored.raw.end()));
  EXPECT_EQ(stored.objective, 42.0);
  EXPECT_EQ(stored.message.rfind("ran; raw holds 4096 of its 12289 measurements", 0), 0u)
      << stored.message;
  // At the limit, nothing changes.
  const auto whole = Measurement::success(1.0, std::vector<double>(kMaxRawValues, 1.0));
  EXPECT_EQ(storable(whole).raw.size(), kMaxRawValues);
  EXPECT_TRUE(storable(whole).message.empty());
}

// A retry is the result stored, field for field; anything else differs, and says where.
TEST(DifferingFields, NameEveryFieldThatDiffers) {
  auto stored = Measurement::success(0.1, {0.1, 0.2}, 1.5);
  stored.message = "ran";
  stored.metrics = nlohmann::json::parse(R"({"gflops": 2, "bytes": 3.5})");
  auto sent = stored;
  sent.metrics = nlohmann::json::parse(R"({"bytes": 3.5, "gflops": 2.0})");
  EXPECT_TRUE(differing_fields(stored, sent).empty());
  sent.objective = 0.2;
  sent.cost_seconds = 1.0;
  sent.metrics["gflops"] = 2.5;
  EXPECT_EQ(differing_fields(stored, sent),
            (std::vector<std::string>{"value", "cost_seconds", "metrics"}));
  const auto failed = Measurement::failure(TrialStatus::failed, "crashed");
  EXPECT_EQ(
      differing_fields(stored, failed),
      (std::vector<std::string>{"status", "value", "raw", "cost_seconds", "message", "metrics"}));
  // Metrics left out and an empty object are the same: none.
  auto none = failed;
  none.metrics = nullptr;
  EXPECT_TRUE(differing_fields(failed, none).empty());
}

}  // namespace
}  // namespace tunebase
