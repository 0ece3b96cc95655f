#include "apps/sweep.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <thread>

#include "api/priors.h"
#include "api/records_json.h"
#include "apps/cli.h"
#include "apps/evaluators.h"
#include "core/error.h"
#include "core/json.h"
#include "core/measurements.h"
#include "db/json_text.h"
#include "db/sqlite.h"
#include "kernels/petsc_solver.h"
#include "kernels/replay.h"
#include "tuner/session.h"

namespace tunebase::cli {

std::atomic<bool> g_waiting_for_database{false};
std::atomic<bool> g_stop_waiting{false};

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

namespace {

constexpr int kProgressBarWidth = 24;
// How long a sweep holds the configuration it evaluates (as a worker's default lease): when the
// process dies, a server sharing the study proposes it again after this.
constexpr double kSweepLeaseSeconds = 3600.0;
// How long a measured result waits for a database another writer holds.
constexpr std::chrono::minutes kStoreResultPatience{10};

// This process's pid namespace ("pid:[4026531836]"): a pid means this process only among
// processes of the same namespace (containers sharing a host name do not).
std::string pid_namespace() {
  char buf[64] = {};
  const auto n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// The part of a sweep's client id after its pid: the pid namespace, when known.
std::string namespace_suffix() {
  const auto ns = pid_namespace();
  return ns.empty() ? std::string() : " " + ns;
}

// The client ids of this host's sweeps: prefix + pid + suffix.
struct LocalSweeps {
  std::string prefix = "sweep@" + host_name() + ":";
  std::string suffix = namespace_suffix();

  // The process id of a sweep of this host and pid namespace from its client id; none for
  // other clients (and for sweeps whose namespace this process cannot tell).
  std::optional<pid_t> pid_of(std::string_view client_id) const;
};

std::optional<pid_t> LocalSweeps::pid_of(std::string_view client_id) const {
  if (suffix.empty() || !client_id.starts_with(prefix) || !client_id.ends_with(suffix)) {
    return std::nullopt;
  }
  const auto digits =
      client_id.substr(prefix.size(), client_id.size() - prefix.size() - suffix.size());
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) return std::nullopt;
  return pid;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(seconds, 0.0)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

class ProgressBar {
 public:
  ProgressBar(std::size_t total, bool enabled)
      : total_(total),
        enabled_(enabled),
        tty_(isatty(STDERR_FILENO) != 0),
        start_(std::chrono::steady_clock::now()) {}

  void update(std::size_t done, std::size_t done_here, const std::string& best) {
    if (!enabled_) return;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double per_eval = done_here ? elapsed / static_cast<double>(done_here) : 0.0;
    const double left = per_eval * static_cast<double>(total_ > done ? total_ - done : 0);
    const int filled = total_ ? static_cast<int>(kProgressBarWidth * done / total_) : 0;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kProgressBarWidth, '.');
    char line[256];
    std::snprintf(line, sizeof line, "[%s] %zu/%zu  best %s  elapsed %s  left %s", bar.c_str(),
                  done, total_, best.c_str(), format_duration(elapsed).c_str(),
                  format_duration(left).c_str());
    if (tty_) {
      std::cerr << "\r" << line << "\033[K" << std::flush;
    } else {
      std::cerr << line << "\n";
    }
  }
  void finish() {
    if (enabled_ && tty_) std::cerr << "\n";
  }
  /// The budget changed meanwhile (POST /v1/studies/{id}/resume): the bar counts to it.
  void set_total(std::size_t total) { total_ = total; }

 private:
  std::size_t total_;
  bool enabled_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

// {"transfer": ..., "prior_machines": [...]}: how a study chooses its priors, as stored.
nlohmann::json transfer_settings(const SweepOptions& options) {
  nlohmann::json settings{{"transfer", options.transfer}};
  if (!options.prior_machines.empty()) settings["prior_machines"] = options.prior_machines;
  return settings;
}

// "420 x 420 with 7860 nonzeros", from a matrix's features.
std::string matrix_shape(const nlohmann::json& features) {
  const auto number = [&](const char* key) {
    if (!features.contains(key) || !features[key].is_number()) return std::string("?");
    return std::to_string(std::llround(features[key].get<double>()));
  };
  return number("rows") + " x " + number("cols") + " with " + number("nnz") + " nonzeros";
}

// The study --study gives, by name or id as every command takes it, when it exists; a name
// that is not stored names a new study.
std::optional<db::StudyRecord> named_study(const db::Store& store, const std::string& study) {
  if (study.empty()) return std::nullopt;
  if (!is_study_id(study)) {
    db::check_study_name(study);
    return store.find_study(study);
  }
  try {
    return resolve_study(store, study);
  } catch (const NotFound&) {
    // As before ids were taken here: digits name no new study.
    throw InvalidInput("no study has id " + study + " in " + store.path() +
                       " (tunebase studies lists them): sweep --study resumes a study by its id "
                       "or name, and a new study's name of digits only would read as a study "
                       "id; add a letter");
  }
}

// The study --study gives, checked to tune the same kernel, machine and input.
std::optional<db::StudyRecord> check_same_target(const db::Store& store,
                                                 std::optional<db::StudyRecord> existing,
                                                 const db::KernelRecord& kernel,
                                                 const db::MachineRecord& machine,
                                                 const db::TaskRecord& task) {
  if (existing && (existing->kernel_id != kernel.id || existing->machine_id != machine.id ||
                   existing->task_id != task.id)) {
    // Say which differs: a PETSc study resumed on another matrix is another input.
    std::vector<std::string> differs;
    if (existing->kernel_name != kernel.name) {
      differs.push_back("kernel " + existing->kernel_name + ", not " + kernel.name);
    } else if (existing->kernel_id != kernel.id) {
      differs.push_back("another search space");
    }
    if (existing->machine_id != machine.id) {
      differs.push_back("machine " + existing->machine_name + ", not " + machine.name);
    }
    // Tasks belong to a kernel: another kernel's input differs whatever it is.
    if (existing->task_id != task.id && existing->kernel_name == kernel.name) {
      // A matrix by its name (and shape, when both have one name); another input by the start
      // of its description.
      const auto stored_task = store.get_task(existing->task_id);
      const bool one_name =
          stored_task.description.contains("matrix") &&
          stored_task.description.value("matrix", "") == task.description.value("matrix", "");
      const auto input = [&](const db::TaskRecord& t) {
        if (t.description.contains("matrix") && t.description["matrix"].is_string()) {
          return "matrix " + t.description["matrix"].get<std::string>() +
                 (one_name ? " (" + matrix_shape(api::task_features_of(t)) + ")" : "");
        }
        constexpr std::size_t kShown = 60;
        auto text = t.description.dump();
        return text.size() > kShown ? text.substr(0, kShown) + "..." : text;
      };
      // A command's input, unless given, is its command line: say so, as it surprises.
      differs.push_back("input " + input(stored_task) + ", not " + input(task) +
                        (task.description.contains("command")
                             ? " (a command's input includes its command line)"
                             : ""));
    }
    std::string what;
    for (const auto& d : differs) what += (what.empty() ? "" : "; ") + d;
    throw Conflict("study '" + existing->name + "' (id " + std::to_string(existing->id.value) +
                   ") tunes " + existing->kernel_name + " on " + existing->machine_name + " with " +
                   what + "; choose another --study name");
  }
  return existing;
}

// An input is known by its description (a matrix by its file's name): another matrix stored
// under a measured name would mix two inputs' measurements in one task, and in its studies.
void check_same_input(db::Store& store, const std::string& kernel,
                      const nlohmann::json& description, const nlohmann::json& features) {
  const auto name = description.find("matrix");
  if (name == description.end() || !name->is_string()) return;
  // A kernel's input may hold the matrix's features in its description (PETSc's) or apart.
  db::TaskRecord input;
  input.description = description;
  input.features = features;
  const auto input_features = api::task_features_of(input);
  std::optional<db::TaskRecord> other;
  for (const auto& t : store.list_tasks(kernel)) {
    if (t.description.value("matrix", "") != *name) continue;
    const auto stored = api::task_features_of(t);
    if (stored.empty() || input_features.empty() || stored == input_features) return;
    if (!other) other = t;
  }
  if (!other) return;
  const auto stored = api::task_features_of(*other);
  const auto matrix = name->get<std::string>();
  const bool same_shape = matrix_shape(stored) == matrix_shape(input_features);
  throw Conflict("matrix " + matrix + " is not the matrix " + matrix +
                 " measured before in this database (task " + std::to_string(other->id.value) +
                 ": " + matrix_shape(stored) + "; this one: " + matrix_shape(input_features) +
                 (same_shape ? ", other values of its features" : "") +
                 "): an input is known by its file's name, so rename the file to measure it as "
                 "another input");
}

// A resumed study keeps what its objective means: the direction and the unit it was measured
// in. A command's --maximize and --unit only say what its number is, so they must agree.
void check_same_objective(const db::StudyRecord& study, bool minimize, const std::string& unit) {
  const auto differs = objective_mismatch(study.direction == db::Direction::minimize,
                                          db::objective_unit(study), minimize, unit);
  if (differs.empty()) return;
  throw Conflict("study '" + study.name + "' cannot be resumed as given: " + differs +
                 " (or choose another --study name for a new study)");
}

// A resumed study keeps how its objective was measured (a PETSc solve's tolerances and clock).
void check_same_measurement(const db::StudyRecord& study, const Evaluator& evaluator) {
  const auto differs = measurement_mismatch(study.settings, evaluator, "sweep");
  if (differs.empty()) return;
  throw Conflict("study '" + study.name + "' cannot be resumed as given: " + differs +
                 " (or choose another --study name for a new study)");
}

db::StudyRecord create_study(db::Store& store, const SweepOptions& options,
                             const db::KernelRecord& kernel, const db::MachineRecord& machine,
                             const db::TaskRecord& task, bool minimize, const std::string& strategy,
                             const std::string& unit, const nlohmann::json& measurement,
                             std::size_t budget) {
  db::NewStudy study;
  study.name = options.study_name;
  study.kernel = kernel.id;
  study.machine = machine.id;
  study.task = task.id;
  study.direction = minimize ? db::Direction::minimize : db::Direction::maximize;
  study.objective = default_objective_name(unit, minimize);
  study.strategy = strategy;
  study.budget = static_cast<std::int64_t>(budget);
  study.settings = transfer_settings(options);
  study.settings["seed"] = options.seed.value_or(0);
  study.settings["unit"] = unit;
  study.settings["strategy_options"] = options.strategy_options.value_or(nlohmann::json::object());
  if (!measurement.empty()) study.settings["measurement"] = measurement;
  return store.create_study(study);
}

// The budget of a new study: --budget, else every configuration for exhaustive (as Kernel
// Tuner's brute_force measures the whole space), else kDefaultSweepBudget. An exhaustive search
// given a smaller budget says how much of the space it leaves out.
std::size_t new_study_budget(const SweepOptions& options, const std::string& strategy,
                             const Evaluator& evaluator, const SearchSpace& space) {
  if (strategy != "exhaustive") return options.budget.value_or(kDefaultSweepBudget);
  const auto* candidates = evaluator.candidates();
  const std::size_t all = candidates ? candidates->size() : space.valid_count().value_or(0);
  if (!options.budget) return std::clamp<std::size_t>(all, 1, kMaxBudget);
  if (*options.budget < all) {
    std::cerr << "note: exhaustive measures " << *options.budget << " of the " << all
              << (candidates ? " configurations the file holds" : " valid configurations")
              << " (--budget " << *options.budget << "); without --budget it measures all\n";
  }
  return *options.budget;
}

// A sweep without --study creates a new study each time, and measures everything again: a user
// who ran it before (and interrupted it) expects it to go on. Say which study it would go on
// with: the newest active one of the same kernel version, machine and input.
void note_active_study_of_this_sweep(const db::Store& store, const db::KernelRecord& kernel,
                                     const db::StudyRecord& created) {
  std::optional<db::StudyRecord> newest;
  for (const auto& s : store.list_studies(kernel.name)) {
    if (s.id == created.id || s.status != db::StudyStatus::active ||
        s.kernel_id != created.kernel_id || s.machine_id != created.machine_id ||
        s.task_id != created.task_id) {
      continue;
    }
    if (!newest || s.id.value > newest->id.value) newest = s;
  }
  if (!newest) return;
  const auto trials = store.trial_counts(newest->id).results();
  std::cerr << "note: study '" << newest->name << "' (id " << newest->id.value
            << ") of this kernel, machine and input is active with " << trials
            << (trials == 1 ? " trial" : " trials") << "; tunebase sweep --study '" << newest->name
            << "' resumes it\n";
}

// The options a resumed study is swept with: its own seed and choice of priors. A given option
// that differs is noted, and applies to new studies (as --strategy does).
SweepOptions kept_by_study(const db::StudyRecord& study, SweepOptions options) {
  const auto& stored = study.settings;
  const std::string name = "note: study '" + study.name + "' keeps ";
  if (const auto it = stored.find("seed"); it != stored.end() && it->is_number_unsigned()) {
    const auto seed = it->get<std::uint64_t>();
    if (options.seed && *options.seed != seed) {
      std::cerr << name << "its seed " << seed << "; --seed applies to new studies\n";
    }
    options.seed = seed;
  }
  if (const auto it = stored.find("transfer"); it != stored.end() && it->is_boolean()) {
    const bool transfer = it->get<bool>();
    if (transfer && !options.transfer) {
      std::cerr << name
                << "learning from other machines' and inputs' measurements; --no-transfer "
                   "applies to new studies\n";
    }
    if (!transfer && !options.prior_files.empty()) {
      std::cerr << name << "to its own measurements (it was started with --no-transfer); --prior "
                << "applies to new studies\n";
    }
    options.transfer = transfer;
  }
  const auto machines = stored.value("prior_machines", std::vector<std::string>{});
  if (!options.prior_machines.empty() && options.prior_machines != machines) {
    std::cerr << name
              << (!options.transfer  ? std::string("to its own measurements (it was started with "
                                                    "--no-transfer)")
                  : machines.empty() ? std::string("its priors from every machine")
                                     : "its priors from " + nlohmann::json(machines).dump())
              << "; --prior-machine applies to new studies\n";
  }
  options.prior_machines = machines;
  return options;
}

// The budget a sweep works to. The budget is the study's, shared with every process working on
// it (a server's workers read it too): a resumed study keeps it unless --budget is given, which
// then replaces it.
std::size_t sweep_budget(db::Store& store, const db::StudyRecord& study,
                         const SweepOptions& options) {
  const std::string name = "study '" + study.name + "'";
  if (!options.budget) {
    if (study.budget) return static_cast<std::size_t>(*study.budget);
    std::cerr << "note: " << name << " has no budget; this sweep stops at " << kDefaultSweepBudget
              << " evaluations (give --budget to set one)\n";
    return kDefaultSweepBudget;
  }
  const auto budget = static_cast<std::int64_t>(*options.budget);
  if (const auto used = store.budget_used(study.id); budget < used) {
    throw InvalidInput("--budget " + std::to_string(budget) + " is below the " +
                       std::to_string(used) + " trials " + name +
                       " already counts (stored or leased): give at least " + std::to_string(used) +
                       ", or leave --budget out to keep its budget" +
                       (study.budget ? " of " + std::to_string(*study.budget) : std::string()));
  }
  if (study.budget != budget) {
    store.set_study_budget(study.id, budget);
    std::cerr << "note: " << name << " now has a budget of " << budget << " evaluations (was "
              << (study.budget ? std::to_string(*study.budget) : std::string("unlimited"))
              << "), as --budget says\n";
  }
  return *options.budget;
}

}  // namespace

void refuse_prior_of_the_target(const ReplayEvaluator& target, const SearchSpace& space,
                                bool space_differs, const Prior& prior, const std::string& file,
                                const std::string& target_name) {
  std::size_t both = 0;
  std::size_t identical = 0;
  for (const auto& o : prior.observations) {
    if (!o.result.ok()) continue;
    const auto m = space_differs ? target.lookup_json(space.config_to_json(o.config))
                                 : target.lookup(o.config);
    if (!m.ok()) continue;
    ++both;
    identical += m.objective == o.result.objective ? 1 : 0;
  }
  if (both > 0 && identical * 10 >= both * 9) {
    throw InvalidInput("--prior " + file + " holds " + target_name + "'s own measurements (" +
                       std::to_string(identical) + " of the " + std::to_string(both) +
                       " configurations both measured have the same time): a prior comes from "
                       "another machine or input");
  }
}

std::string busy_machine_note(double load_average, unsigned cores) {
  cores = std::max(1u, cores);
  if (!(load_average >= 0.5 * cores)) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", load_average);
  return "note: the machine is busy (load average " + std::string(text) +
         " over the last minute, " + std::to_string(cores) +
         " cores): measurements may be slow and noisy, most of all with several threads; a "
         "quieter machine gives truer rankings";
}

DefaultOrigin default_origin(const SearchSpace& space) {
  std::size_t declared = 0;
  bool real_undeclared = false;
  for (const auto& p : space.parameters()) {
    declared += p.default_declared ? 1 : 0;
    real_undeclared = real_undeclared || (!p.default_declared && !p.is_discrete());
  }
  const std::string real_middle = " (a real one the middle of its range, geometric on a log scale)";
  const std::string first =
      "first value of each parameter" + (real_undeclared ? real_middle : std::string());
  if (declared == space.dimension()) return {"declared", "the space's declared defaults"};
  if (declared == 0) return {"first_values", first + ": the space declares no defaults"};
  const bool one_left = space.dimension() - declared == 1;
  return {"partly_declared",
          "the space declares defaults for " + std::to_string(declared) + " of its " +
              std::to_string(space.dimension()) + " parameters, " +
              (one_left ? "the other takes its first value" : "the others take their first value") +
              (real_undeclared ? real_middle : std::string())};
}

std::optional<double> SweepSummary::speedup() const {
  if (!best || !default_result || !default_result->result.ok()) return std::nullopt;
  const double b = best->result.objective;
  const double d = default_result->result.objective;
  if (!(b > 0.0 && d > 0.0)) return std::nullopt;  // a ratio of signed values means nothing
  return minimize ? d / b : b / d;
}

std::string measurement_mismatch(const nlohmann::json& study_settings, const Evaluator& evaluator,
                                 const std::string& command) {
  const auto measurement = evaluator.measurement_settings();
  const auto stored = db::measurement_of(study_settings);
  if (stored == measurement) return "";
  if (stored.empty()) {
    if (measurement == evaluator.default_measurement_settings()) return "";
    return "it keeps no measurement settings, so its trials were measured with the defaults (" +
           db::measurement_text(evaluator.default_measurement_settings()) + "), and this " +
           command + " measures with " + db::measurement_text(measurement) +
           ": leave out the options that change them (for petsc --rtol, --max-it and --cpu-time)";
  }
  if (measurement.empty()) {
    return "its trials are measured with " + db::measurement_text(stored) +
           " (the \"measurement\" it was created with), and this " + command + "'s kernel " +
           evaluator.kernel_name() + " keeps no such settings";
  }
  return "its trials were measured with " + db::measurement_text(stored) + ", this " + command +
         " measures with " + db::measurement_text(measurement) +
         ": give the options the study was made with (for petsc --rtol, --max-it and --cpu-time)";
}

std::string objective_mismatch(bool study_minimizes, const std::string& study_unit, bool minimize,
                               const std::string& unit) {
  std::vector<std::string> differs;
  if (study_minimizes != minimize) {
    differs.push_back(study_minimizes ? "it minimizes its objective: leave out --maximize"
                                      : "it maximizes its objective: add --maximize");
  }
  // A study created without a unit (over the API) takes numbers in any.
  if (!study_unit.empty() && study_unit != unit) {
    differs.push_back("its objective is in " + study_unit + ": give --unit " + study_unit);
  }
  std::string what;
  for (const auto& d : differs) what += (what.empty() ? "" : "; ") + d;
  return what;
}

std::string format_objective(double value, const std::string& unit) {
  if (unit == "s") return format_seconds(value);
  if (unit == "ms") return format_seconds(value * 1e-3);
  if (unit == "us") return format_seconds(value * 1e-6);
  if (unit == "ns") return format_seconds(value * 1e-9);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  return unit.empty() ? std::string(buf) : buf + (" " + unit);
}

std::string kernel_options_text(const std::string& kernel, const SearchSpace& space,
                                const nlohmann::json& config) {
  if (kernel != "petsc") return {};
  std::string out;
  try {
    for (const auto& [name, value] : petsc_options(space, space.config_from_json(config))) {
      out += (out.empty() ? "" : " ") + name + (value.empty() ? "" : " " + value);
    }
  } catch (const InvalidInput&) {
    return {};  // a space edited since: the parameters say it all
  }
  return out;
}

std::string format_seconds(double s) {
  char buf[32];
  if (!std::isfinite(s)) return "n/a";
  if (s <= 0.0)  // not a duration: the number as it is
    std::snprintf(buf, sizeof buf, "%.6g s", s);
  else if (s < 1e-6)
    std::snprintf(buf, sizeof buf, "%.1f ns", s * 1e9);
  else if (s < 1e-3)
    std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  else if (s < 1.0)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else if (s < 1e6)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else  // %.3f of 1e300 would be 300 digits, cut to 31
    std::snprintf(buf, sizeof buf, "%.4g s", s);
  return buf;
}

nlohmann::json parse_strategy_options(const std::string& text, const std::string& option) {
  auto options = parse_json_text(text, option);
  if (!options.is_object()) {
    throw InvalidInput(option + " must be a JSON object of strategy options, e.g. " +
                       R"('{"initial_design": 10}', got )" + text);
  }
  return options;
}

std::string sweep_client_id() {
  const LocalSweeps local;
  return local.prefix + std::to_string(getpid()) + local.suffix;
}

// Whether process `pid` of this pid namespace has ended: none by that id (kill(pid, 0) fails
// with ESRCH; EPERM: it runs as another user), or one that exited and waits for its parent to
// read its status (a zombie: state Z in /proc/PID/stat, after the command name in parentheses).
bool process_ended(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'Z';
}

std::size_t release_leases_of_ended_sweeps(db::Store& store, db::StudyId study) {
  db::TrialRange pending;
  pending.status = TrialStatus::pending;
  const LocalSweeps local;
  std::size_t released = 0;
  for (const auto& t : store.trials(study, pending)) {
    const auto pid = local.pid_of(t.client_id);
    // A reused pid keeps the lease until it expires, as before.
    if (!pid || !process_ended(*pid)) continue;
    store.release_lease(t.id, "its sweep (process " + std::to_string(*pid) +
                                  " of this host) ended before it reported one");
    ++released;
  }
  return released;
}

namespace {

// While another writer holds the database past SQLite's own wait (an sqlite3 shell, a long
// import), a sweep's write is tried again, saying so once, for up to kStoreResultPatience:
// giving up would end the sweep (and lose a measurement already paid for, which may have
// taken minutes). Past that the error is thrown, with `on_give_up()` appended.
// A second interrupt ends the wait sooner, with the same error.
template <class Write, class Text>
auto write_waiting(const std::string& doing, Write write, Text on_give_up) {
  const auto give_up = std::chrono::steady_clock::now() + kStoreResultPatience;
  struct Waiting {
    Waiting() { g_waiting_for_database = true; }
    ~Waiting() { g_waiting_for_database = false; }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;
  } const waiting;
  for (bool said = false;; said = true) {
    try {
      return write();
    } catch (const db::SqliteError& e) {
      if (!e.busy()) throw;
      if (std::chrono::steady_clock::now() >= give_up || g_stop_waiting) {
        throw StorageError(std::string(e.what()) + on_give_up());
      }
      if (!said) {
        std::cerr << "\nnote: " << e.what() << "; trying again " << doing << " for up to "
                  << std::chrono::duration_cast<std::chrono::minutes>(kStoreResultPatience).count()
                  << " minutes\n";
      }
      const auto next_try = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (!g_stop_waiting && std::chrono::steady_clock::now() < next_try) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
}

template <class Write>
auto write_waiting(const std::string& doing, Write write) {
  return write_waiting(doing, write, [] { return std::string(); });
}

// The error past the wait names the measurement, so that it can be stored by hand.
void complete_trial_waiting(db::Store& store, db::TrialId trial, const std::string& config_text,
                            const Measurement& m) {
  write_waiting(
      "to store the result of trial " + std::to_string(trial.value),
      [&] { store.complete_trial(trial, m); },
      [&] {
        return "; the result of trial " + std::to_string(trial.value) + " " + config_text +
               " was not stored: " +
               (m.ok() ? "objective " + nlohmann::json(m.objective).dump()
                       : std::string(to_string(m.status)) + " (" + m.message + ")");
      });
}

void note_busy_machine() {
  double load[1] = {0.0};
  if (getloadavg(load, 1) != 1) return;
  const auto note = busy_machine_note(load[0], std::thread::hardware_concurrency());
  if (!note.empty()) std::cerr << note << "\n";
}

}  // namespace

void note_leases_taken_back(std::size_t n) {
  if (n == 0) return;
  std::cerr << "note: took back " << n << (n == 1 ? " lease of a sweep" : " leases of sweeps")
            << " of this host that ended without a result; proposed again\n";
}

SweepSummary run_sweep(Evaluator& evaluator, db::Store& store, const SweepOptions& options) {
  const auto& space = evaluator.space();

  // Resolved first: an unknown id changes nothing in the database.
  const auto named = named_study(store, options.study_name);
  if (!options.transfer && (!options.prior_files.empty() || !options.prior_machines.empty())) {
    throw InvalidInput(
        "--prior and --prior-machine choose what transfer learns from; with --no-transfer "
        "nothing is, so give one or the other");
  }
  api::require_prior_machines(store, options.prior_machines);
  const auto machine = [&] {
    const auto info = results_machine(evaluator, options.machine_name);
    if (evaluator.measured_on()) {
      if (auto known = store.find_machine(info.name)) return *known;  // keep its fingerprint
    }
    return store.upsert_machine(info);
  }();
  const auto kernel = store.upsert_kernel(evaluator.kernel_name(), space);
  nlohmann::json description = evaluator.task();
  nlohmann::json features = nlohmann::json::object();
  if (description.contains("features")) {
    features = description["features"];
    description.erase("features");
  }
  check_same_input(store, kernel.name, description, features);
  const auto task = store.upsert_task(kernel.name, description, features);

  // A resumed study is searched as it was: with its seed and its choice of priors.
  const auto resumed = check_same_target(store, named, kernel, machine, task);
  if (resumed) {
    check_same_objective(*resumed, evaluator.minimize(), evaluator.objective_unit());
    check_same_measurement(*resumed, evaluator);
  }
  const SweepOptions chosen = resumed ? kept_by_study(*resumed, options) : options;

  // Priors: other machines' and tasks' measurements of this kernel version, and files.
  std::vector<Prior> priors;
  const auto direction = evaluator.minimize() ? db::Direction::minimize : db::Direction::maximize;
  // Of studies measured as this one is (a PETSc solve's tolerance and clock), as the study keeps.
  auto prior_settings = transfer_settings(chosen);
  prior_settings["measurement"] = evaluator.measurement_settings();
  if (const auto query = api::target_prior_query(
          kernel, machine.id, task.id,
          default_objective_name(evaluator.objective_unit(), evaluator.minimize()), direction,
          prior_settings)) {
    api::load_fitted_models(store);
    priors = api::priors_from_store(store, space, *query);
  }
  // Prior files are read as times; a replay of another objective (--objective GFLOP/s) would
  // learn from the wrong measure.
  if (!options.prior_files.empty() && evaluator.measured_on() &&
      !is_time_unit(evaluator.objective_unit())) {
    throw InvalidInput("--prior files are read as times (lower is better), and the replay tunes " +
                       evaluator.objective_unit() + ": leave out --prior or --objective");
  }
  if (chosen.transfer) {
    for (const auto& file : options.prior_files) {
      priors.push_back(load_prior(file, space));
      // Replayed with its own measurements as a prior, a file would find its optimum at once.
      if (const auto* replay = dynamic_cast<const ReplayEvaluator*>(&evaluator)) {
        refuse_prior_of_the_target(*replay, space, false, priors.back(), file, "the replayed file");
      }
    }
  }
  // Measurements transfer within one space; say why others' were not used.
  if (chosen.transfer && priors.empty()) {
    // Said only when the space is the reason: with studies of this space elsewhere, the
    // reason is --prior-machine, or that none of them succeeded.
    std::size_t other_spaces = 0;
    std::size_t this_space = 0;
    std::size_t measured_otherwise = 0;  // of this space's
    std::string difference;              // from the latest study of other parameters
    std::string other_settings;          // of the latest study measured otherwise
    const std::string parameters = space.parameters_fingerprint();
    const auto measurement = evaluator.measurement_settings();
    for (const auto& s : store.list_studies(kernel.name)) {
      // A study of this machine and input is never a prior, whatever its space.
      if (s.machine_id == machine.id && s.task_id == task.id) continue;
      const auto other = store.find_kernel(kernel.name, s.kernel_version);
      if (!other || SearchSpace::parameters_fingerprint(other->space) == parameters) {
        ++this_space;
        if (const auto theirs = db::measurement_of(s.settings); theirs != measurement) {
          ++measured_otherwise;
          other_settings = db::measurement_text(theirs);
        }
        continue;
      }
      ++other_spaces;
      difference = space.parameters_difference(SearchSpace::from_json(other->space));
    }
    if (this_space > 0 && measured_otherwise == this_space) {
      std::cerr << "note: no priors: the " << this_space << " other "
                << (this_space == 1 ? "study" : "studies") << " of " << kernel.name
                << (this_space == 1 ? " was" : " were") << " measured with other settings ("
                << (this_space == 1 ? "" : "the latest: ") << other_settings
                << ") than this sweep (" << db::measurement_text(measurement)
                << "), and measurements transfer only between studies measured alike\n";
    }
    if (other_spaces > 0 && this_space == 0) {
      std::cerr << "note: no priors: the " << other_spaces << " other "
                << (other_spaces == 1 ? "study" : "studies") << " of " << kernel.name
                << " searched another space (" << (other_spaces == 1 ? "" : "the latest: ")
                << difference
                << "), and measurements transfer only between spaces of the same parameters and "
                   "values, whatever their restrictions\n";
    }
  }
  // A resumed study keeps its strategy and options, and one left to its default (made over
  // the API without a strategy) follows the priors there are now, as a server does; an
  // imported one has none of its own (its strategy is "import"), so it is searched as a new
  // study would be.
  const bool keeps_strategy = resumed && resumed->strategy != "import";
  const bool follows_default = keeps_strategy && resumed->settings.is_object() &&
                               resumed->settings.value("strategy_default", false);
  const std::string strategy = follows_default            ? default_strategy(!priors.empty())
                               : keeps_strategy           ? resumed->strategy
                               : options.strategy.empty() ? default_strategy(!priors.empty())
                                                          : options.strategy;
  const auto strategy_options =
      keeps_strategy ? resumed->settings.value("strategy_options", nlohmann::json::object())
                     : options.strategy_options.value_or(nlohmann::json::object());
  // An unknown name or option, or a search the space does not allow, fails before anything
  // is stored or changed.
  (void)make_strategy(strategy, strategy_options);
  if (!keeps_strategy) require_own_options(strategy, strategy_options);
  if (!evaluator.candidates()) require_searchable(strategy, space);
  const auto study =
      resumed ? *resumed
              : create_study(store, options, kernel, machine, task, evaluator.minimize(), strategy,
                             evaluator.objective_unit(), evaluator.measurement_settings(),
                             new_study_budget(options, strategy, evaluator, space));
  const std::size_t budget =
      resumed ? sweep_budget(store, study, options) : static_cast<std::size_t>(*study.budget);
  if (!resumed) note_active_study_of_this_sweep(store, kernel, study);
  if (follows_default && strategy != study.strategy) {
    write_waiting("to store the study's strategy",
                  [&] { store.set_study_strategy(study.id, strategy); });
    std::cerr << "note: study '" << study.name << "' now searches with " << strategy << " (was "
              << study.strategy << "): its strategy follows its priors\n";
  }

  if (keeps_strategy && !options.strategy.empty() && options.strategy != strategy) {
    std::cerr << "note: study '" << study.name << "' keeps its strategy " << strategy
              << "; --strategy " << options.strategy << " applies to new studies\n";
  }
  if (keeps_strategy && options.strategy_options && *options.strategy_options != strategy_options) {
    std::cerr << "note: study '" << study.name << "' keeps its strategy options "
              << strategy_options.dump() << "; --options applies to new studies\n";
  }
  if (resumed && !keeps_strategy) {
    std::cerr << "note: study '" << study.name << "' was imported: its search goes on with "
              << strategy << "\n";
  }

  SessionOptions session_options;
  session_options.strategy = strategy;
  session_options.strategy_options = strategy_options;
  session_options.priors = priors;
  session_options.task_features = api::task_features_of(task);
  session_options.seed = chosen.seed.value_or(0);
  session_options.budget = budget;
  session_options.minimize = evaluator.minimize();
  if (const auto* cands = evaluator.candidates()) session_options.candidates = *cands;
  Session session(space, session_options);

  // Resume: every result stored in the study. Leases past their end are expired first, as a
  // server does before it proposes, so that a configuration whose client vanished (a killed
  // sweep's too) is measured. Live leases of other clients are not proposed while they live.
  store.expire_leases(std::chrono::system_clock::now());
  note_leases_taken_back(release_leases_of_ended_sweeps(store, study.id));
  std::vector<Observation> finished;
  std::vector<Configuration> leased;
  std::map<std::int64_t, Configuration> held;  // trial id -> configuration, of those leases
  for (const auto& t : store.trials(study.id)) {
    if (t.finished_at) {
      finished.push_back({space.config_from_json(t.config), t.result});
    } else if (t.result.status == TrialStatus::pending) {
      leased.push_back(space.config_from_json(t.config));
      held.emplace(t.id.value, leased.back());
    }
  }
  session.restore(finished, leased);
  // A lease held by another client that ended meanwhile (expired, here or by a server) gives
  // its configuration back, or its result when the client reported one.
  const auto take_back_ended_leases = [&] {
    write_waiting("to take back ended leases",
                  [&] { return store.expire_leases(std::chrono::system_clock::now()); });
    for (auto it = held.begin(); it != held.end();) {
      const auto t = store.get_trial(db::TrialId{it->first});
      if (t.result.status == TrialStatus::pending) {
        ++it;
        continue;
      }
      if (t.finished_at) {
        try {
          session.observe(it->second, t.result);
        } catch (const Conflict&) {
          // Observed already.
        }
      } else {
        session.release(it->second);
      }
      it = held.erase(it);
    }
  };

  SweepSummary summary;
  summary.study = study.id;
  summary.study_name = study.name;
  summary.unit = evaluator.objective_unit();
  summary.measurement = evaluator.measurement_settings();
  summary.minimize = evaluator.minimize();
  summary.default_from = default_origin(space);
  const Configuration default_config = space.default_configuration();
  const auto default_key = space.key(default_config);
  for (const auto& o : finished) {
    if (space.key(o.config) == default_key) summary.default_result = o;
  }

  ProgressBar progress(budget, options.progress);
  auto best_text = [&] {
    auto best = session.best();
    return best ? format_objective(best->result.objective, evaluator.objective_unit())
                : std::string("-");
  };
  // Each configuration is leased before it is evaluated, as a server's workers do, so that a
  // sweep and a server sharing the study never measure one configuration twice.
  const std::string client_id = sweep_client_id();
  auto evaluate_and_store = [&](const Configuration& config) {
    db::TrialId trial;
    try {
      trial = write_waiting("to lease the next configuration", [&] {
        return store.add_pending_trial(study.id, space.config_to_json(config), space.key(config),
                                       client_id, kSweepLeaseSeconds);
      });
    } catch (const Conflict& e) {
      // Taken by another process sharing the database (a server's worker): skip it.
      std::cerr << "\nnote: " << e.what() << "; skipped\n";
      session.hold(config);
      return;
    }
    Measurement m;
    try {
      m = evaluator.evaluate(config);
    } catch (const BackendError& e) {
      m = Measurement::failure(TrialStatus::failed, e.what());
    } catch (const EvaluationInterrupted& e) {
      // Stopped with tunebase (g_interrupted is set, so the sweep ends): no result, and no
      // failure of the configuration, which goes back to whoever proposes it next.
      try {
        store.release_lease(trial);
        std::cerr << "\nnote: " << e.what() << "; its lease is released\n";
      } catch (const Error& released) {
        std::cerr << "\nnote: " << e.what() << "; its lease could not be released ("
                  << released.what()
                  << "): the next sweep of the study on this host takes it back\n";
      }
      session.release(config);
      return;
    } catch (...) {
      // No result: the configuration goes back to whoever proposes it next.
      store.release_lease(trial);
      throw;
    }
    m = storable(std::move(m));
    try {
      complete_trial_waiting(store, trial, space.config_text(config), m);
    } catch (const Conflict& e) {
      std::cerr << "\nnote: " << e.what() << "; this run's measurement is not stored\n";
    }
    session.observe(config, m);
    ++summary.evaluated;
    if (!m.ok()) {
      ++summary.failed_here;
      summary.last_failure = m.message;
    }
    if (space.key(config) == default_key) summary.default_result = Observation{config, m};
    progress.update(
        session.observations().size(), summary.evaluated,
        best_text() + (summary.failed_here ? "  failed " + std::to_string(summary.failed_here)
                                           : std::string()));
  };

  // A study resumed with budget left (a larger one, or a stopped study's) is active again
  // until it is spent.
  if (study.status != db::StudyStatus::active && session.observations().size() < budget) {
    if (study.status == db::StudyStatus::stopped) {
      std::cerr << "note: study '" << study.name << "' was stopped; this sweep resumes it\n";
    }
    store.set_study_status(study.id, db::StudyStatus::active);
  }
  // Measurements on a busy machine mislead (a busy core slows every multi-threaded run alike,
  // and one thread then looks best): said before they start.
  if (!evaluator.measured_on() && session.observations().size() < budget) note_busy_machine();
  // The default configuration first: the baseline every tuned result is compared with.
  const bool default_measurable =
      space.is_valid(default_config) && (!evaluator.candidates() || session.candidate_count());
  if (options.measure_default && !summary.default_result && session.observations().empty()) {
    // Said once, at the study's start: the summary then has no default and no speedup.
    try {
      space.check(default_config);
    } catch (const InvalidInput& e) {
      std::cerr << "note: the default configuration " << space.config_text(default_config)
                << " is not measured, so there is no baseline to compare with: " << e.what()
                << " (give valid defaults in the space file)\n";
    }
  }
  if (options.measure_default && !summary.default_result && default_measurable &&
      session.observations().size() < budget && !g_interrupted) {
    bool is_candidate = true;
    if (const auto* cands = evaluator.candidates()) {
      is_candidate = false;
      for (const auto& c : *cands) is_candidate = is_candidate || space.key(c) == default_key;
    }
    if (is_candidate) {
      evaluate_and_store(default_config);
    } else if (session.observations().empty()) {
      // A replayed file that never measured it (Kernel Tuner's first values).
      std::cerr << "note: the default configuration " << space.config_text(default_config)
                << " is not among the configurations the evaluator can measure (the replayed "
                   "file has no entry for it), so there is no baseline to compare with\n";
    }
  }

  // The budget counts what every process sharing the study stored or holds.
  // The study's budget is the one stored: raised or lowered meanwhile (POST
  // /v1/studies/{id}/resume), the sweep goes on to it.
  std::size_t budget_now = budget;
  const auto budget_left = [&] {
    take_back_ended_leases();
    if (const auto stored = store.get_study(study.id).budget; stored && *stored > 0) {
      budget_now = static_cast<std::size_t>(*stored);
      progress.set_total(budget_now);
    }
    return static_cast<std::size_t>(store.budget_used(study.id)) < budget_now;
  };
  // Stopped by another process (tunebase stop, POST /v1/studies/{id}/stop): no more trials.
  const auto stopped_elsewhere = [&] {
    return store.get_study(study.id).status == db::StudyStatus::stopped;
  };
  while (budget_left() && session.observations().size() < budget_now && !g_interrupted) {
    if (stopped_elsewhere()) {
      summary.stopped = "the study was stopped (tunebase stop or POST /v1/studies/{id}/stop)";
      break;
    }
    auto batch = session.propose(1);
    if (batch.empty()) {
      summary.stopped = session.exhausted()
                            ? "every valid configuration is measured"
                            : "the strategy proposed no new configuration (the study may "
                              "be resumed with another --strategy)";
      break;
    }
    evaluate_and_store(batch.front());
  }
  progress.finish();
  // Another client's live lease keeps the study active: its result may still come, and its
  // worker is told to stop by a completed study (the server completes it at the last result).
  take_back_ended_leases();
  if (!g_interrupted && !stopped_elsewhere()) {
    summary.left_active = !store.complete_unless_leased(study.id);
  }

  summary.interrupted = g_interrupted;
  summary.strategy = strategy;
  // One line per source (a machine's inputs are one model), and none for a strategy that
  // ignores priors.
  if (learns_from_priors(strategy)) {
    for (const auto& p : session.priors()) {
      auto same = std::find_if(summary.priors.begin(), summary.priors.end(),
                               [&](const auto& s) { return s.source == p.source; });
      if (same == summary.priors.end()) {
        summary.priors.push_back({p.source, 0, 0});
        same = std::prev(summary.priors.end());
      }
      same->measurements += p.observations.size();
      ++same->inputs;
    }
  }
  if (const auto d = session.diagnostics(); d.contains("rgpe_weights")) {
    summary.weights = d["rgpe_weights"];
  }
  if (!priors.empty()) api::save_fitted_models(store);
  // Totals from the store: other processes may have added results meanwhile. Results are
  // what the budget counts less the live leases.
  const auto counts = store.trial_counts(study.id);
  summary.leased_elsewhere = static_cast<std::size_t>(counts.pending);
  summary.total = static_cast<std::size_t>(store.budget_used(study.id) - counts.pending);
  summary.failed = summary.total - static_cast<std::size_t>(counts.ok);
  summary.best = session.best();
  if (summary.best) {
    summary.best_config = space.config_to_json(summary.best->config);
    summary.best_config_text = space.config_text(summary.best->config);
    summary.best_options = kernel_options_text(kernel.name, space, summary.best_config);
  }
  return summary;
}

}  // namespace tunebase::cli
