#include "kernels/sparse_matrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

using testing::TempDir;

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const auto path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

/// Dense copy, for comparing small matrices entry by entry.
std::vector<std::vector<double>> dense(const CsrMatrix& a) {
  std::vector<std::vector<double>> d(static_cast<std::size_t>(a.rows),
                                     std::vector<double>(static_cast<std::size_t>(a.cols), 0.0));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) d[r][a.col[k]] = a.val[k];
  }
  return d;
}

void expect_sorted_rows(const CsrMatrix& a) {
  ASSERT_EQ(a.row_ptr.size(), static_cast<std::size_t>(a.rows) + 1);
  EXPECT_EQ(a.row_ptr.back(), a.nnz());
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (auto k = a.row_ptr[r] + 1; k < a.row_ptr[r + 1]; ++k) {
      EXPECT_LT(a.col[k - 1], a.col[k]) << "row " << r;
    }
  }
}

TEST(MatrixMarket, RealGeneralWithCommentsAndBlankLines) {
  const std::string text =
      "%%MatrixMarket matrix coordinate real general\n"
      "% a comment\n"
      "\n"
      "3 4 5\n"
      "1 1 1.5\n"
      "3 4 -2e-3\n"
      "  2 2   +7\n"
      "1 3 .25\n"
      "% comment among entries\n"
      "3 1 4\n";
  MatrixMarketInfo info;
  const CsrMatrix a = parse_matrix_market(text, "mem.mtx", &info);
  EXPECT_EQ(info.field, "real");
  EXPECT_EQ(info.symmetry, "general");
  EXPECT_EQ(a.name, "mem");
  EXPECT_EQ(a.rows, 3);
  EXPECT_EQ(a.cols, 4);
  EXPECT_EQ(a.nnz(), 5);
  expect_sorted_rows(a);
  const auto d = dense(a);
  EXPECT_EQ(d[0][0], 1.5);
  EXPECT_EQ(d[0][2], 0.25);
  EXPECT_EQ(d[1][1], 7.0);
  EXPECT_EQ(d[2][0], 4.0);
  EXPECT_EQ(d[2][3], -2e-3);
}

TEST(MatrixMarket, IntegerFieldAndCrlfLineEndings) {
  const std::string text =
      "%%MatrixMarket matrix coordinate integer general\r\n2 2 2\r\n1 2 -3\r\n2 1 5\r\n";
  MatrixMarketInfo info;
  const CsrMatrix a = parse_matrix_market(text, "int.mtx", &info);
  EXPECT_EQ(info.field, "integer");
  EXPECT_EQ(dense(a), (std::vector<std::vector<double>>{{0, -3}, {5, 0}}));
}

TEST(MatrixMarket, PatternSymmetricMirrorsOffDiagonalOnce) {
  const std::string text =
      "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n1 1\n2 1\n3 2\n";
  MatrixMarketInfo info;
  const CsrMatrix a = parse_matrix_market(text, "p.mtx", &info);
  EXPECT_EQ(info.field, "pattern");
  EXPECT_EQ(info.symmetry, "symmetric");
  EXPECT_EQ(a.nnz(), 5);
  EXPECT_EQ(dense(a), (std::vector<std::vector<double>>{{1, 1, 0}, {1, 0, 1}, {0, 1, 0}}));
}

TEST(MatrixMarket, RealSymmetric) {
  const std::string text =
      "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 2.0\n2 1 -1.0\n";
  EXPECT_EQ(dense(parse_matrix_market(text, "s.mtx")),
            (std::vector<std::vector<double>>{{2, -1}, {-1, 0}}));
}

TEST(MatrixMarket, SkewSymmetricNegatesTheMirror) {
  const std::string text =
      "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 3.0\n3 1 -1.5\n";
  MatrixMarketInfo info;
  const CsrMatrix a = parse_matrix_market(text, "k.mtx", &info);
  EXPECT_EQ(info.symmetry, "skew-symmetric");
  EXPECT_EQ(dense(a), (std::vector<std::vector<double>>{{0, -3, 1.5}, {3, 0, 0}, {-1.5, 0, 0}}));
}

