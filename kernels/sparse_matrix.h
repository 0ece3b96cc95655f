// Sparse matrices: CSR storage, Matrix Market files, generated PDE problems, features.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tunebase {

/// Compressed sparse row matrix with 0-based 32-bit column indices and 64-bit row offsets.
struct CsrMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::int64_t> row_ptr;  ///< rows + 1 offsets
  std::vector<std::int32_t> col;      ///< column of each stored entry, ascending within a row
  std::vector<double> val;            ///< value of each stored entry
  std::string name;                   ///< file stem or generator description

  std::int64_t nnz() const { return static_cast<std::int64_t>(val.size()); }
};

/// What the Matrix Market banner said.
struct MatrixMarketInfo {
  std::string field;     ///< real, integer, pattern
  std::string symmetry;  ///< general, symmetric, skew-symmetric
};

/// Reads a coordinate Matrix Market file (plain or gzip), expanding symmetric and
/// skew-symmetric storage (one triangle) and summing duplicates. Pattern entries become 1.0; a
/// UTF-8 byte order mark is skipped. Throws IoError or InvalidInput naming the file, line and
/// problem (bad banner, unsupported field, truncated data, index out of range, a value that is
/// not finite, a symmetric file listing both triangles, sizes that do not fit in memory...).
CsrMatrix read_matrix_market(const std::string& path, MatrixMarketInfo* info = nullptr);
/// Same from the text of a file already in memory (e.g. an HTTP upload, gunzipped);
/// `origin` names it in error messages and gives the matrix its name.
CsrMatrix parse_matrix_market(std::string_view text, const std::string& origin,
                              MatrixMarketInfo* info = nullptr);

/// Laplacians with Dirichlet boundaries: 5-point on an n x n grid, 7-point on n x n x n.
/// Throws InvalidInput when n < 1, the grid has more than 2^31-1 points or its matrix does not
/// fit in memory.
CsrMatrix laplacian_2d(std::int64_t n);
CsrMatrix laplacian_3d(std::int64_t n);

/// This machine's physical memory in bytes (0 when the system does not say).
std::uint64_t physical_memory_bytes();
/// Bytes a CsrMatrix with `rows` rows and `entries` stored entries takes.
double csr_bytes(double rows, double entries);
/// Throws InvalidInput "<what> needs about X GB of memory, more than this machine's Y GB" when
/// `bytes` exceed physical_memory_bytes(), rather than letting a huge allocation fail with
/// bad_alloc (or the machine swap).
void check_fits_in_memory(double bytes, const std::string& what);
/// check_fits_in_memory for the matrix of a (2 dims + 1)-point stencil on `points` grid points:
/// each point couples to itself and to two neighbours per dimension. `what` names the grid.
void check_stencil_fits_in_memory(double points, int dims, const std::string& what);

/// y = A x, the plain sequential reference every tuned variant is checked against. Resizes
/// y to a.rows; throws InvalidInput when x.size() != a.cols.
void spmv_reference(const CsrMatrix& a, const std::vector<double>& x, std::vector<double>& y);

/// Structural and numerical features of a matrix, stored as a study's task and used as
/// surrogate inputs: rows, cols, nnz, nnz per row (min, mean, max, std), bandwidth,
/// symmetry (structural, numerical), diagonal dominance, ...
nlohmann::json matrix_features(const CsrMatrix& a);

}  // namespace tunebase
