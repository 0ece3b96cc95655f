// Stationary covariance functions (Matérn-5/2 and squared exponential) with ARD lengthscales.
//
// Called "covariance" rather than "kernel" because a kernel, in tunebase, is the tuned code.
// Points are the rows of a dlib::matrix<double> (row-major, contiguous); inputs are expected
// in [0,1]^d (SearchSpace::encode), which is what the default lengthscale priors assume.
#pragma once

#include <dlib/matrix.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tunebase::surrogates {

/// Dense matrix of doubles, row-major; one point per row. Contiguous, so BLAS can take it.
using Matrix = dlib::matrix<double>;

enum class CovarianceKind {
  matern52,             ///< k = s2 (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r)
  squared_exponential,  ///< k = s2 exp(-r^2 / 2)
};

std::string_view to_string(CovarianceKind kind);
/// "matern52" or "squared_exponential" (also "se", "rbf"); throws InvalidInput otherwise.
CovarianceKind covariance_kind_from_string(std::string_view text);

/// r^2 = sum_j ((a_j - b_j) / l_j)^2, k = signal_variance * shape(r).
struct Covariance {
  CovarianceKind kind = CovarianceKind::matern52;
  std::vector<double> lengthscales;
  double signal_variance = 1.0;

  std::size_t dimension() const { return lengthscales.size(); }
  bool operator==(const Covariance&) const = default;

  /// k(a, b) for two points.
  double operator()(std::span<const double> a, std::span<const double> b) const;
  /// K(A, B): rows of A against rows of B, via one matrix product for the distances.
  Matrix cross(const Matrix& a, const Matrix& b) const;
  /// K(X, X), from exact coordinate differences (symmetric, diagonal = signal variance).
  Matrix gram(const Matrix& x) const;
  /// Throws InvalidInput unless lengthscales and signal variance are positive and finite.
  void validate() const;
};

namespace detail {

/// In place: r2[i] <- k(r2[i]) for scaled squared distances (clamped at 0 first). Vectorised
/// (SIMD exp); this is the inner loop of batched prediction.
void covariance_from_squared_distances(CovarianceKind kind, double signal_variance, double* r2,
                                       std::size_t count);

/// Rows of `x` divided by the lengthscales (so plain Euclidean distances are the scaled ones).
Matrix scale_inputs(const Matrix& x, const std::vector<double>& lengthscales);

/// out (ld = ldo) <- K(A, B) given inputs already divided by the lengthscales.
void cross_covariance_scaled(CovarianceKind kind, double signal_variance, const Matrix& a_scaled,
                             const Matrix& b_scaled, double* out, std::size_t ldo);

/// K(X, X) together with G, where dK_ab / dlog l_j = G_ab (x_aj - x_bj)^2 / l_j^2.
struct GramWithDerivatives {
  Matrix k;
  Matrix g;
};
GramWithDerivatives gram_with_derivatives(const Covariance& cov, const Matrix& x);

/// d/dtheta of sum_ab W_ab K_ab for theta = [log l_1..log l_d, log s2], W symmetric.
std::vector<double> contract_derivatives(const Covariance& cov, const Matrix& x,
                                         const GramWithDerivatives& gram, const Matrix& w);

/// Column j (n x (d+1)): (dK/dtheta_j) u for theta = [log l_1..log l_d, log s2].
Matrix apply_derivatives(const Covariance& cov, const Matrix& x, const GramWithDerivatives& gram,
                         std::span<const double> u);

}  // namespace detail
}  // namespace tunebase::surrogates
