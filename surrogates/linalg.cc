// No dlib header here: cblas.h and the CBLAS prototypes dlib declares cannot meet (linalg.h).
#include "surrogates/linalg.h"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"

// LAPACK's Fortran entry points (Debian ships no lapacke.h beside OpenBLAS). The trailing
// size_t is the hidden length of the character argument that gfortran-built LAPACK expects.
extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void dpotri_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
}

namespace tunebase::surrogates::linalg {
namespace {

int as_int(std::size_t v) {
  if (v > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw InvalidInput("matrix dimension " + std::to_string(v) + " exceeds the BLAS int range");
  }
  return static_cast<int>(v);
}

// BLAS rejects a leading dimension of 0 even for empty operands.
int leading(std::size_t ld) { return as_int(std::max<std::size_t>(ld, 1)); }

// A row-major lower triangle is, read column-major, the upper triangle of the transpose.
constexpr char kRowMajorLower = 'U';

}  // namespace

bool cholesky_lower(double* a, std::size_t n, std::size_t lda) {
  if (n == 0) return true;
  const int ni = as_int(n);
  const int ldi = leading(lda);
  int info = 0;
  dpotrf_(&kRowMajorLower, &ni, a, &ldi, &info, 1);
  if (info != 0) return false;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) a[i * lda + j] = 0.0;
  }
  return true;
}

void inverse_from_cholesky(double* l, std::size_t n, std::size_t lda) {
  if (n == 0) return;
  const int ni = as_int(n);
  const int ldi = leading(lda);
  int info = 0;
  dpotri_(&kRowMajorLower, &ni, l, &ldi, &info, 1);
  if (info != 0) {
    throw Error("inverse from a Cholesky factor failed: zero pivot " + std::to_string(info));
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) l[i * lda + j] = l[j * lda + i];
  }
}

void solve_lower(const double* l, std::size_t n, std::size_t ldl, double* b, std::size_t m,
                 std::size_t ldb, bool trans) {
  if (n == 0 || m == 0) return;
  cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, trans ? CblasTrans : CblasNoTrans, CblasNonUnit,
              as_int(n), as_int(m), 1.0, l, leading(ldl), b, leading(ldb));
}

void solve_lower_vector(const double* l, std::size_t n, std::size_t ldl, double* x, bool trans) {
  if (n == 0) return;
  cblas_dtrsv(CblasRowMajor, CblasLower, trans ? CblasTrans : CblasNoTrans, CblasNonUnit, as_int(n),
              l, leading(ldl), x, 1);
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta,
          double* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, as_int(m), as_int(n), as_int(k), alpha, a,
              leading(lda), b, leading(ldb), beta, c, leading(ldc));
}

void gemv(bool trans, std::size_t m, std::size_t n, double alpha, const double* a, std::size_t lda,
          const double* x, double beta, double* y) {
  if (m == 0 || n == 0) return;
  cblas_dgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, as_int(m), as_int(n), alpha, a,
              leading(lda), x, 1, beta, y, 1);
}

void gram_transposed(const double* a, std::size_t k, std::size_t n, std::size_t lda, double* c,
                     std::size_t ldc) {
  if (n == 0) return;
  cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, as_int(n), as_int(k), 1.0, a, leading(lda),
              0.0, c, leading(ldc));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) c[i * ldc + j] = c[j * ldc + i];
  }
}

std::string blas_configuration() {
  const char* config = openblas_get_config();
  return config != nullptr ? std::string(config) : std::string("unknown BLAS");
}

}  // namespace tunebase::surrogates::linalg
