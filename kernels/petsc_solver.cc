#include "kernels/petsc_solver.h"

#include <fcntl.h>
#include <omp.h>
#include <petscksp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/error.h"

namespace tunebase {
namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// The search space
// ---------------------------------------------------------------------------------------------

constexpr std::int64_t kDefaultRestart = 30;
constexpr std::int64_t kDefaultBlocks = 1;
constexpr std::int64_t kMaxFactorLevels = 3;
constexpr double kDefaultOmega = 1.0;
constexpr double kDefaultGamgThreshold = 0.0;
constexpr double kDefaultStrongThreshold = 0.25;  // PETSc's BoomerAMG default
constexpr std::int64_t kDefaultAggressiveLevels = 0;

// PETSc's BoomerAMG defaults.
const char* const kDefaultCoarsen = "Falgout";
const char* const kDefaultRelax = "symmetric-SOR/Jacobi";
const char* const kDefaultInterp = "classical";

std::vector<Value> strings(std::initializer_list<const char*> items) {
  std::vector<Value> out;
  for (const char* s : items) out.emplace_back(std::string(s));
  return out;
}

/// A value as a constraint literal: numbers as Kernel Tuner writes them, strings quoted.
std::string literal(const Value& v) {
  if (!std::holds_alternative<std::string>(v)) return to_string(v);
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "\"" + s + "\"".
  std::string text(1, '"');
  text.append(to_string(v)).push_back('"');
  return text;
}

/// `parameter == pinned or chooser == "use1" or ...`
std::string pinned_unless(const std::string& parameter, const std::string& pinned_value,
                          const std::string& chooser, const std::vector<std::string>& uses) {
  std::string text = parameter;
  text.append(" == ").append(pinned_value);
  for (const auto& u : uses) text.append(" or ").append(chooser).append(" == ").append(literal(u));
  return text;
}

// Values of a configuration by parameter name.
class ConfigView {
 public:
  ConfigView(const SearchSpace& space, const Configuration& config)
      : space_(space), config_(config) {}
  const Value& at(const std::string& name) const {
    const auto i = space_.index_of(name);
    if (!i) throw InvalidInput("PETSc configuration: the space has no parameter '" + name + "'");
    return config_.at(*i);
  }
  std::string text(const std::string& name) const { return to_string(at(name)); }

