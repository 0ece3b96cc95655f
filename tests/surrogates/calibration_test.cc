#include "surrogates/calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace tunebase::surrogates {
namespace {

TEST(IntervalScale, ResidualsTwiceTooLargeDoubleTheIntervalOnceThereAreMany) {
  // r_i = +-2 (a model whose standard deviations are half what they should be): s2 tends to 4,
  // and with many degrees of freedom the 68% half-width to 2 standard deviations.
  std::vector<double> residuals;
  for (int i = 0; i < 2000; ++i) residuals.push_back(i % 2 ? 2.0 : -2.0);
  const auto scale = interval_scale(residuals, 2.0);
  // s2 = (2 + 2000 * 4) / 2002
  EXPECT_NEAR(scale.variance_scale, 8002.0 / 2002.0, 1e-12);
  EXPECT_DOUBLE_EQ(scale.degrees_of_freedom, 2002.0);
  EXPECT_NEAR(scale.half_width(0.6826894921370859), 2.0, 1e-3);
  EXPECT_NEAR(scale.half_width(0.95), 1.96 * 2.0, 1e-2);
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
