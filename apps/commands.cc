// The subcommands: sweep, best, trials, predict, studies, stop, delete, machines, backup, export,
// import (benchmark, serve, worker and token have files of their own).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "api/comparison_json.h"
#include "api/priors.h"
#include "api/records_json.h"
#include "api/study_manager.h"
#include "apps/cli.h"
#include "apps/evaluators.h"
#include "apps/output_file.h"
#include "apps/sweep.h"
#include "core/error.h"
#include "core/json.h"
#include "core/machine.h"
#include "core/measurements.h"
#include "db/json_text.h"
#include "db/store.h"
#include "db/study_export.h"
#include "kernels/format_selection.h"
#include "tuner/quality.h"
#include "tuner/strategy.h"

namespace tunebase::cli {

std::string one_line(std::string text) {
  for (auto& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return text;
}

std::string failure_reasons_text(const FailureBreakdown& breakdown) {
  if (breakdown.reasons.empty() && breakdown.others.empty()) return {};
  static constexpr std::size_t kMaxShownExampleBytes = 120;
  std::ostringstream out;
  out << "why " << breakdown.total() << " evaluation" << (breakdown.total() == 1 ? "" : "s")
      << " failed:\n";
  for (const auto& r : breakdown.reasons) {
    out << std::setw(8) << r.count << "  " << std::left << std::setw(8) << to_string(r.status)
        << std::right << "  " << shortened(r.reason, kMaxReasonBytes);
    if (const auto example = one_line(r.example); !example.empty() && example != r.reason) {
      out << "  (e.g. " << shortened(example, kMaxShownExampleBytes) << ")";
    }
    out << "\n";
  }
  for (const auto& o : breakdown.others) {
    out << std::setw(8) << o.trials << "  " << std::left << std::setw(8) << to_string(o.status)
        << std::right << "  others (" << o.reasons << " more reason" << (o.reasons == 1 ? "" : "s")
        << ")\n";
  }
  return out.str();
}

bool is_study_id(std::string_view study) {
  return !study.empty() && std::all_of(study.begin(), study.end(),
                                       [](unsigned char c) { return std::isdigit(c) != 0; });
}

db::StudyRecord resolve_study(const db::Store& store, const std::string& study) {
  if (is_study_id(study)) {
    std::int64_t id = 0;
    const auto [end, error] = std::from_chars(study.data(), study.data() + study.size(), id);
    if (error == std::errc() && end == study.data() + study.size()) {
      return store.get_study(db::StudyId{id});
    }
    throw NotFound("no study has id " + study + " in " + store.path() +
                   " (tunebase studies lists them)");
  }
  if (auto s = store.find_study(study)) return *s;
  throw NotFound("no study named '" + study + "' in " + store.path() +
                 " (tunebase studies lists them)");
}

namespace {

std::string objective_text(const db::StudyRecord& study, double value) {
  return format_objective(value, db::objective_unit(study));
}

// "bcsstk06 (rows 420, nnz 7860)": an input by its name (its "matrix", else its first text
// field) and the features that tell inputs apart at a glance, in its description or beside it;
// empty when the description names nothing.
std::string named_input_text(const db::TaskRecord& task) {
  const auto& d = task.description;
  auto name = d.find("matrix");
  if (name == d.end() || !name->is_string()) {
    name = std::find_if(d.begin(), d.end(), [](const auto& v) { return v.is_string(); });
  }
  if (name == d.end()) return {};
  std::string telling;
  for (const char* key : {"rows", "nnz", "size"}) {
    for (const auto* where : {&d, &task.features}) {
      if (!where->is_object() || !where->contains(key) || !(*where)[key].is_number()) continue;
      telling += std::string(telling.empty() ? "" : ", ") + key + " " + (*where)[key].dump();
      break;
    }
  }
  return name->get<std::string>() + (telling.empty() ? "" : " (" + telling + ")");
}

// "task 2 bcsstk13 (rows 2003, nnz 83883)", else "task 2 {"n":4096,...}": which input a study
// measured. A description of many features cut to a line would not say which input it is.
std::string task_text(const db::Store& store, db::TaskId id) {
  const auto task = store.get_task(id);
  std::string text = "task " + std::to_string(id.value);
  if (!task.description.is_object() || task.description.empty()) return text;
  if (const auto named = named_input_text(task); !named.empty()) return text + " " + named;
  std::string description = task.description.dump();
  if (description.size() > 80) description = description.substr(0, 77) + "...";
  return text + " " + description;
}

// "  GFLOP/s 9.13  GB/s 70.3" from an evaluator's metrics, when it reports them.
std::string throughput(const nlohmann::json& metrics, const std::string& objective_unit) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  for (const char* key : {"GFLOP/s", "GB/s"}) {
    if (key == objective_unit) continue;  // the objective itself, shown already
    if (metrics.contains(key) && metrics[key].is_number()) {
      os << "  " << key << " " << metrics[key].get<double>();
    }
  }
  return os.str();
}

// "Tesla V100 0.62, target 0.38": transfer weights for people.
std::string weights_text(const nlohmann::json& weights) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  for (const auto& [name, w] : weights.items()) {
    if (os.tellp() > 0) os << ", ";
    os << name << " " << w.get<double>();
  }
  return os.str();
}

// How much a measurement's repeats vary: their interquartile range over their median. None
// with fewer than 3 finite repeats or a median that is not positive.
std::optional<double> relative_spread(std::vector<double> raw) {
  std::erase_if(raw, [](double v) { return !std::isfinite(v); });
  if (raw.size() < 3) return std::nullopt;
  const double median = quantile(raw, 0.5);
  if (!(median > 0.0)) return std::nullopt;
  return (quantile(raw, 0.75) - quantile(raw, 0.25)) / median;
}

// The largest ratio written with its decimals: past it, "%.2f" of a program's absurd time
// (1e308) would print hundreds of digits.
constexpr double kMaxPlainRatio = 1e6;

// "1.66", or "1.23e+308" past kMaxPlainRatio: a speedup for people. Formatted apart, so that
// the streams keep their flags and precision.
std::string ratio_text(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ratio < kMaxPlainRatio ? "%.2f" : "%.3g", ratio);
  return buf;
}

// Repeats that vary by more than this are worth a word: the machine is busy, or the kernel's
// time depends on more than its configuration.
constexpr double kNoisySpread = 0.10;

// The database holding a study that a command changes (stop, delete): it must exist (such a
// command never creates one), and is opened read-only first, so that a file that is not a
// tunebase database is refused before anything would write to it.
db::Store database_of_study(const std::string& path, const std::string& study,
                            const std::string& verb) {
  if (!std::filesystem::exists(path)) {
    throw NotFound("database " + path + " does not exist, so it holds no study '" + study +
                   "' to " + verb + " (check --db)");
  }
  (void)db::Store(path, {.read_only = true});
  return db::Store(path);
}

