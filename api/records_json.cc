#include "api/records_json.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "core/machine.h"
#include "db/json_text.h"

namespace tunebase::api {

nlohmann::json unit_json(const db::StudyRecord& study) {
  const auto unit = db::objective_unit(study);
  return unit.empty() ? nlohmann::json(nullptr) : nlohmann::json(unit);
}

std::string stored_kernels_text(const db::Store& store) {
  std::set<std::string> names;
  for (const auto& k : store.list_kernels()) names.insert(k.name);
  if (names.empty()) return "nothing is stored yet";
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : ", ") + n;
  return "the kernels stored are " + text;
}

std::string similar_machine_name(const db::Store& store, const std::string& name) {
  std::vector<std::string> names;
  for (const auto& m : store.list_machines()) names.push_back(m.name);
  return tunebase::similar_machine_name(name, names);
}

std::string stored_machines_text(const db::Store& store, std::string_view lists_all) {
  const auto machines = store.list_machines();
  std::string text;
  for (std::size_t i = 0; i < machines.size() && i < kListedMachines; ++i) {
    text += (i ? ", " : "") + machines[i].name;
  }
  if (machines.size() > kListedMachines) text += ", ... (" + std::string(lists_all) + ")";
  return text;
}

std::optional<db::Direction> studies_direction(const db::Store& store, const std::string& kernel,
                                               const std::string& objective,
                                               std::optional<db::MachineId> machine,
                                               std::optional<db::TaskId> task) {
  auto studies = store.list_studies(kernel);
  // An input's direction is its own studies' (a rate measured of one input, times of the
  // others), when it has some.
  if (task && std::any_of(studies.begin(), studies.end(),
                          [&](const auto& s) { return s.task_id == *task; })) {
    std::erase_if(studies, [&](const auto& s) { return s.task_id != *task; });
  }
  const auto direction_of = [&](bool machines_only) -> std::optional<db::Direction> {
    std::optional<db::Direction> direction;
    for (const auto& s : studies) {
      if (!objective.empty() && s.objective != objective) continue;
      if (machines_only && s.machine_id != *machine) continue;
      if (direction && *direction != s.direction) return std::nullopt;
      direction = s.direction;
    }
    return direction;
  };
  if (machine && std::any_of(studies.begin(), studies.end(), [&](const auto& s) {
        return s.machine_id == *machine && (objective.empty() || s.objective == objective);
      })) {
    if (const auto all = direction_of(true)) return all;
    // Studies of both directions (one of them perhaps empty): the one kind that measured.
    const auto measured = [&](db::Direction d) {
      return store.best_trial(kernel, *machine, task, d, objective).has_value();
    };
    const bool min = measured(db::Direction::minimize);
    if (min == measured(db::Direction::maximize)) return std::nullopt;
    return min ? db::Direction::minimize : db::Direction::maximize;
  }
  return direction_of(false);
}

Conflict too_few_for_a_model(const db::Store& store, db::StudyId study) {
  // Only an active study's model starts from other machines' measurements (its session's
  // priors); a finished one's is fitted on its own results.
  const bool active = store.get_study(study).status == db::StudyStatus::active;
  const auto successes = store.trial_counts(study).ok;
  return Conflict("study " + std::to_string(study.value) + " has " + std::to_string(successes) +
                  " successful result" + (successes == 1 ? "" : "s") +
                  ", too few for a model (it needs 3" +
                  (active ? std::string(", or measurements of the kernel on other machines or "
                                        "inputs to start from")
                          : std::string("; a study that is no longer active is modelled from "
                                        "its own results only")) +
                  "); measure more first");
}

std::vector<std::string> import_notes(const db::ImportResult& result, bool input_given,
                                      bool file_names_input, std::string_view kernel_option,
                                      std::string_view input_example) {
  std::vector<std::string> notes;
  if (!result.input_kept.empty()) {
    notes.push_back("study " + std::to_string(result.study.value) +
                    " holds these measurements as of input " + result.input_kept +
                    "; it keeps that input (delete the study and import again to file them "
                    "under another)");
  }
  if (!input_given && !file_names_input && !result.imported_before()) {
    notes.push_back(
        "the file names no input (problem size): its measurements are filed under "
        "an unknown input; give " +
        std::string(input_example) + " to file them with other measurements of that input");
  }
  // Those measurements and these will not learn from one another.
  if (result.other_kernel_versions > 0) {
    notes.push_back("kernel " + result.kernel_name + " was stored before with " +
                    std::to_string(result.other_kernel_versions) +
                    " other search space(s); measurements of different spaces are not priors "
                    "for one another (give " +
                    std::string(kernel_option) + " to file this one under another name)");
  }
  return notes;
}

