#include "kernels/pde_problems.h"

#include <array>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace tunebase {
namespace {

constexpr int kMaxDimensions = 3;
/// Unit direction of the convection wind: (1, 2) / sqrt(5) in 2D, (1, 2, 3) / sqrt(14) in 3D.
constexpr std::array<double, kMaxDimensions> kWindDirection = {1.0, 2.0, 3.0};

/// A constant-coefficient stencil on a structured grid: coefficient of the point itself and of
/// its neighbours at -e_d and +e_d along each dimension d.
struct Stencil {
  int dimensions = 2;
  double center = 0.0;
  std::array<double, kMaxDimensions> minus{};
  std::array<double, kMaxDimensions> plus{};
};

std::int64_t checked_unknowns(std::int64_t n, int dimensions, std::string_view problem) {
  if (n < 1) {
    std::ostringstream m;
    m << "problem " << problem << ": size must be at least 1 grid point per side, got " << n;
    throw InvalidInput(m.str());
  }
  const double unknowns = std::pow(static_cast<double>(n), dimensions);
  if (unknowns > static_cast<double>(std::numeric_limits<std::int32_t>::max())) {
    std::ostringstream m;
    m << "problem " << problem << ": size " << n << " gives " << unknowns
      << " unknowns, more than 32-bit column indices allow (at most "
      << std::numeric_limits<std::int32_t>::max() << ")";
    throw InvalidInput(m.str());
  }
  std::ostringstream what;
  what << "problem " << problem << ": size " << n;
  check_stencil_fits_in_memory(unknowns, dimensions, what.str());
  std::int64_t result = 1;
  for (int d = 0; d < dimensions; ++d) result *= n;
  return result;
}

/// Assembles the stencil on an n^dimensions grid with lexicographic numbering
/// i = x + n y + n^2 z; neighbours outside the grid are Dirichlet boundary values and drop out.
CsrMatrix assemble(std::int64_t n, const Stencil& s, std::string name) {
  const std::int64_t rows = checked_unknowns(n, s.dimensions, name);
  std::array<std::int64_t, kMaxDimensions> stride{1, n, n * n};

  CsrMatrix a;
  a.rows = rows;
  a.cols = rows;
  a.name = std::move(name);
  a.row_ptr.reserve(static_cast<std::size_t>(rows) + 1);
  const auto per_row = static_cast<std::size_t>(2 * s.dimensions + 1);
  a.col.reserve(static_cast<std::size_t>(rows) * per_row);
  a.val.reserve(static_cast<std::size_t>(rows) * per_row);
  a.row_ptr.push_back(0);

  for (std::int64_t i = 0; i < rows; ++i) {
    std::array<std::int64_t, kMaxDimensions> coord{};
    for (int d = 0; d < s.dimensions; ++d) coord[d] = (i / stride[d]) % n;
    auto add = [&](std::int64_t column, double value) {
      a.col.push_back(static_cast<std::int32_t>(column));
      a.val.push_back(value);
    };
    // Columns ascend: lower neighbours from the largest stride down, the point, then upper.
    for (int d = s.dimensions - 1; d >= 0; --d) {
      if (coord[d] > 0 && s.minus[d] != 0.0) add(i - stride[d], s.minus[d]);
    }
    add(i, s.center);
    for (int d = 0; d < s.dimensions; ++d) {
      if (coord[d] + 1 < n && s.plus[d] != 0.0) add(i + stride[d], s.plus[d]);
    }
    a.row_ptr.push_back(static_cast<std::int64_t>(a.val.size()));
  }
  return a;
}

std::string format_number(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

CsrMatrix convection_diffusion(std::int64_t n, double wind, int dimensions) {
  if (!std::isfinite(wind) || wind < 0.0) {
    throw InvalidInput("problem convdiff: wind speed must be finite and >= 0, got " +
                       format_number(wind));
  }
  const double h = 1.0 / static_cast<double>(n + 1);
  double direction_norm = 0.0;
  for (int d = 0; d < dimensions; ++d) direction_norm += kWindDirection[d] * kWindDirection[d];
  direction_norm = std::sqrt(direction_norm);

  // Times h^2: (2 dim u_i - sum of neighbours) + h w_d (u_i - u_{i - e_d}) for w_d > 0.
  Stencil s;
  s.dimensions = dimensions;
  s.center = 2.0 * dimensions;
  for (int d = 0; d < dimensions; ++d) {
    const double w = wind * kWindDirection[d] / direction_norm;
    s.minus[d] = -1.0 - h * w;
    s.plus[d] = -1.0;
    s.center += h * w;
  }
  std::string name = "convdiff" + std::to_string(dimensions) + "d_n" + std::to_string(n) + "_w" +
                     format_number(wind);
  return assemble(n, s, std::move(name));
}

}  // namespace

const std::vector<std::string>& problem_names() {
  static const std::vector<std::string> names = {"poisson2d", "poisson3d", "anisotropic2d",
                                                 "convdiff2d", "convdiff3d"};
  return names;
}

CsrMatrix anisotropic_2d(std::int64_t n, double epsilon) {
  if (!std::isfinite(epsilon) || epsilon <= 0.0) {
    throw InvalidInput("problem anisotropic2d: epsilon must be finite and > 0, got " +
                       format_number(epsilon));
  }
  // Times h^2: -epsilon (u_{x-1} - 2u + u_{x+1}) - (u_{y-1} - 2u + u_{y+1}).
  Stencil s;
  s.dimensions = 2;
  s.center = 2.0 * epsilon + 2.0;
  s.minus = {-epsilon, -1.0, 0.0};
  s.plus = {-epsilon, -1.0, 0.0};
  return assemble(n, s, "anisotropic2d_n" + std::to_string(n) + "_eps" + format_number(epsilon));
}

CsrMatrix convection_diffusion_2d(std::int64_t n, double wind) {
  return convection_diffusion(n, wind, 2);
}

CsrMatrix convection_diffusion_3d(std::int64_t n, double wind) {
  return convection_diffusion(n, wind, 3);
}

CsrMatrix generate_problem(std::string_view name, std::int64_t size,
                           const ProblemOptions& options) {
  CsrMatrix a;
  if (name == "poisson2d") {
    checked_unknowns(size, 2, name);
    a = laplacian_2d(size);
    a.name = "poisson2d_n" + std::to_string(size);
  } else if (name == "poisson3d") {
    checked_unknowns(size, 3, name);
    a = laplacian_3d(size);
    a.name = "poisson3d_n" + std::to_string(size);
  } else if (name == "anisotropic2d") {
    a = anisotropic_2d(size, options.epsilon);
  } else if (name == "convdiff2d") {
    a = convection_diffusion_2d(size, options.wind);
  } else if (name == "convdiff3d") {
    a = convection_diffusion_3d(size, options.wind);
  } else {
    std::string known;
    for (const auto& n : problem_names()) known += (known.empty() ? "" : ", ") + n;
    throw InvalidInput("unknown generated problem '" + std::string(name) + "'; known: " + known);
  }
  return a;
}

}  // namespace tunebase