 private:
  const SearchSpace& space_;
  const Configuration& config_;
};

// ---------------------------------------------------------------------------------------------
// Framing between the evaluator and its solver process: a 4-byte length, then JSON text.
// ---------------------------------------------------------------------------------------------

constexpr std::size_t kFrameHeaderBytes = sizeof(std::uint32_t);
constexpr std::size_t kMaxFrameBytes = 64u << 20;
/// Descriptor number the solver process finds its socket at.
constexpr int kChildSocketFd = 3;
/// How much of the solver process's stdout/stderr is kept to explain a crash.
constexpr std::size_t kLogTailBytes = 4096;
/// Of a malformed reply, the start quoted in the trial's message.
constexpr std::size_t kMaxQuotedReplyBytes = 512;
/// Starting PETSc (MPI singleton) and converting the matrix; generous for 10^7-row systems.
constexpr double kStartupLimitSeconds = 300.0;
/// Grace beyond the time limit for the solver process to compute the residual and reply.
constexpr double kReplySlackSeconds = 1.0;
/// How long a solver process may take to finalize PETSc after its socket closes.
constexpr double kShutdownGraceSeconds = 2.0;
constexpr int kPollSliceMs = 200;
/// How long the output of a process that ended is read, at most.
constexpr int kLogDrainMs = 1000;

// Exit codes of the solver process.
constexpr int kExitNormal = 0;
constexpr int kExitInternalError = 70;
constexpr int kExitFaultInjected = 71;
/// How long the process left by fault injection "exit_leaving_child" holds the output open.
constexpr unsigned kLeftChildSeconds = 20;

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool send_frame(int fd, const nlohmann::json& message) {
  const std::string text = message.dump();
  const auto size = static_cast<std::uint32_t>(text.size());
  char header[kFrameHeaderBytes];
  std::memcpy(header, &size, kFrameHeaderBytes);
  return write_all(fd, header, kFrameHeaderBytes) && write_all(fd, text.data(), text.size());
}

bool read_all(int fd, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

/// Blocking read of one frame (used by the solver process); nullopt on end of stream.
std::optional<nlohmann::json> receive_frame_blocking(int fd) {
  char header[kFrameHeaderBytes];
  if (!read_all(fd, header, kFrameHeaderBytes)) return std::nullopt;
  std::uint32_t size = 0;
  std::memcpy(&size, header, kFrameHeaderBytes);
  if (size > kMaxFrameBytes) return std::nullopt;
  std::string text(size, '\0');
  if (!read_all(fd, text.data(), size)) return std::nullopt;
  return nlohmann::json::parse(text);
}

/// CPU time (user + system) this process has used; the solver process runs one thread.
double process_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// ---------------------------------------------------------------------------------------------
// The solver process (runs only in the forked child; never returns into the caller's code)
// ---------------------------------------------------------------------------------------------

/// Thrown inside the solver process when a PETSc call returns an error.
struct PetscCallFailed {
  std::string message;
};

struct ErrorRecord {
  std::string first;  ///< the first error message since the last reset
};

PetscErrorCode record_petsc_error(MPI_Comm, int line, const char* function, const char* file,
                                  PetscErrorCode code, PetscErrorType type, const char* message,
                                  void* context) {
  auto* record = static_cast<ErrorRecord*>(context);
  if (type == PETSC_ERROR_INITIAL && record->first.empty()) {
    std::ostringstream m;
    m << (function ? function : "?") << " (" << (file ? file : "?") << ":" << line
      << "): " << (message ? message : "");
    record->first = m.str();
  }
  return code;
}

class SolverProcess {
 public:
  SolverProcess(int socket, const CsrMatrix& a, const std::vector<double>& rhs,
                const PetscSolverOptions& options, bool symmetric)
      : socket_(socket), a_(a), rhs_(rhs), options_(options), symmetric_(symmetric) {}

  int run() {
    const auto start = Clock::now();
    // One sequential process: keep hypre's OpenMP regions on one thread so timings compare.
    omp_set_num_threads(1);
    // A lone MPI process without mpirun; "isolated" stops Open MPI from starting an orted
    // helper that would outlive a killed solver process.
    ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    // No PETSc signal handler: a crash ends the process with its signal, which the evaluator
    // reports, instead of an MPI_Abort exit code.
    static char program[] = "tunebase-petsc-solver";
    static char no_handler[] = "-no_signal_handler";
    static char* argv_storage[] = {program, no_handler, nullptr};
    int argc = 2;
    char** argv = argv_storage;
    if (PetscInitialize(&argc, &argv, nullptr, nullptr) != 0) return kExitInternalError;
    PetscPushErrorHandler(record_petsc_error, &errors_);

    nlohmann::json ready = {{"ready", true}};
    try {
      build_system();
      ready["startup_seconds"] = seconds_since(start);
    } catch (const PetscCallFailed& e) {
      ready = {{"ready", false}, {"message", e.message}};
    }
    if (!send_frame(socket_, ready) || !ready["ready"].get<bool>()) {
      PetscFinalize();
      return kExitInternalError;
    }

    while (auto request = receive_frame_blocking(socket_)) {
      nlohmann::json reply = solve(*request);
      const bool restart = reply.value("restart", false);
      if (!send_frame(socket_, reply) || restart) break;
    }
    destroy_system();
    PetscFinalize();
    return kExitNormal;
  }

 private:
  void check(PetscErrorCode code, const char* call) {
    if (code == 0) return;
    std::string message = std::string("PETSc error in ") + call;
    const char* text = nullptr;
    PetscErrorMessage(code, &text, nullptr);
    if (text) message += std::string(" (") + text + ")";
    if (!errors_.first.empty()) message += ": " + errors_.first;
    throw PetscCallFailed{message};
  }

  void build_system() {
    const auto n = static_cast<PetscInt>(a_.rows);
    if (a_.rows > std::numeric_limits<PetscInt>::max() ||
        a_.nnz() + a_.rows > std::numeric_limits<PetscInt>::max()) {
      throw PetscCallFailed{"matrix too large for this PETSc build's 32-bit indices"};
    }
    // Every row stores its diagonal, as an explicit zero where the matrix has none: ILU and
    // SOR then meet a zero pivot (a PC failure, reported as DIVERGED_PC_FAILED) instead of
    // PETSc's "missing diagonal" error, and the values are unchanged.
    std::vector<PetscInt> row_ptr{0};
    std::vector<PetscInt> col;
    std::vector<PetscScalar> val;
    row_ptr.reserve(static_cast<std::size_t>(n) + 1);
    col.reserve(a_.col.size() + static_cast<std::size_t>(n));
    val.reserve(a_.col.size() + static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < a_.rows; ++r) {
      bool has_diagonal = false;
      const auto begin = static_cast<std::size_t>(a_.row_ptr[static_cast<std::size_t>(r)]);
      const auto end = static_cast<std::size_t>(a_.row_ptr[static_cast<std::size_t>(r) + 1]);
      for (std::size_t k = begin; k < end; ++k) {
        if (!has_diagonal && a_.col[k] > r) {
          col.push_back(static_cast<PetscInt>(r));
          val.push_back(0.0);
          has_diagonal = true;
        }
        has_diagonal = has_diagonal || a_.col[k] == r;
        col.push_back(static_cast<PetscInt>(a_.col[k]));
        val.push_back(a_.val[k]);
      }
      if (!has_diagonal) {
        col.push_back(static_cast<PetscInt>(r));
        val.push_back(0.0);
      }
      row_ptr.push_back(static_cast<PetscInt>(col.size()));
    }
    check(MatCreate(PETSC_COMM_SELF, &matrix_), "MatCreate");
    check(MatSetSizes(matrix_, n, n, n, n), "MatSetSizes");
    check(MatSetType(matrix_, MATSEQAIJ), "MatSetType");
    check(MatSeqAIJSetPreallocationCSR(matrix_, row_ptr.data(), col.data(), val.data()),
          "MatSeqAIJSetPreallocationCSR");
    if (symmetric_) {
      // Lets GAMG skip symmetrising its graph and ICC trust the structure.
      check(MatSetOption(matrix_, MAT_SYMMETRIC, PETSC_TRUE), "MatSetOption");
      check(MatSetOption(matrix_, MAT_SYMMETRY_ETERNAL, PETSC_TRUE), "MatSetOption");
    }
    check(VecCreateSeq(PETSC_COMM_SELF, n, &b_), "VecCreateSeq");
    std::vector<PetscInt> index(static_cast<std::size_t>(n));
    for (PetscInt i = 0; i < n; ++i) index[static_cast<std::size_t>(i)] = i;
    check(VecSetValues(b_, n, index.data(), rhs_.data(), INSERT_VALUES), "VecSetValues");
    check(VecAssemblyBegin(b_), "VecAssemblyBegin");
    check(VecAssemblyEnd(b_), "VecAssemblyEnd");
    check(VecDuplicate(b_, &x_), "VecDuplicate");
    rhs_norm_ = 0.0;
    for (double v : rhs_) rhs_norm_ += v * v;
    rhs_norm_ = std::sqrt(rhs_norm_);
  }

  void destroy_system() {
    VecDestroy(&x_);
    VecDestroy(&b_);
    MatDestroy(&matrix_);
  }

  void inject_fault() const {
    const std::string& f = options_.fault_injection;
    if (f.empty()) return;
    if (f == "abort") std::abort();
    if (f == "segfault") {
      // A real invalid write, so whichever SIGSEGV handler MPI installed runs as for a bug.
      volatile int* volatile nowhere = nullptr;
      *nowhere = 1;
    }
    if (f == "exit") ::_exit(kExitFaultInjected);
    if (f == "exit_leaving_child") {
      // As an MPI daemon: a process that outlives this one and holds its output open.
      if (::fork() == 0) {
        ::close(kChildSocketFd);
        ::sleep(kLeftChildSeconds);
        ::_exit(0);
      }
      ::_exit(kExitFaultInjected);
    }
    if (f == "hang") {
      for (;;) ::pause();
    }
  }

  /// ||b - A x|| / ||b|| with our own reference SpMV, independent of PETSc's norms.
  double true_relative_residual() {
    const PetscScalar* x = nullptr;
    check(VecGetArrayRead(x_, &x), "VecGetArrayRead");
    std::vector<double> xv(x, x + a_.rows);
    check(VecRestoreArrayRead(x_, &x), "VecRestoreArrayRead");
    std::vector<double> ax;
    spmv_reference(a_, xv, ax);
    double sum = 0.0;
    for (std::size_t i = 0; i < ax.size(); ++i) {
      const double r = rhs_[i] - ax[i];
      sum += r * r;
    }
    return std::sqrt(sum) / rhs_norm_;
  }

  /// Why the preconditioner failed, as PETSc names it (PCFailedReasons): of a block Jacobi
  /// preconditioner, the first failed block's ILU (a zero pivot there is the usual cause).
  struct PcFailure {
    std::string reason;  ///< e.g. FACTOR_NUMERIC_ZEROPIVOT
    std::string where;   ///< e.g. "in the ILU of block 0"; empty for the outer PC
  };
  std::optional<PcFailure> pc_failure(KSP ksp) {
    PC pc = nullptr;
    PCFailedReason reason = PC_NOERROR;
    if (KSPGetPC(ksp, &pc) != 0 || PCGetFailedReason(pc, &reason) != 0) return std::nullopt;
    if (reason == PC_NOERROR) return std::nullopt;
    PcFailure failure{PCFailedReasons[reason], {}};
    PetscBool bjacobi = PETSC_FALSE;
    PetscInt blocks = 0;
    PetscInt first = 0;
    KSP* sub = nullptr;
    if (reason != PC_SUBPC_ERROR ||
        PetscObjectTypeCompare((PetscObject)pc, PCBJACOBI, &bjacobi) != 0 || !bjacobi ||
        PCBJacobiGetSubKSP(pc, &blocks, &first, &sub) != 0) {
      return failure;
    }
    for (PetscInt i = 0; i < blocks; ++i) {
      PC sub_pc = nullptr;
      PCFailedReason sub_reason = PC_NOERROR;
      if (KSPGetPC(sub[i], &sub_pc) != 0 || PCGetFailedReason(sub_pc, &sub_reason) != 0) break;
      if (sub_reason == PC_NOERROR) continue;
      PCType type = nullptr;
      std::string name = PCGetType(sub_pc, &type) == 0 && type ? type : "sub-PC";
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
      return PcFailure{PCFailedReasons[sub_reason],
                       "in the " + name + " of block " + std::to_string(first + i)};
    }
    return failure;
  }

  std::vector<std::string> unused_options() {
    std::vector<std::string> names;
    PetscInt count = 0;
    char** left_names = nullptr;
    char** left_values = nullptr;
    if (PetscOptionsLeftGet(nullptr, &count, &left_names, &left_values) != 0) return names;
    for (PetscInt i = 0; i < count; ++i) names.emplace_back(std::string("-") + left_names[i]);
    PetscOptionsLeftRestore(nullptr, &count, &left_names, &left_values);
    return names;
  }

  nlohmann::json solve(const nlohmann::json& request) {
    if (options_.fault_injection == "malformed_reply") {
      return {{"status", "ok"}, {"times", "not a list"}, {"restart", false}};
    }
    nlohmann::json reply = {{"status", "failed"}, {"restart", false}};
    KSP ksp = nullptr;
    errors_.first.clear();
    try {
      inject_fault();
      check(PetscOptionsClear(nullptr), "PetscOptionsClear");
      for (const auto& option : request.at("options")) {
        const auto name = option.at(0).get<std::string>();
        const auto value = option.at(1).get<std::string>();
        check(PetscOptionsSetValue(nullptr, name.c_str(), value.c_str()), "PetscOptionsSetValue");
      }
      std::vector<double> totals;  // wall seconds of setup + solve
      std::vector<double> setups;
      std::vector<double> solves;
      std::vector<double> cpu_totals;  // CPU seconds of this process for the same span
      double elapsed = 0.0;
      // Solve -1 is an untimed warm-up: the first solve with a fresh KSP in this process is
      // several times slower than the next ones in every trial (first touch of the Krylov and
      // preconditioner storage, caches), which measured the process rather than the method.
      // The convergence checks are made on it, so its failure is the trial's failure.
      constexpr int kWarmUp = -1;
      for (int r = kWarmUp; r < std::max(1, options_.repeats); ++r) {
        check(KSPCreate(PETSC_COMM_SELF, &ksp), "KSPCreate");
        check(KSPSetOperators(ksp, matrix_, matrix_), "KSPSetOperators");
        check(KSPSetTolerances(ksp, options_.rtol, PETSC_DEFAULT, PETSC_DEFAULT,
                               static_cast<PetscInt>(options_.max_iterations)),
              "KSPSetTolerances");
        check(KSPSetFromOptions(ksp), "KSPSetFromOptions");
        check(VecSet(x_, 0.0), "VecSet");

        const double cpu0 = process_cpu_seconds();
        const auto t0 = Clock::now();
        check(KSPSetUp(ksp), "KSPSetUp");
        const auto t1 = Clock::now();
        check(KSPSolve(ksp, b_, x_), "KSPSolve");
        const auto t2 = Clock::now();
        const double cpu2 = process_cpu_seconds();

        KSPConvergedReason reason = KSP_CONVERGED_ITERATING;
        PetscInt iterations = 0;
        check(KSPGetConvergedReason(ksp, &reason), "KSPGetConvergedReason");
        check(KSPGetIterationNumber(ksp, &iterations), "KSPGetIterationNumber");
        if (r == kWarmUp) {
          reply["unused_options"] = unused_options();
          reply["reason"] = KSPConvergedReasons[reason];
          reply["iterations"] = iterations;
          const double residual = true_relative_residual();
          reply["residual"] = std::isfinite(residual) ? nlohmann::json(residual) : nlohmann::json();
          if (reason <= 0) {
            std::ostringstream m;
            m << "KSP did not converge: " << KSPConvergedReasons[reason] << " after " << iterations
              << " iterations";
            if (reason == KSP_DIVERGED_PC_FAILED) {
              if (const auto pc = pc_failure(ksp)) {
                m << " (PC failed: " << pc->reason << (pc->where.empty() ? "" : " ") << pc->where
                  << ")";
                reply["pc_failed_reason"] = pc->reason;
              }
            }
            reply["message"] = m.str();
            break;
          }
          if (!std::isfinite(residual) || residual > options_.residual_tolerance) {
            std::ostringstream m;
            m << "KSP reported " << KSPConvergedReasons[reason] << " after " << iterations
              << " iterations but the true residual ||b-Ax||/||b|| = " << residual
              << " is above the tolerance " << options_.residual_tolerance;
            reply["reason"] = "TRUE_RESIDUAL_ABOVE_TOLERANCE";
            reply["message"] = m.str();
            break;
          }
        }
        check(KSPDestroy(&ksp), "KSPDestroy");
        const double setup = std::chrono::duration<double>(t1 - t0).count();
        const double total = std::chrono::duration<double>(t2 - t0).count();
        elapsed += total;
        const bool next_fits = elapsed + total <= options_.time_limit_seconds;
        if (r == kWarmUp) {
          reply["warmup_seconds"] = total;
          // At least one solve is timed: when a second one would not fit in the time limit,
          // the warm-up is that one.
          if (next_fits) continue;
        }
        setups.push_back(setup);
        solves.push_back(total - setup);
        totals.push_back(total);
        cpu_totals.push_back(cpu2 - cpu0);
        if (!next_fits) break;
      }
      if (ksp) KSPDestroy(&ksp);
      if (totals.size() == 1 && totals[0] > options_.time_limit_seconds) {
        // Finished, but past the limit: a timeout, as if it had been stopped at it.
        std::ostringstream m;
        m << "the solve took " << totals[0] << " s, past the time limit of "
          << options_.time_limit_seconds << " s";
        reply["status"] = "timeout";
        reply["reason"] = "TIMEOUT";
        reply["message"] = m.str();
        reply["wall_seconds"] = totals[0];
      } else if (!totals.empty()) {
        reply["status"] = "ok";
        reply["times"] = options_.clock == SolveClock::cpu ? cpu_totals : totals;
        reply["wall_seconds"] = median(totals);
        reply["cpu_seconds"] = median(cpu_totals);
        reply["setup_seconds"] = median(setups);
        reply["solve_seconds"] = median(solves);
        reply["repeats"] = totals.size();
      }
    } catch (const PetscCallFailed& e) {
      reply["status"] = "failed";
      reply["reason"] = "PETSC_ERROR";
      reply["message"] = e.message;
      // After an error PETSc objects may be half-built; a fresh process is the safe state.
      reply["restart"] = true;
      if (ksp) KSPDestroy(&ksp);
    } catch (const std::exception& e) {
      reply["status"] = "failed";
      reply["reason"] = "INTERNAL_ERROR";
      reply["message"] = std::string("solver process: ") + e.what();
      reply["restart"] = true;
    }
    return reply;
  }

  int socket_;
  const CsrMatrix& a_;
  const std::vector<double>& rhs_;
  const PetscSolverOptions& options_;
  bool symmetric_;
  ErrorRecord errors_;
  Mat matrix_ = nullptr;
  Vec b_ = nullptr;
  Vec x_ = nullptr;
  double rhs_norm_ = 1.0;
};

/// Closes every descriptor from `first` up (the child must not hold the parent's sockets,
/// database files or listening ports).
void close_descriptors_from(int first) {
  if (::close_range(static_cast<unsigned>(first), ~0u, 0) == 0) return;
  const long max_fd = std::min<long>(::sysconf(_SC_OPEN_MAX), 1L << 16);
  for (long fd = first; fd < max_fd; ++fd) ::close(static_cast<int>(fd));
}

std::string describe_exit(int status) {
  std::ostringstream m;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    m << "killed by signal " << sig << " (" << (name ? name : "?") << ")";
  } else if (WIFEXITED(status)) {
    m << "exited with status " << WEXITSTATUS(status);
  } else {
    m << "ended with wait status " << status;
  }
  return m.str();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Space and options
// ---------------------------------------------------------------------------------------------

SearchSpace petsc_search_space(bool symmetric) {
  std::vector<Value> ksp_types =
      strings({"gmres", "fgmres", "lgmres", "bcgs", "bcgsl", "tfqmr", "cgs", "bicg"});
  std::vector<Value> pc_types =
      strings({"none", "jacobi", "bjacobi", "sor", "ilu", "gamg", "hypre", "lu"});
  if (symmetric) {
    ksp_types.emplace_back(std::string("cg"));
    ksp_types.emplace_back(std::string("minres"));
    pc_types.emplace_back(std::string("icc"));
  }
  std::vector<Parameter> parameters = {
      categorical("ksp_type", ksp_types, Value(std::string("gmres"))),
      ordinal("gmres_restart",
              {std::int64_t{10}, std::int64_t{30}, std::int64_t{60}, std::int64_t{100}},
              Value(kDefaultRestart), true),
      categorical("pc_type", pc_types, Value(std::string("bjacobi"))),
      ordinal("bjacobi_blocks", {std::int64_t{1}, std::int64_t{8}}, Value(kDefaultBlocks), true),
      integer_range("factor_levels", 0, kMaxFactorLevels, 1, 0),
      categorical("factor_shift", strings({"default", "nonzero"}), Value(std::string("default"))),
      categorical("lu_package", strings({"petsc", "superlu", "umfpack", "mumps"}),
                  Value(std::string("petsc"))),
      ordinal("sor_omega", {0.7, 1.0, 1.3, 1.6, 1.9}, Value(kDefaultOmega)),
      ordinal("gamg_threshold", {0.0, 0.01, 0.03, 0.08}, Value(kDefaultGamgThreshold)),
      ordinal("hypre_strong_threshold", {0.25, 0.5, 0.7}, Value(kDefaultStrongThreshold)),
      categorical("hypre_coarsen_type", strings({"Falgout", "HMIS", "PMIS"}),
                  Value(std::string(kDefaultCoarsen))),
      categorical("hypre_relax_type",
                  strings({"symmetric-SOR/Jacobi", "l1scaled-SOR/Jacobi", "Chebyshev"}),
                  Value(std::string(kDefaultRelax))),
      categorical("hypre_interp_type", strings({"classical", "ext+i", "FF1"}),
                  Value(std::string(kDefaultInterp))),
      ordinal("hypre_agg_nl", {std::int64_t{0}, std::int64_t{1}}, Value(kDefaultAggressiveLevels)),
  };
  // A parameter that only some methods read is pinned to its default for the others.
  struct AppliesTo {
    std::string parameter;
    std::string chooser;
    std::vector<std::string> uses;
  };
  const std::vector<AppliesTo> applies = {
      {"gmres_restart", "ksp_type", {"gmres", "fgmres", "lgmres"}},
      {"bjacobi_blocks", "pc_type", {"bjacobi"}},
      {"factor_levels", "pc_type", {"ilu", "icc", "bjacobi"}},
      {"factor_shift", "pc_type", {"ilu", "icc", "bjacobi", "lu"}},
      {"lu_package", "pc_type", {"lu"}},
      {"sor_omega", "pc_type", {"sor"}},
      {"gamg_threshold", "pc_type", {"gamg"}},
      {"hypre_strong_threshold", "pc_type", {"hypre"}},
      {"hypre_coarsen_type", "pc_type", {"hypre"}},
      {"hypre_relax_type", "pc_type", {"hypre"}},
      {"hypre_interp_type", "pc_type", {"hypre"}},
      {"hypre_agg_nl", "pc_type", {"hypre"}},
  };
  std::vector<std::string> constraints;
  for (const auto& a : applies) {
    const auto p = std::find_if(parameters.begin(), parameters.end(),
                                [&](const Parameter& q) { return q.name == a.parameter; });
    constraints.push_back(pinned_unless(a.parameter, literal(p->default_value), a.chooser, a.uses));
  }
  return SearchSpace(std::move(parameters), constraints);
}

std::vector<PetscOption> petsc_options(const SearchSpace& space, const Configuration& config) {
  const ConfigView v(space, config);
  std::vector<PetscOption> out;
  const std::string ksp = v.text("ksp_type");
  const std::string pc = v.text("pc_type");
  out.emplace_back("-ksp_type", ksp);
  if (ksp == "gmres" || ksp == "fgmres" || ksp == "lgmres") {
    out.emplace_back("-ksp_gmres_restart", v.text("gmres_restart"));
  }
  out.emplace_back("-pc_type", pc);
  if (pc == "bjacobi") {
    out.emplace_back("-pc_bjacobi_blocks", v.text("bjacobi_blocks"));
    out.emplace_back("-sub_pc_type", "ilu");
    out.emplace_back("-sub_pc_factor_levels", v.text("factor_levels"));
    if (v.text("factor_shift") != "default") {
      out.emplace_back("-sub_pc_factor_shift_type", v.text("factor_shift"));
    }
  } else if (pc == "ilu" || pc == "icc") {
    out.emplace_back("-pc_factor_levels", v.text("factor_levels"));
    if (v.text("factor_shift") != "default") {
      out.emplace_back("-pc_factor_shift_type", v.text("factor_shift"));
    }
  } else if (pc == "lu") {
    // A sparse direct factorisation: the Krylov method then converges at once, at the cost of
    // fill. PETSc's own LU pivots only on the diagonal; SuperLU, UMFPACK and MUMPS pivot, which
    // hard unsymmetric systems need.
    out.emplace_back("-pc_factor_mat_solver_type", v.text("lu_package"));
    if (v.text("factor_shift") != "default") {
      out.emplace_back("-pc_factor_shift_type", v.text("factor_shift"));
    }
  } else if (pc == "sor") {
    out.emplace_back("-pc_sor_omega", v.text("sor_omega"));
  } else if (pc == "gamg") {
    out.emplace_back("-pc_gamg_threshold", v.text("gamg_threshold"));
  } else if (pc == "hypre") {
    out.emplace_back("-pc_hypre_type", "boomeramg");
    out.emplace_back("-pc_hypre_boomeramg_strong_threshold", v.text("hypre_strong_threshold"));
    out.emplace_back("-pc_hypre_boomeramg_coarsen_type", v.text("hypre_coarsen_type"));
    // Down and up sweeps only: the coarsest level keeps its direct solve.
    out.emplace_back("-pc_hypre_boomeramg_relax_type_down", v.text("hypre_relax_type"));
    out.emplace_back("-pc_hypre_boomeramg_relax_type_up", v.text("hypre_relax_type"));
    out.emplace_back("-pc_hypre_boomeramg_interp_type", v.text("hypre_interp_type"));
    out.emplace_back("-pc_hypre_boomeramg_agg_nl", v.text("hypre_agg_nl"));
  }
  return out;
}

bool features_say_symmetric(const nlohmann::json& features) {
  const auto it = features.find("numerical_symmetry");
  return it != features.end() && it->is_number() && it->get<double>() >= 1.0;
}

// ---------------------------------------------------------------------------------------------
// The evaluator and its solver process
// ---------------------------------------------------------------------------------------------

struct PetscSolverEvaluator::Worker {
  pid_t pid = -1;
  int socket = -1;
  int log = -1;
  std::string pending;   ///< bytes received that do not yet form a whole frame
  std::string log_tail;  ///< the last kLogTailBytes the process wrote to stdout/stderr
  bool exited = false;
  int exit_status = 0;

  ~Worker() { shut_down(); }

  enum class Read { frame, closed, timed_out };

  void drain_log() {
    if (log < 0) return;
    char buffer[4096];
    const ssize_t n = ::read(log, buffer, sizeof buffer);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) return;
      ::close(log);
      log = -1;
      return;
    }
    log_tail.append(buffer, static_cast<std::size_t>(n));
    if (log_tail.size() > kLogTailBytes) log_tail.erase(0, log_tail.size() - kLogTailBytes);
  }

