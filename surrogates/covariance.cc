#include "surrogates/covariance.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "surrogates/linalg.h"

namespace tunebase::surrogates {
namespace {

constexpr double kSqrt5 = 2.23606797749978969641;

// k(r) and G(r) (see GramWithDerivatives) from one squared scaled distance.
struct KernelValue {
  double k;
  double g;
};

KernelValue kernel_value(CovarianceKind kind, double s2, double r2) {
  if (kind == CovarianceKind::matern52) {
    const double t = kSqrt5 * std::sqrt(r2);
    const double e = s2 * std::exp(-t);
    // k = s2 (1 + t + t^2/3) e^-t;  dk/dlog l_j = s2 5/3 (1 + t) e^-t (dx_j / l_j)^2
    return {e * (1.0 + t + t * t / 3.0), e * (5.0 / 3.0) * (1.0 + t)};
  }
  // k = s2 exp(-r^2/2);  dk/dlog l_j = k (dx_j / l_j)^2
  const double k = s2 * std::exp(-0.5 * r2);
  return {k, k};
}

void check_columns(const Matrix& x, std::size_t d, const char* what) {
  if (static_cast<std::size_t>(x.nc()) != d) {
    throw InvalidInput(std::string(what) + " has " + std::to_string(x.nc()) +
                       " columns but the covariance has " + std::to_string(d) + " lengthscales");
  }
}

}  // namespace

std::string_view to_string(CovarianceKind kind) {
  switch (kind) {
    case CovarianceKind::matern52:
      return "matern52";
    case CovarianceKind::squared_exponential:
      return "squared_exponential";
  }
  return "unknown";
}

CovarianceKind covariance_kind_from_string(std::string_view text) {
  if (text == "matern52" || text == "matern") return CovarianceKind::matern52;
  if (text == "squared_exponential" || text == "se" || text == "rbf") {
    return CovarianceKind::squared_exponential;
  }
  throw InvalidInput("unknown covariance '" + std::string(text) +
                     "'; allowed: matern52, squared_exponential");
}

void Covariance::validate() const {
  if (lengthscales.empty()) throw InvalidInput("covariance: no lengthscales (dimension 0)");
  for (std::size_t j = 0; j < lengthscales.size(); ++j) {
    if (!(lengthscales[j] > 0.0) || !std::isfinite(lengthscales[j])) {
      throw InvalidInput("covariance: lengthscale " + std::to_string(j) + " is " +
                         std::to_string(lengthscales[j]) + "; must be positive and finite");
    }
  }
  if (!(signal_variance > 0.0) || !std::isfinite(signal_variance)) {
    throw InvalidInput("covariance: signal variance " + std::to_string(signal_variance) +
                       " must be positive and finite");
  }
}

double Covariance::operator()(std::span<const double> a, std::span<const double> b) const {
  double r2 = 0.0;
  for (std::size_t j = 0; j < lengthscales.size(); ++j) {
    const double u = (a[j] - b[j]) / lengthscales[j];
    r2 += u * u;
  }
  return kernel_value(kind, signal_variance, r2).k;
}

Matrix Covariance::cross(const Matrix& a, const Matrix& b) const {
  check_columns(a, dimension(), "first point set");
  check_columns(b, dimension(), "second point set");
  Matrix out(a.nr(), b.nr());
  if (a.nr() == 0 || b.nr() == 0) return out;
  detail::cross_covariance_scaled(kind, signal_variance, detail::scale_inputs(a, lengthscales),
                                  detail::scale_inputs(b, lengthscales), &out(0, 0),
                                  static_cast<std::size_t>(out.nc()));
  return out;
}

Matrix Covariance::gram(const Matrix& x) const { return detail::gram_with_derivatives(*this, x).k; }

namespace detail {

Matrix scale_inputs(const Matrix& x, const std::vector<double>& lengthscales) {
  Matrix s(x.nr(), x.nc());
  for (long i = 0; i < x.nr(); ++i) {
    for (long j = 0; j < x.nc(); ++j) s(i, j) = x(i, j) / lengthscales[static_cast<std::size_t>(j)];
  }
  return s;
}

void cross_covariance_scaled(CovarianceKind kind, double signal_variance, const Matrix& a_scaled,
                             const Matrix& b_scaled, double* out, std::size_t ldo) {
  const auto na = static_cast<std::size_t>(a_scaled.nr());
  const auto nb = static_cast<std::size_t>(b_scaled.nr());
  const auto d = static_cast<std::size_t>(a_scaled.nc());
  if (na == 0 || nb == 0) return;
  std::vector<double> norm_b(nb, 0.0);
  for (std::size_t c = 0; c < nb; ++c) {
    for (std::size_t j = 0; j < d; ++j) norm_b[c] += b_scaled(c, j) * b_scaled(c, j);
  }
  // r2_ac = |a|^2 + |b|^2 - 2 a.b, the cross term as one matrix product
  linalg::gemm(false, true, na, nb, d, -2.0, &a_scaled(0, 0), d, &b_scaled(0, 0), d, 0.0, out, ldo);
  for (std::size_t a = 0; a < na; ++a) {
    double norm_a = 0.0;
    for (std::size_t j = 0; j < d; ++j) norm_a += a_scaled(a, j) * a_scaled(a, j);
    double* row = out + a * ldo;
    for (std::size_t c = 0; c < nb; ++c) row[c] += norm_a + norm_b[c];
    covariance_from_squared_distances(kind, signal_variance, row, nb);
  }
}

GramWithDerivatives gram_with_derivatives(const Covariance& cov, const Matrix& x) {
  check_columns(x, cov.dimension(), "inputs");
  const long n = x.nr();
  const std::size_t d = cov.dimension();
  GramWithDerivatives out{Matrix(n, n), Matrix(n, n)};
  const Matrix s = scale_inputs(x, cov.lengthscales);
  for (long a = 0; a < n; ++a) {
    for (long b = 0; b <= a; ++b) {
      double r2 = 0.0;
      for (std::size_t j = 0; j < d; ++j) {
        const double u = s(a, static_cast<long>(j)) - s(b, static_cast<long>(j));
        r2 += u * u;
      }
      const KernelValue v = kernel_value(cov.kind, cov.signal_variance, r2);
      out.k(a, b) = out.k(b, a) = v.k;
      out.g(a, b) = out.g(b, a) = v.g;
    }
  }
  return out;
}

std::vector<double> contract_derivatives(const Covariance& cov, const Matrix& x,
                                         const GramWithDerivatives& gram, const Matrix& w) {
  const auto n = static_cast<std::size_t>(x.nr());
  const std::size_t d = cov.dimension();
  std::vector<double> grad(d + 1, 0.0);
  if (n == 0) return grad;
  // M = W o G;  sum_ab M_ab (x_aj - x_bj)^2 = 2 sum_a x_aj^2 (M 1)_a - 2 sum_a x_aj (M x)_aj
  Matrix m = dlib::pointwise_multiply(w, gram.g);
  Matrix mx(static_cast<long>(n), static_cast<long>(d));
  linalg::gemm(false, false, n, d, n, 1.0, &m(0, 0), n, &x(0, 0), d, 0.0, &mx(0, 0), d);
  std::vector<double> row_sum(n, 0.0);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) row_sum[a] += m(a, b);
  }
  for (std::size_t j = 0; j < d; ++j) {
    double acc = 0.0;
    for (std::size_t a = 0; a < n; ++a) {
      acc += x(a, j) * (x(a, j) * row_sum[a] - mx(a, j));
    }
    grad[j] = 2.0 * acc / (cov.lengthscales[j] * cov.lengthscales[j]);
  }
  // dK/dlog s2 = K
  grad[d] = dlib::sum(dlib::pointwise_multiply(w, gram.k));
  return grad;
}

