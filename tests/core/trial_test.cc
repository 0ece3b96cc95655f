// Results as evaluators give them and as they are stored.
#include "core/trial.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tunebase
