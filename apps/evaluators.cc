#include "apps/evaluators.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "apps/cli.h"
#include "core/error.h"
#include "core/measurements.h"
#include "kernels/command.h"
#include "kernels/gpu_evaluators.h"
#include "kernels/pde_problems.h"
#include "kernels/petsc_solver.h"
#include "kernels/replay.h"
#include "kernels/source_kernel.h"
#include "kernels/sparse_matrix.h"
#include "kernels/spmv.h"

namespace tunebase::cli {

namespace {

// A space file; what reading it changed is said on stderr (a T1 Default outside its Values).
SearchSpace load_space(const std::string& path) {
  auto space = SearchSpace::load(path);
  for (const auto& note : space.notes()) std::cerr << "note: " << path << ": " << note << "\n";
  return space;
}

// Grid points per side of the generated Laplacian when neither --matrix nor --size is given:
// 64^3 = 262,144 rows, large enough to be memory bound, small enough for a quick sweep.
constexpr std::int64_t kDefaultGridSize = 64;
// More repetitions than anyone times one configuration with.
constexpr int kMaxRepeats = 1'000'000;
// More KSP iterations than any solve worth timing takes.
constexpr std::int64_t kMaxIterations = 1'000'000'000;
// Past any grid or GPU problem size that fits in memory (the kernels check their own limits).
constexpr std::int64_t kMaxSize = 1'000'000'000;

// A command's --unit: the time units by their usual spellings ("msec", "seconds") as s, ms,
// us or ns, which are shown as times; anything else is a label. A rate (GFLOP/s, GB/s) is
// better higher: without --maximize it would be minimised, and the slowest configuration
// reported as the best, so it is refused.
std::string command_unit(const std::string& unit, bool maximize) {
  if (auto time = short_time_unit(unit); !time.empty()) return time;
  if (is_rate_unit(unit) && !maximize) {
    throw InvalidInput("--unit " + unit +
                       " is a rate, where higher is better: add --maximize (tunebase minimises "
                       "the objective unless told otherwise)");
  }
  return unit;
}

CsrMatrix load_matrix(const EvaluatorSpec& spec) {
  if (!spec.matrix.empty()) return read_matrix_market(spec.matrix);
  const std::int64_t n = spec.size > 0 ? spec.size : kDefaultGridSize;
  const std::string problem = spec.problem.empty() ? "laplacian3d" : spec.problem;
  if (problem == "laplacian3d") return laplacian_3d(n);
  if (problem == "laplacian2d") return laplacian_2d(n);
  const auto& names = problem_names();
  if (std::find(names.begin(), names.end(), problem) == names.end()) {
    std::string known = "laplacian3d, laplacian2d";
    for (const auto& name : names) known += ", " + name;
    throw InvalidInput("unknown --problem '" + problem + "'; known: " + known);
  }
  return generate_problem(problem, n);
}

nlohmann::json gpu_options(const EvaluatorSpec& spec) {
  nlohmann::json options = nlohmann::json::object();
  if (spec.size > 0) options["size"] = spec.size;
  if (!spec.matrix.empty()) options["matrix"] = spec.matrix;
  if (spec.repeats > 0) options["repeats"] = spec.repeats;
  options["time_limit"] = spec.timeout_seconds.value_or(kDefaultTimeoutSeconds);
  return options;
}

// The shared flags a kernel may read; reject_unused_options refuses the others.
enum KernelFlag : unsigned {
  kReadsMatrix = 1U << 0,
  kReadsProblem = 1U << 1,
  kReadsSize = 1U << 2,  // with kReadsMatrix: the size of the problem generated without one
  kReadsCmd = 1U << 3,
  kReadsSpace = 1U << 4,
  kReadsRegex = 1U << 5,
  kReadsMaximize = 1U << 6,
  kReadsUnit = 1U << 7,
  kReadsKernelName = 1U << 8,
  kReadsTimeout = 1U << 9,
  kReadsRepeats = 1U << 10,
  kReadsReplay = 1U << 11,
  kReadsSource = 1U << 12,  // --source, --problem-size, --args, --grid-div-*, ...
  kReadsObjective = 1U << 13,
  kReadsMinimize = 1U << 14,
  kReadsSolver = 1U << 15,  // --rtol, --max-it, --cpu-time
};
// A matrix file, or a generated problem of a size.
constexpr unsigned kMatrixInput = kReadsMatrix | kReadsProblem | kReadsSize;
constexpr unsigned kGpuKernel = kReadsSize | kReadsTimeout | kReadsRepeats;

bool is_kernel_name(std::string_view name);

std::unique_ptr<Evaluator> make_spmv(const EvaluatorSpec& spec) {
  SpmvOptions options;
  if (spec.repeats > 0) options.repeats = spec.repeats;
  return std::make_unique<SpmvEvaluator>(load_matrix(spec), options);
}

// How far above --rtol a solve's true relative residual may lie (see make_petsc).
constexpr double kTrueResidualFactor = 100.0;

std::unique_ptr<Evaluator> make_petsc(const EvaluatorSpec& spec) {
  PetscSolverOptions options;
  options.time_limit_seconds = spec.timeout_seconds.value_or(kDefaultTimeoutSeconds);
  if (spec.repeats > 0) options.repeats = spec.repeats;
  if (spec.rtol) {
    if (!(*spec.rtol > 0.0 && *spec.rtol < 1.0)) {
      throw InvalidInput("--rtol " + to_string(Value(*spec.rtol)) +
                         " is out of range: the KSP relative tolerance must be above 0 and below "
                         "1, e.g. 1e-6 (default 1e-8)");
    }
    // The true residual may lie above what the method's own (preconditioned) residual reached
    // by the factor the defaults allow, 100 (rtol 1e-8, true residual at most 1e-6): a looser
    // rtol checked against 1e-6 failed every solve that stopped where it was told to.
    // (To 12 digits: 100 x 1e-6 is 9.999999999999999e-05 in binary, which the study's
    // settings would show.)
    char rounded[32];
    std::snprintf(rounded, sizeof rounded, "%.12g", kTrueResidualFactor * *spec.rtol);
    options.residual_tolerance =
        std::max(options.residual_tolerance, std::strtod(rounded, nullptr));
    options.rtol = *spec.rtol;
  }
  if (spec.max_iterations) options.max_iterations = *spec.max_iterations;
  if (spec.cpu_time) options.clock = SolveClock::cpu;
  return std::make_unique<PetscSolverEvaluator>(load_matrix(spec), options);
}

std::unique_ptr<Evaluator> make_command(const EvaluatorSpec& spec) {
  if (spec.command.empty() || spec.space_file.empty()) {
    throw InvalidInput("--kernel command needs --cmd 'program {param} ...' and --space FILE");
  }
  CommandOptions options;
  options.timeout_seconds = spec.timeout_seconds.value_or(kDefaultTimeoutSeconds);
  if (!spec.regex.empty()) options.objective_regex = spec.regex;
  if (spec.repeats > 0) options.repeats = spec.repeats;
  // A rate's line (GFLOP/s: ...) is better higher, and names the objective when no --unit does.
  const bool maximize = spec.maximize || is_rate_unit(spec.objective);
  if (!spec.objective.empty()) {
    if (!spec.regex.empty()) {
      throw InvalidInput(
          "--objective and --regex exclude each other: the objective is the number of the "
          "output's last line '" +
          spec.objective + ": NUMBER', or what --regex captures");
    }
    options.objective_metric = spec.objective;
  }
  options.minimize = !maximize;
  options.unit = command_unit(spec.unit.empty() ? spec.objective : spec.unit, maximize);
  // A command stopped by the signal that stops tunebase has not failed.
  options.stopping = &g_interrupted;
  if (!spec.kernel_name.empty()) {
    // A built-in kernel's name would mix a program's measurements into that kernel's.
    if (spec.kernel_name != "command" && is_kernel_name(spec.kernel_name)) {
      throw InvalidInput("--kernel-name " + spec.kernel_name +
                         " is a built-in kernel's name; give the program a name of its own");
    }
    options.kernel_name = spec.kernel_name;
  }
  return std::make_unique<CommandEvaluator>(load_space(spec.space_file), spec.command, options);
}

std::unique_ptr<Evaluator> make_replay(const EvaluatorSpec& spec) {
  if (spec.replay_file.empty()) {
    throw InvalidInput("--kernel replay needs --replay FILE (a Kernel Tuner cache or T4 file)");
  }
  auto replay =
      ReplayEvaluator::from_file(spec.replay_file, spec.kernel_name,
                                 replay_objective(spec.objective, spec.maximize, spec.minimize));
  if (spec.space_file.empty()) return std::make_unique<ReplayEvaluator>(std::move(replay));
  // Kernel Tuner's simulation mode with restrictions: the file's configurations they allow.
  auto within = std::make_unique<ReplayInSpace>(std::move(replay), load_space(spec.space_file));
  if (within->left_out() > 0) {
    std::cerr << "note: " << spec.space_file << " leaves out " << within->left_out() << " of "
              << spec.replay_file << "'s configurations; the sweep searches the other "
              << within->candidates()->size() << "\n";
  }
  return within;
}

std::unique_ptr<Evaluator> make_opencl(const EvaluatorSpec& spec) {
  return make_opencl_evaluator(spec.kernel, gpu_options(spec));
}

std::unique_ptr<Evaluator> make_cuda(const EvaluatorSpec& spec) {
  return make_cuda_evaluator(spec.kernel, gpu_options(spec));
}

// The kernel function's name is also the name its measurements are stored under, as Kernel
// Tuner's cache files name them: a built-in kernel's name would mix the two.
std::unique_ptr<Evaluator> make_source(const EvaluatorSpec& spec) {
  if (spec.source_file.empty() || spec.kernel_name.empty() || spec.space_file.empty() ||
      spec.problem_size.empty() || spec.args_file.empty()) {
    throw InvalidInput("--kernel " + spec.kernel +
                       " needs --source FILE, --kernel-name NAME (the kernel function), --space "
                       "FILE (tune_params and restrictions), --problem-size X[,Y[,Z]] and --args "
                       "FILE (the kernel's arguments)");
  }
  if (is_kernel_name(spec.kernel_name)) {
    throw InvalidInput("--kernel-name " + spec.kernel_name +
                       " is a built-in kernel's name, under which these measurements would mix "
                       "with its own: rename the kernel function");
  }
  if (spec.problem_size.size() > 3 || spec.block_size_names.size() > 3) {
    throw InvalidInput("--problem-size and --block-size-names take 1 to 3 values (x, y, z)");
  }
  SourceKernelOptions options;
  options.kernel_name = spec.kernel_name;
  options.problem_size = spec.problem_size;
  const std::vector<std::string>* divisors[] = {&spec.grid_div_x, &spec.grid_div_y,
                                                &spec.grid_div_z};
  for (std::size_t d = 0; d < 3; ++d) {
    if (!divisors[d]->empty()) options.grid_div[d] = *divisors[d];
  }
  for (std::size_t d = 0; d < spec.block_size_names.size(); ++d) {
    options.block_size_names[d] = spec.block_size_names[d];
  }
  if (spec.atol) options.atol = *spec.atol;
  if (spec.repeats > 0) options.gpu.repeats = spec.repeats;
  options.gpu.time_limit_seconds = spec.timeout_seconds.value_or(kDefaultTimeoutSeconds);
  auto arguments = load_kernel_arguments(spec.args_file);
  if (std::none_of(arguments.begin(), arguments.end(), [](const auto& a) { return a.output; })) {
    std::cerr << "note: no argument in " << spec.args_file
              << " is marked \"output\": true, so results are not checked\n";
  }
  const std::string backend = spec.kernel == "cuda-source" ? "cuda" : "opencl";
  return make_source_kernel_evaluator(backend, 0, read_maybe_gzipped(spec.source_file),
                                      load_space(spec.space_file), std::move(arguments),
                                      std::move(options));
}

// One kernel the CLI can tune: --kernel's help and check, make_evaluator, and which shared
// flags reject_unused_options lets through all come from this table.
struct KernelEntry {
  const char* name = nullptr;
  std::unique_ptr<Evaluator> (*make)(const EvaluatorSpec& spec) = nullptr;
  unsigned reads = 0;  // KernelFlag bits
};

// Adding a kernel is adding its entry (and its evaluator). The order is the order of listings.
// The GPU kernels are listed even where their back end is not built: making one says so.
constexpr KernelEntry kKernels[] = {
    {"spmv", make_spmv, kMatrixInput | kReadsRepeats},
    {"petsc", make_petsc, kMatrixInput | kReadsTimeout | kReadsRepeats | kReadsSolver},
    {"command", make_command,
     kReadsCmd | kReadsSpace | kReadsRegex | kReadsMaximize | kReadsUnit | kReadsKernelName |
         kReadsTimeout | kReadsRepeats | kReadsObjective},
    {"replay", make_replay,
     kReadsReplay | kReadsSpace | kReadsKernelName | kReadsObjective | kReadsMaximize |
         kReadsMinimize},
    {"opencl-gemm", make_opencl, kGpuKernel},
    {"opencl-spmv", make_opencl, kGpuKernel | kReadsMatrix},
    {"opencl-conv", make_opencl, kGpuKernel},
    {"cuda-gemm", make_cuda, kGpuKernel},
    {"cuda-spmv", make_cuda, kGpuKernel | kReadsMatrix},
    {"cuda-conv", make_cuda, kGpuKernel},
    {"opencl-source", make_source,
     kReadsSource | kReadsSpace | kReadsKernelName | kReadsTimeout | kReadsRepeats},
    {"cuda-source", make_source,
     kReadsSource | kReadsSpace | kReadsKernelName | kReadsTimeout | kReadsRepeats},
};

const KernelEntry* find_kernel(std::string_view name) {
  for (const auto& entry : kKernels) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}

bool is_kernel_name(std::string_view name) { return find_kernel(name) != nullptr; }

// The kernels that read `flag`, for messages: "spmv and petsc", "every kernel but replay".
std::string readers_text(unsigned flag) {
  std::vector<std::string> readers;
  std::vector<std::string> others;
  for (const auto& entry : kKernels) {
    ((entry.reads & flag) != 0 ? readers : others).emplace_back(entry.name);
  }
  if (others.size() == 1 && readers.size() > 1) return "every kernel but " + others.front();
  std::string out;
  for (std::size_t i = 0; i < readers.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == readers.size() ? " and " : ", ") + readers[i];
  }
  return out;
}

// An option given to a kernel that does not read it would be silently ignored (a replay
// "with --space" searching the file's own space, an SpMV "maximised"): refuse it, naming who
// reads it.
void reject_unused_options(const EvaluatorSpec& spec, const KernelEntry& kernel) {
  const auto reads = [&](unsigned flag) { return (kernel.reads & flag) != 0; };
  if (reads(kReadsProblem) && !spec.matrix.empty() && !spec.problem.empty()) {
    throw InvalidInput(
        "--matrix and --problem exclude each other: a file, or a generated "
        "problem (with --size)");
  }
  const struct {
    const char* flag;
    bool given;
    unsigned bit;
    // Why, after the names of the kernels that read it.
    const char* note;
  } options[] = {
      {"--matrix", !spec.matrix.empty(), kReadsMatrix, ""},
      {"--problem", !spec.problem.empty(), kReadsProblem, ", when no --matrix is given"},
      {"--size", spec.size != 0, kReadsSize, " (those that read --matrix only when none is given)"},
      {"--cmd", !spec.command.empty(), kReadsCmd, ""},
      {"--space", !spec.space_file.empty(), kReadsSpace,
       " (for replay, the file's configurations that the space allows)"},
      {"--regex", !spec.regex.empty(), kReadsRegex, ""},
      {"--maximize", spec.maximize, kReadsMaximize,
       " (the other kernels measure times, which are minimised)"},
      {"--minimize", spec.minimize, kReadsMinimize,
       " (the other kernels minimise unless told --maximize)"},
      {"--objective", !spec.objective.empty(), kReadsObjective,
       " (the other kernels measure times)"},
      {"--unit", !spec.unit.empty(), kReadsUnit, " (the other kernels know their unit)"},
      {"--kernel-name", !spec.kernel_name.empty(), kReadsKernelName,
       " (the other kernels have their own names)"},
      {"--timeout", spec.timeout_seconds.has_value(), kReadsTimeout, ""},
      {"--repeats", spec.repeats != 0, kReadsRepeats,
       " (a file holds one value per configuration)"},
      {"--rtol", spec.rtol.has_value(), kReadsSolver, ""},
      {"--max-it", spec.max_iterations.has_value(), kReadsSolver, ""},
      {"--cpu-time", spec.cpu_time, kReadsSolver, ""},
      {"--replay", !spec.replay_file.empty(), kReadsReplay, ""},
      {"--source", !spec.source_file.empty(), kReadsSource, ""},
      {"--problem-size", !spec.problem_size.empty(), kReadsSource, ""},
      {"--args", !spec.args_file.empty(), kReadsSource, ""},
      {"--grid-div-x", !spec.grid_div_x.empty(), kReadsSource, ""},
      {"--grid-div-y", !spec.grid_div_y.empty(), kReadsSource, ""},
      {"--grid-div-z", !spec.grid_div_z.empty(), kReadsSource, ""},
      {"--block-size-names", !spec.block_size_names.empty(), kReadsSource, ""},
      {"--atol", spec.atol.has_value(), kReadsSource, ""},
  };
  for (const auto& o : options) {
    // A kernel that takes a matrix file reads --size only for the problem it generates without.
    const bool used =
        reads(o.bit) && !(o.bit == kReadsSize && reads(kReadsMatrix) && !spec.matrix.empty());
    if (o.given && !used) {
      std::string why = o.note;
      // A kernel with a size and no matrix (the GPU gemm) is pointed to what it takes.
      if (o.bit == kReadsMatrix && reads(kReadsSize)) {
        why = " (--kernel " + spec.kernel + " takes --size)";
      }
      throw InvalidInput(std::string(o.flag) + " is not used by --kernel " + spec.kernel +
                         "; it is read by " + readers_text(o.bit) + why);
    }
  }
}

}  // namespace