Matrix apply_derivatives(const Covariance& cov, const Matrix& x, const GramWithDerivatives& gram,
                         std::span<const double> u) {
  const auto n = static_cast<std::size_t>(x.nr());
  const std::size_t d = cov.dimension();
  Matrix out(static_cast<long>(n), static_cast<long>(d + 1));
  if (n == 0) return out;
  // (dK/dlog l_j u)_a = [x_aj^2 (G u)_a - 2 x_aj (G (x_j o u))_a + (G (x_j^2 o u))_a] / l_j^2
  const std::size_t cols = 2 * d + 1;
  Matrix rhs(static_cast<long>(n), static_cast<long>(cols));
  for (std::size_t a = 0; a < n; ++a) {
    rhs(a, 0) = u[a];
    for (std::size_t j = 0; j < d; ++j) {
      rhs(a, 1 + j) = x(a, j) * u[a];
      rhs(a, 1 + d + j) = x(a, j) * x(a, j) * u[a];
    }
  }
  Matrix prod(static_cast<long>(n), static_cast<long>(cols));
  linalg::gemm(false, false, n, cols, n, 1.0, &gram.g(0, 0), n, &rhs(0, 0), cols, 0.0, &prod(0, 0),
               cols);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t j = 0; j < d; ++j) {
      const double xa = x(a, j);
      out(a, j) = (xa * xa * prod(a, 0) - 2.0 * xa * prod(a, 1 + j) + prod(a, 1 + d + j)) /
                  (cov.lengthscales[j] * cov.lengthscales[j]);
    }
  }
  // dK/dlog s2 u = K u
  std::vector<double> ku(n, 0.0);
  linalg::gemv(false, n, n, 1.0, &gram.k(0, 0), n, u.data(), 0.0, ku.data());
  for (std::size_t a = 0; a < n; ++a) out(a, d) = ku[a];
  return out;
}

}  // namespace detail
}  // namespace tunebase::surrogates
