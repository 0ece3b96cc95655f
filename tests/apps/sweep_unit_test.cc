#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <set>
#include <string_view>

#include "apps/cli.h"
#include "apps/evaluators.h"
#include "apps/sweep.h"
#include "core/error.h"
#include "tuner/strategy.h"

namespace tunebase::cli {

// The program's main defines them; sweep.cc reads them, and the sweep command (whose help is
// tested here, never run) installs the handler.
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_interrupt_signal{SIGINT};
void install_interrupt_handler() {}

namespace {

TEST(BusyMachineNote, SaidFromALoadOfHalfTheCores) {
  EXPECT_EQ(busy_machine_note(0.3, 2), "");
  EXPECT_EQ(busy_machine_note(0.99, 2), "");
  EXPECT_EQ(busy_machine_note(1.0, 2),
            "note: the machine is busy (load average 1.00 over the last minute, 2 cores): "
            "measurements may be slow and noisy, most of all with several threads; a quieter "
            "machine gives truer rankings");
  EXPECT_EQ(busy_machine_note(3.9, 8), "");
  EXPECT_NE(busy_machine_note(4.0, 8), "");
  // hardware_concurrency() may say 0: one core, then.
  EXPECT_NE(busy_machine_note(0.5, 0), "");
}

// The summary says what the default configuration is: the baseline of its speedup.
// An evaluator measured with `settings`, whose defaults are rtol 1e-8 (as PETSc's).
class SettingsEvaluator final : public Evaluator {
 public:
  explicit SettingsEvaluator(nlohmann::json settings) : settings_(std::move(settings)) {}
  std::string kernel_name() const override { return "solve"; }
  const SearchSpace& space() const override { return space_; }
  Measurement evaluate(const Configuration&) override { return Measurement::success(1.0); }
  nlohmann::json measurement_settings() const override { return settings_; }
  nlohmann::json default_measurement_settings() const override { return {{"rtol", 1e-8}}; }

 private:
  nlohmann::json settings_;
  SearchSpace space_ = SearchSpace::from_json(
      nlohmann::json::parse(R"({"parameters": [{"name": "x", "values": [1, 2]}]})"));
};

// A study that keeps no settings was measured with the defaults (made before studies kept
// them, or over the API without them); one whose settings no tunebase evaluator of the kernel
// has says so, not which options to give.
TEST(MeasurementMismatch, AStudyKeepingNoneWasMeasuredWithTheDefaults) {
  const nlohmann::json tight{{"rtol", 1e-8}};
  const nlohmann::json loose{{"rtol", 1e-3}};
  const nlohmann::json none = nlohmann::json::object();
  const SettingsEvaluator with_defaults(tight), with_loose(loose), without(none);
  EXPECT_EQ(measurement_mismatch({{"measurement", tight}}, with_defaults, "worker"), "");
  EXPECT_EQ(measurement_mismatch(none, with_defaults, "worker"), "");
  EXPECT_EQ(measurement_mismatch(none, without, "worker"), "");
  EXPECT_EQ(measurement_mismatch(none, with_loose, "worker"),
            "it keeps no measurement settings, so its trials were measured with the defaults "
            "(rtol 1e-08), and this worker measures with rtol 0.001: leave out the options that "
            "change them (for petsc --rtol, --max-it and --cpu-time)");
  EXPECT_EQ(measurement_mismatch({{"measurement", tight}}, with_loose, "sweep"),
            "its trials were measured with rtol 1e-08, this sweep measures with rtol 0.001: give "
            "the options the study was made with (for petsc --rtol, --max-it and --cpu-time)");
  EXPECT_EQ(measurement_mismatch({{"measurement", {{"gpu_clock", "locked"}}}}, without, "worker"),
            "its trials are measured with gpu_clock locked (the \"measurement\" it was created "
            "with), and this worker's kernel solve keeps no such settings");
}

TEST(DefaultOrigin, SaysWhetherTheSpaceDeclaresTheDefaults) {
  const auto origin = [](const std::string& space) {
    return default_origin(SearchSpace::from_document(nlohmann::ordered_json::parse(space)));
  };
  auto o = origin(R"({"tune_params": {"bx": [32, 64], "by": [1, 2]}})");
  EXPECT_EQ(o.kind, "first_values");
  EXPECT_EQ(o.text, "first value of each parameter: the space declares no defaults");
  o = origin(R"({"parameters": [{"name": "a", "values": [1, 2], "default": 2},
                                {"name": "x", "type": "real", "low": 0, "high": 1,
                                 "default": 0.5}]})");
  EXPECT_EQ(o.kind, "declared");
  EXPECT_EQ(o.text, "the space's declared defaults");
  o = origin(R"({"parameters": [{"name": "a", "values": [1, 2], "default": 2},
                                {"name": "b", "values": [1, 2]},
                                {"name": "c", "values": [1, 2]}]})");
  EXPECT_EQ(o.kind, "partly_declared");
  EXPECT_EQ(o.text,
            "the space declares defaults for 1 of its 3 parameters, the others take their first "
            "value");
  // A real parameter without a default takes the middle of its interval, not its low end.
  o = origin(R"({"parameters": [{"name": "a", "values": [1, 2]},
                                {"name": "x", "type": "real", "low": 0, "high": 1}]})");
  EXPECT_EQ(o.kind, "first_values");
  EXPECT_EQ(o.text,
            "first value of each parameter (a real one the middle of its range, geometric on a "
            "log scale): the space declares no defaults");
  // One parameter left: "the other".
  o = origin(R"({"parameters": [{"name": "a", "values": [1, 2], "default": 2},
                                {"name": "b", "values": [1, 2]}]})");
  EXPECT_EQ(o.text,
            "the space declares defaults for 1 of its 2 parameters, the other takes its first "
            "value");
}

