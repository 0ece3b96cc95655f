#include "kernels/sparse_matrix.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/measurements.h"

namespace tunebase {
namespace {

constexpr std::int64_t kMaxIndex = std::numeric_limits<std::int32_t>::max();
constexpr std::string_view kBannerPrefix = "%%MatrixMarket";
constexpr std::string_view kExpectedBanner =
    "'%%MatrixMarket matrix coordinate <real|integer|pattern> "
    "<general|symmetric|skew-symmetric>'";
// Two entries whose values differ by less than this (relative) count as numerically symmetric.
constexpr double kSymmetryRelativeTolerance = 1e-12;

// "1 1\n": the shortest possible entry line.
constexpr std::size_t kMinEntryBytes = 4;
// Some editors start a UTF-8 file with a byte order mark.
constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";
// Bytes of one stored entry and of one row of a CsrMatrix.
constexpr double kCsrBytesPerEntry = sizeof(std::int32_t) + sizeof(double);
constexpr double kCsrBytesPerRow = sizeof(std::int64_t);
constexpr double kBytesPerGigabyte = 1e9;

std::string_view without_byte_order_mark(std::string_view text) {
  if (text.substr(0, kUtf8ByteOrderMark.size()) == kUtf8ByteOrderMark) {
    text.remove_prefix(kUtf8ByteOrderMark.size());
  }
  return text;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Walks the text line by line, counting lines from 1 for error messages.
class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}

  /// The next line without its newline, or nullopt at the end of the text.
  std::optional<std::string_view> next() {
    if (pos_ >= text_.size()) return std::nullopt;
    const char* begin = text_.data() + pos_;
    const void* nl = std::memchr(begin, '\n', text_.size() - pos_);
    const std::size_t len =
        nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - begin) : text_.size() - pos_;
    pos_ += len + 1;
    ++line_;
    return std::string_view(begin, len);
  }
  std::int64_t line() const { return line_; }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  std::int64_t line_ = 0;
};

/// The whitespace-separated tokens of one line, parsed one at a time with std::from_chars.
class Tokens {
 public:
  explicit Tokens(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}

  /// Next token, or an empty view when the line has no more.
  std::string_view next() {
    while (p_ < end_ && is_blank(*p_)) ++p_;
    const char* start = p_;
    while (p_ < end_ && !is_blank(*p_)) ++p_;
    return {start, static_cast<std::size_t>(p_ - start)};
  }

 private:
  const char* p_;
  const char* end_;
};

bool blank_line(std::string_view line) { return std::all_of(line.begin(), line.end(), is_blank); }

template <typename T>
bool parse_number(std::string_view token, T& out) {
  if (token.empty()) return false;
  // from_chars rejects a leading '+', which some writers emit.
  if (token.front() == '+' && token.size() > 1) token.remove_prefix(1);
  const char* end = token.data() + token.size();
  auto [ptr, ec] = std::from_chars(token.data(), end, out);
  return ec == std::errc() && ptr == end;
}

struct Banner {
  std::string field;
  std::string symmetry;
};

class MatrixMarketParser {
 public:
  MatrixMarketParser(std::string_view text, const std::string& origin)
      : lines_(without_byte_order_mark(text)), text_size_(text.size()), origin_(origin) {}

  CsrMatrix parse(MatrixMarketInfo* info) {
    const Banner banner = read_banner();
    if (info) {
      info->field = banner.field;
      info->symmetry = banner.symmetry;
    }
    read_size_line(banner);
    read_entries(banner);
    return to_csr();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(lines_.line(), what); }
  [[noreturn]] void fail_at(std::int64_t line, const std::string& what) const {
    throw InvalidInput(origin_ + ":" + std::to_string(line) + ": " + what);
  }

