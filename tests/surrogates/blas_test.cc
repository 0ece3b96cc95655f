// dlib's matrix products and our own linear algebra must reach OpenBLAS, not dlib's fallback
// loops or the reference BLAS. This executable interposes cblas_dgemm (a definition in the
// executable wins over the shared libraries'), counts the calls and forwards them to the
// next definition, which must live in an OpenBLAS library.
// cblas.h before any dlib header, so dlib uses these prototypes (see surrogates/linalg.h).
#include <cblas.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "surrogates/covariance.h"
#include "surrogates/linalg.h"

namespace {
std::atomic<int> dgemm_calls{0};
using Dgemm = decltype(&cblas_dgemm);

Dgemm next_dgemm() {
  static const auto next = reinterpret_cast<Dgemm>(dlsym(RTLD_NEXT, "cblas_dgemm"));
  return next;
}
}  // namespace

extern "C" void cblas_dgemm(OPENBLAS_CONST enum CBLAS_ORDER order,
                            OPENBLAS_CONST enum CBLAS_TRANSPOSE trans_a,
                            OPENBLAS_CONST enum CBLAS_TRANSPOSE trans_b, OPENBLAS_CONST blasint m,
                            OPENBLAS_CONST blasint n, OPENBLAS_CONST blasint k,
                            OPENBLAS_CONST double alpha, OPENBLAS_CONST double* a,
                            OPENBLAS_CONST blasint lda, OPENBLAS_CONST double* b,
                            OPENBLAS_CONST blasint ldb, OPENBLAS_CONST double beta, double* c,
                            OPENBLAS_CONST blasint ldc) {
  ++dgemm_calls;
  next_dgemm()(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace tunebase::surrogates {
namespace {

TEST(Blas, ForwardedDgemmLivesInOpenBlas) {
  ASSERT_NE(next_dgemm(), nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(next_dgemm()), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  // libblas.so.3 may be a symlink chain (Debian alternatives) to OpenBLAS's copy.
  const std::string library = std::filesystem::canonical(info.dli_fname).string();
  EXPECT_NE(library.find("openblas"), std::string::npos) << library;
  EXPECT_NE(linalg::blas_configuration().find("OpenBLAS"), std::string::npos);
}

TEST(Blas, DlibMatrixProductsCallBlas) {
  constexpr long kSize = 64;
  Matrix a = dlib::randm(kSize, kSize);
  Matrix b = dlib::randm(kSize, kSize);
  const int before = dgemm_calls.load();
  Matrix c = a * b;
  EXPECT_GT(dgemm_calls.load(), before) << "dlib evaluated a*b without BLAS (DLIB_USE_BLAS?)";
  // And the result is right.
  double expected = 0.0;
  for (long k = 0; k < kSize; ++k) expected += a(3, k) * b(k, 5);
  EXPECT_NEAR(c(3, 5), expected, 1e-12);
}

TEST(Blas, CovarianceUsesBlasForDistances) {
  Covariance cov;
  cov.lengthscales = {0.5, 0.5};
  const Matrix a = dlib::randm(10, 2);
  const Matrix b = dlib::randm(20, 2);
  const int before = dgemm_calls.load();
  const Matrix k = cov.cross(a, b);
  EXPECT_GT(dgemm_calls.load(), before);
  const double direct =
      cov(std::span<const double>(&a(2, 0), 2), std::span<const double>(&b(7, 0), 2));
  EXPECT_NEAR(k(2, 7), direct, 1e-12);
}

}  // namespace
}  // namespace tunebase::surrogates
