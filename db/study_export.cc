#include "db/study_export.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "core/measurements.h"
#include "core/space.h"
#include "db/json_text.h"

namespace tunebase::db {

namespace {

// RFC 4180: quote a field holding a comma, quote or line break; double inner quotes.
std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Free text that clients write (messages, client ids) that a spreadsheet would read as a
// formula (it starts with =, +, -, @, tab or carriage return) gets a leading apostrophe, as
// OWASP's advice on CSV injection says: Excel and LibreOffice then show it as text and run
// nothing. Configuration values and parameter names are written as they are (a categorical
// "-O3" stays "-O3"), so that what a program reads back is in the space.
std::string csv_free_text(std::string_view s) {
  if (!s.empty() && std::string_view("=+-@\t\r").find(s.front()) != std::string_view::npos) {
    return csv_field("'" + std::string(s));
  }
  return csv_field(s);
}

std::string csv_value(const nlohmann::json& v) {
  if (v.is_null()) return {};
  if (v.is_string()) return csv_field(v.get<std::string>());
  if (v.is_number_float()) {
    // A real stays a real (2.0, not 2), so that a reader tells it from an integer, as the
    // JSON and Kernel Tuner exports do.
    auto text = format_number(v.get<double>());
    if (text.find_first_of(".eEni") == std::string::npos) text += ".0";
    return text;
  }
  if (v.is_number() || v.is_boolean()) return json_text(v);
  return csv_field(json_text(v));
}

// The columns after the parameters'; a parameter of the same name is written as param_NAME.
// unit, raw (repeated measurements) and metrics (as JSON) came later: they close the row, so
// that columns read by position keep their place.
constexpr std::string_view kTrialColumns[] = {
    "status",      "objective", "cost_seconds", "client_id", "created_at",
    "finished_at", "message",   "unit",         "raw",       "metrics"};

std::string parameter_column(const std::string& name) {
  const bool taken =
      name == "trial_id" || std::find(std::begin(kTrialColumns), std::end(kTrialColumns), name) !=
                                std::end(kTrialColumns);
  return csv_field(taken ? "param_" + name : name);
}

nlohmann::json optional_text(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// Everything of the JSON document but its trials.
nlohmann::json study_header(const Store& store, StudyId id) {
  const auto study = store.get_study(id);
  const auto kernel = store.get_kernel(study.kernel_id);
  const auto machine = store.get_machine(study.machine_id);
  const auto task = store.get_task(study.task_id);
  nlohmann::json out;
  out["format"] = "tunebase-study";
  out["format_version"] = 1;
  out["study"] = {{"id", study.id.value},
                  {"name", study.name},
                  {"objective", study.objective},
                  {"direction", to_string(study.direction)},
                  {"strategy", study.strategy},
                  {"budget", study.budget ? nlohmann::json(*study.budget) : nlohmann::json()},
                  {"settings", study.settings},
                  {"status", to_string(study.status)},
                  {"created_at", study.created_at}};
  out["kernel"] = {{"name", kernel.name}, {"version", kernel.version}, {"space", kernel.space}};
  out["machine"] = {{"name", machine.name},
                    {"fingerprint", machine.fingerprint},
                    {"fingerprint_hash", machine.fingerprint_hash}};
  out["task"] = {
      {"description", task.description}, {"features", task.features}, {"hash", task.hash}};
  return out;
}

nlohmann::json trial_row(const TrialRecord& t) {
  return {{"id", t.id.value},
          {"config", t.config},
          {"config_key", t.config_key},
          {"status", t.status_name()},
          {"objective", number_or_null(t.result.objective)},
          {"raw", raw_to_json(t.result.raw)},
          {"cost_seconds", t.result.cost_seconds},
          {"message", t.result.message},
          {"metrics", t.result.metrics},
          {"client_id", t.client_id},
          {"lease_expires_at", optional_text(t.shown_lease_expires_at())},
          {"created_at", t.created_at},
          {"started_at", optional_text(t.started_at)},
          {"finished_at", optional_text(t.finished_at)}};
}

// Kernel Tuner's names of failures, as a message is or starts ("CompilationFailedConfig: ...",
// a command's exit code for it); anything else failed at run time, as far as it knows.
std::string kernel_tuner_failure(const TrialRecord& t) {
  if (t.result.status == TrialStatus::invalid) return "InvalidConfig";
  for (std::string_view name :
       {"CompilationFailedConfig", "RuntimeFailedConfig", "InvalidConfig"}) {
    const std::string_view message = t.result.message;
    if (message.starts_with(name) &&
        (message.size() == name.size() || message.substr(name.size()).starts_with(": "))) {
      return std::string(name);
    }
  }
  return "RuntimeFailedConfig";
}

// Checks that `study` can be a Kernel Tuner cache, and gives its header (everything but the
// cache) and the milliseconds per unit of its objective. A study of another objective than
// time (a rate, a score) names it, as Kernel Tuner tunes one (objective="GFLOP/s",
// objective_higher_is_better=True): its entries hold it under that name and their time beside
// it; one of a time in another unit, or an objective named time, would be taken for a time.
std::pair<nlohmann::ordered_json, double> kernel_tuner_header(const Store& store, StudyId id) {
  const auto study = store.get_study(id);
  const auto kernel = store.get_kernel(study.kernel_id);
  const std::string what = "study " + std::to_string(id.value) + " \"" + study.name + "\"";
  const std::string instead = ": export it as json or csv";
  std::string unit;
  if (const auto u = study.settings.find("unit"); u != study.settings.end() && u->is_string()) {
    unit = u->get<std::string>();
  }
  const bool other_objective =
      (study.direction == Direction::maximize || !(unit.empty() || is_time_unit(unit))) &&
      study.objective != "time" && study.objective != "times";
  if (study.direction == Direction::maximize && !other_objective) {
    throw InvalidInput("a Kernel Tuner cache holds times (lower is better), but " + what +
                       " maximizes its objective \"" + study.objective + "\"" + instead);
  }
  double to_ms = 1.0;  // a study without a unit: its values are written as they are
  if (!unit.empty() && !other_objective) {
    try {
      to_ms = milliseconds_per(unit, "unit");
    } catch (const InvalidInput&) {
      throw InvalidInput("a Kernel Tuner cache holds times, but " + what + " measures \"" +
                         study.objective + "\" in " + unit + " (time units: s, ms, us, ns)" +
                         instead);
    }
  }
  const auto space = SearchSpace::from_json(kernel.space);
  // In the space's order, as Kernel Tuner writes its tune_params (a JSON object would sort them).
  nlohmann::ordered_json keys = nlohmann::ordered_json::array();
  nlohmann::ordered_json tune_params = nlohmann::ordered_json::object();
  for (const auto& p : space.parameters()) {
    if (p.name == "time" || p.name == "times") {
      throw InvalidInput("a Kernel Tuner cache keeps each entry's measurement under \"" + p.name +
                         "\", but " + what + " has a parameter of that name" + instead);
    }
    if (other_objective && p.name == study.objective) {
      throw InvalidInput("a Kernel Tuner cache keeps each entry's objective under its name, but " +
                         what + " has a parameter named as its objective \"" + p.name + "\"" +
                         instead);
    }
    if (!p.is_discrete()) {
      throw InvalidInput("a Kernel Tuner cache lists every value of each parameter, but " + what +
                         " has the real interval '" + p.name + "' (" + format_number(p.low) +
                         " .. " + format_number(p.high) + ")" + instead);
    }
    keys.push_back(p.name);
    nlohmann::json values = nlohmann::json::array();
    for (const auto& v : p.values) values.push_back(value_as_written(v, p.python_bool));
    tune_params[p.name] = std::move(values);
  }
  // Kernel Tuner's order of the fields.
  nlohmann::ordered_json header;
  header["device_name"] = store.get_machine(study.machine_id).name;
  header["kernel_name"] = kernel.name;
  const auto task = store.get_task(study.task_id);
  if (const auto size = task.description.find("problem_size"); size != task.description.end()) {
    header["problem_size"] = *size;
  }
  header["tune_params_keys"] = std::move(keys);
  header["tune_params"] = std::move(tune_params);
  header["objective"] = other_objective ? study.objective : "time";
  if (other_objective) {
    header["objective_higher_is_better"] = study.direction == Direction::maximize;
  }
  return {std::move(header), to_ms};
}

// The key Kernel Tuner gives a trial's configuration (Python's str() of each value, joined by
// commas), or nothing for a trial with no result (pending, a lease that ended) or of another
// space (an old version's).
std::optional<std::string> kernel_tuner_key(const TrialRecord& t,
                                            const std::vector<std::string>& names,
                                            const std::vector<bool>& python_bools) {
  if (t.result.status == TrialStatus::pending || t.lease_expired()) return std::nullopt;
  std::string key;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!t.config.contains(names[i])) return std::nullopt;
    // By position, not by what is written so far: a first value of "" still takes its comma.
    if (i > 0) key += ',';
    const auto v = value_from_json(t.config[names[i]]);
    key += python_bools[i] ? (as_double(v) != 0.0 ? "True" : "False") : python_text(v);
  }
  return key;
}

// A value in the study's unit in milliseconds: divided by 1000 for microseconds rather than
// multiplied by 0.001 (1400 us is 1.4 ms, not 1.4000000000000001).
double in_milliseconds(double value, double milliseconds_per_unit) {
  if (milliseconds_per_unit >= 1.0) return value * milliseconds_per_unit;
  return value / std::round(1.0 / milliseconds_per_unit);
}

template <class Json>  // nlohmann::json, or ordered_json where the order is the format's
std::string text_of(const Json& j, int indent) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

TrialPages::TrialPages(const Store& store, StudyId study, TrialRange range, std::size_t page_trials)
    : store_(store), study_(study), range_(range) {
  range_.up_to = std::min(range_.up_to, store.last_trial_id(study));
  range_.limit = std::max<std::size_t>(page_trials, 1);
}

std::vector<TrialRecord> TrialPages::next() {
  if (range_.after >= range_.up_to) return {};
  auto page = store_.trials(study_, range_);
  range_.after = page.empty() ? range_.up_to : page.back().id.value;
  return page;
}

StudyExport::StudyExport(const Store& store, StudyId study, ExportFormat format,
                         std::size_t page_trials)
    : store_(store), study_(study), format_(format), pages_(store, study, {}, page_trials) {
  if (format_ != ExportFormat::kernel_tuner) return;
  std::tie(kt_header_, to_milliseconds_) = kernel_tuner_header(store, study);
  objective_ = kt_header_["objective"].get<std::string>();
  for (const auto& name : kt_header_["tune_params_keys"]) {
    names_.push_back(name);
    python_bools_.push_back(kt_header_["tune_params"][name.get<std::string>()][0].is_boolean());
  }
  // A cache holds one entry a key. The store keeps one result a configuration, so keys repeat
  // only where a string value holds a comma ("a,b" and "c" against "a" and "b,c"): then the
  // trials are read once before the text is made, and two configurations with one key are
  // refused.
  bool commas = false;
  for (const auto& [name, values] : kt_header_["tune_params"].items()) {
    for (const auto& v : values) {
      commas = commas || (v.is_string() && v.get<std::string>().find(',') != std::string::npos);
    }
  }
  if (!commas) return;
  std::unordered_map<std::string, std::string> config_of_key;
  TrialRange same_trials;
  same_trials.up_to = pages_.last_id();
  TrialPages scan(store, study, same_trials, page_trials);
  for (auto page = scan.next(); !page.empty(); page = scan.next()) {
    for (const auto& t : page) {
      const auto key = kernel_tuner_key(t, names_, python_bools_);
      if (!key) continue;
      const auto [seen, fresh] = config_of_key.emplace(*key, t.config_key);
      if (!fresh && seen->second != t.config_key) {
        throw InvalidInput("configurations " + seen->second + " and " + t.config_key +
                           " of study " + std::to_string(study.value) +
                           " have the same Kernel Tuner cache key \"" + *key +
                           "\" (a string value holds a comma), and a cache holds one entry a "
                           "key: export it as json or csv");
      }
    }
  }
}

ExportFormat export_format_from_string(std::string_view name) {
  if (name == "json") return ExportFormat::json;
  if (name == "csv") return ExportFormat::csv;
  if (name == "kernel_tuner") return ExportFormat::kernel_tuner;
  throw InvalidInput("unknown export format \"" + std::string(name) +
                     "\"; allowed: json, csv, kernel_tuner (a Kernel Tuner cache file)");
}

bool StudyExport::next(std::string& out) {
  if (ended_) return false;
  if (!begun_) {
    begin(out);
    begun_ = true;
    return true;
  }
  const auto page = pages_.next();
  if (page.empty()) {
    end(out);
    ended_ = true;
    return true;
  }
  for (const auto& t : page) append_trial(t, out);
  return true;
}

void StudyExport::begin(std::string& out) {
  if (format_ == ExportFormat::json) {
    // The header object's text without its closing brace, then the trials array.
    auto header = text_of(study_header(store_, study_), 1);
    header.resize(header.size() - 2);  // "\n}"
    out += header;
    out += ",\n \"trials\": [";
    return;
  }
  if (format_ == ExportFormat::kernel_tuner) {
    auto header = text_of(kt_header_, 1);
    header.resize(header.size() - 2);  // "\n}"
    out += header;
    out += ",\n \"cache\": {";
    return;
  }
  // Parameter columns in the space's order; names found only in configs follow.
  const auto study = store_.get_study(study_);
  const auto kernel = store_.get_kernel(study.kernel_id);
  if (const auto unit = study.settings.find("unit");
      unit != study.settings.end() && unit->is_string()) {
    unit_ = csv_free_text(unit->get<std::string>());
  }
  if (kernel.space.contains("parameters") && kernel.space["parameters"].is_array()) {
    for (const auto& p : kernel.space["parameters"]) {
      if (p.contains("name") && p["name"].is_string()) names_.push_back(p["name"]);
    }
  }
  for (auto& name : store_.config_names(study_, pages_.last_id())) {
    if (std::find(names_.begin(), names_.end(), name) == names_.end()) {
      names_.push_back(std::move(name));
    }
  }
  out += "trial_id";
  for (const auto& n : names_) out += "," + parameter_column(n);
  for (const auto column : kTrialColumns) (out += ',') += column;
  out += "\r\n";
}

void StudyExport::append_trial(const TrialRecord& t, std::string& out) {
  if (format_ == ExportFormat::json) {
    out += any_trial_ ? ",\n  " : "\n  ";
    any_trial_ = true;
    out += text_of(trial_row(t), -1);
    return;
  }
  if (format_ == ExportFormat::kernel_tuner) {
    const auto key = kernel_tuner_key(t, names_, python_bools_);
    if (!key) return;
    // As Kernel Tuner writes an entry: the parameters in their order, then time and times,
    // then the rest.
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < names_.size(); ++i) {
      entry[names_[i]] = value_as_written(value_from_json(t.config[names_[i]]), python_bools_[i]);
    }
    const bool of_time = objective_ == "time";
    if (!t.result.ok()) {
      entry["time"] = kernel_tuner_failure(t);
    } else if (of_time) {
      entry["time"] = in_milliseconds(t.result.objective, to_milliseconds_);
    } else {
      // The time measured beside another objective (a replay's, in milliseconds), then it.
      const auto time = t.result.metrics.find("time");
      if (time != t.result.metrics.end() && time->is_number()) entry["time"] = *time;
      ++(entry.contains("time") ? timed_ : untimed_);
      entry[objective_] = t.result.objective;
    }
    // The repeated measurements of the objective: times only when it is one.
    nlohmann::json times = nlohmann::json::array();
    double times_ms = 0.0;
    for (double r : t.result.raw) {
      if (!of_time) break;
      times.push_back(in_milliseconds(r, to_milliseconds_));
      times_ms += times.back().get<double>();
    }
    if (!times.empty()) entry["times"] = std::move(times);
    // Metrics as they came (an imported cache's compile_time, GFLOP/s...); the time and the
    // parameters are the trial's own.
    // A number that is not finite (stored as null) would be written as null, which Kernel Tuner
    // cannot add up.
    for (const auto& [name, value] : t.result.metrics.items()) {
      const bool finite =
          !value.is_null() && (!value.is_number_float() || std::isfinite(value.get<double>()));
      if (!entry.contains(name) && (name != "times" || !of_time) && finite) entry[name] = value;
    }
    const bool cost_known = entry.contains("compile_time") || entry.contains("benchmark_time") ||
                            entry.contains("verification_time");
    const double cost_ms = t.result.cost_seconds * 1000.0;
    if (!cost_known && cost_ms > 0 && std::abs(cost_ms - times_ms) > 1e-9 * cost_ms) {
      entry["benchmark_time"] = cost_ms;
    }
    out += any_trial_ ? ",\n  " : "\n  ";
    any_trial_ = true;
    out += text_of(nlohmann::json(*key), -1) + ": " + text_of(entry, -1);
    return;
  }
  // Fields are appended one by one: a row is `trial_id,<parameters...>,status,...`.
  auto field = [&out](std::string_view text) {
    out += ',';
    out += text;
  };
  out += std::to_string(t.id.value);
  for (const auto& n : names_) field(t.config.contains(n) ? csv_value(t.config[n]) : "");
  field(t.status_name());
  field(std::isfinite(t.result.objective) ? format_number(t.result.objective) : "");
  field(format_number(t.result.cost_seconds));
  field(csv_free_text(t.client_id));
  field(t.created_at);
  field(t.finished_at.value_or(""));
  field(csv_free_text(t.result.message));
  field(unit_);
  field(t.result.raw.empty() ? "" : csv_field(json_text(t.result.raw)));
  field(t.result.metrics.empty() ? "" : csv_field(json_text(t.result.metrics)));
  out += "\r\n";
}