  /// Waits for one frame until `deadline`, collecting the process's output meanwhile.
  Read receive(nlohmann::json& out, Clock::time_point deadline) {
    for (;;) {
      if (pending.size() >= kFrameHeaderBytes) {
        std::uint32_t size = 0;
        std::memcpy(&size, pending.data(), kFrameHeaderBytes);
        if (size > kMaxFrameBytes) return Read::closed;
        if (pending.size() >= kFrameHeaderBytes + size) {
          const std::string text = pending.substr(kFrameHeaderBytes, size);
          pending.erase(0, kFrameHeaderBytes + size);
          out = nlohmann::json::parse(text, nullptr, false);
          return out.is_discarded() ? Read::closed : Read::frame;
        }
      }
      const auto now = Clock::now();
      if (now >= deadline) return Read::timed_out;
      const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      pollfd fds[2] = {{socket, POLLIN, 0}, {log, POLLIN, 0}};
      const int ready =
          ::poll(fds, log >= 0 ? 2 : 1,
                 static_cast<int>(std::min<std::int64_t>(left_ms.count() + 1, kPollSliceMs)));
      if (ready < 0 && errno != EINTR) return Read::closed;
      if (ready <= 0) continue;
      if (log >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) drain_log();
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buffer[65536];
        const ssize_t n = ::read(socket, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Read::closed;
        pending.append(buffer, static_cast<std::size_t>(n));
      }
    }
  }