std::string stored_objectives_text(const db::Store& store, const std::string& kernel) {
  std::set<std::string> names;
  for (const auto& s : store.list_studies(kernel)) names.insert(s.objective);
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

nlohmann::json machine_json(const db::MachineRecord& m) {
  return {{"id", m.id.value},
          {"name", m.name},
          {"fingerprint", m.fingerprint},
          {"fingerprint_hash", m.fingerprint_hash},
          {"created_at", m.created_at}};
}

nlohmann::json trial_json(const db::TrialRecord& t) {
  nlohmann::json j{{"id", t.id.value},
                   {"study_id", t.study_id.value},
                   {"config", t.config},
                   {"status", t.status_name()},
                   {"value", t.result.ok() ? nlohmann::json(t.result.objective) : nlohmann::json()},
                   {"raw", t.result.raw},
                   {"cost_seconds", t.result.cost_seconds},
                   {"message", t.result.message},
                   {"metrics", t.result.metrics},
                   {"client_id", t.client_id},
                   {"created_at", t.created_at}};
  const auto lease = t.shown_lease_expires_at();
  j["lease_expires_at"] = lease ? nlohmann::json(*lease) : nlohmann::json();
  j["started_at"] = t.started_at ? nlohmann::json(*t.started_at) : nlohmann::json();
  j["finished_at"] = t.finished_at ? nlohmann::json(*t.finished_at) : nlohmann::json();
  j["lease_expired"] = t.lease_expired();
  return j;
}

nlohmann::json forecast_json(const nlohmann::json& config, const Forecast& f) {
  nlohmann::json j{{"config", config},
                   {"mean", f.mean},
                   {"lower", f.lower},
                   {"upper", f.upper},
                   {"std", f.std},
                   {"std_scale", f.log_scale ? "log" : "objective"},
                   {"probability_feasible", f.probability_feasible}};
  if (f.interval_unknown) j["note"] = std::string(kIntervalUnknownNote);
  return j;
}

nlohmann::json counts_json(const db::TrialCounts& c) {
  return {{"total", c.total},
          {"pending", c.pending},
          {"ok", c.ok},
          {"failed", c.failed},
          {"timeout", c.timeout},
          {"invalid", c.invalid},
          {"lease_ended", c.lease_ended}};
}

MeasuredConfigurations measured_configurations(const db::Store& store, const std::string& kernel,
                                               const db::MachineRecord& machine,
                                               std::optional<db::TaskId> task,
                                               db::Direction direction,
                                               const std::string& objective,
                                               const db::StudyRecord& best_study) {
  MeasuredConfigurations out;
  const auto version = store.get_kernel(best_study.kernel_id);
  db::StudyFilter here{.kernel_name = kernel,
                       .machine = machine.id,
                       .task = task,
                       .direction = direction,
                       .objective = objective};
  // The studies here of versions with other parameters: left out of the best, and said to be.
  std::optional<db::StudyId> other_space;
  std::size_t others = 0;
  const auto all_versions = store.study_trial_counts(here);
  here.version = version.version;
  const auto same_parameters = store.study_trial_counts(here);
  for (const auto& [study, counts] : all_versions) {
    if (counts.ok > 0 && !same_parameters.contains(study)) {
      ++others;
      other_space = other_space.value_or(study);
    }
  }
  const auto space = SearchSpace::from_json(version.space);
  if (other_space) {
    const auto other =
        SearchSpace::from_json(store.get_kernel(store.get_study(*other_space).kernel_id).space);
    out.other_spaces =
        std::to_string(others) + (others == 1 ? " study" : " studies") + " measured kernel \"" +
        kernel + "\" on \"" + machine.name + "\" in a search space with other parameters (" +
        space.parameters_difference(other) + (others == 1 ? ") and is" : ") and are") +
        " left out: this is the best of the space of the newest studies";
  }
  // Of those, the studies measured otherwise (a PETSc solve's tolerance or clock): left out of
  // the best too (Store::best_trial), and said to be, with both settings.
  here.measurement = db::measurement_of(best_study.settings);
  const auto measured_alike = store.study_trial_counts(here);
  std::optional<db::StudyId> measured_otherwise;
  std::size_t otherwise = 0;
  for (const auto& [study, counts] : same_parameters) {
    if (counts.ok > 0 && !measured_alike.contains(study)) {
      ++otherwise;
      measured_otherwise = measured_otherwise.value_or(study);
    }
  }
  if (measured_otherwise) {
    out.other_measurements =
        std::to_string(otherwise) + (otherwise == 1 ? " study" : " studies") +
        " measured kernel \"" + kernel + "\" on \"" + machine.name + "\" with other settings (" +
        db::measurement_text(db::measurement_of(store.get_study(*measured_otherwise).settings)) +
        (otherwise == 1 ? ") and is" : ", ...) and are") +
        " left out: this is the best of those measured as the newest study (" +
        db::measurement_text(*here.measurement) + "), whose times compare";
  }
  out.configurations = store.measured_configurations(here);
  if (out.configurations >= kFewMeasuredConfigurations) return out;
  const auto valid = space.enumerable() ? space.valid_count() : std::nullopt;
  if (valid && out.configurations >= static_cast<std::int64_t>(*valid)) return out;
  out.note = "only " + std::to_string(out.configurations) + " of " +
             (valid ? std::to_string(*valid) + " valid" : std::string("the")) +
             " configurations measured on \"" + machine.name + "\"" +
             (task ? " for task " + std::to_string(task->value) : std::string()) +
             ": the best of so few may be far from the best there (" +
             std::to_string(kFewMeasuredConfigurations) +
             " taken at random hold one of the best 5% only 40% of the time); a sweep there "
             "(tunebase sweep, or POST /v1/studies/" +
             std::to_string(best_study.id.value) + "/suggestions) measures more";
  return out;
}

std::string measured_otherwise_text(const db::Store& store, const std::string& kernel) {
  const auto counts = store.study_trial_counts({.kernel_name = kernel});
  std::vector<db::StudyRecord> measured;  // with a success
  for (auto& study : store.list_studies(kernel)) {
    const auto c = counts.find(study.id);
    if (c != counts.end() && c->second.ok > 0) measured.push_back(std::move(study));
  }
  if (measured.empty()) return "";
  const auto newest = db::measurement_of(
      std::max_element(measured.begin(), measured.end(), [](const auto& a, const auto& b) {
        return a.id.value < b.id.value;
      })->settings);
  std::size_t otherwise = 0;
  std::string latest;
  for (const auto& study : measured) {
    if (const auto theirs = db::measurement_of(study.settings); theirs != newest) {
      ++otherwise;
      latest = db::measurement_text(theirs);
    }
  }
  if (otherwise == 0) return "";
  return "; predictions learn only from the studies measured as the newest one with a result (" +
         db::measurement_text(newest) + "): " + std::to_string(otherwise) +
         (otherwise == 1 ? " study" : " studies") + " measured otherwise (" +
         (otherwise == 1 ? "" : "the latest: ") + latest + (otherwise == 1 ? ") is" : ") are") +
         " left out";
}

std::optional<AllFailed> all_failed_here(const db::Store& store, const std::string& kernel,
                                         db::MachineId machine, std::optional<db::TaskId> task,
                                         const std::string& objective) {
  AllFailed out;
  const auto counts = store.study_trial_counts(
      {.kernel_name = kernel, .machine = machine, .task = task, .objective = objective});
  for (const auto& [study, c] : counts) {
    if (c.ok > 0) return std::nullopt;
    if (c.results() == 0) continue;
    out.evaluations += c.results();
    out.studies.push_back(study);
  }
  if (out.evaluations == 0) return std::nullopt;
  return out;
}

std::string all_failed_text(const AllFailed& failed,
                            const std::function<std::string(db::StudyId)>& why) {
  std::string text =
      std::to_string(failed.evaluations) +
      (failed.evaluations == 1 ? " evaluation, failed: " : " evaluations, all failed: ");
  for (std::size_t i = 0; i < failed.studies.size() && i < kListedStudies; ++i) {
    if (i > 0) text += " or ";
    text += why(failed.studies[i]);
  }
  if (failed.studies.size() > kListedStudies) {
    text += " (and " + std::to_string(failed.studies.size() - kListedStudies) + " more studies)";
  }
  return text + " shows why";
}

namespace {

// A study's unit as its settings hold it; none (null), also when stored as "" (sweeps of a
// plain number).
nlohmann::json unit_of(const nlohmann::json& settings) {
  const auto unit = settings.find("unit");
  if (unit == settings.end() || !unit->is_string() || unit->get_ref<const std::string&>().empty())
    return nullptr;
  return *unit;
}

}  // namespace

nlohmann::json study_json(const db::Store& store, const db::StudyRecord& s, bool with_space) {
  nlohmann::json j{
      {"id", s.id.value},
      {"name", s.name},
      {"kernel",
       {{"id", s.kernel_id.value}, {"name", s.kernel_name}, {"version", s.kernel_version}}},
      {"machine", s.machine_name},
      {"machine_id", s.machine_id.value},
      {"task_id", s.task_id.value},
      {"objective", s.objective},
      {"direction", std::string(db::to_string(s.direction))},
      {"strategy", s.strategy},
      {"budget", s.budget ? nlohmann::json(*s.budget) : nlohmann::json()},
      {"settings", s.settings},
      // Also in settings when given; here always, as the study uses them.
      {"unit", unit_of(s.settings)},
      {"seed", s.settings.value("seed", s.id.value)},
      {"status", std::string(db::to_string(s.status))},
      {"created_at", s.created_at}};
  j["trials"] = counts_json(store.trial_counts(s.id));
  j["task"] = store.get_task(s.task_id).description;
  if (with_space) j["kernel"]["space"] = store.get_kernel(s.kernel_id).space;
  return j;
}

}  // namespace tunebase::api
