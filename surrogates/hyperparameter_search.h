#pragma once
// Type-II maximum a posteriori search shared by the GP regression and the feasibility
// classifier: box-constrained L-BFGS (dlib) from several starts, keeping the lowest.

#include <dlib/optimization.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include "core/error.h"
#include "surrogates/covariance.h"

namespace tunebase::surrogates::detail {

using ColumnVector = dlib::matrix<double, 0, 1>;

/// Objective value where the posterior cannot be evaluated, so that the line search backs off.
inline constexpr double kFailedObjective = 1e30;

/// The best of a multi-start search: `value` is at least kFailedObjective when no start could
/// be evaluated.
struct Minimum {
  double value = std::numeric_limits<double>::infinity();
  ColumnVector theta;
};

/// Minimises, from each of `starts` (clamped into [lo, hi] by the caller), the objective that
/// `make_objective()` returns for that start: a callable
/// `double(const ColumnVector& theta, ColumnVector& gradient)` that fills the gradient and may
/// throw Error where it cannot be evaluated. Each point is evaluated once for dlib's separate
/// value and derivative callbacks; a fresh objective per start keeps any state it carries
/// between evaluations (a warm start) within one descent.
template <typename MakeObjective>
Minimum minimise_from_starts(MakeObjective make_objective, std::span<const ColumnVector> starts,
                             const ColumnVector& lo, const ColumnVector& hi, double tolerance,
                             std::size_t max_iterations) {
  constexpr unsigned long kLbfgsMemory = 10;
  Minimum best;
  for (const ColumnVector& start : starts) {
    auto objective = make_objective();
    ColumnVector last;
    bool evaluated = false;
    double value = 0.0;
    ColumnVector gradient;
    auto evaluate = [&](const ColumnVector& theta) {
      if (evaluated && theta == last) return;
      last = theta;
      evaluated = true;
      gradient.set_size(theta.size());
      try {
        value = objective(theta, gradient);
        if (!std::isfinite(value)) throw Error("non-finite objective");
      } catch (const Error&) {
        value = kFailedObjective;
        gradient = 0;
      }
    };
    ColumnVector theta = start;
    const double found = dlib::find_min_box_constrained(
        dlib::lbfgs_search_strategy(kLbfgsMemory),
        dlib::objective_delta_stop_strategy(tolerance, static_cast<unsigned long>(max_iterations)),
        [&](const ColumnVector& t) {
          evaluate(t);
          return value;
        },
        [&](const ColumnVector& t) {
          evaluate(t);
          return gradient;
        },
        theta, lo, hi);
    if (found < best.value) {
      best.value = found;
      best.theta = theta;
    }
  }
  return best;
}

}  // namespace tunebase::surrogates::detail
