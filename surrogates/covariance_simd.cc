// The elementwise inner loop of batched prediction, built with -ffast-math -fopenmp-simd
// (surrogates/CMakeLists.txt) so that exp() vectorises through glibc's libmvec, and cloned
// for AVX-512 / AVX2 / baseline so one binary runs everywhere at full width. Only finite,
// non-negative squared distances ever reach it; nothing here tests for NaN or infinity.
#include <cmath>
#include <cstddef>

#include "surrogates/covariance.h"

namespace tunebase::surrogates::detail {
namespace {

constexpr double kSqrt5 = 2.23606797749978969641;

[[gnu::target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")]] void matern52_in_place(
    double s2, double* __restrict r2, std::size_t count) {
#pragma omp simd
  for (std::size_t i = 0; i < count; ++i) {
    // k = s2 (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r), with t = sqrt5 r: s2 (1 + t + t^2/3) e^-t
    const double t = kSqrt5 * std::sqrt(r2[i] > 0.0 ? r2[i] : 0.0);
    r2[i] = s2 * (1.0 + t + t * t * (1.0 / 3.0)) * std::exp(-t);
  }
}

[[gnu::target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")]] void
squared_exponential_in_place(double s2, double* __restrict r2, std::size_t count) {
#pragma omp simd
  for (std::size_t i = 0; i < count; ++i) {
    // k = s2 exp(-r^2 / 2)
    r2[i] = s2 * std::exp(-0.5 * (r2[i] > 0.0 ? r2[i] : 0.0));
  }
}

}  // namespace

void covariance_from_squared_distances(CovarianceKind kind, double signal_variance, double* r2,
                                       std::size_t count) {
  switch (kind) {
    case CovarianceKind::matern52:
      matern52_in_place(signal_variance, r2, count);
      return;
    case CovarianceKind::squared_exponential:
      squared_exponential_in_place(signal_variance, r2, count);
      return;
  }
}

}  // namespace tunebase::surrogates::detail
