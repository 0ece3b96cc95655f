// Building an evaluator from command-line options (shared by sweep and worker).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/machine.h"
#include "kernels/evaluator.h"
#include "kernels/replay.h"

namespace tunebase::cli {

inline constexpr double kDefaultTimeoutSeconds = 60.0;

struct EvaluatorSpec {
  /// spmv, command, replay (and the GPU and solver kernels where built).
  std::string kernel = "spmv";
  /// Matrix Market file (plain or .gz) for matrix kernels.
  std::string matrix;
  /// Generated problem when no matrix is given (empty: laplacian3d), and its size (0: the
  /// kernel's default).
  std::string problem;
  std::int64_t size = 0;
  /// Command evaluator: the command template, its space file, an objective regex, a timeout.
  std::string command;
  std::string space_file;
  std::string regex;
  std::optional<double> timeout_seconds;  ///< default kDefaultTimeoutSeconds
  bool maximize = false;
  /// Replay: lower is better even for a rate (--minimize).
  bool minimize = false;
  /// Replay: the field of the file's entries tuned (default time); command: the NAME of the
  /// `NAME: NUMBER` line of its output tuned (default the last number, or --regex).
  std::string objective;
  std::string unit;
  std::string kernel_name;  ///< the command's kernel name (empty: "command")
  /// Replay evaluator: a Kernel Tuner cache or T4 file.
  std::string replay_file;
  int repeats = 0;  ///< 0: the evaluator's default
  /// PETSc: KSP relative tolerance and iteration cap (unset: PetscSolverOptions' defaults), and
  /// whether the objective is the solver process's CPU time instead of wall time.
  std::optional<double> rtol;
  std::optional<std::int64_t> max_iterations;
  bool cpu_time = false;
  /// Own kernel source (opencl-source, cuda-source), as Kernel Tuner's tune_kernel(): the
  /// source file (the kernel function is --kernel-name, the space --space), the problem size,
  /// the arguments file, grid divisors and block-size names per dimension, the tolerance.
  std::string source_file;
  std::vector<std::int64_t> problem_size;
  std::string args_file;
  std::vector<std::string> grid_div_x;
  std::vector<std::string> grid_div_y;
  std::vector<std::string> grid_div_z;
  std::vector<std::string> block_size_names;
  std::optional<double> atol;
};

/// What a replay tunes: --objective NAME (empty: time) in the direction --maximize or
/// --minimize give, else the name's own (a rate is maximised). InvalidInput when both are given.
ReplayObjective replay_objective(const std::string& name, bool maximize, bool minimize);

/// Registers the evaluator options on a subcommand.
void add_evaluator_options(CLI::App& cmd, EvaluatorSpec& spec);
/// Builds the evaluator; InvalidInput names what is missing or unknown.
std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSpec& spec);
/// This machine as stored: detect_machine() plus the compute devices (OpenCL, CUDA) in the
/// fingerprint, named `name` when given.
MachineInfo this_machine(const std::string& name = {});

/// The machine an evaluator's results belong to: this one (this_machine(name)), or for a
/// replayed file its device (named `name` when given), as `tunebase import` files them: stored
/// as this machine's they would answer `best` here and act as its measurements in transfer.
/// InvalidInput when a replayed file names no device and no name is given.
MachineInfo results_machine(const Evaluator& evaluator, const std::string& name = {});

/// Names accepted by --kernel, in the order of listings (apps/evaluators.cc's table).
std::vector<std::string> kernel_names();
/// The same, joined with ", " for help and messages.
std::string known_kernels();

}  // namespace tunebase::cli