ReplayObjective replay_objective(const std::string& name, bool maximize, bool minimize) {
  if (maximize && minimize) {
    throw InvalidInput(
        "--maximize and --minimize exclude each other; give one, or neither for "
        "the objective's own direction (a rate such as GFLOP/s is maximised, "
        "anything else minimised)");
  }
  ReplayObjective objective;
  if (!name.empty()) objective.name = name;
  if (maximize || minimize) objective.minimize = minimize;
  return objective;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const auto& entry : kKernels) names.emplace_back(entry.name);
  return names;
}

std::string known_kernels() {
  std::string out;
  for (const auto& k : kernel_names()) out += (out.empty() ? "" : ", ") + k;
  return out;
}

MachineInfo this_machine(const std::string& name) {
  MachineInfo info = detect_machine();
  if (!name.empty()) info.name = name;
  try {
    info.fingerprint["devices"] = compute_devices();
  } catch (const Error& e) {
    // A broken OpenCL installation must not stop a CPU sweep; the fingerprint says so.
    info.fingerprint["devices_error"] = e.what();
  }
  refresh_fingerprint_hash(info);
  return info;
}

MachineInfo results_machine(const Evaluator& evaluator, const std::string& name) {
  const auto elsewhere = evaluator.measured_on();
  if (!elsewhere) return this_machine(name);
  MachineInfo info;
  info.name = name.empty() ? *elsewhere : name;
  if (info.name.empty()) {
    throw InvalidInput(
        "the replayed file names no device (T4 files have none); give the machine its results "
        "belong to with --machine NAME");
  }
  info.fingerprint = {{"device_name", *elsewhere}, {"source", "replay"}};
  refresh_fingerprint_hash(info);
  return info;
}