  Banner read_banner() {
    const auto first = lines_.next();
    if (!first) {
      throw InvalidInput(origin_ + ": the file is empty; a Matrix Market file starts with " +
                         std::string(kExpectedBanner));
    }
    Tokens tokens(*first);
    const auto head = tokens.next();
    if (lower(head) != lower(kBannerPrefix)) {
      fail("missing Matrix Market banner: expected " + std::string(kExpectedBanner) + ", found '" +
           std::string(first->substr(0, 80)) + "'");
    }
    const std::string object = lower(tokens.next());
    const std::string format = lower(tokens.next());
    std::string field = lower(tokens.next());
    const std::string symmetry = lower(tokens.next());
    if (object.empty() || format.empty() || field.empty() || symmetry.empty()) {
      fail("incomplete banner '" + std::string(*first) + "': expected " +
           std::string(kExpectedBanner));
    }
    if (object != "matrix") {
      fail("object '" + object + "' is not supported; only 'matrix' is");
    }
    if (format == "array") {
      fail("array (dense) format is not supported; only 'coordinate' (sparse) is");
    }
    if (format != "coordinate") {
      fail("unknown format '" + format + "'; only 'coordinate' is supported");
    }
    if (field == "double") field = "real";
    if (field == "complex") {
      fail("field 'complex' is not supported; supported fields: real, integer, pattern");
    }
    if (field != "real" && field != "integer" && field != "pattern") {
      fail("unknown field '" + field + "'; supported fields: real, integer, pattern");
    }
    if (symmetry == "hermitian") {
      fail(
          "symmetry 'hermitian' is not supported (it needs complex values); supported: "
          "general, symmetric, skew-symmetric");
    }
    if (symmetry != "general" && symmetry != "symmetric" && symmetry != "skew-symmetric") {
      fail("unknown symmetry '" + symmetry + "'; supported: general, symmetric, skew-symmetric");
    }
    if (!tokens.next().empty()) {
      fail("unexpected text after the banner: expected " + std::string(kExpectedBanner));
    }
    return {field, symmetry};
  }

  /// The next line that is neither a comment nor blank, or nullopt at the end.
  std::optional<std::string_view> next_data_line() {
    while (auto line = lines_.next()) {
      if (!line->empty() && line->front() == '%') continue;
      if (blank_line(*line)) continue;
      return line;
    }
    return std::nullopt;
  }

  void read_size_line(const Banner& banner) {
    const auto line = next_data_line();
    if (!line) fail("missing size line 'rows columns entries' after the banner");
    Tokens tokens(*line);
    std::int64_t sizes[3];
    for (auto& s : sizes) {
      if (!parse_number(tokens.next(), s) || s < 0) {
        fail("bad size line '" + std::string(*line) +
             "': expected three non-negative integers 'rows columns entries'");
      }
    }
    if (!tokens.next().empty()) {
      fail("bad size line '" + std::string(*line) +
           "': expected exactly three integers 'rows columns entries'");
    }
    rows_ = sizes[0];
    cols_ = sizes[1];
    declared_ = sizes[2];
    if (rows_ > kMaxIndex || cols_ > kMaxIndex) {
      fail("matrix of " + std::to_string(rows_) + " x " + std::to_string(cols_) +
           " is too large: at most " + std::to_string(kMaxIndex) + " rows and columns");
    }
    if (banner.symmetry != "general" && rows_ != cols_) {
      fail("a " + banner.symmetry + " matrix must be square, but the size line says " +
           std::to_string(rows_) + " x " + std::to_string(cols_));
    }
    if (declared_ > rows_ * cols_) {
      fail("the size line declares " + std::to_string(declared_) + " entries, more than the " +
           std::to_string(rows_) + " x " + std::to_string(cols_) + " matrix can hold");
    }
    const double stored =
        static_cast<double>(declared_) * (banner.symmetry == "general" ? 1.0 : 2.0);
    // Reading holds the coordinates and the row counts of the sort beside the CSR matrix:
    // about twice its size.
    check_fits_in_memory(2 * csr_bytes(static_cast<double>(rows_), stored),
                         origin_ + ":" + std::to_string(lines_.line()) + ": the " +
                             std::to_string(rows_) + " x " + std::to_string(cols_) +
                             " matrix with " + std::to_string(declared_) +
                             " entries that the size line declares");
  }

