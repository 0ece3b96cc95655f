#include "surrogates/calibration.h"

#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <string>

#include "core/error.h"

namespace tunebase::surrogates {

double IntervalScale::half_width(double probability) const {
  if (!(probability > 0.0 && probability < 1.0)) {
    throw InvalidInput("interval probability " + std::to_string(probability) +
                       " must lie strictly between 0 and 1");
  }
  // sqrt(s2) t_nu((1 + p) / 2)
  const boost::math::students_t_distribution<double> t(degrees_of_freedom);
  return std::sqrt(variance_scale) * boost::math::quantile(t, 0.5 * (1.0 + probability));
}

IntervalScale interval_scale(std::span<const double> standardised_residuals, double prior_points) {
  if (!(prior_points > 0.0) || !std::isfinite(prior_points)) {
    throw InvalidInput("interval_scale: prior_points must be positive and finite, got " +
                       std::to_string(prior_points));
  }
  double sum_squares = 0.0;
  double n = 0.0;
  for (const double r : standardised_residuals) {
    if (!std::isfinite(r)) continue;
    sum_squares += r * r;
    n += 1.0;
  }
  IntervalScale out;
  out.degrees_of_freedom = prior_points + n;
  // s2 = (nu0 * 1 + sum r^2) / (nu0 + n)
  out.variance_scale = (prior_points + sum_squares) / out.degrees_of_freedom;
  return out;
}

}  // namespace tunebase::surrogates