  /// Waits for the process to end (at most `wait_seconds`, then kills it) and records how.
  void reap(double wait_seconds) {
    if (pid <= 0 || exited) return;
    const auto start = Clock::now();
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        exited = true;
        exit_status = status;
        break;
      }
      if (r < 0 && errno != EINTR) {  // not our child any more (SIGCHLD ignored elsewhere)
        exited = true;
        exit_status = 0;
        break;
      }
      if (seconds_since(start) >= wait_seconds) {
        ::kill(pid, SIGKILL);
        wait_seconds = std::numeric_limits<double>::infinity();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Keep whatever the process wrote last, for a while: a process it started (an MPI daemon)
    // may hold the pipe open long after it ended.
    const auto log_deadline = Clock::now() + std::chrono::milliseconds(kLogDrainMs);
    while (log >= 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(log_deadline - Clock::now());
      pollfd fd = {log, POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&fd, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {
        ::close(log);
        log = -1;
        break;
      }
      drain_log();
    }
  }

  void kill_now() {
    if (pid > 0 && !exited) ::kill(pid, SIGKILL);
    reap(0.0);
  }

  void shut_down() {
    if (socket >= 0) {
      ::close(socket);  // end of stream: the process finalizes PETSc and exits
      socket = -1;
    }
    reap(kShutdownGraceSeconds);
    if (log >= 0) {
      ::close(log);
      log = -1;
    }
  }

  std::string output_tail() const {
    if (log_tail.empty()) return {};
    return "; its last output: " + log_tail;
  }
};

namespace {

std::string evaluator_origin(const CsrMatrix& a) {
  return "PETSc evaluator on matrix '" + a.name + "': ";
}

CsrMatrix checked_system_matrix(CsrMatrix a) {
  if (a.rows <= 0 || a.rows != a.cols) {
    throw InvalidInput(evaluator_origin(a) + "the matrix must be square and non-empty, got " +
                       std::to_string(a.rows) + " x " + std::to_string(a.cols));
  }
  return a;
}

PetscSolverOptions checked_options(const CsrMatrix& a, PetscSolverOptions options) {
  const std::string where = evaluator_origin(a);
  if (!(options.rtol > 0.0 && options.rtol < 1.0) || !(options.residual_tolerance > 0.0) ||
      options.max_iterations < 1 || !(options.time_limit_seconds > 0.0) || options.repeats < 1) {
    throw InvalidInput(where +
                       "options out of range: need 0 < rtol < 1, residual_tolerance > 0, "
                       "max_iterations >= 1, time_limit_seconds > 0, repeats >= 1");
  }
  static const std::vector<std::string> kFaults = {
      "", "abort", "segfault", "hang", "exit", "exit_leaving_child", "malformed_reply"};
  if (std::find(kFaults.begin(), kFaults.end(), options.fault_injection) == kFaults.end()) {
    throw InvalidInput(where + "unknown fault_injection '" + options.fault_injection +
                       "'; allowed: abort, segfault, hang, exit, exit_leaving_child, "
                       "malformed_reply (or empty)");
  }
  auto squared_norm = [](const std::vector<double>& v) {
    double sum = 0.0;
    for (double x : v) sum += x * x;
    return sum;
  };
  const bool given = !options.rhs.empty();
  if (!given) {
    // b = A * (1, ..., 1): the exact solution is known and every row contributes.
    spmv_reference(a, std::vector<double>(static_cast<std::size_t>(a.cols), 1.0), options.rhs);
    if (squared_norm(options.rhs) == 0.0) {
      // A*1 = 0 (a Neumann Laplacian, a graph Laplacian): b = A x with x_i = (i+1)/n, still in
      // the range of A, so that the singular system is consistent.
      std::vector<double> x(static_cast<std::size_t>(a.cols));
      for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<double>(i + 1) / static_cast<double>(x.size());
      }
      spmv_reference(a, x, options.rhs);
    }
  } else if (static_cast<std::int64_t>(options.rhs.size()) != a.rows) {
    throw InvalidInput(where + "right-hand side has " + std::to_string(options.rhs.size()) +
                       " entries, the matrix " + std::to_string(a.rows) + " rows");
  }
  const double norm = squared_norm(options.rhs);
  if (!(norm > 0.0) || !std::isfinite(norm)) {
    throw InvalidInput(where + (given ? "the right-hand side is zero or not finite"
                                      : "no right-hand side could be made: A*x is zero or not "
                                        "finite both for x = (1, ..., 1) and for x_i = (i+1)/n, "
                                        "so the matrix has no system to solve"));
  }
  return options;
}

/// A reply of the solver process that does not follow the protocol.
class MalformedReply : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a solver process's reply says.
struct SolveReply {
  Measurement measurement;
  bool restart = false;  ///< the process asks to be replaced (its state may be damaged)
};

/// Reads a reply; throws MalformedReply when it is no object, a field has the wrong type, or a
/// solve that succeeded lists no times.
SolveReply read_reply(const nlohmann::json& reply, double cost_seconds) {
  SolveReply read;
  try {
    if (!reply.is_object()) throw MalformedReply("not a JSON object");
    read.restart = reply.value("restart", false);
    const std::string status = reply.value("status", std::string());
    if (status == "ok") {
      std::vector<double> times = reply.at("times").get<std::vector<double>>();
      if (times.empty()) throw MalformedReply("a solve that succeeded lists no times");
      const double objective = median(times);
      read.measurement = Measurement::success(objective, std::move(times), cost_seconds);
    } else {
      read.measurement = Measurement::failure(
          status == "timeout" ? TrialStatus::timeout : TrialStatus::failed,
          reply.value("message", std::string("PETSc solve failed")), cost_seconds);
    }
  } catch (const nlohmann::json::exception& e) {
    throw MalformedReply(e.what());
  }
  for (const char* key :
       {"reason", "pc_failed_reason", "iterations", "residual", "wall_seconds", "cpu_seconds",
        "setup_seconds", "solve_seconds", "warmup_seconds", "repeats", "unused_options"}) {
    if (reply.contains(key)) read.measurement.metrics[key] = reply[key];
  }
  return read;
}

nlohmann::json system_task(const CsrMatrix& a) {
  nlohmann::json task = matrix_features(a);
  task["matrix"] = a.name;
  return task;
}

}  // namespace