TEST(MatrixMarket, SymmetricUpperTriangleAloneIsMirrored) {
  const std::string text =
      "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 2.0\n1 2 -1.0\n";
  EXPECT_EQ(dense(parse_matrix_market(text, "u.mtx")),
            (std::vector<std::vector<double>>{{2, -1}, {-1, 0}}));
}

TEST(MatrixMarket, Utf8ByteOrderMarkIsSkipped) {
  const std::string text =
      "\xEF\xBB\xBF%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 3\n";
  EXPECT_EQ(parse_matrix_market(text, "bom.mtx").val, std::vector<double>{3.0});
}

TEST(MatrixMarket, BannerIsCaseInsensitive) {
  const std::string text = "%%matrixmarket MATRIX Coordinate REAL General\n1 1 1\n1 1 3\n";
  EXPECT_EQ(parse_matrix_market(text, "c.mtx").val, std::vector<double>{3.0});
}

TEST(MatrixMarket, UnsortedInputIsSortedAndDuplicatesSummed) {
  const std::string text =
      "%%MatrixMarket matrix coordinate real general\n2 5 5\n1 5 1\n1 2 2\n1 5 10\n2 3 4\n1 1 "
      "8\n";
  const CsrMatrix a = parse_matrix_market(text, "d.mtx");
  expect_sorted_rows(a);
  EXPECT_EQ(a.nnz(), 4);
  EXPECT_EQ(a.col, (std::vector<std::int32_t>{0, 1, 4, 2}));
  EXPECT_EQ(a.val, (std::vector<double>{8, 2, 11, 4}));
}

TEST(MatrixMarket, EmptyRowsAndZeroEntries) {
  const std::string text = "%%MatrixMarket matrix coordinate real general\n4 3 1\n3 2 1\n";
  const CsrMatrix a = parse_matrix_market(text, "e.mtx");
  EXPECT_EQ(a.row_ptr, (std::vector<std::int64_t>{0, 0, 0, 1, 1}));
  const CsrMatrix z =
      parse_matrix_market("%%MatrixMarket matrix coordinate real general\n2 2 0\n", "z.mtx");
  EXPECT_EQ(z.nnz(), 0);
  EXPECT_EQ(z.rows, 2);
}

TEST(MatrixMarket, GzipAndPlainFilesGiveTheSameMatrix) {
  TempDir dir;
  const std::string text =
      "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 4\n2 1 -1\n2 2 4\n3 3 4\n";
  const auto plain = read_matrix_market(write_file(dir, "m.mtx", text));
  MatrixMarketInfo info;
  const auto zipped =
      read_matrix_market(testing::write_gzip(dir.file("zipped.mtx.gz"), text), &info);
  EXPECT_EQ(zipped.name, "zipped");
  EXPECT_EQ(plain.name, "m");
  EXPECT_EQ(info.symmetry, "symmetric");
  EXPECT_EQ(plain.row_ptr, zipped.row_ptr);
  EXPECT_EQ(plain.col, zipped.col);
  EXPECT_EQ(plain.val, zipped.val);
  // Detected by content, not by name.
  const auto misnamed = read_matrix_market(testing::write_gzip(dir.file("misnamed.mtx"), text));
  EXPECT_EQ(misnamed.val, plain.val);
}

TEST(MatrixMarket, MissingFileIsAnError) {
  TempDir dir;
  EXPECT_THROW(read_matrix_market(dir.file("absent.mtx")), Error);
}

struct BadFile {
  std::string label;
  std::string text;
  std::vector<std::string> message_parts;  ///< each must appear in the error message
};

// Test names and failure messages show the case's label, not its bytes.
void PrintTo(const BadFile& bad, std::ostream* os) { *os << bad.label; }

class MatrixMarketErrors : public ::testing::TestWithParam<BadFile> {};

TEST_P(MatrixMarketErrors, NameFileLineAndProblem) {
  const BadFile& bad = GetParam();
  TempDir dir;
  const auto path = write_file(dir, "bad.mtx", bad.text);
  try {
    read_matrix_market(path);
    FAIL() << bad.label << ": no error";
  } catch (const InvalidInput& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    for (const auto& part : bad.message_parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << bad.label << ": '" << part << "' missing from: " << message;
    }
  }
}

