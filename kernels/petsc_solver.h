// The PETSc target: tunes Krylov method, preconditioner and their parameters for one sparse
// system, each solve in a separate process so that a crash or hang cannot end a sweep.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/space.h"
#include "kernels/evaluator.h"
#include "kernels/sparse_matrix.h"

namespace tunebase {

/// Which clock times a solve. Wall time is time to solution; CPU time of the (single-threaded)
/// solver process approximates it on a busy shared machine, where other processes' load
/// inflates wall times unevenly between configurations.
enum class SolveClock { wall, cpu };

/// How a PETSc solve is run and judged.
struct PetscSolverOptions {
  /// KSP relative tolerance (PETSc's own convergence test, in the method's default norm).
  double rtol = 1.0e-8;
  /// Largest accepted true relative residual ||b - A x|| / ||b||, computed by us after the
  /// solve. Left-preconditioned methods stop on the preconditioned residual, which can be
  /// smaller than the true one by the conditioning of the preconditioner; this bound is what a
  /// converged solve must really reach.
  double residual_tolerance = 1.0e-6;
  /// KSP iteration cap; reaching it is a failure (DIVERGED_ITS).
  std::int64_t max_iterations = 10'000;
  /// Wall-clock limit of one evaluation (setup + solve, the warm-up and all repeats); past it
  /// the solver process is killed and the trial is a timeout.
  double time_limit_seconds = 60.0;
  /// Timed solves per evaluation, after one untimed warm-up solve; the objective is their
  /// median. Repeats stop early when the next one would pass the time limit (at least one is
  /// always taken: when even one would not fit after the warm-up, the warm-up is timed).
  int repeats = 3;
  /// Clock of the objective and of `raw`; metrics report both medians either way.
  SolveClock clock = SolveClock::wall;
  /// Right-hand side; empty means b = A * (1, ..., 1), or b = A x with x_i = (i+1)/n when
  /// A * 1 = 0 (a singular matrix such as a Neumann Laplacian: b stays in the range of A).
  std::vector<double> rhs;
  /// Test hook only: "abort", "segfault", "hang" or "exit" makes the solver process fail that
  /// way instead of solving, "exit_leaving_child" makes it exit leaving a process that holds
  /// its output open for a while (as an MPI daemon may), and "malformed_reply" makes it answer
  /// with a reply that breaks the protocol, to check that the sweep survives it. Empty in real
  /// use.
  std::string fault_injection;
};

/// One PETSc options-database entry, e.g. {"-ksp_type", "gmres"}.
using PetscOption = std::pair<std::string, std::string>;

/// The PETSc search space. Parameters:
///   ksp_type        gmres fgmres lgmres bcgs bcgsl tfqmr cgs bicg, plus cg minres when
///                   `symmetric`
///   gmres_restart   10 30 60 100 (gmres, fgmres, lgmres only)
///   pc_type         none jacobi bjacobi sor ilu gamg hypre lu, plus icc when `symmetric`
///                   (lu: PETSc's sparse direct factorisation, the method converging at once)
///   bjacobi_blocks  1 8 (bjacobi; each block gets ILU(factor_levels))
///   factor_levels   0..3 (ilu, icc, bjacobi)
///   factor_shift    default nonzero (ilu, icc, bjacobi, lu: PETSc's own shift, or shifting zero
///                   pivots away, -pc_factor_shift_type nonzero)
///   lu_package      petsc superlu umfpack mumps (lu: -pc_factor_mat_solver_type)
///   sor_omega       0.7 1.0 1.3 1.6 1.9 (sor)
///   gamg_threshold  0 0.01 0.03 0.08 (gamg)
///   hypre_*         BoomerAMG strong threshold (0.25 0.5 0.7), coarsening (Falgout HMIS
///                   PMIS), relaxation (symmetric-SOR/Jacobi l1scaled-SOR/Jacobi Chebyshev),
///                   interpolation (classical ext+i FF1), aggressive-coarsening levels (0 1)
/// A parameter that does not apply to the chosen method is pinned to its default by a
/// constraint, so every valid configuration is a different solver. Real-valued parameters are
/// ordinal lists so that the space stays enumerable (exhaustive search, scoring every
/// candidate): the Cartesian product (7.5e7 for the symmetric space) is above
/// SearchSpace::kMaxEnumerate, but the pinning constraints prune the enumeration to far
/// fewer partial configurations. The default configuration is PETSc's default: GMRES(30) with block
/// Jacobi and ILU(0) (one block on one process, which is what PETSc's sequential ILU(0) default
/// computes).
SearchSpace petsc_search_space(bool symmetric);

/// The options-database entries `config` (valid in `space`, a petsc_search_space) stands for;
/// parameters pinned because they do not apply emit nothing.
std::vector<PetscOption> petsc_options(const SearchSpace& space, const Configuration& config);

/// Whether matrix_features() describe a numerically symmetric matrix (CG, MINRES and ICC are
/// offered only then).
bool features_say_symmetric(const nlohmann::json& features);

/// Evaluator of the PETSc target on one matrix. Each evaluation sends the configuration to a
/// solver process (forked on first use, PETSc initialised once there, reused while it stays
/// healthy) and reads the result back through a socket. A crash, abort or PETSc error of that
/// process is a failed trial and a hang past the time limit a timeout; the next evaluation
/// starts a fresh process. Not thread-safe: one evaluation at a time per object.
///
/// Objective: median time of KSPSetUp + KSPSolve in seconds over options.repeats solves of
/// A x = b from x = 0, each with a fresh KSP (wall clock unless options.clock is cpu; the time
/// limit is always wall clock). One untimed warm-up solve comes first: the first solve in a
/// trial is several times slower than the next ones whatever the method, and the convergence
/// checks below are made on it, so its failure is the trial's failure. A solve fails when KSP
/// reports divergence (the message names the KSPConvergedReason, e.g. DIVERGED_ITS), when
/// PETSc raises an error, or when the true residual is above options.residual_tolerance.
/// Metrics: iterations, residual (true relative residual), reason, wall_seconds and
/// cpu_seconds (medians), setup_seconds and solve_seconds (wall medians), warmup_seconds (wall
/// time of the warm-up solve), repeats (timed solves), and
/// unused_options (options PETSc did not read; empty when the
/// space is right).
class PetscSolverEvaluator : public Evaluator {
 public:
  /// Throws InvalidInput for a non-square or empty matrix, a right-hand side of the wrong
  /// length or zero norm (for the default one: A x = 0 for both x it tries), or options out of
  /// range.
  explicit PetscSolverEvaluator(CsrMatrix matrix, PetscSolverOptions options = {});
  ~PetscSolverEvaluator() override;
  PetscSolverEvaluator(const PetscSolverEvaluator&) = delete;
  PetscSolverEvaluator& operator=(const PetscSolverEvaluator&) = delete;

  std::string kernel_name() const override { return "petsc"; }
  const SearchSpace& space() const override { return space_; }
  /// matrix_features() of the matrix plus "matrix": its name.
  nlohmann::json task() const override { return task_; }
  Measurement evaluate(const Configuration& config) override;
  /// {"rtol", "max_it", "residual_tolerance", "clock": "wall" or "cpu"}: what a solve must
  /// reach and how it is timed.
  nlohmann::json measurement_settings() const override;
  nlohmann::json default_measurement_settings() const override;

  /// PETSc's default solver: GMRES(30), block Jacobi with ILU(0).
  Configuration petsc_default() const { return space_.default_configuration(); }
  const CsrMatrix& matrix() const { return matrix_; }

 private:
  struct Worker;

  CsrMatrix matrix_;
  PetscSolverOptions options_;
  nlohmann::json task_;
  SearchSpace space_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace tunebase