void add_evaluator_options(CLI::App& cmd, EvaluatorSpec& spec) {
  cmd.add_option("--kernel,-k", spec.kernel, "What to tune: " + known_kernels())
      ->capture_default_str();
  cmd.add_option("--matrix", spec.matrix, "Matrix Market file (.mtx or .mtx.gz)");
  cmd.add_option("--problem", spec.problem,
                 "Generated matrix when no --matrix: laplacian3d (size^3 rows), laplacian2d, "
                 "poisson2d, poisson3d, anisotropic2d, convdiff2d, convdiff3d (default "
                 "laplacian3d)");
  cmd.add_option("--size", spec.size,
                 "Grid points per side of the generated problem (default 64), or the GPU "
                 "kernel's problem size")
      ->check(CLI::Range(std::int64_t{1}, kMaxSize));
  cmd.add_option("--cmd", spec.command,
                 "Command evaluator: command with {NAME} placeholders (also exported as NAME "
                 "and TUNEBASE_NAME)");
  cmd.add_option("--space", spec.space_file,
                 "Search space file: tunebase JSON, T1, or Kernel Tuner tune_params");
  cmd.add_option("--regex", spec.regex,
                 "Objective = first capture group of the last match of this regex in stdout "
                 "(default: the last number; nan or inf there fails the trial)");
  cmd.add_option(
         "--timeout", spec.timeout_seconds,
         "Time limit in seconds (default 60), past which a trial is stored as a "
         "timeout: command stops each run at it (--repeats 3 may take 3 times as long), "
         "petsc one evaluation with all its solves (one that ends past it is a timeout too; the "
         "solver is killed 1 s past it), and the GPU "
         "kernels skip a configuration whose checked first launch predicts its repeats "
         "would pass it")
      ->check(CLI::Range(0.001, CommandOptions::kMaxTimeoutSeconds));
  cmd.add_flag("--maximize", spec.maximize,
               "Higher objective is better (command; replay, where a rate such as GFLOP/s is "
               "maximised without it)");
  cmd.add_flag("--minimize", spec.minimize,
               "Replay: lower objective is better, even for a rate (the default for others)");
  cmd.add_option("--objective", spec.objective,
                 "Replay: the numeric field of the file's entries to tune, e.g. GFLOP/s "
                 "(default time; one ending in /s is maximised). Command: the NAME of the last "
                 "'NAME: NUMBER' line the program prints (default: the last number, or --regex; "
                 "a rate is maximised, and is the --unit unless one is given)");
  cmd.add_option("--unit", spec.unit,
                 "Unit of the number the command prints: s, ms, us or ns (shown as times) or a "
                 "label such as GFLOP/s (default: none, a plain number)");
  cmd.add_option("--kernel-name", spec.kernel_name,
                 "For opencl-source and cuda-source, the kernel function, which names its "
                 "measurements too. Else the name the command's measurements are stored under "
                 "(default: command). Studies "
                 "of one name learn from each other and best --kernel NAME answers for it: give "
                 "each program its own. For replay, the kernel's name instead of the file's (a "
                 "T4 file names none), as import --kernel");
  cmd.add_option("--replay", spec.replay_file,
                 "Replay evaluator: answer from a Kernel Tuner cache or T4 file");
  cmd.add_option("--repeats", spec.repeats,
                 "Timed repetitions per configuration (default: the kernel's own; petsc: 3, "
                 "each KSPSetUp + KSPSolve, the objective their median, after one untimed "
                 "warm-up solve)")
      ->check(CLI::Range(1, kMaxRepeats));
  cmd.add_option("--rtol", spec.rtol,
                 "petsc: KSP relative tolerance, above 0 and below 1 (default 1e-8); a solve "
                 "also fails when its true residual ||b-Ax||/||b|| is above 100 times it (at "
                 "least 1e-6)");
  cmd.add_option("--max-it", spec.max_iterations,
                 "petsc: KSP iteration cap (default 10000); reaching it fails the trial "
                 "(DIVERGED_ITS)")
      ->check(CLI::Range(std::int64_t{1}, kMaxIterations));
  cmd.add_flag("--cpu-time", spec.cpu_time,
               "petsc: the objective is the CPU time of the solver process instead of wall "
               "time (steadier on a busy machine; the --timeout stays wall time)");
  cmd.add_option("--source", spec.source_file,
                 "opencl-source, cuda-source: the kernel source file; each tune parameter is "
                 "passed as a -D define (CUDA: declare the kernel extern \"C\")");
  cmd.add_option("--problem-size", spec.problem_size,
                 "opencl-source, cuda-source: the problem's extents, x[,y[,z]]")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, kMaxSize));
  cmd.add_option("--args", spec.args_file,
                 "opencl-source, cuda-source: JSON array of the kernel's arguments in order: "
                 "arrays {\"type\": \"float\", \"size\": N, \"fill\": \"random\", "
                 "\"output\": true}, scalars {\"type\": \"int32\", \"value\": N}");
  cmd.add_option("--grid-div-x", spec.grid_div_x,
                 "opencl-source, cuda-source: expressions over the parameters whose product "
                 "divides the problem size into the grid in x (default: block_size_x); "
                 "work-items = grid * block")
      ->delimiter(',');
  cmd.add_option("--grid-div-y", spec.grid_div_y, "The same in y (default: block_size_y)")
      ->delimiter(',');
  cmd.add_option("--grid-div-z", spec.grid_div_z, "The same in z (default: block_size_z)")
      ->delimiter(',');
  cmd.add_option("--block-size-names", spec.block_size_names,
                 "opencl-source, cuda-source: the parameters giving the work-group size in x, "
                 "y, z (default: block_size_x,block_size_y,block_size_z; untuned: 256, 1, 1)")
      ->delimiter(',');
  cmd.add_option("--atol", spec.atol,
                 "opencl-source, cuda-source: an output element passes when |x - reference| <= "
                 "atol + 1e-5 |reference| (numpy.allclose, as Kernel Tuner; default 1e-6); the "
                 "reference is the outputs of the space's defaults (Kernel Tuner: the first "
                 "values)")
      ->check(CLI::Range(0.0, std::numeric_limits<double>::max()));
}

std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSpec& spec) {
  // A mistyped kernel is named as such, before what its options would be.
  const auto* kernel = find_kernel(spec.kernel);
  if (!kernel) {
    throw InvalidInput("unknown kernel '" + spec.kernel + "'; known kernels: " + known_kernels());
  }
  reject_unused_options(spec, *kernel);
  return kernel->make(spec);
}

}  // namespace tunebase::cli