const std::string kGeneral = "%%MatrixMarket matrix coordinate real general\n";

INSTANTIATE_TEST_SUITE_P(
    EveryErrorClass, MatrixMarketErrors,
    ::testing::Values(
        BadFile{"empty", "", {"empty", "%%MatrixMarket"}},
        BadFile{"no banner", "3 3 1\n1 1 1\n", {":1:", "missing Matrix Market banner"}},
        BadFile{"incomplete banner",
                "%%MatrixMarket matrix coordinate\n",
                {":1:", "incomplete banner"}},
        BadFile{"array",
                "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
                {":1:", "array", "only 'coordinate'"}},
        BadFile{"complex",
                "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
                {":1:", "complex", "real, integer, pattern"}},
        BadFile{"hermitian",
                "%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n",
                {"hermitian", "general, symmetric, skew-symmetric"}},
        BadFile{"vector object", "%%MatrixMarket vector coordinate real general\n", {"vector"}},
        BadFile{"size line two numbers", kGeneral + "3 3\n", {":2:", "bad size line"}},
        BadFile{"size line not numeric", kGeneral + "% c\n3 x 3\n", {":3:", "bad size line"}},
        BadFile{"size line negative", kGeneral + "-3 3 1\n", {"bad size line", "non-negative"}},
        BadFile{"missing size line", kGeneral + "% only comments\n", {"missing size line"}},
        BadFile{"too many declared", kGeneral + "2 2 5\n", {"more than"}},
        BadFile{"symmetric not square",
                "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n",
                {"must be square"}},
        BadFile{"truncated",
                kGeneral + "3 3 3\n1 1 1\n2 2 2\n",
                {":4:", "truncated", "declares 3", "after 2"}},
        BadFile{"row out of range",
                kGeneral + "3 3 2\n1 1 1\n4 1 2\n",
                {":4:", "out of range", "1..3"}},
        BadFile{"column zero", kGeneral + "3 3 1\n1 0 1\n", {":3:", "out of range"}},
        BadFile{
            "non-numeric value", kGeneral + "2 2 1\n1 1 abc\n", {":3:", "'abc'", "not a number"}},
        BadFile{"non-numeric index", kGeneral + "2 2 1\n1 x 1\n", {":3:", "bad entry"}},
        BadFile{"missing value", kGeneral + "2 2 1\n1 1\n", {":3:", "no value"}},
        BadFile{"integer with fraction",
                "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n",
                {":3:", "not an integer"}},
        BadFile{"pattern with value",
                "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1.0\n",
                {":3:", "2 numbers"}},
        BadFile{"extra entries", kGeneral + "2 2 1\n1 1 1\n2 2 2\n", {":4:", "more entries"}},
        BadFile{"nan value", kGeneral + "2 2 1\n1 1 nan\n", {":3:", "'nan'", "not finite"}},
        BadFile{
            "inf value", kGeneral + "2 2 2\n1 1 1\n2 2 -Inf\n", {":4:", "'-Inf'", "not finite"}},
        BadFile{"symmetric with both triangles",
                "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 2\n2 1 -1\n"
                "1 2 -1\n3 3 2\n",
                {":5:", "(1, 2)", "above the diagonal", "line 4", "stores one triangle"}},
        BadFile{"sizes beyond memory",
                kGeneral + "2147483647 2147483647 100000000000000\n1 1 1\n",
                {":2:", "100000000000000 entries", "GB of memory"}}),
    [](const auto& test_info) {
      std::string name = test_info.param.label;
      for (auto& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

std::vector<std::map<std::string, std::string>> read_index_csv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string cell;
    while (std::getline(ss, cell, ',')) out.push_back(cell);
    return out;
  };
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto cells = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

TEST(MatrixMarketSharedData, EveryMatrixMatchesTheIndex) {
  TUNEBASE_SHARED_FILE_OR_SKIP(index, "matrices/INDEX.csv");
  const auto folder = std::filesystem::path(index).parent_path();
  const auto rows = read_index_csv(index);
  ASSERT_GE(rows.size(), 20u);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    files += entry.path().extension() == ".mtx";
  }
  EXPECT_EQ(files, rows.size()) << "every .mtx file should have an INDEX.csv row";
  for (const auto& row : rows) {
    SCOPED_TRACE(row.at("name"));
    const auto path = folder / (row.at("name") + ".mtx");
    MatrixMarketInfo info;
    const CsrMatrix a = read_matrix_market(path.string(), &info);
    EXPECT_EQ(a.name, row.at("name"));
    EXPECT_EQ(a.rows, std::stoll(row.at("rows")));
    EXPECT_EQ(a.cols, std::stoll(row.at("cols")));
    // nnz_full counts the expanded symmetric storage; the files have no duplicates.
    EXPECT_EQ(a.nnz(), std::stoll(row.at("nnz_full")));
    EXPECT_EQ(info.field, row.at("field"));
    EXPECT_EQ(info.symmetry, row.at("symmetry"));
    expect_sorted_rows(a);
    const auto features = matrix_features(a);
    EXPECT_EQ(features["empty_rows"].get<std::int64_t>(), std::stoll(row.at("empty_rows")));
    EXPECT_EQ(features["explicit_zeros"].get<std::int64_t>(), std::stoll(row.at("explicit_zeros")));
    if (row.at("symmetry") == "symmetric") {
      EXPECT_DOUBLE_EQ(features["structural_symmetry"].get<double>(), 1.0);
      EXPECT_DOUBLE_EQ(features["numerical_symmetry"].get<double>(), 1.0);
    }
  }
}

TEST(Laplacian, TwoDimensionalStencil) {
  const CsrMatrix a = laplacian_2d(3);
  EXPECT_EQ(a.rows, 9);
  EXPECT_EQ(a.cols, 9);
  // 9 diagonal entries plus 2 per grid edge (12 edges)
  EXPECT_EQ(a.nnz(), 33);
  expect_sorted_rows(a);
  const auto d = dense(a);
  EXPECT_EQ(d[4], (std::vector<double>{0, -1, 0, -1, 4, -1, 0, -1, 0}));
  EXPECT_EQ(d[0], (std::vector<double>{4, -1, 0, -1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(a.name, "laplacian_2d_3");
}

TEST(Laplacian, ThreeDimensionalStencilAtScale) {
  const CsrMatrix small = laplacian_3d(3);
  EXPECT_EQ(small.nnz(), 27 + 2 * 54);
  const auto d = dense(small);
  EXPECT_EQ(d[13][13], 6.0);  // centre point has all six neighbours
  EXPECT_EQ(d[13][4], -1.0);
  EXPECT_EQ(d[13][22], -1.0);

  const CsrMatrix big = laplacian_3d(100);
  EXPECT_EQ(big.rows, 1'000'000);
  // n^3 diagonal entries plus 2 per grid edge (3 n^2 (n-1) edges)
  EXPECT_EQ(big.nnz(), 1'000'000 + 2 * 3 * 100 * 100 * 99);
  expect_sorted_rows(big);
}

TEST(Laplacian, RejectsBadSizes) {
  EXPECT_THROW(laplacian_2d(0), InvalidInput);
  EXPECT_THROW(laplacian_3d(-1), InvalidInput);
  EXPECT_THROW(laplacian_3d(2000), InvalidInput);
}

TEST(Laplacian, GridsBeyondMemoryAreRefusedBeforeAllocating) {
  // The largest 3D grid that 32-bit indices allow: about 200 GB as CSR.
  constexpr std::int64_t n = 1290;
  const double points = static_cast<double>(n) * n * n;
  if (static_cast<double>(physical_memory_bytes()) >= csr_bytes(points, 7 * points)) {
    GTEST_SKIP() << "this machine could hold the matrix";
  }
  try {
    laplacian_3d(n);
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("laplacian_3d: n = 1290"), std::string::npos) << message;
    EXPECT_NE(message.find("GB of memory"), std::string::npos) << message;
  }
}

TEST(SpmvReference, MultipliesAndChecksSizes) {
  const std::string text =
      "%%MatrixMarket matrix coordinate real general\n3 2 3\n1 1 2\n1 2 3\n3 2 -1\n";
  const CsrMatrix a = parse_matrix_market(text, "r.mtx");
  std::vector<double> y;
  spmv_reference(a, {1.0, 10.0}, y);
  EXPECT_EQ(y, (std::vector<double>{32.0, 0.0, -10.0}));
  EXPECT_THROW(spmv_reference(a, {1.0, 2.0, 3.0}, y), InvalidInput);
}

TEST(MatrixFeatures, SmallKnownMatrix) {
  // [ 4  1  0  0 ]
  // [ 1 -3  2  0 ]
  // [ 0  0  0  0 ]
  // [ 5  0  0  1 ]
  const std::string text =
      "%%MatrixMarket matrix coordinate real general\n4 4 7\n1 1 4\n1 2 1\n2 1 1\n2 2 -3\n2 3 "
      "2\n4 1 5\n4 4 1\n";
  const auto f = matrix_features(parse_matrix_market(text, "f.mtx"));
  EXPECT_EQ(f["rows"], 4);
  EXPECT_EQ(f["cols"], 4);
  EXPECT_EQ(f["nnz"], 7);
  EXPECT_EQ(f["nnz_per_row_min"], 0);
  EXPECT_EQ(f["nnz_per_row_max"], 3);
  EXPECT_DOUBLE_EQ(f["nnz_per_row_mean"].get<double>(), 1.75);
  // row lengths 2 3 0 2: E[len^2] = 17/4, std = sqrt(17/4 - 1.75^2)
  EXPECT_NEAR(f["nnz_per_row_std"].get<double>(), std::sqrt(17.0 / 4 - 1.75 * 1.75), 1e-12);
  EXPECT_EQ(f["empty_rows"], 1);
  EXPECT_EQ(f["bandwidth"], 3);
  EXPECT_EQ(f["lower_bandwidth"], 3);
  EXPECT_EQ(f["upper_bandwidth"], 1);
  // off-diagonal entries (1,2) (2,1) (2,3) (4,1): the first two are mirrored
  EXPECT_DOUBLE_EQ(f["structural_symmetry"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(f["numerical_symmetry"].get<double>(), 0.5);
  // diagonal 4 -3 0 1 against off-diagonal sums 1 3 0 5: rows 1-3 dominant, only row 1 strictly
  EXPECT_DOUBLE_EQ(f["diagonal_dominance_fraction"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(f["strict_diagonal_dominance_fraction"].get<double>(), 0.25);
  EXPECT_EQ(f["diagonal_zero_or_missing"], 1);
  EXPECT_DOUBLE_EQ(f["diagonal_min_abs"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(f["diagonal_max_abs"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(f["diagonal_positive_fraction"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(f["frobenius_norm"].get<double>(), std::sqrt(16.0 + 1 + 1 + 9 + 4 + 25 + 1));
  EXPECT_DOUBLE_EQ(f["max_abs"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(f["inf_norm"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(f["one_norm"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(f["ell_fill_ratio"].get<double>(), 12.0 / 7.0);
}

TEST(MatrixFeatures, SymmetricLaplacianAndRectangular) {
  const auto f = matrix_features(laplacian_2d(10));
  EXPECT_DOUBLE_EQ(f["structural_symmetry"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(f["numerical_symmetry"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(f["diagonal_dominance_fraction"].get<double>(), 1.0);
  EXPECT_EQ(f["bandwidth"], 10);
  EXPECT_EQ(f["nnz_per_row_min"], 3);
  EXPECT_EQ(f["nnz_per_row_max"], 5);

  const std::string skew = "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3\n";
  const auto s = matrix_features(parse_matrix_market(skew, "k.mtx"));
  EXPECT_DOUBLE_EQ(s["structural_symmetry"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["numerical_symmetry"].get<double>(), 0.0);

  const std::string rect = "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 1 1\n2 3 1\n";
  const auto r = matrix_features(parse_matrix_market(rect, "r.mtx"));
  EXPECT_EQ(r["cols"], 3);
  EXPECT_DOUBLE_EQ(r["structural_symmetry"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(r["density"].get<double>(), 2.0 / 6.0);
}

}  // namespace
}  // namespace tunebase