// The words of the line of `sweep --help` that describes `flag` (split at spaces and ,;:).
std::set<std::string> help_words(const std::string& flag) {
  CLI::App app;
  add_sweep_command(app);
  const auto help = app.get_subcommand("sweep")->help();
  const auto at = help.find(flag + " TEXT");
  if (at == std::string::npos) return {};
  std::set<std::string> words;
  std::string word;
  for (std::size_t i = at; i <= help.size(); ++i) {
    if (i == help.size() || std::string_view(" ,;:\n").find(help[i]) != std::string_view::npos) {
      if (!word.empty()) words.insert(word);
      word.clear();
      if (i == help.size() || help[i] == '\n') break;
    } else {
      word += help[i];
    }
  }
  return words;
}

std::string invalid_input(const EvaluatorSpec& spec) {
  try {
    (void)make_evaluator(spec);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "accepted";
}

// Registering a strategy or a kernel is what puts it in the help and in the error that lists
// the allowed names.
TEST(Registry, EveryStrategyIsInTheSweepHelp) {
  const auto words = help_words("--strategy");
  ASSERT_FALSE(words.empty());
  for (const auto& name : strategy_names()) EXPECT_TRUE(words.count(name)) << name;
}

TEST(Registry, EveryKernelIsInTheHelpAndTheUnknownKernelError) {
  const auto words = help_words("--kernel");
  ASSERT_FALSE(words.empty());
  EvaluatorSpec spec;
  spec.kernel = "fft";
  const auto message = invalid_input(spec);
  EXPECT_NE(message.find("unknown kernel 'fft'; known kernels: "), std::string::npos) << message;
  for (const auto& name : kernel_names()) {
    EXPECT_TRUE(words.count(name)) << name;
    EXPECT_NE(message.find(name), std::string::npos) << name << ": " << message;
  }
  // In the order of the table (a new kernel goes after these).
  EXPECT_EQ(known_kernels().rfind("spmv, petsc, command, replay, opencl-gemm, opencl-spmv, "
                                  "opencl-conv, cuda-gemm, cuda-spmv, cuda-conv",
                                  0),
            0u);
}

// Which kernels read a flag is said from the table, so a new kernel is named where it belongs.
TEST(Registry, AFlagAKernelIgnoresNamesTheKernelsThatReadIt) {
  EvaluatorSpec spec;
  spec.kernel = "opencl-gemm";
  spec.matrix = "m.mtx";
  EXPECT_EQ(invalid_input(spec),
            "--matrix is not used by --kernel opencl-gemm; it is read by spmv, petsc, "
            "opencl-spmv and cuda-spmv (--kernel opencl-gemm takes --size)");
  spec = {};
  spec.kernel = "replay";
  spec.repeats = 3;
  EXPECT_EQ(invalid_input(spec),
            "--repeats is not used by --kernel replay; it is read by every kernel but replay (a "
            "file holds one value per configuration)");
  spec = {};
  spec.kernel = "spmv";
  spec.timeout_seconds = 5.0;
  EXPECT_EQ(invalid_input(spec),
            "--timeout is not used by --kernel spmv; it is read by petsc, command, opencl-gemm, "
            "opencl-spmv, opencl-conv, cuda-gemm, cuda-spmv, cuda-conv, opencl-source and "
            "cuda-source");
  // A matrix kernel reads --size for the problem it generates, not beside a matrix file.
  spec = {};
  spec.kernel = "cuda-spmv";
  spec.matrix = "m.mtx";
  spec.size = 5;
  EXPECT_NE(invalid_input(spec).find("--size is not used by --kernel cuda-spmv"),
            std::string::npos);
  spec = {};
  spec.kernel = "spmv";
  spec.matrix = "m.mtx";
  spec.problem = "poisson2d";
  EXPECT_NE(invalid_input(spec).find("--matrix and --problem exclude each other"),
            std::string::npos);
  // A command must not take a built-in kernel's name.
  spec = {};
  spec.kernel = "command";
  spec.command = "echo {x}";
  spec.space_file = "space.json";
  spec.kernel_name = "cuda-gemm";
  EXPECT_EQ(invalid_input(spec),
            "--kernel-name cuda-gemm is a built-in kernel's name; give the program a name of its "
            "own");
}

// The own-kernel flags (Kernel Tuner's tune_kernel arguments) are read by opencl-source and
// cuda-source only, and those say everything they need.
TEST(Registry, OwnKernelSourcesSayWhatTheyNeedAndOthersRefuseTheirFlags) {
  EvaluatorSpec spec;
  spec.kernel = "opencl-gemm";
  spec.problem_size = {1024};
  EXPECT_EQ(invalid_input(spec),
            "--problem-size is not used by --kernel opencl-gemm; it is read by opencl-source and "
            "cuda-source");
  spec = {};
  spec.kernel = "opencl-source";
  spec.source_file = "scale.cl";
  EXPECT_EQ(invalid_input(spec),
            "--kernel opencl-source needs --source FILE, --kernel-name NAME (the kernel "
            "function), --space FILE (tune_params and restrictions), --problem-size X[,Y[,Z]] and "
            "--args FILE (the kernel's arguments)");
  spec.kernel_name = "spmv";
  spec.space_file = "space.json";
  spec.problem_size = {1024};
  spec.args_file = "args.json";
  EXPECT_NE(invalid_input(spec).find("--kernel-name spmv is a built-in kernel's name"),
            std::string::npos);
}

TEST(FailureReasonsText, OthersAreByStatusAndAnEmptyMessageHasNoExample) {
  FailureBreakdown b;
  b.reasons = {
      {TrialStatus::failed, "(no message)", 4, ""},
      {TrialStatus::timeout, "`<command>` timed out after N s", 3, "`b` timed out after 3 s"}};
  b.others = {{TrialStatus::failed, 2, 1}, {TrialStatus::invalid, 5, 2}};
  b.other_trials = 7;
  b.other_reasons = 3;
  EXPECT_EQ(failure_reasons_text(b),
            "why 14 evaluations failed:\n"
            "       4  failed    (no message)\n"
            "       3  timeout   `<command>` timed out after N s  (e.g. `b` timed out after 3 s)\n"
            "       2  failed    others (1 more reason)\n"
            "       5  invalid   others (2 more reasons)\n");
  EXPECT_EQ(failure_reasons_text({}), "");
}

}  // namespace
}  // namespace tunebase::cli