  void read_entries(const Banner& banner) {
    const bool pattern = banner.field == "pattern";
    const bool integer = banner.field == "integer";
    const bool mirror = banner.symmetry != "general";
    const double mirror_sign = banner.symmetry == "skew-symmetric" ? -1.0 : 1.0;
    // An entry takes at least kMinEntryBytes of text, so a size line that lies cannot make
    // us reserve more than the file could hold.
    const auto possible =
        std::min(static_cast<std::size_t>(declared_), text_size_ / kMinEntryBytes + 1);
    const std::size_t capacity = mirror ? 2 * possible : possible;
    row_.reserve(capacity);
    col_.reserve(capacity);
    val_.reserve(capacity);
    const char* expected = pattern ? "2 numbers 'row column'" : "3 numbers 'row column value'";

    for (std::int64_t k = 0; k < declared_; ++k) {
      const auto line = next_data_line();
      if (!line) {
        fail("truncated: the size line declares " + std::to_string(declared_) +
             " entries but the file ends after " + std::to_string(k));
      }
      Tokens tokens(*line);
      std::int64_t i = 0;
      std::int64_t j = 0;
      const auto ti = tokens.next();
      const auto tj = tokens.next();
      if (!parse_number(ti, i) || !parse_number(tj, j)) {
        fail("bad entry '" + std::string(*line) + "': expected " + expected +
             " with integer 1-based indices");
      }
      if (i < 1 || i > rows_ || j < 1 || j > cols_) {
        fail("index (" + std::to_string(i) + ", " + std::to_string(j) +
             ") out of range: rows are 1.." + std::to_string(rows_) + ", columns 1.." +
             std::to_string(cols_));
      }
      double v = 1.0;
      if (!pattern) {
        const auto tv = tokens.next();
        if (tv.empty())
          fail("entry '" + std::string(*line) + "' has no value: expected " + expected);
        if (integer) {
          std::int64_t iv = 0;
          if (!parse_number(tv, iv)) {
            fail("value '" + std::string(tv) + "' is not an integer (the banner says 'integer')");
          }
          v = static_cast<double>(iv);
        } else if (!parse_number(tv, v)) {
          fail("value '" + std::string(tv) + "' is not a number");
        } else if (!std::isfinite(v)) {
          fail("value '" + std::string(tv) + "' is not finite; matrix entries must be numbers");
        }
      }
      if (!tokens.next().empty()) {
        fail("bad entry '" + std::string(*line) + "': expected " + expected +
             " (the banner says '" + banner.field + "')");
      }
      if (mirror && i != j) check_one_triangle(i, j, banner.symmetry);
      const auto r = static_cast<std::int32_t>(i - 1);
      const auto c = static_cast<std::int32_t>(j - 1);
      row_.push_back(r);
      col_.push_back(c);
      val_.push_back(v);
      if (mirror && r != c) {
        row_.push_back(c);
        col_.push_back(r);
        val_.push_back(mirror_sign * v);
      }
    }
    if (next_data_line()) {
      fail("more entries than the " + std::to_string(declared_) + " declared on the size line");
    }
  }

  /// A symmetric file stores the entries of one triangle, which are mirrored; a file listing
  /// both would count every off-diagonal value twice.
  void check_one_triangle(std::int64_t i, std::int64_t j, const std::string& symmetry) {
    auto& first = i < j ? first_above_ : first_below_;
    if (!first) first = Entry{i, j, lines_.line()};
    if (!first_above_ || !first_below_) return;
    fail_at(first_above_->line,
            "entry (" + std::to_string(first_above_->i) + ", " + std::to_string(first_above_->j) +
                ") lies above the diagonal, but the file also lists entries below it (line " +
                std::to_string(first_below_->line) + ": (" + std::to_string(first_below_->i) +
                ", " + std::to_string(first_below_->j) + ")): a " + symmetry +
                " file stores one triangle, which is mirrored; write the matrix as 'general' "
                "or keep one triangle");
  }