void print_sweep_summary(const SweepSummary& s) {
  std::cout << "study:      " << s.study_name << " (id " << s.study.value << ", strategy "
            << s.strategy << ")\n";
  if (!s.measurement.empty()) {
    std::cout << "measured:   " << db::measurement_text(s.measurement) << "\n";
  }
  if (!s.priors.empty()) {
    std::cout << "priors:     ";
    for (std::size_t i = 0; i < s.priors.size(); ++i) {
      const auto& p = s.priors[i];
      std::cout << (i ? ", " : "") << p.source << " (" << p.measurements << " measurements"
                << (p.inputs > 1 ? " of " + std::to_string(p.inputs) + " inputs" : "") << ")";
    }
    std::cout << "\n";
    if (s.weights.is_object() && !s.weights.empty()) {
      std::cout << "weights:    " << weights_text(s.weights) << "\n";
    }
  }
  // A resumed study: this run's failures apart from the study's.
  std::cout << "trials:     " << s.total << " stored (" << s.evaluated << " in this run, "
            << (s.evaluated == s.total ? std::to_string(s.failed) + " failed)"
                                       : std::to_string(s.failed_here) + " failed in it; " +
                                             std::to_string(s.failed) + " failed in all)")
            << (s.interrupted ? ", interrupted" : "");
  if (s.leased_elsewhere) {
    std::cout << "; " << s.leased_elsewhere << " still leased to other clients";
    if (s.left_active) std::cout << " (the study stays active until they report)";
  }
  std::cout << "\n";
  // A sweep run again without --study starts a new study: say how this one goes on.
  if (s.interrupted) {
    std::cout << "resume:     the same sweep with --study '" << s.study_name << "'\n";
  }
  if (!s.stopped.empty()) std::cout << "stopped:    " << s.stopped << "\n";
  if (!s.last_failure.empty()) {
    std::cout << "failure:    " << one_line(s.last_failure) << " (the last of " << s.failed_here
              << " in this run)\n";
  }
  if (!s.best) {
    std::cout << "best:       none (no successful evaluation)\n";
    return;
  }
  std::cout << "best:       " << s.best_config_text << "\n";
  if (!s.best_options.empty()) std::cout << "options:    " << s.best_options << "\n";
  std::cout << "objective:  " << format_objective(s.best->result.objective, s.unit)
            << throughput(s.best->result.metrics, s.unit) << "\n";
  if (const auto spread = relative_spread(s.best->result.raw)) {
    // Formatted apart, so that the streams keep their precision.
    const auto percent = [&](int decimals) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.*f%%", decimals, 100.0 * *spread);
      return std::string(buf);
    };
    std::cout << "spread:     " << percent(1) << " (interquartile range of its "
              << s.best->result.raw.size() << " repeats over their median)\n";
    if (*spread > kNoisySpread) {
      std::cerr << "note: the best configuration's repeats vary by " << percent(0)
                << " (interquartile range over median): the machine may be busy, so rankings "
                   "between close configurations are uncertain; more --repeats or a quieter "
                   "machine help\n";
    }
  }
  if (s.default_result && s.default_result->result.ok()) {
    std::cout << "default:    " << format_objective(s.default_result->result.objective, s.unit)
              << throughput(s.default_result->result.metrics, s.unit) << " (" << s.default_from.text
              << ")\n";
    if (const auto speedup = s.speedup()) {
      std::cout << "speedup:    " << ratio_text(*speedup) << "x over the default configuration\n";
    }
  } else if (s.default_result) {
    std::cout << "default:    failed (" << one_line(s.default_result->result.message) << ")\n";
  }
}

// How a stored configuration reads in listings, in the space of the kernel version it is of:
// its parameters in declared order, and kernel_options_text.
struct ConfigTexts {
  std::string config, options;
};

ConfigTexts config_texts(const db::Store& store, const std::string& kernel,
                         const std::string& version, const nlohmann::json& config) {
  const auto record = store.find_kernel(kernel, version);
  if (!record) return {config.dump(), {}};
  return {config_text(config, record->space),
          kernel_options_text(kernel, SearchSpace::from_json(record->space), config)};
}

