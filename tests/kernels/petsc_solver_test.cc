#include "kernels/petsc_solver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/failure_reasons.h"
#include "kernels/pde_problems.h"
#include "tests/support/process_limits.h"

namespace tunebase {
namespace {

/// Options with the given fields changed from their defaults (designated initialisers would
/// trip -Wmissing-field-initializers).
PetscSolverOptions options_with(int repeats, double time_limit_seconds = 60.0,
                                std::string fault = {}) {
  PetscSolverOptions o;
  o.repeats = repeats;
  o.time_limit_seconds = time_limit_seconds;
  o.fault_injection = std::move(fault);
  return o;
}

Configuration with(const SearchSpace& space, Configuration c,
                   const std::map<std::string, Value>& changes) {
  for (const auto& [name, value] : changes) c.at(*space.index_of(name)) = value;
  space.check(c);
  return c;
}

std::string message_of(const Measurement& m) { return m.message + " " + m.metrics.dump(); }

TEST(PetscSearchSpace, SymmetricOnlyMethodsDependOnTheMatrix) {
  const SearchSpace general = petsc_search_space(false);
  const SearchSpace symmetric = petsc_search_space(true);
  const auto& general_ksp = general.parameter(*general.index_of("ksp_type"));
  const auto& symmetric_ksp = symmetric.parameter(*symmetric.index_of("ksp_type"));
  EXPECT_FALSE(general_ksp.index_of(Value(std::string("cg"))));
  EXPECT_TRUE(symmetric_ksp.index_of(Value(std::string("cg"))));
  EXPECT_TRUE(symmetric_ksp.index_of(Value(std::string("minres"))));
  EXPECT_FALSE(general.parameter(*general.index_of("pc_type")).index_of(Value(std::string("icc"))));
  EXPECT_TRUE(
      symmetric.parameter(*symmetric.index_of("pc_type")).index_of(Value(std::string("icc"))));
}

TEST(PetscSearchSpace, DefaultIsGmres30WithBlockJacobiIlu0) {
  const SearchSpace space = petsc_search_space(false);
  const Configuration d = space.default_configuration();
  EXPECT_TRUE(space.is_valid(d));
  const std::vector<PetscOption> expected = {
      {"-ksp_type", "gmres"},      {"-ksp_gmres_restart", "30"}, {"-pc_type", "bjacobi"},
      {"-pc_bjacobi_blocks", "1"}, {"-sub_pc_type", "ilu"},      {"-sub_pc_factor_levels", "0"}};
  EXPECT_EQ(petsc_options(space, d), expected);
}

TEST(PetscSearchSpace, EveryValidConfigurationIsADifferentSolver) {
  for (bool symmetric : {false, true}) {
    const SearchSpace space = petsc_search_space(symmetric);
    ASSERT_TRUE(space.enumerable());
    const auto& valid = space.valid_configurations();
    std::set<std::vector<PetscOption>> distinct;
    for (const auto& c : valid) distinct.insert(petsc_options(space, c));
    // A parameter that does not apply is pinned, so no two configurations mean the same solve.
    EXPECT_EQ(distinct.size(), valid.size()) << "symmetric=" << symmetric;
    EXPECT_GT(valid.size(), 1000u);
  }
}

TEST(PetscSolver, DefaultSolveOfAGeneratedSystemConvergesWithTrueResidualChecked) {
  PetscSolverEvaluator e(generate_problem("convdiff2d", 24), options_with(2));
  EXPECT_EQ(e.kernel_name(), "petsc");
  EXPECT_EQ(e.task()["matrix"], "convdiff2d_n24_w100");
  EXPECT_EQ(e.task()["rows"], 576);
  const Measurement m = e.evaluate(e.petsc_default());
  ASSERT_TRUE(m.ok()) << message_of(m);
  EXPECT_EQ(m.raw.size(), 2u);
  EXPECT_GT(m.objective, 0.0);
  EXPECT_EQ(m.metrics["reason"], "CONVERGED_RTOL");
  EXPECT_GT(m.metrics["iterations"].get<int>(), 0);
  EXPECT_LE(m.metrics["residual"].get<double>(), 1e-6);
  EXPECT_TRUE(m.metrics["unused_options"].empty()) << m.metrics.dump();
}

TEST(PetscSolver, AnUntimedWarmUpSolveComesBeforeTheTimedRepeats) {
  // The first solve in a trial is several times slower than the next ones whatever the method;
  // it is solved and checked but not one of the repeats, and the trial's cost covers it.
  PetscSolverEvaluator e(generate_problem("poisson2d", 30), options_with(3));
  const Measurement m = e.evaluate(e.petsc_default());
  ASSERT_TRUE(m.ok()) << message_of(m);
  ASSERT_EQ(m.raw.size(), 3u);
  EXPECT_EQ(m.metrics["repeats"], 3);
  ASSERT_TRUE(m.metrics.contains("warmup_seconds")) << m.metrics.dump();
  const double warmup = m.metrics["warmup_seconds"].get<double>();
  EXPECT_GT(warmup, 0.0);
  double timed = 0.0;
  for (double t : m.raw) timed += t;
  EXPECT_GE(m.cost_seconds, warmup + timed);
}

TEST(PetscSolver, CpuClockTimesTheSolverProcess) {
  PetscSolverOptions o = options_with(1);
  o.clock = SolveClock::cpu;
  PetscSolverEvaluator e(generate_problem("poisson2d", 30), o);
  const Measurement m = e.evaluate(e.petsc_default());
  ASSERT_TRUE(m.ok()) << message_of(m);
  EXPECT_DOUBLE_EQ(m.objective, m.metrics["cpu_seconds"].get<double>());
  EXPECT_GT(m.metrics["wall_seconds"].get<double>(), 0.0);
  EXPECT_GT(m.objective, 0.0);
}

TEST(PetscSolver, HypreBoomerAmgWithCgSolvesPoissonInFewIterations) {
  PetscSolverEvaluator e(generate_problem("poisson2d", 40), options_with(1));
  const SearchSpace& s = e.space();
  const Configuration c = with(s, e.petsc_default(),
                               {{"ksp_type", std::string("cg")},
                                {"gmres_restart", std::int64_t{30}},
                                {"pc_type", std::string("hypre")},
                                {"bjacobi_blocks", std::int64_t{1}},
                                {"hypre_coarsen_type", std::string("HMIS")},
                                {"hypre_interp_type", std::string("ext+i")}});
  const Measurement m = e.evaluate(c);
  ASSERT_TRUE(m.ok()) << message_of(m);
  // Multigrid: iterations independent of the grid, far below CG's ~sqrt(condition) count.
  EXPECT_LT(m.metrics["iterations"].get<int>(), 25);
  EXPECT_LE(m.metrics["residual"].get<double>(), 1e-6);
  EXPECT_TRUE(m.metrics["unused_options"].empty()) << m.metrics.dump();
}

TEST(PetscSolver, EveryPreconditionerReadsAllItsOptions) {
  PetscSolverEvaluator e(generate_problem("poisson2d", 12), options_with(1));
  const SearchSpace& s = e.space();
  const Configuration d = e.petsc_default();
  const std::vector<Configuration> configs = {
      with(s, d,
           {{"ksp_type", std::string("fgmres")},
            {"gmres_restart", std::int64_t{10}},
            {"pc_type", std::string("jacobi")},
            {"bjacobi_blocks", std::int64_t{1}}}),
      with(s, d,
           {{"ksp_type", std::string("bcgs")},
            {"gmres_restart", std::int64_t{30}},
            {"bjacobi_blocks", std::int64_t{8}},
            {"factor_levels", std::int64_t{2}},
            {"factor_shift", std::string("nonzero")}}),
      with(s, d,
           {{"ksp_type", std::string("tfqmr")},
            {"pc_type", std::string("sor")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"sor_omega", 1.3}}),
      with(s, d,
           {{"ksp_type", std::string("cg")},
            {"pc_type", std::string("icc")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"factor_levels", std::int64_t{1}}}),
      with(s, d,
           {{"ksp_type", std::string("bcgsl")},
            {"pc_type", std::string("ilu")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"factor_levels", std::int64_t{1}},
            {"factor_shift", std::string("nonzero")}}),
      with(s, d,
           {{"ksp_type", std::string("lgmres")},
            {"pc_type", std::string("gamg")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"gamg_threshold", 0.03}}),
      with(s, d,
           {{"ksp_type", std::string("gmres")},
            {"pc_type", std::string("hypre")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"hypre_strong_threshold", 0.5},
            {"hypre_coarsen_type", std::string("PMIS")},
            {"hypre_relax_type", std::string("Chebyshev")},
            {"hypre_interp_type", std::string("FF1")},
            {"hypre_agg_nl", std::int64_t{1}}}),
      with(s, d,
           {{"ksp_type", std::string("minres")},
            {"gmres_restart", std::int64_t{30}},
            {"pc_type", std::string("none")},
            {"bjacobi_blocks", std::int64_t{1}}}),
      with(s, d,
           {{"ksp_type", std::string("bcgs")},
            {"pc_type", std::string("lu")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"factor_shift", std::string("nonzero")}}),
      with(s, d,
           {{"ksp_type", std::string("gmres")},
            {"pc_type", std::string("lu")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"lu_package", std::string("superlu")}}),
      with(s, d,
           {{"ksp_type", std::string("gmres")},
            {"pc_type", std::string("lu")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"lu_package", std::string("umfpack")}}),
      with(s, d,
           {{"ksp_type", std::string("gmres")},
            {"pc_type", std::string("lu")},
            {"bjacobi_blocks", std::int64_t{1}},
            {"lu_package", std::string("mumps")}}),
  };
  for (const auto& c : configs) {
    const Measurement m = e.evaluate(c);
    EXPECT_TRUE(m.ok()) << s.key(c) << ": " << message_of(m);
    EXPECT_TRUE(m.metrics["unused_options"].empty()) << s.key(c) << ": " << m.metrics.dump();
  }
}

TEST(PetscSolver, IterationCapFailsCleanlyWithItsReason) {
  PetscSolverOptions o;
  o.max_iterations = 60;
  PetscSolverEvaluator e(generate_problem("convdiff2d", 30), o);
  const SearchSpace& s = e.space();
  const Configuration c = with(s, e.petsc_default(),
                               {{"ksp_type", std::string("gmres")},
                                {"gmres_restart", std::int64_t{10}},
                                {"pc_type", std::string("none")},
                                {"bjacobi_blocks", std::int64_t{1}}});
  const Measurement m = e.evaluate(c);
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_FALSE(m.ok());
  EXPECT_EQ(m.metrics["reason"], "DIVERGED_ITS");
  EXPECT_NE(m.message.find("DIVERGED_ITS"), std::string::npos) << m.message;
  EXPECT_GT(m.metrics["residual"].get<double>(), 1e-6);
  // The solver process survives a divergence and serves the next configuration.
  // GMRES(30) with ILU(0) converges well inside the same cap.
  const Measurement next = e.evaluate(e.petsc_default());
  EXPECT_TRUE(next.ok()) << message_of(next);
}

TEST(PetscSolver, ConvergedInKspNormButTrueResidualTooLargeFails) {
  // KSP stops at 1e-2 in its own norm; we require 1e-9 of the true residual.
  PetscSolverOptions o = options_with(1);
  o.rtol = 1e-2;
  o.residual_tolerance = 1e-9;
  PetscSolverEvaluator e(generate_problem("poisson2d", 20), o);
  const Measurement m = e.evaluate(e.petsc_default());
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_EQ(m.metrics["reason"], "TRUE_RESIDUAL_ABOVE_TOLERANCE");
  EXPECT_NE(m.message.find("true residual"), std::string::npos) << m.message;
}

/// Permutation matrix [[0 1],[1 0]] (x3 blocks): ILU(0) meets a zero pivot at once.
CsrMatrix zero_diagonal() {
  CsrMatrix a;
  a.rows = a.cols = 6;
  a.name = "zero_diagonal";
  a.row_ptr = {0, 1, 2, 3, 4, 5, 6};
  a.col = {1, 0, 3, 2, 5, 4};
  a.val = {1, 1, 1, 1, 1, 1};
  return a;
}

TEST(PetscSolver, IluOnAZeroDiagonalFailsWithItsReason) {
  PetscSolverEvaluator e(zero_diagonal(), options_with(1));
  const Measurement m = e.evaluate(e.petsc_default());
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_FALSE(m.message.empty());
  // The missing diagonal is stored as an explicit zero, so ILU meets a zero pivot: a PC
  // failure that KSP reports, not a PETSc error.
  EXPECT_EQ(m.metrics.value("reason", std::string()), "DIVERGED_PC_FAILED") << message_of(m);
  EXPECT_NE(m.message.find("DIVERGED_PC_FAILED"), std::string::npos) << m.message;
  // Shifting the zero pivots away (the standard remedy) lets the factorisation and the
  // iteration go ahead: whatever the outcome, it is no longer a PC failure.
  const Configuration shifted =
      with(e.space(), e.petsc_default(), {{"factor_shift", std::string("nonzero")}});
  const Measurement after = e.evaluate(shifted);
  EXPECT_NE(after.metrics.value("reason", std::string()), "DIVERGED_PC_FAILED")
      << message_of(after);
  EXPECT_GT(after.metrics.value("iterations", 0), 0) << message_of(after);
  EXPECT_TRUE(after.metrics["unused_options"].empty()) << message_of(after);
}

TEST(PetscSolver, APcFailureSaysWhyThePreconditionerFailed) {
  PetscSolverEvaluator e(zero_diagonal(), options_with(1));
  // Block Jacobi fails because its block's ILU does: the block's reason is the one to show.
  const Measurement m = e.evaluate(e.petsc_default());
  EXPECT_EQ(m.metrics.value("reason", std::string()), "DIVERGED_PC_FAILED") << message_of(m);
  EXPECT_EQ(m.metrics.value("pc_failed_reason", std::string()), "FACTOR_NUMERIC_ZEROPIVOT")
      << message_of(m);
  EXPECT_THAT(m.message, ::testing::HasSubstr("DIVERGED_PC_FAILED after 0 iterations (PC failed: "
                                              "FACTOR_NUMERIC_ZEROPIVOT in the ILU of block 0)"));
  // The reason stays part of the failure's group, with the block's number as N.
  EXPECT_EQ(failure_reason(m.message),
            "KSP did not converge: DIVERGED_PC_FAILED after N iterations (PC failed: "
            "FACTOR_NUMERIC_ZEROPIVOT in the ILU of block N)");
  // ILU as the preconditioner itself: its own reason, no block.
  const Measurement ilu =
      e.evaluate(with(e.space(), e.petsc_default(),
                      {{"pc_type", std::string("ilu")}, {"bjacobi_blocks", std::int64_t{1}}}));
  EXPECT_EQ(ilu.metrics.value("pc_failed_reason", std::string()), "FACTOR_NUMERIC_ZEROPIVOT")
      << message_of(ilu);
  EXPECT_THAT(ilu.message, ::testing::EndsWith("(PC failed: FACTOR_NUMERIC_ZEROPIVOT)"));
}

TEST(PetscSolver, CrashInTheSolverProcessIsAFailedTrial) {
  for (const auto& [fault, expected] : std::vector<std::pair<std::string, std::string>>{
           {"abort", "signal 6"}, {"segfault", "signal 11"}, {"exit", "exited with status"}}) {
    PetscSolverEvaluator e(generate_problem("poisson2d", 8), options_with(1, 60.0, fault));
    const Measurement m = e.evaluate(e.petsc_default());
    EXPECT_EQ(m.status, TrialStatus::failed) << fault;
    EXPECT_NE(m.message.find(expected), std::string::npos) << fault << ": " << m.message;
    // The sweep goes on: the next evaluation starts a fresh process (and crashes again).
    EXPECT_EQ(e.evaluate(e.petsc_default()).status, TrialStatus::failed);
  }
}

TEST(PetscSolver, ASolverProcessThatCannotStartIsNoFailedTrial) {
  // A broken environment fails every configuration alike: the sweep must stop and store
  // nothing rather than record the whole space as failed.
  ::setenv("PETSC_OPTIONS", "-options_file /nonexistent/tunebase.opts", 1);
  PetscSolverEvaluator e(generate_problem("poisson2d", 8), options_with(1));
  try {
    (void)e.evaluate(e.petsc_default());
    ADD_FAILURE() << "evaluated with a broken PETSC_OPTIONS";
  } catch (const EvaluatorUnavailable& error) {
    EXPECT_NE(std::string(error.what()).find("failed to start"), std::string::npos) << error.what();
  }
  ::unsetenv("PETSC_OPTIONS");
  EXPECT_TRUE(e.evaluate(e.petsc_default()).ok());  // fixed: the next evaluation starts anew
}

TEST(PetscSolver, NoFreeDescriptorForTheSolverProcessIsNoFailedTrial) {
  PetscSolverEvaluator e(generate_problem("poisson2d", 8), options_with(1));
  {
    const testing::NoFreeDescriptors exhausted;
    try {
      (void)e.evaluate(e.petsc_default());
      ADD_FAILURE() << "started a solver process without a free descriptor";
    } catch (const EvaluatorUnavailable& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr("Too many open files"));
    }
  }
  EXPECT_TRUE(e.evaluate(e.petsc_default()).ok());
}

TEST(PetscSolver, AMalformedReplyIsAFailedTrialNotAnException) {
  PetscSolverEvaluator e(generate_problem("poisson2d", 8),
                         options_with(1, 60.0, "malformed_reply"));
  for (int run = 0; run < 2; ++run) {  // the second one from a fresh process
    const Measurement m = e.evaluate(e.petsc_default());
    EXPECT_EQ(m.status, TrialStatus::failed) << run;
    EXPECT_THAT(m.message, ::testing::HasSubstr("malformed reply")) << m.message;
    EXPECT_THAT(m.message, ::testing::HasSubstr("not a list")) << m.message;
  }
}

TEST(PetscSolver, AConfigurationOutsideTheSpaceIsAnInvalidTrial) {
  PetscSolverEvaluator e(generate_problem("poisson2d", 8), options_with(1));
  Configuration outside = e.petsc_default();
  outside.at(*e.space().index_of("pc_type")) = std::string("multigrid-of-dreams");
  const Measurement m = e.evaluate(outside);
  EXPECT_EQ(m.status, TrialStatus::invalid);
  EXPECT_THAT(m.message, ::testing::HasSubstr("pc_type")) << m.message;
}

TEST(PetscSolver, AProcessHoldingTheSolversOutputDoesNotHoldTheSweep) {
  // The solver exits and leaves a process with its output open for 20 s: its last output is
  // read for a second, not until that process ends.
  PetscSolverEvaluator e(generate_problem("poisson2d", 8),
                         options_with(1, 60.0, "exit_leaving_child"));
  const Measurement m = e.evaluate(e.petsc_default());
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_THAT(m.message, ::testing::HasSubstr("exited with status")) << m.message;
  EXPECT_LT(m.cost_seconds, 10.0);
}

TEST(PetscSolver, HangPastTheTimeLimitIsATimeout) {
  PetscSolverEvaluator e(generate_problem("poisson2d", 8), options_with(1, 0.5, "hang"));
  const Measurement m = e.evaluate(e.petsc_default());
  EXPECT_EQ(m.status, TrialStatus::timeout);
  EXPECT_LT(m.cost_seconds, 30.0);
}

TEST(PetscSolver, ASolveThatEndsPastTheTimeLimitIsATimeoutNotAResult) {
  // Unpreconditioned GMRES on a 10,000-unknown Laplacian takes far more than 1 ms, and far less
  // than the reply's margin of 1 s.
  PetscSolverEvaluator e(generate_problem("poisson2d", 100), options_with(3, 1e-3));
  const Configuration slow =
      with(e.space(), e.petsc_default(),
           {{"pc_type", std::string("none")}, {"bjacobi_blocks", std::int64_t{1}}});
  const Measurement m = e.evaluate(slow);
  EXPECT_EQ(m.status, TrialStatus::timeout) << message_of(m);
  EXPECT_THAT(message_of(m), ::testing::HasSubstr("past the time limit of 0.001 s"));
}

TEST(PetscSolver, SlowSolveTimesOutAndTheNextSolveStillWorks) {
  // Unpreconditioned GMRES(30) on a 160,000-unknown Laplacian stagnates for many seconds.
  PetscSolverEvaluator e(generate_problem("poisson2d", 400), options_with(1, 2.0));
  const SearchSpace& s = e.space();
  const Configuration slow =
      with(s, e.petsc_default(),
           {{"pc_type", std::string("none")}, {"bjacobi_blocks", std::int64_t{1}}});
  EXPECT_EQ(e.evaluate(slow).status, TrialStatus::timeout);
  const Configuration fast = with(s, e.petsc_default(),
                                  {{"ksp_type", std::string("cg")},
                                   {"pc_type", std::string("hypre")},
                                   {"bjacobi_blocks", std::int64_t{1}}});
  const Measurement m = e.evaluate(fast);
  EXPECT_TRUE(m.ok()) << message_of(m);
}

TEST(PetscSolver, SingularMatrixWithZeroRowSumsGetsAConsistentRightHandSide) {
  // The Neumann Laplacian of a path: A * 1 = 0, so b = A * 1 would be zero.
  constexpr std::int64_t n = 9;
  CsrMatrix a;
  a.rows = a.cols = n;
  a.name = "neumann_path_9";
  a.row_ptr = {0};
  auto put = [&](std::int64_t column, double value) {
    a.col.push_back(static_cast<std::int32_t>(column));
    a.val.push_back(value);
  };
  for (std::int64_t i = 0; i < n; ++i) {
    if (i > 0) put(i - 1, -1.0);
    put(i, (i == 0 || i == n - 1) ? 1.0 : 2.0);
    if (i + 1 < n) put(i + 1, -1.0);
    a.row_ptr.push_back(static_cast<std::int64_t>(a.val.size()));
  }
  PetscSolverEvaluator e(a, options_with(1));
  // GMRES without a preconditioner solves a consistent singular system of 9 unknowns.
  const Measurement m =
      e.evaluate(with(e.space(), e.petsc_default(), {{"pc_type", std::string("none")}}));
  EXPECT_TRUE(m.ok()) << message_of(m);

  // A matrix that maps both vectors to zero has no system to solve.
  CsrMatrix zero = a;
  std::fill(zero.val.begin(), zero.val.end(), 0.0);
  try {
    PetscSolverEvaluator z(zero);
    FAIL() << "no error";
  } catch (const InvalidInput& error) {
    EXPECT_NE(std::string(error.what()).find("x_i = (i+1)/n"), std::string::npos) << error.what();
  }
}

TEST(PetscSolver, RejectsBadInput) {
  CsrMatrix rectangular;
  rectangular.rows = 2;
  rectangular.cols = 3;
  rectangular.row_ptr = {0, 1, 2};
  rectangular.col = {0, 1};
  rectangular.val = {1, 1};
  EXPECT_THROW(PetscSolverEvaluator e(rectangular), InvalidInput);
  const CsrMatrix small = generate_problem("poisson2d", 3);
  PetscSolverOptions wrong_length;
  wrong_length.rhs = {1.0, 2.0};
  EXPECT_THROW(PetscSolverEvaluator e(small, wrong_length), InvalidInput);
  PetscSolverOptions zero_rhs;
  zero_rhs.rhs.assign(9, 0.0);
  EXPECT_THROW(PetscSolverEvaluator e(small, zero_rhs), InvalidInput);
  PetscSolverOptions zero_rtol;
  zero_rtol.rtol = 0.0;
  EXPECT_THROW(PetscSolverEvaluator e(small, zero_rtol), InvalidInput);
  EXPECT_THROW(PetscSolverEvaluator e(small, options_with(1, 60.0, "x")), InvalidInput);
}

}  // namespace
}  // namespace tunebase
