// Generated PDE test problems: finite-difference matrices of any size, by name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/sparse_matrix.h"

namespace tunebase {

/// Knobs of the generated problems; each problem reads only the ones it names.
struct ProblemOptions {
  /// anisotropic2d: -epsilon u_xx - u_yy; small epsilon makes point smoothers and plain AMG
  /// coarsening struggle.
  double epsilon = 1.0e-3;
  /// convdiff2d / convdiff3d: speed |w| of the constant wind w = |w| (1, 2, 3)/|(1, 2, 3)| in
  /// -laplace(u) + w . grad(u) on the unit square / cube; larger is less symmetric.
  double wind = 100.0;
};

/// Names accepted by generate_problem, in the order they are documented.
const std::vector<std::string>& problem_names();

/// The matrix of problem `name` on a grid of `size` interior points per side (so `size`^2
/// unknowns in 2D and `size`^3 in 3D), Dirichlet boundaries, rows scaled by h^2:
///   poisson2d, poisson3d  5- / 7-point Laplacian (symmetric positive definite)
///   anisotropic2d         -epsilon u_xx - u_yy (SPD)
///   convdiff2d, convdiff3d  -laplace(u) + w . grad(u), first-order upwind (nonsymmetric
///                         M-matrix)
/// The matrix name records the problem and its parameters, e.g. `convdiff2d_n1000_w100`.
/// Throws InvalidInput for an unknown name (listing the known ones), a size below 1, or a
/// grid whose unknowns do not fit 32-bit column indices or whose matrix does not fit in memory.
CsrMatrix generate_problem(std::string_view name, std::int64_t size,
                           const ProblemOptions& options = {});

/// -epsilon u_xx - u_yy on an n x n grid, 5-point stencil.
CsrMatrix anisotropic_2d(std::int64_t n, double epsilon);
/// -laplace(u) + w . grad(u) with upwind differences on n x n (x n) grids.
CsrMatrix convection_diffusion_2d(std::int64_t n, double wind);
CsrMatrix convection_diffusion_3d(std::int64_t n, double wind);

}  // namespace tunebase