void print_predicted_best(const std::string& kernel, const std::string& machine,
                          const api::PredictedBest& p, const ConfigTexts& texts,
                          const std::string& input, std::optional<db::TaskId> task, bool json) {
  if (json) {
    auto j = api::predicted_best_json(kernel, machine, p);
    if (task) j["task_id"] = task->value;  // as GET /v1/best answers
    if (!input.empty()) j["input"] = input;
    if (const auto outside = api::features_outside_note(p); !outside.empty()) j["note"] = outside;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "kernel:    " << kernel << "\nmachine:   " << machine << "\nsource:    predicted ("
            << p.model << " on " << p.trials << " measurements of " << p.machines << " machine"
            << (p.machines == 1 ? "" : "s")
            << (p.inputs > p.machines
                    ? " (" + std::to_string(p.inputs) + " machine and input pairs)"
                    : std::string())
            << (p.failed_here ? "; " + std::to_string(p.failed_here) +
                                    " configurations failed here and were left out, none ran"
                : !input.empty() ? std::string("; nothing measured for this input yet")
                                 : std::string("; nothing measured here yet"))
            << ")";
  if (!input.empty()) std::cout << "\ninput:     " << input;
  std::cout << "\nconfig:    " << texts.config;
  if (!texts.options.empty()) std::cout << "\noptions:   " << texts.options;
  if (p.from_measurements) {
    std::cout << "\nchosen:    ran on " << p.sources_that_ran_it << " of " << p.sources
              << " other machines and inputs; ";
    if (p.mean_quantile > 0.0) {
      std::cout << "on average in their best " << std::setprecision(2) << 100.0 * p.mean_quantile
                << "%";
    } else {
      std::cout << "the best each of them measured";
    }
  }
  // A new input's objective is extrapolated from the measured inputs', whoever measured them.
  const std::string new_input_caveat =
      "; a new input's objective may lie far outside it: the configuration is the better guess";
  std::cout << "\nobjective: " << format_objective(p.forecast.mean, p.unit) << " (68% interval "
            << format_objective(p.forecast.lower, p.unit) << " .. "
            << format_objective(p.forecast.upper, p.unit)
            << (p.this_machine_only
                    ? ", from this machine's measurements of " + std::to_string(p.inputs) +
                          " other inputs, which alone are predicted from: other machines' are "
                          "left out" +
                          (input.empty() ? std::string() : new_input_caveat) + ")\n"
                : !input.empty() ? ", for the measured inputs' machines" + new_input_caveat + ")\n"
                : p.machines > 1
                    ? ", from the other machines' measurements and how much they differ)\n"
                    : ", from the other machine's measurements, widened to a factor of 2.3 "
                      "either way, as much as GPUs differ: one machine shows nothing of how "
                      "machines differ)\n");
  std::cout << "runs:      probability " << std::setprecision(2) << std::fixed
            << p.forecast.probability_feasible << std::defaultfloat
            << " (from the failures of the measurements it rests on)\n";
  if (!p.weights.empty()) std::cout << "weights:   " << weights_text(p.weights) << "\n";
  if (const auto outside = api::features_outside_note(p); !outside.empty()) {
    std::cout << "note:      " << outside << "\n";
  }
}

/// The stored input of `kernel` whose description is `text` (JSON), as --input names it;
/// NotFound with some of the kernel's inputs when none is.
db::TaskId stored_input(const db::Store& store, const std::string& kernel,
                        const std::string& text) {
  const auto wanted = parse_json_text(text, "--input", DuplicateKeys::refuse);
  constexpr std::size_t kListed = 5;
  std::string some;
  std::size_t count = 0;
  for (const auto& t : store.list_tasks(kernel)) {
    if (t.description == wanted) return t.id;
    if (count++ < kListed) some += (some.empty() ? "" : ", ") + db::json_text(t.description);
  }
  throw NotFound("no stored input of " + kernel + " is " + db::json_text(wanted) +
                 (count == 0
                      ? std::string(" (it has none)")
                      : "; its inputs" + std::string(count > kListed ? " include " : ": ") + some +
                            (count > kListed ? " (" + std::to_string(count) +
                                                   " in all; tunebase studies lists "
                                                   "them)"
                                             : std::string())));
}

/// Whether `path` is a table of SpMV times per storage format (Ginkgo's, one CSV per machine)
/// rather than a Kernel Tuner or T4 file.
bool is_spmv_table(const std::string& path) {
  auto extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".csv";
}

/// Files one SpMV-format table: one study per matrix (its task the matrix, its features the
/// matrix properties), all in one transaction.
void import_spmv_table(db::Store& store, const std::string& path, const std::string& machine,
                       const std::string& kernel, const std::vector<std::string>& formats) {
  auto table = read_spmv_table(path);
  if (!formats.empty()) keep_spmv_formats(table, formats);
  std::vector<std::pair<MeasuredDataset, db::ImportOptions>> datasets;
  for (auto& m : spmv_measurements(table)) {
    db::ImportOptions options;
    options.machine_name = machine;
    options.kernel_name = kernel;
    options.input = std::move(m.task);
    options.task_features = std::move(m.task_features);
    options.unit = "s";
    options.match_other_inputs = false;
    datasets.emplace_back(std::move(m.dataset), std::move(options));
  }
  const auto results = store.import_datasets(datasets);
  std::size_t trials = 0, failed = 0, before = 0;
  for (const auto& r : results) {
    trials += r.trials;
    failed += r.failed;
    before += r.imported_before() ? 1 : 0;
  }
  const std::string what =
      results.empty() ? table.machine
                      : results.front().kernel_name + " on " + results.front().machine_name;
  if (before == results.size()) {
    std::cout << "nothing new: the " << before << " matrices of " << path << " (" << what
              << ") were imported before, with the same results\n";
    return;
  }
  std::cout << "imported " << trials << " trials (" << failed << " failed) of " << what << ": "
            << results.size() - before << " matrices, one study each"
            << (before > 0 ? "; " + std::to_string(before) + " others were imported before"
                           : std::string())
            << "\n";
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  struct Args {
    EvaluatorSpec spec;
    SweepOptions sweep;
    std::string strategy_options;
    std::size_t budget = kDefaultSweepBudget;
    std::uint64_t seed = 0;
    std::string db = kDefaultDb;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("sweep", "Tune a kernel on this machine and store every trial");
  add_evaluator_options(*cmd, args->spec);
  // The default (auto) picks one of these two; the help names every other registered one.
  std::string others;
  for (const auto& name : strategy_names()) {
    if (name != "bo-transfer" && name != "bo") others += (others.empty() ? "" : ", ") + name;
  }
  cmd->add_option("--strategy,-s", args->sweep.strategy,
                  "Search strategy: bo-transfer when other machines or inputs measured this "
                  "kernel, else bo; also " +
                      others);
  cmd->add_option("--options", args->strategy_options,
                  "Strategy options of a new study as JSON, e.g. '{\"initial_design\": 10}' "
                  "(bo: acquisition, kappa, min_feasible, ...; the API's strategy_options)");
  cmd->add_flag(
      "--no-transfer", [args](std::int64_t) { args->sweep.transfer = false; },
      "Ignore what other machines and inputs measured (no priors)");
  cmd->add_option("--prior-machine", args->sweep.prior_machines,
                  "Only this machine's measurements are priors (repeatable)");
  cmd->add_option("--prior", args->sweep.prior_files,
                  "Kernel Tuner cache or T4 file of another machine used as a prior (repeatable)")
      ->check(CLI::ExistingFile);
  auto* budget =
      cmd->add_option("--budget,-b", args->budget,
                      "Number of evaluations in the study (default " +
                          std::to_string(kDefaultSweepBudget) +
                          " for a new study, every configuration for --strategy exhaustive; a "
                          "resumed study keeps its own unless given, which changes it)")
          ->check(CLI::Range(std::size_t{1}, kMaxBudget));
  auto* seed =
      cmd->add_option("--seed", args->seed,
                      "Random seed of a new study (runs are reproducible; a resumed study keeps "
                      "its own)")
          ->check(CLI::Range(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()))
          ->capture_default_str();
  cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
  cmd->add_option("--study", args->sweep.study_name,
                  "Study name or id: an existing study is resumed, a new name starts a study "
                  "(digits only are an id, as study names never are)");
  cmd->add_option("--machine", args->sweep.machine_name, "Machine name (default: host name)");
  cmd->add_flag(
      "--no-progress", [args](std::int64_t) { args->sweep.progress = false; }, "No progress bar");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, budget, seed] {
    install_interrupt_handler();
    if (budget->count() > 0) args->sweep.budget = args->budget;
    if (seed->count() > 0) args->sweep.seed = args->seed;
    if (!args->strategy_options.empty()) {
      args->sweep.strategy_options = parse_strategy_options(args->strategy_options, "--options");
    }
    auto evaluator = make_evaluator(args->spec);
    db::Store store(args->db);
    const auto summary = run_sweep(*evaluator, store, args->sweep);
    if (args->json) {
      nlohmann::json j{
          {"study", summary.study_name},
          {"study_id", summary.study.value},
          {"trials", summary.total},
          {"evaluated", summary.evaluated},
          {"failed", summary.failed},
          {"failed_in_run", summary.failed_here},
          {"interrupted", summary.interrupted},
          {"leased_elsewhere", summary.leased_elsewhere},
          {"left_active", summary.left_active},
          {"stopped", summary.stopped.empty() ? nlohmann::json() : nlohmann::json(summary.stopped)},
          {"last_failure",
           summary.last_failure.empty() ? nlohmann::json() : nlohmann::json(summary.last_failure)},
          {"unit", summary.unit},
          {"strategy", summary.strategy},
          {"measurement", summary.measurement}};
      if (!summary.priors.empty()) {
        nlohmann::json priors = nlohmann::json::array();
        for (const auto& p : summary.priors) {
          priors.push_back(
              {{"source", p.source}, {"measurements", p.measurements}, {"inputs", p.inputs}});
        }
        j["priors"] = priors;
        if (!summary.weights.is_null()) j["weights"] = summary.weights;
      }
      if (summary.best) {
        const auto spread = relative_spread(summary.best->result.raw);
        j["best"] = {{"config", summary.best_config},
                     {"objective", summary.best->result.objective},
                     {"metrics", summary.best->result.metrics},
                     {"spread", spread ? nlohmann::json(*spread) : nlohmann::json()}};
      }
      if (summary.default_result && summary.default_result->result.ok() && summary.best) {
        j["default_objective"] = summary.default_result->result.objective;
        j["default_metrics"] = summary.default_result->result.metrics;
        j["default_from"] = summary.default_from.kind;
        if (const auto speedup = summary.speedup()) j["speedup_over_default"] = *speedup;
      }
      // A failure message may quote a program's output that is not UTF-8.
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      print_sweep_summary(summary);
    }
    // Every evaluation failing is a problem with the set-up more often than with the space: a
    // script or build system must not take it for a tuned kernel.
    if (!summary.best && summary.total > 0 && !summary.interrupted) {
      throw Error("no evaluation of study '" + summary.study_name + "' succeeded (" +
                  std::to_string(summary.failed) + " failed" +
                  (summary.last_failure.empty()
                       ? std::string(")")
                       : "; the last: " + one_line(summary.last_failure) + ")") +
                  "; tunebase trials --study '" + summary.study_name + "' shows every message");
    }
  });
}

