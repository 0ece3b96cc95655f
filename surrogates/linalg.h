// Thin wrappers over the CBLAS and LAPACK routines the surrogates need, on row-major storage.
//
// dlib::matrix<double> is row-major and contiguous, so `&m(0,0)` with leading dimension
// `m.nc()` is what these take. They live in one translation unit that includes <cblas.h>
// (OpenBLAS) before any dlib header: dlib declares its own copy of the CBLAS prototypes when
// no cblas.h was seen first, and the two sets cannot meet in one file.
#pragma once

#include <cstddef>
#include <string>

namespace tunebase::surrogates::linalg {

/// Lower Cholesky factor in place (the strict upper triangle is zeroed). Returns false when
/// the matrix is not numerically positive definite; `a` is then clobbered.
bool cholesky_lower(double* a, std::size_t n, std::size_t lda);

/// Inverse of the SPD matrix whose lower Cholesky factor is `l` (in place, full symmetric).
void inverse_from_cholesky(double* l, std::size_t n, std::size_t lda);

/// B <- L^-1 B (trans=false) or B <- L^-T B (trans=true), L lower n x n, B n x m.
void solve_lower(const double* l, std::size_t n, std::size_t ldl, double* b, std::size_t m,
                 std::size_t ldb, bool trans);

/// x <- L^-1 x or L^-T x for one vector.
void solve_lower_vector(const double* l, std::size_t n, std::size_t ldl, double* x, bool trans);

/// C <- alpha op(A) op(B) + beta C, with op(A) m x k and op(B) k x n.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta,
          double* c, std::size_t ldc);

/// y <- alpha op(A) x + beta y, A m x n.
void gemv(bool trans, std::size_t m, std::size_t n, double alpha, const double* a, std::size_t lda,
          const double* x, double beta, double* y);

/// C <- A^T A (lower and upper triangle filled), A k x n, C n x n.
void gram_transposed(const double* a, std::size_t k, std::size_t n, std::size_t lda, double* c,
                     std::size_t ldc);

/// The BLAS in use, as OpenBLAS describes its build (for benchmark reports).
std::string blas_configuration();

}  // namespace tunebase::surrogates::linalg
