#include "surrogates/transform.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/trial.h"

namespace tunebase::surrogates {
namespace {

TEST(ObjectiveTransform, LogStandardisesAndInverts) {
  const std::vector<double> times = {1.0, 10.0, 100.0};
  const ObjectiveTransform t = ObjectiveTransform::fit(times, true);
  const std::vector<double> z = t.forward(times);
  EXPECT_NEAR(z[0] + z[1] + z[2], 0.0, 1e-12);
  EXPECT_NEAR(z[1], 0.0, 1e-12);
  // sample standard deviation of (log 1, log 10, log 100) is log 10
  EXPECT_NEAR(t.scale(), std::log(10.0), 1e-12);
  for (double v : times) EXPECT_NEAR(t.inverse(t.forward(v)), v, 1e-12 * v);
  EXPECT_EQ(ObjectiveTransform::from_json(t.to_json()).centre(), t.centre());
}

TEST(ObjectiveTransform, RejectsNonPositiveValuesUnderLogAndHandlesConstants) {
  EXPECT_THROW(ObjectiveTransform::fit(std::vector<double>{1.0, 0.0}, true), InvalidInput);
  EXPECT_THROW(ObjectiveTransform::fit(std::vector<double>{1.0, NAN}, false), InvalidInput);
  const ObjectiveTransform t = ObjectiveTransform::fit(std::vector<double>{3.0, 3.0}, false);
  EXPECT_DOUBLE_EQ(t.scale(), 1.0);
  EXPECT_DOUBLE_EQ(t.forward(3.0), 0.0);
  const ObjectiveTransform identity;
  EXPECT_DOUBLE_EQ(identity.forward(-2.5), -2.5);
  EXPECT_THROW(ObjectiveTransform::from_json(nlohmann::json{{"log", true}}), InvalidInput);
}

TEST(ObjectiveTransform, ValuesNearTheLargestDoubleStayFinite) {
  // Squared deviations of 1e160 overflowed: the scale was infinite and every prediction NaN.
  constexpr double kLargest = std::numeric_limits<double>::max();
  for (const std::vector<double>& values :
       {std::vector<double>{1e160, -1e160, 3e159}, std::vector<double>{kLargest, -kLargest, 0.0},
        std::vector<double>{kLargest, kLargest}}) {
    const ObjectiveTransform t = ObjectiveTransform::fit(values, false);
    EXPECT_TRUE(std::isfinite(t.centre()));
    EXPECT_TRUE(std::isfinite(t.scale()));
    EXPECT_GT(t.scale(), 0.0);
    for (double v : values) {
      const double z = t.forward(v);
      ASSERT_TRUE(std::isfinite(z)) << v;
      EXPECT_NEAR(t.inverse(z), v, 1e-12 * std::abs(v)) << v;
    }
    EXPECT_TRUE(std::isfinite(t.inverse(1e300)));
  }
  EXPECT_DOUBLE_EQ(median({1e308, 1.5e308}), 1.25e308);
}

}  // namespace
}  // namespace tunebase::surrogates
