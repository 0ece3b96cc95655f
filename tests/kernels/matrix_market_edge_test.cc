// Matrix Market edge cases beside sparse_matrix_test.cc: damaged gzip files and sizes at the
// limits of the 32-bit column indices.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "kernels/sparse_matrix.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

using ::tunebase::testing::TempDir;

constexpr int kPaddingLines = 200;

std::string small_file_text() {
  std::string text = "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n2 2 2\n3 3 3\n";
  // Comment lines after the data make the compressed stream long enough to cut in half.
  for (int i = 0; i < kPaddingLines; ++i) text += "% padding " + std::to_string(i) + "\n";
  return text;
}

std::string gzip_bytes(const TempDir& dir, const std::string& text) {
  std::ifstream in(testing::write_gzip(dir.file("whole.mtx.gz"), text), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(MatrixMarketEdges, TruncatedGzipIsAnErrorNotAShortMatrix) {
  TempDir dir;
  const std::string bytes = gzip_bytes(dir, small_file_text());
  const std::string cut = dir.file("cut.mtx.gz");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  try {
    read_matrix_market(cut);
    FAIL() << "a gzip file cut in half was read without error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(cut), std::string::npos) << m;
    EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  }
}

TEST(MatrixMarketEdges, GzipMagicWithGarbageIsAnError) {
  TempDir dir;
  const std::string path = dir.file("garbage.mtx.gz");
  std::ofstream(path, std::ios::binary) << std::string("\x1f\x8b", 2) << "not really gzip data";
  EXPECT_THROW(read_matrix_market(path), Error);
}

TEST(MatrixMarketEdges, EmptyMatrixAndSizeLimits) {
  const CsrMatrix empty =
      parse_matrix_market("%%MatrixMarket matrix coordinate real general\n0 0 0\n", "empty.mtx");
  EXPECT_EQ(empty.rows, 0);
  EXPECT_EQ(empty.nnz(), 0);
  EXPECT_EQ(empty.row_ptr.size(), 1u);
  // More rows than 32-bit indices address; refused before allocating.
  EXPECT_THROW(
      parse_matrix_market(
          "%%MatrixMarket matrix coordinate real general\n9999999999 9999999999 1\n1 1 1\n",
          "huge.mtx"),
      InvalidInput);
  // An index that does not fit any integer type.
  EXPECT_THROW(parse_matrix_market("%%MatrixMarket matrix coordinate real general\n2 2 1\n"
                                   "99999999999999999999 1 1\n",
                                   "overflow.mtx"),
               InvalidInput);
  // A value that overflows a double.
  EXPECT_THROW(parse_matrix_market(
                   "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1e999\n", "big.mtx"),
               InvalidInput);
}

}  // namespace
}  // namespace tunebase
