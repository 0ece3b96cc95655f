#include "kernels/pde_problems.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace tunebase {
namespace {

ProblemOptions with_epsilon(double epsilon) {
  ProblemOptions o;
  o.epsilon = epsilon;
  return o;
}

ProblemOptions with_wind(double wind) {
  ProblemOptions o;
  o.wind = wind;
  return o;
}

// Rows are well formed: offsets ascend, columns in range and strictly ascending per row.
void expect_well_formed(const CsrMatrix& a) {
  ASSERT_EQ(a.row_ptr.size(), static_cast<std::size_t>(a.rows) + 1);
  EXPECT_EQ(a.row_ptr.front(), 0);
  EXPECT_EQ(a.row_ptr.back(), a.nnz());
  EXPECT_EQ(a.col.size(), a.val.size());
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      ASSERT_GE(a.col[k], 0);
      ASSERT_LT(a.col[k], a.cols);
      if (k > a.row_ptr[r]) {
        ASSERT_LT(a.col[k - 1], a.col[k]) << "row " << r;
      }
    }
  }
}

double entry(const CsrMatrix& a, std::int64_t r, std::int64_t c) {
  for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
    if (a.col[k] == c) return a.val[k];
  }
  return 0.0;
}

TEST(PdeProblems, Poisson2dHasTheFivePointStencil) {
  const CsrMatrix a = generate_problem("poisson2d", 4);
  expect_well_formed(a);
  EXPECT_EQ(a.rows, 16);
  // 5 entries per row minus one per boundary side touched: 16*5 - 4 sides * 4 points.
  EXPECT_EQ(a.nnz(), 16 * 5 - 4 * 4);
  EXPECT_EQ(a.name, "poisson2d_n4");
  const nlohmann::json f = matrix_features(a);
  EXPECT_DOUBLE_EQ(f["numerical_symmetry"].get<double>(), 1.0);
  // Interior point (1,1) = row 5: 4 on the diagonal, -1 at its four neighbours.
  EXPECT_DOUBLE_EQ(entry(a, 5, 5), 4.0);
  for (std::int64_t c : {1, 4, 6, 9}) EXPECT_DOUBLE_EQ(entry(a, 5, c), -1.0);
}

TEST(PdeProblems, Poisson3dSize) {
  const CsrMatrix a = generate_problem("poisson3d", 5);
  expect_well_formed(a);
  EXPECT_EQ(a.rows, 125);
  // 7 per row minus one per face point on each of the 6 faces.
  EXPECT_EQ(a.nnz(), 125 * 7 - 6 * 25);
}

TEST(PdeProblems, AnisotropicWeightsTheXDirectionByEpsilon) {
  const double eps = 0.01;
  const CsrMatrix a = generate_problem("anisotropic2d", 3, with_epsilon(eps));
  expect_well_formed(a);
  // Centre point (1,1) = row 4: x-neighbours 3, 5; y-neighbours 1, 7.
  EXPECT_DOUBLE_EQ(entry(a, 4, 4), 2.0 + 2.0 * eps);
  EXPECT_DOUBLE_EQ(entry(a, 4, 3), -eps);
  EXPECT_DOUBLE_EQ(entry(a, 4, 5), -eps);
  EXPECT_DOUBLE_EQ(entry(a, 4, 1), -1.0);
  EXPECT_DOUBLE_EQ(entry(a, 4, 7), -1.0);
  EXPECT_DOUBLE_EQ(matrix_features(a)["numerical_symmetry"].get<double>(), 1.0);
}

TEST(PdeProblems, ConvectionDiffusionIsANonsymmetricMMatrix) {
  for (const char* name : {"convdiff2d", "convdiff3d"}) {
    const CsrMatrix a = generate_problem(name, 6, with_wind(50.0));
    expect_well_formed(a);
    EXPECT_LT(matrix_features(a)["numerical_symmetry"].get<double>(), 1.0) << name;
    for (std::int64_t r = 0; r < a.rows; ++r) {
      double row_sum = 0.0;
      for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
        if (a.col[k] == r) {
          EXPECT_GT(a.val[k], 0.0);
        } else {
          EXPECT_LT(a.val[k], 0.0);
        }
        row_sum += a.val[k];
      }
      // Upwinding keeps weak diagonal dominance: sum over the row >= 0 (= 0 inside).
      EXPECT_GE(row_sum, -1e-12) << name << " row " << r;
    }
  }
}

TEST(PdeProblems, ZeroWindIsThePoissonMatrix) {
  const CsrMatrix c = generate_problem("convdiff3d", 4, with_wind(0.0));
  const CsrMatrix p = generate_problem("poisson3d", 4);
  EXPECT_EQ(c.row_ptr, p.row_ptr);
  EXPECT_EQ(c.col, p.col);
  EXPECT_EQ(c.val, p.val);
}

TEST(PdeProblems, RejectsUnknownNamesAndBadSizes) {
  try {
    generate_problem("poisson4d", 3);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("convdiff3d"), std::string::npos) << e.what();
  }
  EXPECT_THROW(generate_problem("poisson2d", 0), InvalidInput);
  EXPECT_THROW(generate_problem("convdiff2d", -3), InvalidInput);
  // 2000^3 unknowns do not fit 32-bit column indices; refused before allocating.
  EXPECT_THROW(generate_problem("convdiff3d", 2000), InvalidInput);
  EXPECT_THROW(generate_problem("anisotropic2d", 4, with_epsilon(0.0)), InvalidInput);
  EXPECT_THROW(generate_problem("convdiff2d", 4, with_wind(-1.0)), InvalidInput);
  EXPECT_EQ(problem_names().size(), 5u);
}

TEST(PdeProblems, GridsBeyondMemoryAreRefusedBeforeAllocating) {
  // The largest 2D grid that 32-bit indices allow: about 150 GB as CSR.
  constexpr std::int64_t n = 46340;
  const double points = static_cast<double>(n) * n;
  if (static_cast<double>(physical_memory_bytes()) >= csr_bytes(points, 5 * points)) {
    GTEST_SKIP() << "this machine could hold the matrix";
  }
  for (const char* name : {"convdiff2d", "anisotropic2d", "poisson2d"}) {
    try {
      generate_problem(name, n);
      FAIL() << name << ": no error";
    } catch (const InvalidInput& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("size 46340"), std::string::npos) << message;
      EXPECT_NE(message.find("GB of memory"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace tunebase