  CsrMatrix to_csr() {
    CsrMatrix a;
    a.rows = rows_;
    a.cols = cols_;
    std::filesystem::path stem(origin_);
    if (stem.extension() == ".gz") stem = stem.stem();
    if (stem.extension() == ".mtx") stem = stem.stem();
    a.name = stem.filename().string();

    // Counting sort of the coordinates by row keeps each row's file order.
    std::vector<std::int64_t> count(static_cast<std::size_t>(rows_) + 1, 0);
    for (auto r : row_) ++count[static_cast<std::size_t>(r) + 1];
    std::partial_sum(count.begin(), count.end(), count.begin());
    const std::size_t n = val_.size();
    std::vector<std::int32_t> col(n);
    std::vector<double> val(n);
    {
      std::vector<std::int64_t> next(count.begin(), count.end() - 1);
      for (std::size_t k = 0; k < n; ++k) {
        const auto dst = static_cast<std::size_t>(next[static_cast<std::size_t>(row_[k])]++);
        col[dst] = col_[k];
        val[dst] = val_[k];
      }
    }
    row_.clear();
    row_.shrink_to_fit();
    col_.clear();
    col_.shrink_to_fit();
    val_.clear();
    val_.shrink_to_fit();

    // Sort each row by column (files written column by column are already sorted) and sum
    // duplicates, compacting in place.
    a.row_ptr.assign(static_cast<std::size_t>(rows_) + 1, 0);
    std::size_t out = 0;
    std::vector<std::pair<std::int32_t, double>> scratch;
    for (std::int64_t r = 0; r < rows_; ++r) {
      const auto begin = static_cast<std::size_t>(count[static_cast<std::size_t>(r)]);
      const auto end = static_cast<std::size_t>(count[static_cast<std::size_t>(r) + 1]);
      if (!std::is_sorted(col.begin() + static_cast<std::ptrdiff_t>(begin),
                          col.begin() + static_cast<std::ptrdiff_t>(end))) {
        scratch.clear();
        for (std::size_t k = begin; k < end; ++k) scratch.emplace_back(col[k], val[k]);
        std::stable_sort(scratch.begin(), scratch.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
        for (std::size_t k = begin; k < end; ++k) {
          col[k] = scratch[k - begin].first;
          val[k] = scratch[k - begin].second;
        }
      }
      for (std::size_t k = begin; k < end; ++k) {
        if (out > static_cast<std::size_t>(a.row_ptr[static_cast<std::size_t>(r)]) &&
            col[out - 1] == col[k]) {
          val[out - 1] += val[k];
        } else {
          col[out] = col[k];
          val[out] = val[k];
          ++out;
        }
      }
      a.row_ptr[static_cast<std::size_t>(r) + 1] = static_cast<std::int64_t>(out);
    }
    col.resize(out);
    val.resize(out);
    a.col = std::move(col);
    a.val = std::move(val);
    return a;
  }

  LineReader lines_;
  std::size_t text_size_;
  const std::string& origin_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  std::int64_t declared_ = 0;
  std::vector<std::int32_t> row_;
  std::vector<std::int32_t> col_;
  std::vector<double> val_;
  struct Entry {
    std::int64_t i = 0;
    std::int64_t j = 0;
    std::int64_t line = 0;
  };
  std::optional<Entry> first_above_;
  std::optional<Entry> first_below_;
};

void check_grid_size(std::int64_t n, int dims, const char* what) {
  if (n < 1) {
    throw InvalidInput(std::string(what) + ": grid size n must be at least 1, got " +
                       std::to_string(n));
  }
  double points = 1.0;
  for (int d = 0; d < dims; ++d) points *= static_cast<double>(n);
  if (points > static_cast<double>(kMaxIndex)) {
    throw InvalidInput(std::string(what) + ": n = " + std::to_string(n) + " gives " +
                       std::to_string(static_cast<long long>(points)) +
                       " unknowns, more than the 2^31-1 that 32-bit column indices allow");
  }
  check_stencil_fits_in_memory(points, dims, std::string(what) + ": n = " + std::to_string(n));
}

/// Builds a Laplacian on an nx x ny x nz grid (nz = 1 for 2D): diagonal 2*dims, -1 for each
/// neighbour inside the grid. Rows are filled in parallel once their offsets are known.
CsrMatrix grid_laplacian(std::int64_t nx, std::int64_t ny, std::int64_t nz, int dims) {
  CsrMatrix a;
  const std::int64_t rows = nx * ny * nz;
  a.rows = rows;
  a.cols = rows;
  a.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  auto neighbours = [&](std::int64_t x, std::int64_t y, std::int64_t z) {
    return 1 + (x > 0) + (x + 1 < nx) + (y > 0) + (y + 1 < ny) + (z > 0) + (z + 1 < nz);
  };
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t x = r % nx;
    const std::int64_t y = (r / nx) % ny;
    const std::int64_t z = r / (nx * ny);
    a.row_ptr[static_cast<std::size_t>(r) + 1] = neighbours(x, y, z);
  }
  std::partial_sum(a.row_ptr.begin(), a.row_ptr.end(), a.row_ptr.begin());
  const auto nnz = static_cast<std::size_t>(a.row_ptr.back());
  a.col.resize(nnz);
  a.val.resize(nnz);
  const double diagonal = 2.0 * dims;
  const std::int64_t plane = nx * ny;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t x = r % nx;
    const std::int64_t y = (r / nx) % ny;
    const std::int64_t z = r / plane;
    auto k = static_cast<std::size_t>(a.row_ptr[static_cast<std::size_t>(r)]);
    auto put = [&](std::int64_t c, double v) {
      a.col[k] = static_cast<std::int32_t>(c);
      a.val[k] = v;
      ++k;
    };
    // Ascending column order: -z, -y, -x, centre, +x, +y, +z.
    if (z > 0) put(r - plane, -1.0);
    if (y > 0) put(r - nx, -1.0);
    if (x > 0) put(r - 1, -1.0);
    put(r, diagonal);
    if (x + 1 < nx) put(r + 1, -1.0);
    if (y + 1 < ny) put(r + nx, -1.0);
    if (z + 1 < nz) put(r + plane, -1.0);
  }
  return a;
}

}  // namespace

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

