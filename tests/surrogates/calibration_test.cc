#include "surrogates/calibration.h"

#include <gtest/gtest.h>

#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace tunebase::surrogates {
namespace {

// n residuals spread as a normal of standard deviation `sd` is: its (i + 1/2) / n quantiles.
std::vector<double> normal_residuals(int n, double sd) {
  const boost::math::normal_distribution<double> normal;
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(sd * boost::math::quantile(normal, (i + 0.5) / n));
  return out;
}

TEST(IntervalScale, ResidualsTwiceTooLargeDoubleTheIntervalOnceThereAreMany) {
  // A model whose standard deviations are half what they should be: s2 tends to 4, and with
  // many degrees of freedom the 68% half-width to 2 standard deviations.
  const auto scale = interval_scale(normal_residuals(2000, 2.0), 2.0);
  EXPECT_NEAR(scale.variance_scale, 4.0, 0.02);
  EXPECT_DOUBLE_EQ(scale.degrees_of_freedom, 2002.0);
  EXPECT_NEAR(scale.half_width(0.6826894921370859), 2.0, 5e-3);
  EXPECT_NEAR(scale.half_width(0.95), 1.96 * 2.0, 2e-2);
}

TEST(IntervalScale, OneResultFarFromTheRestDoesNotWidenEveryInterval) {
  // 89 residuals of a calibrated model and one of 20 (a configuration far slower than any
  // other): the mean of r^2 would be 5.4, and every interval 2.3 times as wide. Counted as 3.5
  // robust standard deviations, it adds 12 / 91 to s2.
  auto residuals = normal_residuals(89, 1.0);
  residuals.push_back(20.0);
  const auto scale = interval_scale(residuals, 2.0);
  EXPECT_GT(scale.variance_scale, 1.0);
  EXPECT_LT(scale.variance_scale, 1.25);
}

TEST(IntervalScale, FewResidualsGiveAStudentTWiderThanTheNormal) {
  // No residual: s2 = 1 with the prior's 2 degrees of freedom, t_2(0.8413) = 1.32.
  const auto none = interval_scale({}, 2.0);
  EXPECT_DOUBLE_EQ(none.variance_scale, 1.0);
  EXPECT_NEAR(none.half_width(0.6826894921370859), 1.3213, 1e-3);
  // Non-finite residuals are left out.
  const std::vector<double> odd = {1.0, std::numeric_limits<double>::quiet_NaN(), -1.0};
  const auto two = interval_scale(odd, 2.0);
  EXPECT_DOUBLE_EQ(two.variance_scale, 1.0);
  EXPECT_DOUBLE_EQ(two.degrees_of_freedom, 4.0);
}

TEST(IntervalScale, RefusesWhatIsNoIntervalOrNoPrior) {
  EXPECT_THROW(interval_scale({}, 0.0), InvalidInput);
  EXPECT_THROW(interval_scale({}, std::numeric_limits<double>::infinity()), InvalidInput);
  const auto scale = interval_scale({}, 2.0);
  EXPECT_THROW((void)scale.half_width(1.0), InvalidInput);
  EXPECT_THROW((void)scale.half_width(0.0), InvalidInput);
}

}  // namespace
}  // namespace tunebase::surrogates