void StudyExport::end(std::string& out) const {
  if (format_ == ExportFormat::json) out += any_trial_ ? "\n ]\n}\n" : "]\n}\n";
  if (format_ == ExportFormat::kernel_tuner) out += any_trial_ ? "\n }\n}\n" : "}\n}\n";
}

std::string StudyExport::note() const {
  if (format_ != ExportFormat::kernel_tuner || objective_ == "time") return {};
  const bool higher = kt_header_["objective_higher_is_better"].get<bool>();
  std::string note = "the cache's objective is each entry's \"" + objective_ +
                     "\" (objective_higher_is_better: " + (higher ? "true" : "false") +
                     ", as Kernel Tuner's tune_kernel takes them), not its \"time\"";
  if (untimed_ == 0) return note + ", which holds the time in ms measured beside it";
  if (timed_ == 0) {
    return note + ", which the successful entries have none of: their trials measured no time";
  }
  return note + ", which holds the time in ms measured beside it, absent from the " +
         std::to_string(untimed_) + " of " + std::to_string(timed_ + untimed_) +
         " successful entries whose trials measured none";
}

std::string export_study(const Store& store, StudyId study, ExportFormat format) {
  StudyExport source(store, study, format);
  std::string out;
  while (source.next(out)) {
  }
  return out;
}

nlohmann::json study_to_json(const Store& store, StudyId study) {
  auto out = study_header(store, study);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& t : store.trials(study)) rows.push_back(trial_row(t));
  out["trials"] = std::move(rows);
  return out;
}

}  // namespace tunebase::db