double csr_bytes(double rows, double entries) {
  return (rows + 1) * kCsrBytesPerRow + entries * kCsrBytesPerEntry;
}

void check_fits_in_memory(double bytes, const std::string& what) {
  const auto memory = static_cast<double>(physical_memory_bytes());
  if (memory <= 0.0 || bytes <= memory) return;
  std::ostringstream message;
  message.precision(3);
  message << what << " needs about " << bytes / kBytesPerGigabyte
          << " GB of memory, more than this machine's " << memory / kBytesPerGigabyte << " GB";
  throw InvalidInput(message.str());
}

void check_stencil_fits_in_memory(double points, int dims, const std::string& what) {
  check_fits_in_memory(csr_bytes(points, points * (2 * dims + 1)),
                       what + " (" + std::to_string(static_cast<long long>(points)) + " unknowns)");
}

CsrMatrix parse_matrix_market(std::string_view text, const std::string& origin,
                              MatrixMarketInfo* info) {
  return MatrixMarketParser(text, origin).parse(info);
}

CsrMatrix read_matrix_market(const std::string& path, MatrixMarketInfo* info) {
  // The user's own file: no limit but memory (a SuiteSparse matrix may be gigabytes of text).
  const std::string text = read_maybe_gzipped(path, std::numeric_limits<std::size_t>::max());
  return parse_matrix_market(text, path, info);
}

CsrMatrix laplacian_2d(std::int64_t n) {
  check_grid_size(n, 2, "laplacian_2d");
  CsrMatrix a = grid_laplacian(n, n, 1, 2);
  a.name = "laplacian_2d_" + std::to_string(n);
  return a;
}

CsrMatrix laplacian_3d(std::int64_t n) {
  check_grid_size(n, 3, "laplacian_3d");
  CsrMatrix a = grid_laplacian(n, n, n, 3);
  a.name = "laplacian_3d_" + std::to_string(n);
  return a;
}

void spmv_reference(const CsrMatrix& a, const std::vector<double>& x, std::vector<double>& y) {
  if (static_cast<std::int64_t>(x.size()) != a.cols) {
    throw InvalidInput("spmv: x has " + std::to_string(x.size()) + " entries but matrix '" +
                       a.name + "' has " + std::to_string(a.cols) + " columns");
  }
  y.assign(static_cast<std::size_t>(a.rows), 0.0);
  for (std::int64_t r = 0; r < a.rows; ++r) {
    // y_r = sum_k val_k x_col_k over the stored entries of row r
    double sum = 0.0;
    for (auto k = a.row_ptr[static_cast<std::size_t>(r)];
         k < a.row_ptr[static_cast<std::size_t>(r) + 1]; ++k) {
      sum += a.val[static_cast<std::size_t>(k)] *
             x[static_cast<std::size_t>(a.col[static_cast<std::size_t>(k)])];
    }
    y[static_cast<std::size_t>(r)] = sum;
  }
}