// A machine name the database does not hold is answered as a new machine (a prediction); a
// misspelt name would get that prediction without a word, so say which names it holds.
// GET /v1/best says the same in its note.
void note_unknown_machine(const db::Store& store, const std::string& name, const std::string& db) {
  const auto same_but_case = api::similar_machine_name(store, name);
  const auto known = api::stored_machines_text(store, "tunebase machines lists all");
  std::cerr << "note: machine '" << name << "' is not in " << db << ": predicting as for a new "
            << "machine"
            << (!same_but_case.empty() ? "; did you mean '" + same_but_case + "'?"
                : known.empty()        ? std::string()
                                       : " (it holds " + known + ")")
            << "\n";
}

// What `tunebase space` says of a space: its parameters, how many configurations it has and
// how many of them are valid (counted, or estimated from random points when there are too
// many to count), and whether its default is one of them.
nlohmann::json space_summary(const SearchSpace& space) {
  nlohmann::json parameters = nlohmann::json::array();
  for (const auto& p : space.parameters()) {
    const auto shown = [&](const Value& v) { return value_as_written(v, p.python_bool); };
    nlohmann::json j{{"name", p.name},
                     {"kind", std::string(to_string(p.kind))},
                     {"default", shown(p.default_value)}};
    if (p.kind == ParamKind::integer) {
      j["count"] = p.size();
      j["low"] = static_cast<std::int64_t>(p.low);
      j["high"] = static_cast<std::int64_t>(p.high);
      j["step"] = p.step;
    } else if (p.is_discrete()) {
      j["count"] = p.size();
      nlohmann::json values = nlohmann::json::array();
      for (const auto& v : p.values) values.push_back(shown(v));
      j["values"] = std::move(values);
    } else {
      j["low"] = p.low;
      j["high"] = p.high;
    }
    if (p.log_scale) j["log"] = true;
    parameters.push_back(std::move(j));
  }
  nlohmann::json constraints = nlohmann::json::array();
  for (const auto& c : space.constraints()) constraints.push_back(c.text);
  // Infinite for a real parameter, and for a product of counts beyond a double's range.
  const double points = space.cartesian_size();
  nlohmann::json out{{"parameters", std::move(parameters)},
                     {"constraints", std::move(constraints)},
                     {"points", std::isfinite(points) ? nlohmann::json(points) : nullptr}};
  if (space.enumerable()) {
    out["valid"] = *space.valid_count();
    out["valid_counted"] = true;
  } else {
    constexpr std::size_t kDraws = 100000;
    Rng rng(0);
    const double share = space.valid_share(kDraws, rng);
    out["valid_share_estimate"] = share;
    out["valid_counted"] = false;
    if (std::isfinite(points)) out["valid"] = points * share;
  }
  const auto defaults = space.default_configuration();
  out["default"] = space.config_to_json(defaults);
  try {
    space.check(defaults);
    out["default_valid"] = true;
  } catch (const InvalidInput& e) {
    out["default_valid"] = false;
    out["default_violates"] = e.what();
  }
  return out;
}

// What a Kernel Tuner cache measured of the space it spans, "measured" in tunebase space: a
// replay searches only those configurations, which may be far fewer than the valid ones (4,362
// of 10,240 in convolution_hub/A6000). Null for a file that holds no measurements.
nlohmann::json measured_summary(const std::string& path) {
  const auto text = read_maybe_gzipped(path);
  const auto document = parse_json_text(text, path);
  if (!document.is_object() || !document.contains("cache")) return nullptr;
  try {
    const auto dataset = parse_measurements(text, path);
    const auto failed = std::count_if(dataset.entries.begin(), dataset.entries.end(),
                                      [](const Observation& o) { return !o.result.ok(); });
    return {{"configurations", dataset.entries.size()}, {"failed", failed}};
  } catch (const InvalidInput& e) {
    // The space stands without them (a cache Kernel Tuner has only begun is empty): what is
    // wrong with the measurements is said, as import and replay would say it.
    return {{"error", e.what()}};
  }
}