PetscSolverEvaluator::PetscSolverEvaluator(CsrMatrix matrix, PetscSolverOptions options)
    : matrix_(checked_system_matrix(std::move(matrix))),
      options_(checked_options(matrix_, std::move(options))),
      task_(system_task(matrix_)),
      space_(petsc_search_space(features_say_symmetric(task_))) {}

PetscSolverEvaluator::~PetscSolverEvaluator() = default;

namespace {

nlohmann::json settings_of(const PetscSolverOptions& options) {
  return {{"rtol", options.rtol},
          {"max_it", options.max_iterations},
          {"residual_tolerance", options.residual_tolerance},
          {"clock", options.clock == SolveClock::cpu ? "cpu" : "wall"}};
}

}  // namespace

nlohmann::json PetscSolverEvaluator::measurement_settings() const { return settings_of(options_); }

nlohmann::json PetscSolverEvaluator::default_measurement_settings() const {
  return settings_of(PetscSolverOptions{});
}

Measurement PetscSolverEvaluator::evaluate(const Configuration& config) {
  const auto start = Clock::now();
  try {
    space_.check(config);
  } catch (const InvalidInput& e) {
    return Measurement::failure(TrialStatus::invalid, e.what(), seconds_since(start));
  }
  nlohmann::json request;
  request["options"] = nlohmann::json::array();
  for (const auto& [name, value] : petsc_options(space_, config)) {
    request["options"].push_back({name, value});
  }

  if (worker_ && (worker_->exited || worker_->socket < 0)) worker_.reset();
  if (!worker_) {
    auto worker = std::make_unique<Worker>();
    int sockets[2];
    int log_pipe[2];
    // This process out of descriptors, memory or processes: no configuration can be solved
    // until that is fixed, and none is to blame.
    const auto cannot_start = [&](const char* call, int error) {
      return EvaluatorUnavailable("PETSc evaluator: cannot start the solver process for matrix '" +
                                  matrix_.name + "': " + call + " failed: " + std::strerror(error) +
                                  "; nothing was stored for this configuration");
    };
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
      throw cannot_start("socketpair", errno);
    }
    if (::pipe2(log_pipe, O_CLOEXEC) != 0) {
      const int error = errno;
      ::close(sockets[0]);
      ::close(sockets[1]);
      throw cannot_start("pipe", error);
    }
    const pid_t parent = ::getpid();
    const bool symmetric = features_say_symmetric(task_);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int error = errno;
      for (int fd : {sockets[0], sockets[1], log_pipe[0], log_pipe[1]}) ::close(fd);
      throw cannot_start("fork", error);
    }
    if (pid == 0) {
      // Solver process: never returns into the caller's code.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(kExitInternalError);
      ::signal(SIGPIPE, SIG_IGN);
      ::dup2(log_pipe[1], STDOUT_FILENO);
      ::dup2(log_pipe[1], STDERR_FILENO);
      const int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
      if (sockets[1] != kChildSocketFd) ::dup2(sockets[1], kChildSocketFd);
      close_descriptors_from(kChildSocketFd + 1);
      int code = kExitInternalError;
      try {
        SolverProcess process(kChildSocketFd, matrix_, options_.rhs, options_, symmetric);
        code = process.run();
      } catch (...) {
        code = kExitInternalError;
      }
      ::_exit(code);
    }
    ::close(sockets[1]);
    ::close(log_pipe[1]);
    worker->pid = pid;
    worker->socket = sockets[0];
    worker->log = log_pipe[0];
    nlohmann::json ready;
    const auto startup_deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(kStartupLimitSeconds));
    const auto got = worker->receive(ready, startup_deadline);
    if (got != Worker::Read::frame || !ready.value("ready", false)) {
      worker->kill_now();
      std::string why = got == Worker::Read::timed_out
                            ? "did not start within " + std::to_string(kStartupLimitSeconds) + " s"
                            : describe_exit(worker->exit_status);
      if (got == Worker::Read::frame) why = ready.value("message", why);
      // Before any configuration: the environment (PETSC_OPTIONS, the libraries), not the
      // configuration, is at fault, and every evaluation would fail the same way.
      throw EvaluatorUnavailable("PETSc evaluator: the solver process for matrix '" + matrix_.name +
                                 "' failed to start: " + why + worker->output_tail() +
                                 "; nothing was stored for this configuration");
    }
    worker_ = std::move(worker);
  }

  Worker& w = *worker_;
  if (!send_frame(w.socket, request)) {
    w.reap(kShutdownGraceSeconds);
    const std::string why = describe_exit(w.exit_status);
    worker_.reset();
    return Measurement::failure(TrialStatus::failed,
                                "PETSc solver process was gone before the solve: " + why,
                                seconds_since(start));
  }
  nlohmann::json reply;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                         options_.time_limit_seconds + kReplySlackSeconds));
  const auto got = w.receive(reply, deadline);
  if (got == Worker::Read::timed_out) {
    w.kill_now();
    worker_.reset();
    std::ostringstream m;
    m << "no result within the time limit of " << options_.time_limit_seconds << " s (waited "
      << options_.time_limit_seconds + kReplySlackSeconds
      << " s, with the reply's margin); solver process killed";
    Measurement result = Measurement::failure(TrialStatus::timeout, m.str(), seconds_since(start));
    result.metrics["reason"] = "TIMEOUT";
    return result;
  }
  if (got == Worker::Read::closed) {
    w.reap(kShutdownGraceSeconds);
    const std::string why = describe_exit(w.exit_status);
    const std::string tail = w.output_tail();
    worker_.reset();
    Measurement result = Measurement::failure(
        TrialStatus::failed, "PETSc solver process died during the solve: " + why + tail,
        seconds_since(start));
    result.metrics["reason"] = "CRASH";
    return result;
  }
  SolveReply read;
  try {
    read = read_reply(reply, seconds_since(start));
  } catch (const MalformedReply& e) {
    // The process does not speak this protocol (a mismatched build, a bug): this solve is a
    // failed trial, and the next one gets a fresh process.
    w.kill_now();
    worker_.reset();
    std::string text = reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() > kMaxQuotedReplyBytes) text = text.substr(0, kMaxQuotedReplyBytes) + "...";
    Measurement result = Measurement::failure(
        TrialStatus::failed,
        "PETSc solver process sent a malformed reply (" + std::string(e.what()) + "): " + text,
        seconds_since(start));
    result.metrics["reason"] = "MALFORMED_REPLY";
    return result;
  }
  if (read.restart) {
    w.reap(kShutdownGraceSeconds);
    worker_.reset();
  }
  return read.measurement;
}

}  // namespace tunebase