nlohmann::json matrix_features(const CsrMatrix& a) {
  const auto rows = static_cast<std::size_t>(a.rows);
  const auto cols = static_cast<std::size_t>(a.cols);
  const auto nnz = static_cast<std::size_t>(a.nnz());
  nlohmann::json f;
  f["rows"] = a.rows;
  f["cols"] = a.cols;
  f["nnz"] = a.nnz();
  f["density"] = (rows && cols) ? static_cast<double>(nnz) /
                                      (static_cast<double>(rows) * static_cast<double>(cols))
                                : 0.0;

  // Row lengths: load balance and padding of sliced formats.
  std::int64_t min_len = rows ? std::numeric_limits<std::int64_t>::max() : 0;
  std::int64_t max_len = 0;
  std::int64_t empty_rows = 0;
  double sum_sq = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto len = a.row_ptr[r + 1] - a.row_ptr[r];
    min_len = std::min(min_len, len);
    max_len = std::max(max_len, len);
    empty_rows += len == 0;
    sum_sq += static_cast<double>(len) * static_cast<double>(len);
  }
  const double mean = rows ? static_cast<double>(nnz) / static_cast<double>(rows) : 0.0;
  // std = sqrt(E[len^2] - mean^2)
  const double std_len =
      rows ? std::sqrt(std::max(0.0, sum_sq / static_cast<double>(rows) - mean * mean)) : 0.0;
  f["nnz_per_row_min"] = min_len;
  f["nnz_per_row_mean"] = mean;
  f["nnz_per_row_max"] = max_len;
  f["nnz_per_row_std"] = std_len;
  f["nnz_per_row_cv"] = mean > 0 ? std_len / mean : 0.0;
  f["empty_rows"] = empty_rows;
  // ELL stores rows * max_len slots: how much of that is padding.
  f["ell_fill_ratio"] =
      nnz ? static_cast<double>(rows) * static_cast<double>(max_len) / static_cast<double>(nnz)
          : 1.0;

  // Column reach of each row: locality of the x accesses.
  std::int64_t lower_bw = 0;
  std::int64_t upper_bw = 0;
  double distance_sum = 0.0;
  std::int64_t explicit_zeros = 0;
  double frobenius_sq = 0.0;
  double max_abs = 0.0;
  double inf_norm = 0.0;
  std::vector<double> col_abs_sum(cols, 0.0);
  const std::size_t diag_len = std::min(rows, cols);
  std::vector<double> diag(diag_len, 0.0);
  std::vector<double> offdiag_abs(diag_len, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    double row_abs = 0.0;
    for (auto k = static_cast<std::size_t>(a.row_ptr[r]);
         k < static_cast<std::size_t>(a.row_ptr[r + 1]); ++k) {
      const auto c = static_cast<std::size_t>(a.col[k]);
      const double v = a.val[k];
      const double av = std::abs(v);
      const auto d = static_cast<std::int64_t>(c) - static_cast<std::int64_t>(r);
      lower_bw = std::max(lower_bw, -d);
      upper_bw = std::max(upper_bw, d);
      distance_sum += static_cast<double>(std::abs(d));
      explicit_zeros += v == 0.0;
      frobenius_sq += v * v;
      max_abs = std::max(max_abs, av);
      row_abs += av;
      col_abs_sum[c] += av;
      if (r < diag_len) {
        if (c == r) {
          diag[r] = v;
        } else {
          offdiag_abs[r] += av;
        }
      }
    }
    inf_norm = std::max(inf_norm, row_abs);
  }
  f["bandwidth"] = std::max(lower_bw, upper_bw);
  f["lower_bandwidth"] = lower_bw;
  f["upper_bandwidth"] = upper_bw;
  f["mean_diagonal_distance"] = nnz ? distance_sum / static_cast<double>(nnz) : 0.0;
  f["explicit_zeros"] = explicit_zeros;
  // ||A||_F = sqrt(sum a_ij^2)
  f["frobenius_norm"] = std::sqrt(frobenius_sq);
  f["max_abs"] = max_abs;
  f["inf_norm"] = inf_norm;
  f["one_norm"] = cols ? *std::max_element(col_abs_sum.begin(), col_abs_sum.end()) : 0.0;

  // Diagonal: missing pivots and dominance predict whether Jacobi-type preconditioners work.
  std::int64_t zero_diagonal = 0;
  std::int64_t positive_diagonal = 0;
  std::int64_t dominant = 0;
  std::int64_t strictly_dominant = 0;
  double diag_min = diag_len ? std::numeric_limits<double>::infinity() : 0.0;
  double diag_max = 0.0;
  for (std::size_t i = 0; i < diag_len; ++i) {
    const double ad = std::abs(diag[i]);
    zero_diagonal += diag[i] == 0.0;
    positive_diagonal += diag[i] > 0.0;
    diag_min = std::min(diag_min, ad);
    diag_max = std::max(diag_max, ad);
    // row i is dominant when |a_ii| >= sum_{j != i} |a_ij|
    dominant += ad >= offdiag_abs[i];
    strictly_dominant += ad > offdiag_abs[i];
  }
  const double diag_count = diag_len ? static_cast<double>(diag_len) : 1.0;
  f["diagonal_zero_or_missing"] = zero_diagonal;
  f["diagonal_positive_fraction"] = static_cast<double>(positive_diagonal) / diag_count;
  f["diagonal_min_abs"] = diag_min;
  f["diagonal_max_abs"] = diag_max;
  f["diagonal_dominance_fraction"] = static_cast<double>(dominant) / diag_count;
  f["strict_diagonal_dominance_fraction"] = static_cast<double>(strictly_dominant) / diag_count;

  // Symmetry: for each off-diagonal (i, j), whether (j, i) is stored (structural) and holds
  // the same value (numerical). Row i of A and row i of A^T are merged, both sorted.
  double structural = 0.0;
  double numerical = 0.0;
  if (rows == cols) {
    std::vector<std::int64_t> t_ptr(cols + 1, 0);
    for (std::size_t k = 0; k < nnz; ++k) ++t_ptr[static_cast<std::size_t>(a.col[k]) + 1];
    std::partial_sum(t_ptr.begin(), t_ptr.end(), t_ptr.begin());
    std::vector<std::int32_t> t_col(nnz);
    std::vector<double> t_val(nnz);
    {
      std::vector<std::int64_t> next(t_ptr.begin(), t_ptr.end() - 1);
      for (std::size_t r = 0; r < rows; ++r) {
        for (auto k = static_cast<std::size_t>(a.row_ptr[r]);
             k < static_cast<std::size_t>(a.row_ptr[r + 1]); ++k) {
          const auto dst = static_cast<std::size_t>(next[static_cast<std::size_t>(a.col[k])]++);
          t_col[dst] = static_cast<std::int32_t>(r);
          t_val[dst] = a.val[k];
        }
      }
    }
    std::int64_t off_diagonal = 0;
    std::int64_t matched = 0;
    std::int64_t equal = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      auto k = static_cast<std::size_t>(a.row_ptr[r]);
      const auto k_end = static_cast<std::size_t>(a.row_ptr[r + 1]);
      auto t = static_cast<std::size_t>(t_ptr[r]);
      const auto t_end = static_cast<std::size_t>(t_ptr[r + 1]);
      for (; k < k_end; ++k) {
        if (static_cast<std::size_t>(a.col[k]) == r) continue;
        ++off_diagonal;
        while (t < t_end && t_col[t] < a.col[k]) ++t;
        if (t < t_end && t_col[t] == a.col[k]) {
          ++matched;
          const double x = a.val[k];
          const double y = t_val[t];
          equal +=
              std::abs(x - y) <= kSymmetryRelativeTolerance * std::max(std::abs(x), std::abs(y));
        }
      }
    }
    structural =
        off_diagonal ? static_cast<double>(matched) / static_cast<double>(off_diagonal) : 1.0;
    numerical = off_diagonal ? static_cast<double>(equal) / static_cast<double>(off_diagonal) : 1.0;
  }
  f["structural_symmetry"] = structural;
  f["numerical_symmetry"] = numerical;
  f["csr_bytes"] =
      static_cast<std::int64_t>(csr_bytes(static_cast<double>(rows), static_cast<double>(nnz)));
  return f;
}

}  // namespace tunebase