void add_query_commands(CLI::App& app) {
  // --- space
  {
    struct Args {
      std::string file;
      bool json = false;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand(
        "space",
        "Check a space file (tunebase, Kernel Tuner or T1 format, .json or .json.gz): its "
        "parameters, how many configurations it has, how many are valid (and how many a Kernel "
        "Tuner cache measured), and its default");
    cmd->add_option("file", args->file, "The space file")->required();
    cmd->add_flag("--json", args->json, "Print JSON");
    cmd->callback([args] {
      const auto space = SearchSpace::load(args->file);
      auto summary = space_summary(space);
      for (const auto& note : space.notes()) std::cerr << "note: " << note << "\n";
      if (!space.notes().empty()) summary["notes"] = space.notes();
      if (auto measured = measured_summary(args->file); !measured.is_null()) {
        summary["measured"] = std::move(measured);
      }
      if (args->json) {
        std::cout << summary.dump(2) << "\n";
        return;
      }
      std::cout << "parameters:  " << space.dimension() << "\n";
      for (const auto& p : summary["parameters"]) {
        std::cout << "  " << p["name"].get<std::string>() << "  " << p["kind"].get<std::string>();
        if (p.contains("values")) {
          // A long list as its first values and its last.
          const auto& values = p["values"];
          std::string listed;
          for (std::size_t i = 0; i < values.size(); ++i) {
            if (values.size() > 12 && i == 10) {
              listed += ", ...";
              i = values.size() - 1;
            }
            listed += (listed.empty() ? "" : ", ") + db::json_text(values[i]);
          }
          std::cout << ", " << p["count"] << (values.size() == 1 ? " value [" : " values [")
                    << listed << "]";
        } else if (p.contains("step")) {
          std::cout << ", " << p["count"] << " values " << p["low"] << " .. " << p["high"]
                    << " step " << p["step"];
        } else {
          std::cout << ", " << p["low"] << " .. " << p["high"];
        }
        if (p.contains("log")) std::cout << ", log scale";
        std::cout << ", default " << db::json_text(p["default"]) << "\n";
      }
      std::cout << "constraints: " << summary["constraints"].size() << "\n";
      for (const auto& c : summary["constraints"]) {
        std::cout << "  " << c.get<std::string>() << "\n";
      }
      const auto& points = summary["points"];
      // Counts up to 2^53 in full (82944, not 8.2944e+04).
      const auto whole_number = [](double v) {
        return v < 0x1p53 ? std::to_string(std::llround(v)) : db::format_number(v);
      };
      const auto three_digits = [](double v) {
        char text[32];
        std::snprintf(text, sizeof text, "%.3g", v);
        return std::string(text);
      };
      std::cout << "points:      "
                << (!points.is_null()      ? whole_number(points.get<double>())
                    : space.all_discrete() ? std::string("more than 1e308")
                                           : std::string("infinite (a real parameter)"))
                << "\n";
      if (summary["valid_counted"].get<bool>()) {
        const auto valid = summary["valid"].get<double>();
        std::cout << "valid:       " << whole_number(valid);
        if (!points.is_null() && points.get<double>() > 0) {
          std::cout << " (" << three_digits(100.0 * valid / points.get<double>()) << "%)";
        }
        std::cout << "\n";
      } else {
        const double share = summary["valid_share_estimate"].get<double>();
        std::cout << "valid:       ";
        if (share == 0.0) {
          std::cout << "under 0.001% (none of 100000 random points; estimated, as there are "
                       "too many to count)\n";
        } else {
          std::cout << (summary.contains("valid")
                            ? "about " + three_digits(summary["valid"].get<double>()) + " ("
                            : std::string("("))
                    << three_digits(100.0 * share)
                    << "% of 100000 random points; estimated, as there are too many to count)\n";
        }
      }
      if (summary.contains("measured")) {
        const auto& measured = summary["measured"];
        if (measured.contains("error")) {
          std::cout << "measured:    none that import or replay would take: "
                    << measured["error"].get<std::string>() << "\n";
        } else {
          std::cout << "measured:    " << measured["configurations"] << " configurations ("
                    << measured["failed"] << " failed): a replay searches only these\n";
        }
      }
      std::cout << "default:     " << space.config_text(space.default_configuration())
                << (summary["default_valid"].get<bool>()
                        ? " (valid)"
                        : " (invalid: " + summary["default_violates"].get<std::string>() + ")")
                << "\n";
    });
  }
  // --- best
  {
    struct Args {
      std::string kernel, machine, db = kDefaultDb, matrix, input, problem;
      std::int64_t task = 0, size = 0;
      bool json = false, maximize = false;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("best", "Best known configuration of a kernel on a machine");
    auto* input_option = cmd->add_option(
        "--input", args->input,
        "A stored input as its description, JSON, e.g. '{\"matrix\": \"ACUSIM/Pres_Poisson\"}' "
        "(the task tunebase studies shows)");
    auto* task_option =
        cmd->add_option("--task", args->task, "Task id (default: any input)")
            ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()))
            ->excludes(input_option);
    auto* matrix_option =
        cmd->add_option("--matrix", args->matrix,
                        "Matrix Market file (spmv, petsc): the best for this input, predicted "
                        "from the inputs measured when it was never measured itself")
            ->excludes(task_option)
            ->excludes(input_option);
    // A generated problem, as sweep --problem and --size make it.
    cmd->add_option("--problem", args->problem,
                    "Generated matrix (spmv, petsc), as sweep --problem: laplacian3d, "
                    "laplacian2d, poisson2d, poisson3d, anisotropic2d, convdiff2d, convdiff3d; "
                    "answered as --matrix")
        ->excludes(matrix_option)
        ->excludes(task_option)
        ->excludes(input_option);
    cmd->add_option("--size", args->size,
                    "Grid points per side of the generated problem (default 64), as sweep --size")
        ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()))
        ->excludes(matrix_option)
        ->excludes(task_option)
        ->excludes(input_option);
    cmd->add_option("--kernel,-k", args->kernel, "Kernel name")->required();
    cmd->add_option("--machine", args->machine, "Machine name (default: this host)");
    cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
    cmd->add_flag("--maximize", args->maximize,
                  "Higher objective is better (left out: as the kernel's studies, when they all "
                  "maximize)");
    cmd->add_flag("--json", args->json, "Print JSON");
    cmd->callback([args] {
      db::Store store(args->db, {.read_only = true});
      const std::string machine_name =
          args->machine.empty() ? detect_machine().name : args->machine;
      const auto machine = store.find_machine(machine_name);
      const bool generated = !args->problem.empty() || args->size > 0;
      if ((!args->matrix.empty() || generated) && args->kernel != "spmv" &&
          args->kernel != "petsc") {
        throw InvalidInput(std::string(generated ? "--problem and --size are" : "--matrix is") +
                           " read for the matrix kernels, spmv and petsc, not " + args->kernel +
                           " (--task picks an input of any kernel)");
      }
      if (!store.find_kernel(args->kernel)) {
        throw NotFound("no kernel '" + args->kernel + "' in " + args->db + "; " +
                       api::stored_kernels_text(store));
      }
      if (!machine) note_unknown_machine(store, machine_name, args->db);
      std::optional<db::TaskId> task;
      if (args->task > 0) {
        const auto t = store.get_task(db::TaskId{args->task});
        if (t.kernel_name != args->kernel) {
          throw InvalidInput("task " + std::to_string(args->task) + " is an input of kernel " +
                             t.kernel_name + ", not " + args->kernel +
                             " (tunebase studies shows each study's task)");
        }
        task = t.id;
      }
      if (!args->input.empty()) task = stored_input(store, args->kernel, args->input);
      // An input given as a matrix: its stored task when it was measured (here or elsewhere),
      // else its features and the kernel version of its space, to predict from other inputs.
      nlohmann::json input_features = nlohmann::json::object();
      std::string input_version;
      std::string input_name;
      bool other_content = false;  // a matrix measured under this name had other features
      if (!args->matrix.empty() || generated) {
        EvaluatorSpec spec;
        spec.kernel = args->kernel;
        spec.matrix = args->matrix;
        spec.problem = args->problem;
        spec.size = args->size;
        const auto evaluator = make_evaluator(spec);
        // As a sweep stores it: the features beside the description (spmv) or in it (petsc).
        db::TaskRecord input;
        input.description = evaluator->task();
        if (input.description.contains("features")) {
          input.features = input.description["features"];
          input.description.erase("features");
        }
        input_features = api::task_features_of(input);
        input_version = evaluator->space().fingerprint();
        input_name = input.description.value("matrix", args->matrix);
        // The same matrix: the same description and features (a file renamed is another name,
        // another content under a measured name is no measurement of it).
        for (const auto& t : store.list_tasks(args->kernel)) {
          if (t.description == input.description && api::task_features_of(t) == input_features) {
            task = t.id;
          } else if (t.description.is_object() &&
                     t.description.value("matrix", std::string()) == input_name) {
            other_content = true;
          }
        }
      }
      // Without --maximize, the direction of the kernel's studies on this machine (else on
      // all) when they all take one, else of what was measured here.
      const auto direction =
          args->maximize
              ? db::Direction::maximize
              : api::studies_direction(store, args->kernel, "",
                                       machine ? std::optional(machine->id) : std::nullopt, task)
                    .value_or(db::Direction::minimize);
      const bool maximize = direction == db::Direction::maximize;
      if (maximize && !args->maximize) {
        std::cerr << "note: the studies of " << args->kernel
                  << " maximize their objective: the best is the highest\n";
      }
      // A matrix measured nowhere has no measured best, here or anywhere.
      const bool unmeasured_input = !task && !input_name.empty();
      const auto best = machine && !unmeasured_input
                            ? store.best_trial(args->kernel, machine->id, task, direction)
                            : std::nullopt;
      if (!best) {
        // Nothing measured here: what the transfer model predicts from other machines.
        api::load_fitted_models(store);
        const auto predicted =
            task || input_version.empty()
                ? api::predict_best(store, args->kernel,
                                    machine ? std::optional(machine->id) : std::nullopt, task,
                                    direction, "")
                : api::predict_best(store, args->kernel,
                                    machine ? std::optional(machine->id) : std::nullopt,
                                    std::nullopt, direction, "", input_features, input_version);
        if (!predicted && !input_version.empty()) {
          // A matrix of another kind (PETSc's space differs for symmetric ones): no input
          // measured in its space says anything of it.
          bool kind_measured = false;
          for (const auto& s : store.list_studies(args->kernel)) {
            kind_measured = kind_measured || s.kernel_version == input_version;
          }
          if (!kind_measured) {
            throw NotFound("no input of matrix " + input_name + "'s kind was measured for " +
                           args->kernel + ": its search space differs from the measured " +
                           "inputs'" +
                           (args->kernel == "petsc"
                                ? " (petsc offers CG, MINRES and ICC only for symmetric matrices)"
                                : "") +
                           ", and measurements transfer only within one space; tune one matrix "
                           "of its kind first (" +
                           args->db + ")");
          }
        }
        if (!predicted) {
          const auto other = maximize ? db::Direction::minimize : db::Direction::maximize;
          const bool other_way =
              machine && store.best_trial(args->kernel, machine->id, task, other).has_value();
          // Trials that all failed are something measured, just nothing that worked.
          const auto all_failed = machine && !unmeasured_input
                                      ? api::all_failed_here(store, args->kernel, machine->id, task)
                                      : std::nullopt;
          throw NotFound(
              (all_failed ? "no successful measurement (" +
                                api::all_failed_text(*all_failed,
                                                     [](db::StudyId id) {
                                                       return "tunebase trials --study " +
                                                              std::to_string(id.value);
                                                     }) +
                                ")"
                          : std::string("nothing measured")) +
              " for kernel '" + args->kernel + "' on machine '" + machine_name + "'" +
              (task ? " with task " + std::to_string(task->value) : std::string()) +
              (unmeasured_input ? " for matrix " + input_name : std::string()) +
              (other_way ? " in studies that " + std::string(db::to_string(direction)) +
                               " (its studies here " + std::string(db::to_string(other)) + ": " +
                               (maximize ? "leave out" : "add") + " --maximize)"
               : unmeasured_input
                   ? ", and too few successful measurements of it on other inputs or "
                     "other machines to predict from"
                   : ", and too few successful measurements of it on other machines "
                     "to predict from") +
              (other_way ? std::string() : api::measured_otherwise_text(store, args->kernel)) +
              " (" + args->db + "; tunebase studies lists what is there)");
        }
        print_predicted_best(
            args->kernel, machine_name, *predicted,
            config_texts(store, args->kernel, predicted->kernel_version, predicted->config),
            unmeasured_input
                ? "matrix " + input_name +
                      (other_content && !task
                           ? " (not the matrix measured under this name, whose features differ: "
                             "predicted from the inputs measured, by their features)"
                           : " (measured nowhere: predicted from the inputs measured, by their "
                             "features)")
            : task && machine &&
                    store.best_trial(args->kernel, machine->id, std::nullopt, direction)
                ? task_text(store, *task) + " (not measured here, where other inputs were)"
                : std::string(),
            task, args->json);
        return;
      }
      const auto study = store.get_study(best->study_id);
      // How many configurations the best was chosen from, as GET /v1/best says.
      const auto few =
          api::measured_configurations(store, args->kernel, *machine, task, direction, "", study);
      if (args->json) {
        nlohmann::json j{{"kernel", args->kernel},
                         {"machine", machine_name},
                         {"source", "measured"},
                         {"config", best->config},
                         {"objective", best->result.objective},
                         {"unit", api::unit_json(study)},
                         {"objective_name", study.objective},
                         {"study", study.name},
                         {"study_id", study.id.value},
                         {"task_id", study.task_id.value},
                         {"trial_id", best->id.value},
                         {"measured_configurations", few.configurations}};
        // Measured both ways here (a time and a rate), as GET /v1/best says.
        const auto other = maximize ? db::Direction::minimize : db::Direction::maximize;
        std::string note;
        if (!args->maximize && store.best_trial(args->kernel, machine->id, task, other)) {
          note = "studies of both directions measured kernel \"" + args->kernel + "\" on \"" +
                 machine_name + "\": this is the " + std::string(db::to_string(direction)) +
                 " one" + (maximize ? std::string() : "; --maximize gives the other");
        }
        for (const auto* said : {&few.other_spaces, &few.other_measurements, &few.note}) {
          if (!said->empty()) note += (note.empty() ? "" : "; ") + *said;
        }
        if (!note.empty()) j["note"] = note;
        std::cout << j.dump(2) << "\n";
        return;
      }
      std::cout << "kernel:    " << args->kernel << "\nmachine:   " << machine_name
                << "\nsource:    measured (study " << study.name << ", trial " << best->id.value
                << ")\ninput:     " << task_text(store, study.task_id) << "\nconfig:    ";
      const auto texts = config_texts(store, args->kernel, study.kernel_version, best->config);
      std::cout << texts.config;
      if (!texts.options.empty()) std::cout << "\noptions:   " << texts.options;
      std::cout << "\nobjective: " << objective_text(study, best->result.objective) << "\n";
      for (const auto* said : {&few.other_spaces, &few.other_measurements, &few.note}) {
        if (!said->empty()) std::cout << "note:      " << *said << "\n";
      }
      if (!task) {
        // Times of different inputs do not compare: say when others were measured here.
        std::set<std::int64_t> tasks;
        for (const auto& s : store.list_studies()) {
          if (s.kernel_name == args->kernel && s.machine_id == machine->id &&
              s.direction == direction)
            tasks.insert(s.task_id.value);
        }
        if (tasks.size() > 1) {
          std::cout << "note:      " << tasks.size()
                    << " inputs (tasks) of this kernel were measured here; this is the best of "
                       "all of them. --task N picks one (tunebase studies shows them)\n";
        }
      }
    });
  }
  // --- trials
  {
    struct Args {
      std::string study, db = kDefaultDb;
      bool json = false;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("trials", "History of a study, trial by trial");
    cmd->add_option("--study", args->study, "Study name or id")->required();
    cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
    cmd->add_flag("--json", args->json, "Print JSON: the trials as GET /v1/studies/{id}/trials");
    cmd->callback([args] {
      db::Store store(args->db, {.read_only = true});
      const auto study = resolve_study(store, args->study);
      const auto trials = store.trials(study.id);
      if (args->json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& t : trials) j.push_back(api::trial_json(t));
        std::cout << nlohmann::json{{"study_id", study.id.value},
                                    {"trials", j},
                                    {"failure_reasons", api::failure_reasons_json(store, study.id)}}
                         .dump(2)
                  << "\n";
        return;
      }
      std::cout << "study " << study.name << ": " << study.kernel_name << " on "
                << study.machine_name << ", strategy " << study.strategy << "\n";
      const auto kernel = store.find_kernel(study.kernel_name, study.kernel_version);
      const auto space = kernel ? kernel->space : nlohmann::json();
      std::optional<double> best;
      const bool minimize = study.direction == db::Direction::minimize;
      for (const auto& t : trials) {
        std::string mark = " ";
        if (t.result.ok() &&
            (!best || (minimize ? t.result.objective < *best : t.result.objective > *best))) {
          best = t.result.objective;
          mark = "*";
        }
        // A lease that ended without a result is no evaluation that timed out.
        std::cout << std::setw(5) << t.id.value << " " << mark << " " << std::setw(8)
                  << (t.lease_expired() ? "ended" : to_string(t.result.status)) << "  "
                  << std::setw(12)
                  << (t.result.ok() ? objective_text(study, t.result.objective) : "-") << "  "
                  << config_text(t.config, space);
        if (t.result.status == TrialStatus::pending && t.lease_expires_at) {
          std::cout << "  (leased to " << t.client_id << " until " << *t.lease_expires_at << ")";
        } else if (!t.result.ok() && !t.result.message.empty()) {
          std::cout << "  (" << one_line(t.result.message) << ")";
        }
        std::cout << "\n";
      }
      std::cout << trials.size() << " trials; * marks a new best\n";
      std::cout << failure_reasons_text(failure_breakdown(store.failure_messages(study.id)));
      // What the search learnt: how much each parameter moves the objective.
      api::StudyManager studies(store);
      if (const auto relevance = studies.relevance(study.id); !relevance.empty()) {
        std::cout << "influence: ";
        for (std::size_t i = 0; i < relevance.size(); ++i) {
          const double percent = 100.0 * relevance[i].share;
          std::cout << (i ? ", " : "") << relevance[i].name << " "
                    << (percent < 0.5 ? std::string("<1") : std::to_string(std::lround(percent)))
                    << "%";
        }
        std::cout << " (the study's GP: shares of 1 / lengthscale)\n";
      } else {
        std::cout << "influence: not yet: " << api::no_relevance_reason(store, study.id) << "\n";
      }
    });
  }
  // --- predict
  {
    struct Args {
      std::string study, db = kDefaultDb;
      std::vector<std::string> configs;
      bool json = false;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand(
        "predict", "Forecast configurations of a study from its model (as POST /v1/predict)");
    cmd->add_option("--study", args->study, "Study name or id")->required();
    cmd->add_option("--config", args->configs,
                    "Configuration as JSON, e.g. '{\"block_size\": 64}' (repeatable); parameters "
                    "left out take the space's defaults")
        ->required();
    cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
    cmd->add_flag("--json", args->json, "Print JSON, as POST /v1/predict");
    cmd->callback([args] {
      db::Store store(args->db, {.read_only = true});
      const auto study = resolve_study(store, args->study);
      api::StudyManager studies(store);
      const auto space = studies.space(study.id);
      std::vector<Configuration> configs;
      for (const auto& text : args->configs) {
        // Parameters left out take the space's defaults, so that a configuration can be given
        // by the parameters that apply to it (a PETSc LU solve without gmres_restart).
        const auto given = parse_json_text(text, "--config");
        const auto defaults = space->default_configuration();
        std::string filled;
        for (std::size_t i = 0; i < space->dimension(); ++i) {
          const auto& name = space->parameter(i).name;
          if (given.is_object() && given.contains(name)) continue;
          filled += (filled.empty() ? "" : ", ") + name + "=" + to_string(defaults[i]);
        }
        try {
          configs.push_back(space->config_from_json(given, /*fill_defaults=*/true));
        } catch (const InvalidInput& e) {
          // A default filled in may be what breaks a constraint: say which were.
          if (filled.empty() || !given.is_object()) throw;
          throw InvalidInput(std::string(e.what()) + " (--config " + text +
                             " left out parameters, given the space's defaults: " + filled +
                             "; give them in --config)");
        }
        if (!filled.empty()) {
          std::cerr << "note: --config " << text << " leaves out parameters, given the space's "
                    << "defaults: " << filled << "\n";
        }
      }
      const auto forecasts = studies.predict(study.id, configs);
      if (forecasts.empty()) {
        throw api::too_few_for_a_model(store, study.id);
      }
      nlohmann::json out = nlohmann::json::array();
      for (std::size_t i = 0; i < forecasts.size(); ++i) {
        const auto& f = forecasts[i];
        if (args->json) {
          out.push_back(api::forecast_json(space->config_to_json(configs[i]), f));
          continue;
        }
        std::cout << space->config_text(configs[i]) << "  " << objective_text(study, f.mean)
                  << " (68% interval " << objective_text(study, f.lower) << " .. "
                  << objective_text(study, f.upper) << "), P(runs) " << std::setprecision(2)
                  << f.probability_feasible << "\n";
        if (f.interval_unknown) std::cout << "  note: " << api::kIntervalUnknownNote << "\n";
      }
      if (args->json) {
        std::cout << nlohmann::json{{"study_id", study.id.value},
                                    {"unit", api::unit_json(study)},
                                    {"predictions", out}}
                         .dump(2)
                  << "\n";
      }
    });
  }
  // --- studies
  {
    auto db_path = std::make_shared<std::string>(kDefaultDb);
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("studies", "List the studies in a database");
    cmd->add_option("--db", *db_path, "SQLite database file")->capture_default_str();
    cmd->add_flag("--json", *json, "Print JSON, as GET /v1/studies");
    cmd->callback([db_path, json] {
      db::Store store(*db_path, {.read_only = true});
      if (*json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& s : store.list_studies()) list.push_back(api::study_json(store, s, false));
        std::cout << nlohmann::json{{"studies", list}}.dump(2) << "\n";
        return;
      }
      const auto studies = store.list_studies();
      if (studies.empty()) {
        std::cerr << "no studies in " << *db_path
                  << " yet (tunebase sweep, tunebase import or POST /v1/studies adds them)\n";
      }
      for (const auto& s : studies) {
        const auto counts = store.trial_counts(s.id);
        std::cout << std::setw(4) << s.id.value << "  " << s.name << "  [" << s.kernel_name
                  << " on " << s.machine_name << ", " << task_text(store, s.task_id) << ", "
                  << s.strategy << ", " << counts.total << " trials, " << counts.ok << " ok, "
                  << db::to_string(s.status);
        // How its times were measured, where they depend on more (a PETSc solve's rtol).
        if (const auto m = db::measurement_of(s.settings); !m.empty()) {
          std::cout << ", measured with " << db::measurement_text(m);
        }
        std::cout << "]\n";
      }
    });
  }
  // --- stop
  {
    struct Args {
      std::string study, db = kDefaultDb;
    };
    auto args = std::make_shared<Args>();
    auto* cmd =
        app.add_subcommand("stop",
                           "Stop a study: no more suggestions, results of live leases still taken "
                           "(as POST /v1/studies/{id}/stop)");
    cmd->add_option("--study", args->study, "Study name or id")->required();
    cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
    cmd->callback([args] {
      auto store = database_of_study(args->db, args->study, "stop");
      const auto study = resolve_study(store, args->study);
      // Through the manager, as the server does: a server on the same file reads the new
      // status before its next suggestion.
      api::StudyManager studies(store);
      const bool was_active = study.status == db::StudyStatus::active;
      const auto stopped = studies.stop(study.id);
      std::cout << "study " << stopped.name << " (id " << stopped.id.value << ") "
                << (was_active ? "stopped" : "was already stopped") << "\n";
    });
  }
  // --- delete
  {
    struct Args {
      std::string study, db = kDefaultDb;
      bool force = false;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand(
        "delete",
        "Delete a study and its trials (a mistaken import, a test run), as DELETE "
        "/v1/studies/{id}; refused while the study is active or (without --force) holds live "
        "leases. Irreversible: tunebase backup first");
    cmd->add_option("--study", args->study, "Study name or id")->required();
    cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
    cmd->add_flag("--force", args->force,
                  "End the study's live leases with it (their results are refused then), as "
                  "DELETE /v1/studies/{id}?force=true");
    cmd->callback([args] {
      auto store = database_of_study(args->db, args->study, "delete");
      const auto study = resolve_study(store, args->study);
      const auto deleted = store.delete_study(
          study.id, args->force ? db::Store::LiveLeases::end : db::Store::LiveLeases::refuse);
      std::cout << "deleted study " << study.name << " (id " << study.id.value << ", "
                << study.kernel_name << " on " << study.machine_name << ") and its "
                << deleted.trials << " trials";
      if (deleted.leases_ended > 0) {
        std::cout << ", " << deleted.leases_ended << " of them live leases, ended";
      }
      std::cout << "\n";
    });
  }
  // --- machines
  {
    auto db_path = std::make_shared<std::string>(kDefaultDb);
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("machines", "List the machines in a database");
    cmd->add_option("--db", *db_path, "SQLite database file")->capture_default_str();
    cmd->add_flag("--json", *json, "Print JSON, as GET /v1/machines");
    cmd->callback([db_path, json] {
      db::Store store(*db_path, {.read_only = true});
      if (*json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& m : store.list_machines()) list.push_back(api::machine_json(m));
        std::cout << nlohmann::json{{"machines", list}}.dump(2) << "\n";
        return;
      }
      const auto machines = store.list_machines();
      if (machines.empty()) {
        std::cerr << "no machines in " << *db_path
                  << " yet (tunebase sweep, tunebase import or POST /v1/machines adds them)\n";
      }
      for (const auto& m : machines) {
        // What the machine is: its CPU, or the device its imported or replayed measurements
        // name. Labelled in brackets, as studies lists its details: an imported machine is
        // named after its device, and two unlabelled columns of one name read as a mistake.
        std::string what;
        if (const auto cpu = m.fingerprint.value("cpu_model", std::string()); !cpu.empty()) {
          what = "CPU " + cpu;
        } else if (const auto device = m.fingerprint.value("device_name", std::string());
                   !device.empty()) {
          what = "device " + device;
        }
        std::cout << std::setw(4) << m.id.value << "  " << m.name
                  << (what.empty() ? std::string() : "  [" + what + "]") << "\n";
      }
    });
  }
  // --- backup
  {
    struct Args {
      std::string db = kDefaultDb;
      std::string output;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand(
        "backup",
        "Copy the whole database to a new file, consistently, while servers and sweeps go on "
        "using it (copying the .db file can miss the last results, kept in its -wal file)");
    cmd->add_option("output", args->output, "The new file")->required();
    cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
    cmd->callback([args] {
      if (!std::filesystem::exists(args->db)) {
        throw IoError("no database " + args->db + " to back up");
      }
      db::Store store(args->db, {.read_only = true});
      const auto start = std::chrono::steady_clock::now();
      store.backup(args->output);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      std::cout << "backed up " << args->db << " to " << args->output << " ("
                << std::filesystem::file_size(args->output) << " bytes, "
                << static_cast<int>(took.count() * 1000.0) << " ms)\n";
    });
  }
  // --- export
  {
    struct Args {
      std::string study, db = kDefaultDb, format = "json", output;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand(
        "export",
        "Export a study as JSON, CSV, or a Kernel Tuner cache file (which Kernel Tuner and "
        "tunebase import read)");
    cmd->add_option("--study", args->study, "Study name or id")->required();
    cmd->add_option("--format", args->format,
                    "json, csv, or kernel_tuner (a cache file: times in milliseconds, failures "
                    "as RuntimeFailedConfig..., pending trials left out; a study of another "
                    "objective, such as GFLOP/s, holds it under its name beside the time)")
        ->transform(CLI::IsMember({"json", "csv", "kernel_tuner"}, CLI::ignore_case))
        ->capture_default_str();
    cmd->add_option("--output,-o", args->output, "Output file (default: standard output)");
    cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
    cmd->callback([args] {
      db::Store store(args->db, {.read_only = true});
      const auto study = resolve_study(store, args->study);
      // A page of trials at a time: a study of any size is written without holding it whole.
      db::StudyExport source(store, study.id, db::export_format_from_string(args->format));
      auto write_all = [&source](std::ostream& out) {
        std::string piece;
        while (out && source.next(piece)) {
          out << piece;
          piece.clear();
        }
        return static_cast<bool>(out.flush());
      };
      // Which field holds the objective, when a cache's is no time.
      const auto note = [&source] {
        if (const auto text = source.note(); !text.empty()) std::cerr << "note: " << text << "\n";
      };
      if (args->output.empty()) {
        if (!write_all(std::cout)) throw IoError("cannot write standard output");
        note();
        return;
      }
      namespace fs = std::filesystem;
      // Never over the database being read (or its journal files): that would empty it.
      for (const auto& file : {args->db, args->db + "-wal", args->db + "-shm"}) {
        std::error_code same;
        if (fs::equivalent(args->output, file, same)) {
          throw InvalidInput("--output " + args->output + " is the database " + file +
                             "; write the export to another file");
        }
      }
      OutputFile file(args->output);
      if (!write_all(file.stream())) {
        throw IoError("cannot write " + args->output + ": " + std::strerror(errno));
      }
      file.commit();
      note();
    });
  }
  // --- import
  {
    struct Args {
      std::string file, db = kDefaultDb, machine, kernel, study, input;
      std::vector<std::string> formats;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand(
        "import",
        "Store a Kernel Tuner cache (.json/.json.gz) or T4 file as measurements, or a table of "
        "SpMV times per format (.csv, Ginkgo's: kernel spmv_format, one study per matrix)");
    cmd->add_option("--study", args->study,
                    "Name of the new study (default: \"import KERNEL on MACHINE (task N)\")");
    cmd->add_option("file", args->file, "The file to import")->required();
    cmd->add_option("--machine", args->machine,
                    "Machine name (default: the file's device; a .csv's name without .csv)");
    cmd->add_option("--kernel", args->kernel,
                    "Kernel name (default: the file's kernel_name; T4 files have none; a .csv's: "
                    "spmv_format)");
    cmd->add_option("--input", args->input,
                    "The input the measurements are of, as JSON, e.g. '{\"problem_size\": "
                    "[4096, 4096]}' (default: the file's problem_size; T4 files name none)");
    cmd->add_option("--formats", args->formats,
                    "A .csv's format columns to import (comma-separated, default all): machines "
                    "imported with the same formats share one space, so their measurements "
                    "transfer (e.g. csr,coo,ell,sellp,hybrid, the formats every Ginkgo file has)")
        ->delimiter(',');
    cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
    cmd->callback([args] {
      if (!args->formats.empty() && !is_spmv_table(args->file)) {
        throw InvalidInput("--formats selects the format columns of an SpMV table (.csv); " +
                           args->file + " is not one");
      }
      if (is_spmv_table(args->file)) {
        if (!args->study.empty() || !args->input.empty()) {
          throw InvalidInput(
              "an SpMV table (.csv) is filed as one study per matrix, its input the matrix: "
              "--study and --input do not apply; give --kernel and --machine only");
        }
        db::Store store(args->db);
        import_spmv_table(store, args->file, args->machine, args->kernel, args->formats);
        return;
      }
      const auto dataset = read_measurements(args->file);
      db::Store store(args->db);
      db::ImportOptions options;
      options.machine_name = args->machine;
      options.kernel_name = args->kernel;
      if (!args->input.empty()) {
        options.input = parse_json_text(args->input, "--input", DuplicateKeys::refuse);
      }
      if (!args->study.empty()) {
        db::check_study_name(args->study);
        options.study_name = args->study;
      }
      const auto result = store.import_dataset(dataset, options);
      for (const auto& note : dataset.notes)
        std::cerr << "note: " << args->file << ": " << note << "\n";
      for (const auto& note :
           api::import_notes(result, options.input.has_value(), !dataset.task().empty(), "--kernel",
                             "--input '{\"problem_size\": [...]}'")) {
        std::cerr << "note: " << note << "\n";
      }
      if (result.imported_before()) {
        std::cout << "nothing new: study " << result.study.value << " holds all "
                  << result.already_stored << " measurements of this file (" << result.kernel_name
                  << " on " << result.machine_name << "), with the same results"
                  << (result.input_added ? "; its input, unknown before, is now task " +
                                               std::to_string(result.task.value) + " " +
                                               store.get_task(result.task).description.dump()
                                         : std::string())
                  << "\n";
        return;
      }
      if (result.already_stored > 0) {
        std::cout << "added " << result.trials << " new trials (" << result.failed << " failed) of "
                  << result.kernel_name << " on " << result.machine_name << " to study "
                  << result.study.value << ", which held the other " << result.already_stored
                  << " with the same results\n";
        return;
      }
      std::cout << "imported " << result.trials << " trials (" << result.failed << " failed) of "
                << result.kernel_name << " on " << result.machine_name << " as study "
                << result.study.value << "\n";
    });
  }
}

}  // namespace tunebase::cli
