#include "api/service.h"

#include <algorithm>
#include <boost/algorithm/string.hpp>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>

#include "api/comparison_json.h"
#include "api/errors.h"
#include "api/json_reader.h"
#include "api/priors.h"
#include "api/records_json.h"
#include "core/json.h"
#include "core/measurements.h"
#include "db/json_text.h"
#include "db/study_export.h"
#include "tuner/strategy.h"

namespace tunebase::api {

namespace {

// Limits on what one request may ask for.
constexpr std::int64_t kMaxSuggestionsPerRequest = 1000;
constexpr double kDefaultLeaseSeconds = 3600.0;
constexpr double kMaxLeaseSeconds = 7 * 24 * 3600.0;
constexpr std::size_t kMaxPredictConfigs = 100000;
constexpr std::size_t kMaxMeasurementsPerRequest = 100000;
constexpr double kMaxCostSeconds = 1e9;
constexpr std::size_t kMaxUnitBytes = 32;
// The most items one page of a listing (trials, studies, machines) holds: a client pages
// through more with `after`, from the reply's next_after.
constexpr std::int64_t kMaxListLimit = 10000;
// A fingerprint says what a machine is (CPU model, GPUs, memory): a few hundred bytes. Every
// listing of machines carries them all, so one may not grow to the size of a request body.
constexpr std::size_t kMaxFingerprintBytes = 16 * 1024;
// A study's task (its input: matrix, problem size, command line) and task_features come with
// every listing of studies, as do its strategy_options: bounded as fingerprints are.
constexpr std::size_t kMaxTaskBytes = 16 * 1024;
constexpr std::size_t kMaxStrategyOptionsBytes = 16 * 1024;
// How a study's objective is measured (a PETSc solve's rtol, max_it, residual_tolerance and
// clock) is a handful of settings, listed with every study too.
constexpr std::size_t kMaxMeasurementBytes = 4 * 1024;
// Names in a study's prior_machines, at most.
constexpr std::size_t kMaxPriorMachines = 1000;
constexpr auto kPredictedBestTtl = std::chrono::seconds(60);
// Entries of each /v1/best cache at most (then it starts afresh): names are the client's.
constexpr std::size_t kMaxCachedAnswers = 4096;
// Read-only connections for queries; each serialises its own calls, so a few let the I/O
// threads read in parallel.
constexpr std::size_t kReaderConnections = 4;

const std::vector<std::string> kResultStatuses = {"ok", "failed", "timeout", "invalid"};

std::string bearer_token(const std::string& authorization) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  std::string scheme = authorization.substr(0, kScheme.size());
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), ::tolower);
  if (scheme != "bearer ") return {};
  auto token = authorization.substr(kScheme.size());
  token.erase(0, token.find_first_not_of(' '));
  return token;
}

// db::check_name, its error naming the request field.
void check_name_in(const std::string& name, const std::string& field, const std::string& what) {
  in_field(field, [&] { db::check_name(name, what); });
}

// A study's task_features place its input among others for transfer: numbers, and for a task
// that has some already, the same ones (another study's transfer stands on them).
// Task features are numbers: FieldError at `field`.NAME for another value.
void check_feature_numbers(const nlohmann::json& features, const std::string& field) {
  for (const auto& [name, value] : features.items()) {
    if (!value.is_number()) {
      throw FieldError(field + "." + name,
                       "task features must be numbers (they place the input among others for "
                       "transfer); got " +
                           db::json_text(value) + "; put descriptions in \"task\"");
    }
  }
}

void check_task_features(const db::Store& store, const std::string& kernel,
                         const nlohmann::json* task, const nlohmann::json& features) {
  check_feature_numbers(features, "task_features");
  const auto description = task ? *task : nlohmann::json::object();
  for (const auto& t : store.list_tasks(kernel)) {
    if (t.description == description && !t.features.empty() && t.features != features) {
      throw Conflict("task " + std::to_string(t.id.value) + " of kernel " + kernel + " (" +
                     db::json_text(description) + ") has the features " +
                     db::json_text(t.features) + ", which its studies' transfer uses; got " +
                     db::json_text(features) +
                     ": give the same features or none, or another task for another input");
    }
  }
}

// FieldError unless `value` takes at most `limit` bytes as JSON (`what_it_is` says what it
// holds, to keep to): it is stored, and listings carry it.
void check_json_size(const nlohmann::json& value, const std::string& field, std::size_t limit,
                     const std::string& what_it_is = {}) {
  if (const auto size = db::json_text(value).size(); size > limit) {
    throw FieldError(field, "\"" + field + "\" must be at most " + std::to_string(limit) +
                                " bytes as JSON" + what_it_is + ", got " + std::to_string(size));
  }
}

std::string checked_name(JsonReader& r, const std::string& key, bool required) {
  auto name = required ? std::optional(r.required_string(key)) : r.optional_string(key);
  if (!name) return {};
  check_name_in(*name, r.field(key), "\"" + r.field(key) + "\"");
  return *name;
}

std::optional<std::string> checked_query_name(const Request& request, const std::string& key) {
  auto value = request.query_value(key);
  if (value) check_name_in(*value, "query." + key, "query parameter \"" + key + "\"");
  return value;
}

// A study named as one that exists: 409 naming it (error.existing_study_id, a Location
// header), for a client that creates a study or continues it (four workers starting at once).
// A request that gives other measurement settings (`measurement`: db::measurement_of of the
// study it asked for) is told: continuing that study would mix them.
StudyExists study_exists(const db::StudyRecord& existing, const nlohmann::json& measurement) {
  const auto id = std::to_string(existing.id.value);
  const auto theirs = db::measurement_of(existing.settings);
  return StudyExists(
      "a study named \"" + existing.name + "\" exists already: study " + id + " (GET /v1/studies/" +
          id + ", " + existing.kernel_name + " on " + existing.machine_name +
          "); choose another name, or continue that study" +
          (theirs == measurement ? std::string()
                                 : " (measured with " + db::measurement_text(theirs) + ", not " +
                                       db::measurement_text(measurement) + " as asked)"),
      existing.id.value);
}

// A route that takes no fields: no body, or an empty object (what a client that always sends
// JSON sends). Anything else is refused as stop refuses it, naming the field: a DELETE sent with
// a body meant for another route must not delete.
void require_no_fields(const Request& request) {
  if (request.body.empty()) return;
  const auto body = parse_json_body(request.body);
  JsonReader(body).finish();
}

std::int64_t integer_query(const Request& request, const std::string& name) {
  const auto text = *request.query_value(name);
  std::int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);  // checked by check_query
  return v;
}

// GET /v1/compare: machines=A,B[,...] names the machines, each checked as a name. The value is
// split at its literal commas before it is decoded, so that a name with a comma is sent with
// it escaped ("Tesla P100%2C 12GB").
Response compare_machines_response(const db::Store& store, const Request& request) {
  db::ComparisonQuery query;
  query.kernel = *checked_query_name(request, "kernel");
  const auto raw = request.raw_query.find("machines");
  const bool encoded = raw != request.raw_query.end();
  boost::split(query.machines, encoded ? raw->second : *request.query_value("machines"),
               boost::is_any_of(","));
  for (auto& name : query.machines) {
    if (encoded) name = percent_decode(name, true);
    boost::trim_if(name, boost::is_any_of(" "));
    check_name_in(name, "query.machines", "each machine of query parameter \"machines\"");
  }
  if (query.machines.size() < 2) {
    throw FieldError("query.machines",
                     "query parameter \"machines\" names two or more machines, separated by "
                     "commas (machines=A100,V100); got one");
  }
  if (request.query_value("task")) query.task = db::TaskId{integer_query(request, "task")};
  query.objective = checked_query_name(request, "objective").value_or("");
  return Response::json(comparison_json(db::compare_stored_machines(store, query)));
}

// The query parameters of a listing that pages by id: `after` (ids greater than it) and
// `limit` (at most that many, with next_after saying where the next page starts).
QueryParam after_param(const std::string& what) {
  return {"after",
          "integer",
          false,
          "only " + what +
              " with a greater id (the next_after of the "
              "page before, or the last id seen: new since a poll)",
          {}};
}
QueryParam limit_param(const std::string& what) {
  QueryParam p{"limit",
               "integer",
               false,
               "at most this many " + what + " (1 to " + std::to_string(kMaxListLimit) +
                   "; default: all): the reply's next_after is then the after of the next page, "
                   "null when there is none",
               {},
               1};
  p.maximum = kMaxListLimit;
  return p;
}
const nlohmann::json kNextAfter = {
    {"type", "integer"},
    {"nullable", true},
    {"description",
     "(with limit) the after of the next page: the last id of this one when more follow, null "
     "when this page is the last"}};

// One page of `records` (in id order), as a listing answers: those with an id over the query's
// `after`, at most `limit` of them under `key`, and with a limit next_after.
template <class Record, class ToJson>
nlohmann::json listing_page(const Request& request, const std::string& key,
                            const std::vector<Record>& records, const ToJson& to_json) {
  const std::int64_t after = request.query_value("after") ? integer_query(request, "after") : 0;
  const bool limited = request.query_value("limit").has_value();
  const auto limit = limited ? static_cast<std::size_t>(integer_query(request, "limit"))
                             : std::numeric_limits<std::size_t>::max();
  nlohmann::json list = nlohmann::json::array();
  nlohmann::json next_after = nullptr;
  std::int64_t last = 0;
  for (const auto& record : records) {
    if (record.id.value <= after) continue;
    if (list.size() == limit) {  // one more: the next page starts after the last listed
      next_after = last;
      break;
    }
    list.push_back(to_json(record));
    last = record.id.value;
  }
  nlohmann::json reply{{key, std::move(list)}};
  if (limited) reply["next_after"] = next_after;
  return reply;
}

/// A result as the API writes it: {"status", "value", "raw", "cost_seconds", "message",
/// "metrics"}; reports for ok results need a value or raw measurements.
double read_lease_seconds(JsonReader& r) {
  // One message for every value out of (0, max]: any number is read, then checked.
  const double lease = r.optional_number("lease_seconds", std::numeric_limits<double>::lowest(),
                                         std::numeric_limits<double>::max())
                           .value_or(kDefaultLeaseSeconds);
  if (!(lease > 0.0 && lease <= kMaxLeaseSeconds)) {
    throw FieldError("lease_seconds", "\"lease_seconds\" must be > 0 and at most " +
                                          nlohmann::json(kMaxLeaseSeconds).dump() + ", got " +
                                          nlohmann::json(lease).dump());
  }
  return lease;
}

Measurement read_result(JsonReader& r) {
  const auto status_text = r.optional_choice("status", kResultStatuses).value_or("ok");
  const auto status = trial_status_from_string(status_text);
  const auto value = r.optional_number("value");
  auto raw = r.optional_numbers("raw");
  const double cost = r.optional_number("cost_seconds", 0.0, kMaxCostSeconds).value_or(0.0);
  const auto message = r.optional_string("message").value_or("");
  const auto* metrics = r.optional_object("metrics");
  // Every listing and export of the study carries them: bounded, as names are.
  if (message.size() > kMaxMessageBytes) {
    throw FieldError(r.field("message"),
                     "\"" + r.field("message") + "\" must be at most " +
                         std::to_string(kMaxMessageBytes) + " bytes, got " +
                         std::to_string(message.size()) +
                         "; keep what says why (the end of a program's output, say)");
  }
  if (metrics) check_json_size(*metrics, r.field("metrics"), kMaxMetricsBytes);
  if (raw.size() > kMaxRawValues) {
    throw FieldError(r.field("raw"), "\"" + r.field("raw") + "\" must hold at most " +
                                         std::to_string(kMaxRawValues) + " values, got " +
                                         std::to_string(raw.size()) +
                                         "; send the objective as \"value\" with a sample of the "
                                         "repeats (tunebase worker keeps them evenly spaced)");
  }
  Measurement m;
  if (status == TrialStatus::ok) {
    if (!value && raw.empty()) {
      r.finish();  // a misspelt "value" ("objective", "values") is named as what it is
      throw FieldError(r.field("value"), "a result with status ok needs \"" + r.field("value") +
                                             "\" (the objective) or \"" + r.field("raw") +
                                             "\" (repeated measurements; the median is used)");
    }
    m = Measurement::success(value ? *value : median(raw), raw, cost);
  } else {
    if (value) {
      throw FieldError(r.field("value"),
                       "a result with status " + status_text + " has no \"value\"; leave it out");
    }
    m = Measurement::failure(status, message, cost);
    m.raw = std::move(raw);
  }
  m.message = message;
  if (metrics) m.metrics = *metrics;
  return m;
}

// --- JSON schemas for the OpenAPI document

nlohmann::json object_schema(nlohmann::json properties, std::vector<std::string> required = {}) {
  nlohmann::json s{
      {"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return s;
}
const nlohmann::json kAnyObject = {{"type", "object"}};
const nlohmann::json kString = {{"type", "string"}};
const nlohmann::json kInteger = {{"type", "integer"}};
const nlohmann::json kNumber = {{"type", "number"}};
const nlohmann::json kBoolean = {{"type", "boolean"}};
const nlohmann::json kConfig = {{"type", "object"}, {"description", "{\"parameter\": value, ...}"}};

nlohmann::json result_properties() {
  return {
      {"status", {{"type", "string"}, {"enum", kResultStatuses}}},
      {"value",
       {{"type", "number"}, {"description", "the objective; needed when ok unless raw is given"}}},
      {"raw",
       {{"type", "array"},
        {"items", kNumber},
        {"maxItems", kMaxRawValues},
        {"description", "the repeated measurements, at most " + std::to_string(kMaxRawValues)}}},
      {"cost_seconds", {{"type", "number"}, {"minimum", 0}}},
      {"message",
       {{"type", "string"},
        {"maxLength", kMaxMessageBytes},
        {"description", "at most " + std::to_string(kMaxMessageBytes) + " bytes (UTF-8)"}}},
      {"metrics",
       {{"type", "object"},
        {"description", "at most " + std::to_string(kMaxMetricsBytes) + " bytes as JSON"}}}};
}

nlohmann::json nullable(nlohmann::json schema) {
  schema["nullable"] = true;
  return schema;
}
nlohmann::json array_of(nlohmann::json items) {
  return {{"type", "array"}, {"items", std::move(items)}};
}

// The records replies are made of (records_json.h, trial_json): every field, always present.
nlohmann::json trial_schema() {
  return object_schema(
      {{"id", kInteger},
       {"study_id", kInteger},
       {"config", kConfig},
       {"status",
        {{"type", "string"},
         {"enum", {"pending", "ok", "failed", "timeout", "invalid", "lease_ended"}},
         {"description",
          "lease_ended: the lease ended (expired or released) with no result reported"}}},
       {"value", nullable({{"type", "number"}, {"description", "the objective (ok trials)"}})},
       {"raw", array_of(kNumber)},
       {"cost_seconds", kNumber},
       {"message", kString},
       {"metrics", kAnyObject},
       {"client_id", kString},
       {"created_at", kString},
       {"lease_expires_at",
        nullable({{"type", "string"},
                  {"description",
                   "when the client's lease ends (pending) or ended with no result "
                   "(lease_ended); null once a result is stored, which ends the lease"}})},
       {"started_at", nullable(kString)},
       {"finished_at", nullable(kString)},
       {"lease_expired",
        {{"type", "boolean"},
         {"description", "the lease ended (expired or released) with no result reported"}}}},
      {"id", "study_id", "config", "status", "value", "client_id", "created_at", "finished_at",
       "lease_expired"});
}
nlohmann::json machine_schema() {
  return object_schema({{"id", kInteger},
                        {"name", kString},
                        {"fingerprint", kAnyObject},
                        {"fingerprint_hash", kString},
                        {"created_at", kString}},
                       {"id", "name", "fingerprint", "created_at"});
}
nlohmann::json lease_seconds_schema() {
  // OpenAPI 3.0's form of > 0 (3.1 writes "exclusiveMinimum": 0).
  return {{"type", "number"},
          {"minimum", 0},
          {"exclusiveMinimum", true},
          {"maximum", kMaxLeaseSeconds},
          {"default", kDefaultLeaseSeconds},
          {"description",
           "how long the client holds them; a lease that ends without a result "
           "gives its configuration back (a late result is still taken while "
           "nobody else measured it); POST /v1/trials/{id}/lease extends it"}};
}

nlohmann::json study_schema() {
  nlohmann::json counts = nlohmann::json::object();
  for (const char* k : {"total", "pending", "ok", "failed", "timeout", "invalid", "lease_ended"})
    counts[k] = kInteger;
  return object_schema(
      {{"id", kInteger},
       {"name", kString},
       {"kernel",
        object_schema({{"id", kInteger},
                       {"name", kString},
                       {"version", kString},
                       {"space", {{"type", "object"}, {"description", "(one study only)"}}}})},
       {"machine", kString},
       {"machine_id", kInteger},
       {"task_id", kInteger},
       {"objective", {{"type", "string"}, {"description", "the objective's name"}}},
       {"direction", {{"type", "string"}, {"enum", {"minimize", "maximize"}}}},
       {"strategy", kString},
       {"budget", nullable(kInteger)},
       {"settings", kAnyObject},
       {"unit", nullable({{"type", "string"}, {"description", "the objective's unit"}})},
       {"seed",
        {{"type", "integer"},
         {"description", "the seed of its search: the one given, else the study's id"}}},
       {"status", {{"type", "string"}, {"enum", {"active", "completed", "stopped"}}}},
       {"created_at", kString},
       {"trials", object_schema(counts, {"total", "pending", "ok", "failed", "timeout", "invalid",
                                         "lease_ended"})},
       {"task", {{"type", "object"}, {"description", "the task's description (its input)"}}},
       // "type" beside allOf: OpenAPI 3.0's nullable applies only where a type is given.
       {"best", nullable({{"type", "object"},
                          {"allOf", {trial_schema()}},
                          {"description", "its best trial (GET one study only)"}})},
       {"failure_reasons",
        object_schema(
            {{"total",
              {{"type", "integer"},
               {"description", "evaluations that failed, timed out or were invalid"}}},
             {"reasons",
              {{"type", "array"},
               {"description",
                "why, most frequent first (at most 10, each status keeping its most frequent): "
                "messages grouped, ignoring case, with numbers, paths, times, ids, commands, "
                "configurations and details after \"; \" left out; an exit code, a signal, an "
                "error code, a violated constraint, a command's first stderr line and a Python "
                "traceback's exception kept; the reason is whole (not cut)"},
               {"items", object_schema({{"status", kString},
                                        {"reason", kString},
                                        {"count", kInteger},
                                        {"example",
                                         {{"type", "string"},
                                          {"description",
                                           "its most frequent message (first 300 "
                                           "bytes)"}}}})}}},
             {"others",
              {{"type", "object"},
               {"description",
                "the trials of the reasons not listed, and how many reasons: in all and by "
                "status"},
               {"properties",
                {{"trials", kInteger},
                 {"reasons", kInteger},
                 {"by_status",
                  array_of(object_schema(
                      {{"status", kString}, {"trials", kInteger}, {"reasons", kInteger}}))}}}}}})}},
      {"id", "name", "kernel", "machine", "objective", "direction", "strategy", "status",
       "trials"});
}

// Notes for one answer, in one string.
std::string joined_notes(const std::vector<std::string>& notes) {
  std::string out;
  for (const auto& n : notes) out += (out.empty() ? "" : "; ") + n;
  return out;
}

// The unit a study of `kernel` created without one takes: the one its studies of the same
// objective and direction that measured something agree on (an import's ms; "s" and
// "seconds" agree), else none. With no objective given, the studies compared are those whose
// objective is named by their unit (default_objective_name): the name the new study takes
// follows the unit it finds. Studies that measured times in different units leave no way to
// tell a new study's: FieldError asking for one.
std::optional<std::string> kernel_unit(const db::Store& store, const std::string& kernel,
                                       const std::optional<std::string>& objective,
                                       db::Direction direction) {
  const bool minimize = direction == db::Direction::minimize;
  std::vector<std::string> units;
  const auto counts = store.study_trial_counts({.kernel_name = kernel, .direction = direction});
  for (const auto& study : store.list_studies(kernel)) {
    const auto unit = db::objective_unit(study);
    const auto name = objective.value_or(default_objective_name(unit, minimize));
    const auto c = counts.find(study.id);
    if (study.objective == name && c != counts.end() && c->second.ok > 0) {
      units.push_back(unit);
    }
  }
  if (units.empty()) return std::nullopt;
  const auto same = [&](const std::string& u) {
    return u == units.front() ||
           (is_time_unit(u) && short_time_unit(u) == short_time_unit(units.front()));
  };
  if (std::all_of(units.begin(), units.end(), same)) {
    return units.front().empty() ? std::nullopt : std::optional(units.front());
  }
  std::set<std::string> times;
  for (const auto& u : units) {
    if (is_time_unit(u)) times.insert(short_time_unit(u));
  }
  if (times.size() > 1) {
    std::string list;
    for (const auto& u : times) list += (list.empty() ? "" : ", ") + u;
    // Different units of time: of objective "time" when none was given.
    throw FieldError("unit", "the studies of kernel \"" + kernel + "\" measured \"" +
                                 objective.value_or(default_objective_name("s", minimize)) +
                                 "\" in " + list +
                                 ": give this study's \"unit\" (s, ms, us, ns) so that its "
                                 "values are compared with theirs as times");
  }
  return std::nullopt;
}

}  // namespace

Service::Service(db::Store& store, ServiceOptions options)
    : store_(store), options_(options), studies_(store) {
  // Queries read through their own connections: in WAL mode they see every committed write
  // and never wait for a commit in progress on the writing connection.
  for (std::size_t i = 0; i < kReaderConnections; ++i) {
    readers_.push_back(
        std::make_unique<db::Store>(store.path(), db::StoreOptions{.read_only = true}));
  }
  add_routes();
  std::vector<std::string> labels;
  for (const auto& r : router_.routes()) labels.push_back(r.method + " " + r.pattern);
  metrics_ = std::make_unique<Metrics>(labels);
}

Service::~Service() = default;

void Service::add_routes() {
  auto route = [&](std::string method, std::string pattern, std::string id, std::string summary,
                   Access access, Handler handler) -> Route& {
    Route r;
    r.method = std::move(method);
    r.pattern = std::move(pattern);
    r.operation_id = std::move(id);
    r.summary = std::move(summary);
    r.access = access;
    r.handler = std::move(handler);
    router_.add(std::move(r));
    return const_cast<Route&>(router_.routes().back());
  };
  auto bind = [this](Response (Service::*f)(Request&)) {
    return [this, f](Request& r) { return (this->*f)(r); };
  };
  // A batch handler serving one request (when a writer route is called outside a batch).
  auto batch_one = [this](std::vector<Response> (Service::*f)(std::vector<Request*>&)) {
    return [this, f](Request& r) {
      std::vector<Request*> one{&r};
      return (this->*f)(one).front();
    };
  };

  {
    auto& r = route(
        "GET", "/healthz", "health",
        "Health: 200 while the server answers and its database was never found corrupt; 503 "
        "with status \"corrupt\" once a request (or the check at start) found it so, which no "
        "retry mends. database: the database file (its name only when reads need a token: "
        "health needs none)",
        Access::open, [this](Request&) {
          const auto database = options_.auth_reads
                                    ? std::filesystem::path(store_.path()).filename().string()
                                    : store_.path();
          if (const auto corrupt = db::corruption_seen(store_.path())) {
            // The message names the file in full: only for those who may read.
            return Response::json(
                {{"status", "corrupt"},
                 {"database", database},
                 {"message", options_.auth_reads
                                 ? std::string("the database is corrupt (what was found is "
                                               "not shown while reads need a token)")
                                 : *corrupt}},
                503);
          }
          return Response::json({{"status", "ok"}, {"database", database}});
        });
    r.response_schema =
        object_schema({{"status", {{"type", "string"}, {"enum", {"ok", "corrupt"}}}},
                       {"database", kString},
                       {"message", kString}},
                      {"status", "database"});
    r.own_unavailable_answer = true;
  }
  {
    auto& r = route("GET", "/metrics", "metrics", "Prometheus metrics (text format 0.0.4)",
                    Access::open, [this](Request&) {
                      return Response::text(
                          metrics_->render(studies_.active_studies(), studies_.pending_leases()),
                          "text/plain; version=0.0.4");
                    });
    // On an I/O thread: its counts never wait for the study manager's locks (held across
    // database work), and on the compute pool a scrape waited behind model fits.
    r.response_content_type = "text/plain";
    r.response_schema = kString;
  }
  {
    auto& r = route("GET", "/openapi.json", "openapi", "This API as an OpenAPI 3 document",
                    Access::open, [this](Request&) {
                      return Response::json(openapi_document(router_, options_.auth_reads));
                    });
    r.response_schema = kAnyObject;
  }
  {
    auto& r = route("POST", "/v1/machines", "createMachine",
                    "Register a machine (or update its fingerprint)", Access::write,
                    bind(&Service::create_machine));
    r.runs = Runs::writer;
    r.request_schema = object_schema(
        {{"name", kString},
         {"fingerprint",
          {{"type", "object"},
           {"description", "what the machine is (CPU, GPUs, memory): at most " +
                               std::to_string(kMaxFingerprintBytes) + " bytes as JSON"}}}},
        {"name"});
    r.success_status = 201;
    r.may_update = true;
    r.response_schema = machine_schema();
  }
  {
    auto& r = route("GET", "/v1/machines", "listMachines", "Every registered machine", Access::read,
                    bind(&Service::list_machines));
    r.query = {after_param("machines"), limit_param("machines")};
    r.response_schema =
        object_schema({{"machines", array_of(machine_schema())}, {"next_after", kNextAfter}});
  }
  {
    auto& r = route("POST", "/v1/studies", "createStudy",
                    "Create a study: a kernel and its space tuned on a machine and task (the "
                    "machine registered first, POST /v1/machines)",
                    Access::write, bind(&Service::create_study));
    r.created_location = true;
    // Checking a space may enumerate its valid configurations.
    r.runs = Runs::compute;
    r.request_schema = object_schema(
        {{"name", kString},
         {"kernel", kString},
         {"space",
          {{"type", "object"},
           {"description",
            "tunebase space: {\"parameters\": [{\"name\", \"type\": integer|ordinal|"
            "categorical|real, \"values\" | \"low\"/\"high\"/\"step\", \"log\", \"default\"}], "
            "\"constraints\": [\"expr\", ...]}, or Kernel Tuner's {\"tune_params\": {name: "
            "[values]}, \"restrictions\": [...]} (its parameter order kept), or a T1 file's "
            "{\"ConfigurationSpace\": ...} (docs/space-format.md); optional when the kernel "
            "is known"}}},
         {"machine", kString},
         {"task",
          {{"type", "object"},
           {"description", "the input measured (matrix, problem size, command line): at most " +
                               std::to_string(kMaxTaskBytes) + " bytes as JSON"}}},
         {"task_features",
          {{"type", "object"},
           {"description", "numbers that place the input among others for transfer: at most " +
                               std::to_string(kMaxTaskBytes) + " bytes as JSON"}}},
         {"objective",
          {{"type", "string"},
           {"maxLength", db::kMaxNameBytes},
           {"description",
            "the objective's name (GET /v1/best?objective= filters by it). Default: named by "
            "the unit taken, as tunebase sweep names it: \"time\" for a time or a plain number "
            "minimized, the unit for another (\"GFLOP/s\"), \"value\" for a plain number "
            "maximized"}}},
         {"direction",
          {{"type", "string"},
           {"enum", {"minimize", "maximize"}},
           {"description",
            "default: minimize; required (400 without it) when \"unit\" (or, with no unit, "
            "\"objective\") is a rate (a name ending in \"/s\", or FLOPS), where higher is "
            "better"}}},
         {"strategy", {{"type", "string"}, {"enum", strategy_names()}}},
         {"strategy_options",
          {{"type", "object"},
           {"description", "at most " + std::to_string(kMaxStrategyOptionsBytes) +
                               " bytes as JSON (tuner/bo.h lists them)"}}},
         {"budget", {{"type", "integer"}, {"minimum", 1}}},
         {"transfer", kBoolean},
         {"prior_machines",
          {{"type", "array"}, {"items", kString}, {"maxItems", kMaxPriorMachines}}},
         {"seed", {{"type", "integer"}, {"minimum", 0}}},
         {"unit",
          {{"type", "string"},
           {"maxLength", kMaxUnitBytes},
           {"description",
            "unit of the objective (\"s\", \"ms\", \"us\", \"ns\", \"GFLOP/s\"); times in "
            "different units are converted when compared or learned from. Default: the unit "
            "of the kernel's other studies of this objective (when none is given, of those "
            "named by their unit) and direction when they agree on one (imports are in "
            "milliseconds), else none; refused (400) when they measure time "
            "in different units. \"\": none (plain numbers). A unit of time however written "
            "(\"sec\", \"MS\", \"µs\") is stored by its short name"}}},
         {"measurement",
          {{"type", "object"},
           {"description",
            "how the objective is measured, kept as settings.measurement (tunebase worker "
            "sends its evaluator's: a PETSc solve's rtol, max_it, residual_tolerance and clock): "
            "workers measuring otherwise are refused, priors come only from studies measured "
            "alike, and GET /v1/best answers from the studies measured as the newest one. At "
            "most " +
                std::to_string(kMaxMeasurementBytes) + " bytes as JSON"}}}},
        {"kernel", "machine"});
    r.conflict_description =
        "a study of this name exists already: error.existing_study_id and the Location header "
        "name it (continue it, or choose another name)";
    r.success_status = 201;
    r.response_schema = study_schema();
    // The newest study's space and settings choose what a measured best answers from.
    r.changes_measurements = true;
  }
  {
    auto& r = route("GET", "/v1/studies", "listStudies", "Every study, or those of one kernel",
                    Access::read, bind(&Service::list_studies));
    r.query = {{"kernel", "string", false, "kernel name", {}},
               {"name",
                "string",
                false,
                "study name: the study of that name (names are unique), or none; with POST "
                "/v1/studies (whose 409 names the study that has the name) a client gets or "
                "creates a study by its name",
                {}},
               after_param("studies"),
               limit_param("studies")};
    r.response_schema =
        object_schema({{"studies", array_of(study_schema())}, {"next_after", kNextAfter}});
  }
  {
    auto& r = route("GET", "/v1/studies/{id}", "getStudy",
                    "A study with its space, trial counts and best trial", Access::read,
                    bind(&Service::get_study));
    r.response_schema = study_schema();
  }
  {
    auto& r = route("GET", "/v1/studies/{id}/trials", "listTrials", "The trials of a study",
                    Access::read, bind(&Service::list_trials));
    // Replies that grow with the study (an imported one has tens of thousands of trials) are
    // built off the I/O threads, which keep answering quick requests meanwhile.
    r.runs = Runs::compute;
    r.query = {{"status",
                "string",
                false,
                "only trials with this status, as the study's trial counts count them: "
                "lease_ended are leases that ended with no result, timeout are evaluations "
                "that timed out",
                {"pending", "ok", "failed", "timeout", "invalid", "lease_ended"}},
               {"client_id",
                "string",
                false,
                "only trials of this client: its leases (with status=pending, its live ones) "
                "and the results it reported",
                {}},
               after_param("trials"),
               limit_param("trials")};
    r.response_schema = object_schema(
        {{"study_id", kInteger}, {"trials", array_of(trial_schema())}, {"next_after", kNextAfter}});
  }
  {
    auto& r = route("GET", "/v1/studies/{id}/relevance", "parameterRelevance",
                    "How much each parameter moves the objective, by the study's GP: shares of "
                    "1 / lengthscale, most relevant first (empty until hyperparameters were "
                    "fitted to at least two successful results per encoded input; with priors, "
                    "from the priors' results at once)",
                    Access::read, bind(&Service::relevance));
    r.runs = Runs::model;  // fits a model
    r.asks_model = true;
    r.response_schema = object_schema(
        {{"study_id", kInteger},
         {"parameters",
          array_of(object_schema({{"name", kString}, {"share", kNumber}}, {"name", "share"}))},
         {"reason", {{"type", "string"}, {"description", "why parameters is empty"}}}},
        {"study_id", "parameters"});
  }
  {
    auto& r = route("POST", "/v1/studies/{id}/stop", "stopStudy",
                    "Stop a study: suggestions answer done from now on; results of its live "
                    "leases are still taken (409 for a completed study)",
                    Access::write, bind(&Service::stop_study));
    r.runs = Runs::writer;
    // Nothing to say: no body, or an empty object (what a client that always sends JSON sends).
    r.request_schema = object_schema(nlohmann::json::object());
    r.request_body_required = false;
    r.response_schema = study_schema();
  }
  {
    auto& r = route("POST", "/v1/studies/{id}/resume", "resumeStudy",
                    "Make a stopped or completed study active again, with a new budget when "
                    "given (also an active study's; 400 for one below its results and live "
                    "leases, 409 when its budget is spent and none is given), as tunebase "
                    "sweep resumes one; a sweep running the study goes on to the new budget",
                    Access::write, bind(&Service::resume_study));
    r.runs = Runs::writer;
    r.request_schema =
        object_schema({{"budget",
                        {{"type", "integer"},
                         {"minimum", 1},
                         {"description",
                          "the study's new budget: at least its results and live leases, and one "
                          "more to take up a study that is not active"}}}},
                      {});
    r.request_body_required = false;  // no body: the budget stays
    r.response_schema = study_schema();
  }
  {
    auto& r = route("DELETE", "/v1/studies/{id}", "deleteStudy",
                    "Delete a study and its trials (a mistaken import, a test run): they leave "
                    "best answers and other studies' priors; its ids are never used again. An "
                    "active study is refused (409): stop it. One with live leases (a worker that "
                    "died holds them up to its lease_seconds) is refused too, naming them and "
                    "their clients, unless force=true ends them with it. Irreversible: back the "
                    "database up first (tunebase backup)",
                    Access::write, bind(&Service::delete_study));
    r.query = {{"force",
                "string",
                false,
                "true: the study's live leases end with it (their clients' results are refused, "
                "404) rather than the deletion refused (409) until they reported or ended",
                {"true", "false"}}};
    r.runs = Runs::writer;
    r.changes_measurements = true;  // best answers and predictions change
    // As stop: no body, or {}; a body with fields (meant for another route) is refused.
    r.request_schema = object_schema(nlohmann::json::object());
    r.request_body_required = false;
    r.response_schema = object_schema(
        {{"deleted", kInteger},
         {"name", kString},
         {"trials", kInteger},
         {"leases_ended",
          {{"type", "integer"}, {"description", "of the trials, live leases ended (force=true)"}}}},
        {"deleted", "name", "trials", "leases_ended"});
  }
  {
    auto& r = route("POST", "/v1/studies/{id}/suggestions", "suggest",
                    "Lease n configurations to a client as pending trials. The live leases the "
                    "client holds already in the study come first (oldest first, renewed to "
                    "this lease_seconds, resumed: true), as Vizier's SuggestTrials gives a "
                    "client its active trials: a client that restarts with its client_id takes "
                    "up what it was evaluating, and asking twice does not lock the budget",
                    Access::write, bind(&Service::suggest));
    r.runs = Runs::compute;
    r.request_schema = object_schema(
        {{"n",
          {{"type", "integer"},
           {"minimum", 1},
           {"maximum", kMaxSuggestionsPerRequest},
           {"default", 1},
           {"description",
            "configurations wanted; fewer come back when the budget or the "
            "space has fewer left (see reason)"}}},
         {"client_id",
          {{"type", "string"},
           {"description",
            "who evaluates them: its results are reported with the same id. One id per "
            "client: two clients sharing one are given each other's live leases"}}},
         {"lease_seconds", lease_seconds_schema()},
         {"resume_leases",
          {{"type", "boolean"},
           {"default", true},
           {"description",
            "false: new leases only, none of the client's own live ones given back (a client "
            "that keeps track of its own: tunebase worker takes up those from before it "
            "started itself, and leaves a twin's alone)"}}}},
        {"client_id"});
    r.response_schema = object_schema(
        {{"study_id", kInteger},
         {"suggestions",
          {{"type", "array"},
           {"items", object_schema({{"trial_id", kInteger},
                                    {"config", kConfig},
                                    {"lease_expires_at", kString},
                                    {"resumed",
                                     {{"type", "boolean"},
                                      {"description",
                                       "a live lease the client held already, given back renewed "
                                       "(false: a new one)"}}}})}}},
         {"done",
          {{"type", "boolean"},
           {"description",
            "no suggestion will come any more: the budget is spent, "
            "every configuration is measured, or the study is not "
            "active"}}},
         {"reason",
          {{"type", "string"},
           {"description",
            "why fewer than n came back (absent when all did); when live leases fill the "
            "budget, it names those that are the client's own"}}},
         {"retry_after_seconds",
          {{"type", "number"},
           {"description",
            "none came back but more may come: ask again after "
            "this long (when the first live lease ends)"}}},
         {"propose_seconds", kNumber},
         {"model",
          {{"type", "object"}, {"description", "what proposed them: strategy, phase, priors"}}}});
  }
  {
    auto& r = route("GET", "/v1/trials/{id}", "getTrial", "One trial", Access::read,
                    bind(&Service::get_trial));
    r.response_schema = trial_schema();
  }
  {
    auto& r =
        route("POST", "/v1/trials/{id}/result", "reportResult",
              "Report the result (or failure) of a leased trial; accepted once (the same result "
              "sent again, every field as before, answers 200 with the trial and "
              "already_stored: true; one that differs in status, value, raw, cost_seconds, "
              "message or metrics is a 409 naming what is stored and what differs), also after "
              "the "
              "lease expired while the configuration has no other result and the budget has "
              "room (else 409): a newer lease of the configuration is then withdrawn, and its "
              "holder's result refused with 409",
              Access::write, batch_one(&Service::report_results));
    r.runs = Runs::writer;
    r.changes_measurements = true;
    r.batch_handler = [this](std::vector<Request*>& all) { return report_results(all); };
    auto props = result_properties();
    props["client_id"] = kString;
    r.request_schema = object_schema(props, {"client_id"});
    r.response_schema = trial_schema();
    r.response_schema["properties"]["already_stored"] = {
        {"type", "boolean"},
        {"description", "present (true) when this result was stored before: nothing changed"}};
  }
  {
    auto& r = route("POST", "/v1/trials/{id}/release", "releaseTrial",
                    "Give a leased trial back without a result (the client cannot evaluate it): "
                    "its configuration may be proposed again at once",
                    Access::write, bind(&Service::release_trial));
    r.runs = Runs::writer;  // a write: it may wait on the file's lock, not on an I/O thread
    r.request_schema = object_schema({{"client_id", kString}}, {"client_id"});
    r.response_schema = trial_schema();
  }
  {
    auto& r = route("POST", "/v1/trials/{id}/lease", "extendLease",
                    "Extend a leased trial's lease to lease_seconds from now (default 3600, "
                    "as for suggestions, whatever the lease was taken for): the client is still "
                    "evaluating it. Short leases renewed "
                    "while the work goes on let a client that dies give its configurations "
                    "back soon",
                    Access::write, bind(&Service::extend_lease));
    r.runs = Runs::writer;
    r.request_schema = object_schema(
        {{"client_id", kString}, {"lease_seconds", lease_seconds_schema()}}, {"client_id"});
    r.response_schema = trial_schema();
  }
  {
    auto& r = route("POST", "/v1/studies/{id}/measurements", "addMeasurements",
                    "Add results measured outside the service (all or none): data the study "
                    "learns from. They count toward the budget like the study's own results "
                    "(so fewer suggestions are left), and are stored even when the budget is "
                    "spent; a configuration the study measured (with another result) or "
                    "leased already is refused (409). Sending the same results again (a retry) "
                    "stores nothing: 200 with their trials and already_stored",
                    Access::write, batch_one(&Service::add_measurements));
    r.runs = Runs::writer;
    r.changes_measurements = true;
    r.may_update = true;  // 200: every result was stored already (a retry)
    r.body_limit = kMaxMeasurementsBodyBytes;
    r.batch_handler = [this](std::vector<Request*>& all) { return add_measurements(all); };
    auto item = result_properties();
    item["config"] = kConfig;
    r.request_schema = object_schema(
        {{"client_id", kString},
         {"measurements", {{"type", "array"}, {"items", object_schema(item, {"config"})}}}},
        {"measurements"});
    r.success_status = 201;
    r.response_schema = object_schema(
        {{"study_id", kInteger}, {"trial_ids", array_of(kInteger)}, {"already_stored", kInteger}},
        {"study_id", "trial_ids"});
  }
  {
    auto& r = route("GET", "/v1/best", "best",
                    "Best known configuration of a kernel on a machine (and task): measured, "
                    "or predicted when nothing was measured there",
                    Access::read, bind(&Service::best));
    r.asks_model = true;  // a prediction is made on the model pool
    r.query = {{"kernel", "string", true, "kernel name", {}},
               {"machine", "string", true, "machine name", {}},
               {"task", "integer", false, "task id (default: any input)", {}, 1},
               {"task_features",
                "string",
                false,
                "an input by its features, a JSON object of numbers as a study's "
                "task_features ({\"n\":4096}): the stored input with those features, else a "
                "prediction for an input measured nowhere, from the others by their features "
                "(not with task)",
                {}},
               {"direction",
                "string",
                false,
                "default: the direction of the machine's studies of the kernel (of the "
                "objective asked; of all machines' when it has none) when they all take one, "
                "else minimize",
                {"minimize", "maximize"}},
               {"objective", "string", false, "objective name (default: any)", {}}};
    r.response_schema = object_schema(
        {{"source", {{"type", "string"}, {"enum", {"measured", "predicted"}}}},
         {"kernel", kString},
         {"machine", kString},
         {"config", kConfig},
         {"objective", {{"type", "number"}, {"description", "its objective value"}}},
         {"unit",
          {{"type", "string"},
           {"nullable", true},
           {"description", "unit of the objective; null for a plain number"}}},
         {"objective_name", {{"type", "string"}, {"description", "(measured)"}}},
         {"trial_id", {{"type", "integer"}, {"description", "(measured)"}}},
         {"study_id", {{"type", "integer"}, {"description", "(measured)"}}},
         {"study", {{"type", "string"}, {"description", "study name (measured)"}}},
         {"measured_configurations",
          {{"type", "integer"},
           {"description",
            "(measured) how many configurations succeeded on the machine (for the task, "
            "direction and objective asked), the best among them"}}},
         {"task_id",
          {{"type", "integer"},
           {"description",
            "the task (input) answered for: measured, or asked for by task or "
            "task_features"}}},
         {"note",
          {{"type", "string"},
           {"description",
            "what to know about the answer, when there is something: the machine is not "
            "registered (predicted as for a new machine; with the registered name it probably "
            "meant, or the machines registered); the input is measured nowhere; several "
            "stored inputs have the task_features given; features no stored input has; "
            "studies of both directions measured the kernel there; fewer than 10 configurations "
            "measured there (a measured best of few)"}}},
         {"task_features",
          {{"type", "object"},
           {"description",
            "(predicted) the task_features asked for, of an input measured "
            "nowhere"}}},
         {"lower",
          {{"type", "number"},
           {"description",
            "(predicted) lower end of the 68% interval of the objective, in its "
            "unit; with one source machine, on that machine's scale"}}},
         {"upper", {{"type", "number"}, {"description", "(predicted) upper end of it"}}},
         {"probability_feasible",
          {{"type", "number"}, {"description", "(predicted) probability that it runs at all"}}},
         {"based_on",
          {{"type", "object"},
           {"description",
            "(predicted) what the prediction rests on: trials, machines, inputs (the "
            "machine and input pairs measured, each a source), failed_here, kernel_version, "
            "model, weights (per source), this_machine_only (true: from M's own measurements of 3 "
            "or more other inputs alone), chosen_from "
            "(measurements or model) and, when chosen from measurements, sources, "
            "sources_that_ran_it and mean_quantile (0: each source's best)"}}}});
  }
  {
    auto& r = route(
        "GET", "/v1/compare", "compareMachines",
        "Machine against machine: what two or more machines measured of a kernel on one input "
        "(the successful configurations each has and shares, the rank correlation of their "
        "values, each machine's best and how it does on the others, configurations that run "
        "on one and fail on the other). 404 for an unknown kernel or machine (naming those "
        "stored), 400 for inputs or objectives that differ, 409 when no two machines share 3 "
        "successful configurations",
        Access::read,
        [this](Request& request) { return compare_machines_response(reader(), request); });
    r.runs = Runs::compute;  // every trial of the kernel on each machine is read
    r.query = {{"kernel", "string", true, "kernel name", {}},
               {"machines",
                "string",
                true,
                "two or more machine names separated by commas (machines=A100,V100)",
                {}},
               {"task",
                "integer",
                false,
                "task id (default: the one input every machine measured)",
                {},
                1},
               {"objective",
                "string",
                false,
                "objective name (default: the one the machines' studies measure)",
                {}}};
    const nlohmann::json best_elsewhere = object_schema(
        {{"from", kString},
         {"to", kString},
         {"config_key", kString},
         {"status",
          {{"type", "string"},
           {"description", "how it did on `to`: ok, failed, timeout, invalid or not_measured"}}},
         {"objective", nullable(kNumber)},
         {"fraction_of_best",
          nullable(
              {{"type", "number"},
               {"description",
                "`to`'s best value over this one (its inverse when maximizing): 1 when `from`'s "
                "best is `to`'s best too, 0.5 when it takes twice as long there"}})}});
    const nlohmann::json one_only =
        object_schema({{"runs_on", kString}, {"fails_on", kString}, {"count", kInteger}});
    r.response_schema = object_schema(
        {{"kernel", kString},
         {"task", object_schema({{"id", kInteger}, {"description", kAnyObject}})},
         {"objective", kString},
         {"direction", kString},
         {"unit", nullable(kString)},
         {"machines",
          array_of(object_schema(
              {{"machine", kString},
               {"configurations",
                {{"type", "integer"}, {"description", "configurations measured (any status)"}}},
               {"ok", {{"type", "integer"}, {"description", "of them, those that ran"}}},
               {"failed", {{"type", "integer"}, {"description", "of them, those that never ran"}}},
               {"best", nullable(object_schema({{"config", kConfig},
                                                {"config_key", kString},
                                                {"objective", kNumber},
                                                {"trial_id", kInteger}}))}}))},
         {"pairs",
          array_of(object_schema(
              {{"machines", array_of(kString)},
               {"measured_on_both", kInteger},
               {"common",
                {{"type", "integer"}, {"description", "configurations that ran on both"}}},
               {"spearman", nullable({{"type", "number"},
                                      {"description",
                                       "Spearman's rank correlation of the values over the common "
                                       "configurations (null below 3; note says why)"}})},
               {"top_k", kInteger},
               {"top_k_overlap",
                {{"type", "integer"},
                 {"description",
                  "how many of each machine's top_k best common configurations are shared"}}},
               {"best_elsewhere", array_of(best_elsewhere)},
               {"runs_on_one_only", array_of(one_only)},
               {"runs_on_one_only_examples",
                {{"type", "array"},
                 {"description",
                  "of each direction, the 5 most frequent failure reasons (as failure_reasons "
                  "groups them): how many configurations (count) and one of them"},
                 {"items", object_schema({{"runs_on", kString},
                                          {"fails_on", kString},
                                          {"config", kConfig},
                                          {"config_key", kString},
                                          {"status", kString},
                                          {"trial_id", kInteger},
                                          {"message", kString},
                                          {"reason", kString},
                                          {"count", kInteger}})}}},
               {"note", kString}}))}});
  }
  {
    auto& r = route("POST", "/v1/predict", "predict",
                    "Predicted objective (mean and uncertainty) of configurations of a study",
                    Access::read, bind(&Service::predict));
    r.runs = Runs::model;
    r.asks_model = true;
    r.body_limit = kMaxMeasurementsBodyBytes;  // room for the 100,000 configurations allowed
    r.request_schema = object_schema(
        {{"study_id", kInteger}, {"configs", {{"type", "array"}, {"items", kConfig}}}},
        {"study_id", "configs"});
    r.response_schema = object_schema(
        {{"study_id", kInteger},
         {"unit",
          {{"type", "string"},
           {"nullable", true},
           {"description", "unit of mean, lower and upper; null for a plain number"}}},
         {"predictions",
          {{"type", "array"},
           {"items",
            object_schema({{"config", kConfig},
                           {"mean",
                            {{"type", "number"},
                             {"description",
                              "the forecast: the median of the predictive "
                              "distribution of a measurement (with std_scale "
                              "log, not the arithmetic mean of the objective)"}}},
                           {"lower",
                            {{"type", "number"},
                             {"description",
                              "16th percentile: lower .. upper is the 68% "
                              "interval of a measurement, in the objective's "
                              "unit; it need not be symmetric around mean (the "
                              "model may warp the objective). Its width is "
                              "calibrated on how far the model's predictions of "
                              "the study's own results missed them when each was "
                              "left out, so that about 68% of measurements fall "
                              "inside"}}},
                           {"upper", {{"type", "number"}, {"description", "84th percentile"}}},
                           {"std",
                            {{"type", "number"},
                             {"description",
                              "half the width of lower .. upper on the model's "
                              "scale, std_scale: log when every value seen is "
                              "positive (about the relative uncertainty), else "
                              "the objective's unit"}}},
                           {"std_scale", {{"type", "string"}, {"enum", {"log", "objective"}}}},
                           {"probability_feasible", kNumber}})}}}});
  }
  {
    auto& r = route("POST", "/v1/import", "importMeasurements",
                    "Upload a Kernel Tuner cache (.json or .json.gz) or T4 file as the "
                    "measurements of a machine",
                    Access::write, bind(&Service::import_file));
    r.created_location = true;
    r.runs = Runs::compute;
    r.changes_measurements = true;
    r.body_limit = kMaxImportBytes;
    r.query = {{"machine", "string", false, "machine name (default: the file's device_name)", {}},
               {"kernel",
                "string",
                false,
                "kernel name (default: the file's kernel_name; T4 files have none)",
                {}},
               {"study_name", "string", false, "name of the new study", {}},
               {"input",
                "string",
                false,
                "the input the measurements are of, as JSON (e.g. {\"problem_size\": [4096, "
                "4096]}); default: the file's problem_size (T4 files name none)",
                {}}};
    r.request_content_type = "application/octet-stream";
    r.request_schema = {{"type", "string"}, {"format", "binary"}};
    r.success_status = 201;
    r.may_update = true;  // 200: the file was imported before, nothing to add
    r.response_schema = object_schema(
        {{"machine_id", kInteger},
         {"kernel_id", kInteger},
         {"kernel", kString},
         {"task_id", kInteger},
         {"study_id", kInteger},
         {"trials", {{"type", "integer"}, {"description", "measurements stored"}}},
         {"failed", {{"type", "integer"}, {"description", "of them, failed configurations"}}},
         {"format", kString},
         {"other_kernel_versions", kInteger},
         {"already_stored",
          {{"type", "integer"},
           {"description",
            "entries the study held already (the file extends an earlier import of this "
            "input: only its new entries were added, counted in trials; all of them, with "
            "trials 0 and status 200, when it was imported before)"}}},
         {"input_added",
          {{"type", "boolean"},
           {"description",
            "imported before under an unknown input (a T4 file's), the study is now of the "
            "input this one names"}}},
         {"notes", array_of(kString)}});
  }
  {
    auto& r = route("GET", "/v1/studies/{id}/export", "exportStudy",
                    "A study and its trials as JSON, CSV or a Kernel Tuner cache file, streamed a "
                    "page of trials at a time",
                    Access::read, bind(&Service::export_study));
    r.runs = Runs::compute;  // as listTrials
    r.query = {{"format",
                "string",
                false,
                "json (default), csv, or kernel_tuner (a Kernel Tuner cache file)",
                {"json", "csv", "kernel_tuner"}}};
    r.response_schema = kAnyObject;
    r.other_responses = {{"text/csv",
                          {{"type", "string"},
                           {"description", "format=csv: a header row, then one row per trial"}}}};
  }
}

db::Store& Service::reader() const {
  return *readers_[next_reader_.fetch_add(1, std::memory_order_relaxed) % readers_.size()];
}

void Service::authorize(const Route& route, Request& request) const {
  const bool needs_token =
      route.access == Access::write || (route.access == Access::read && options_.auth_reads);
  if (!needs_token || !request.token_name.empty()) return;
  if (request.authorization.empty()) {
    throw Unauthorized(route.method + " " + route.pattern +
                       " needs a token: send the header \"Authorization: Bearer <token>\" "
                       "(create one with `tunebase token create NAME --db FILE`)");
  }
  const auto token = bearer_token(request.authorization);
  if (token.empty()) {
    throw Unauthorized("the Authorization header must be \"Bearer <token>\"");
  }
  const auto record = reader().verify_token(token);
  if (!record) throw Unauthorized("the bearer token is not valid (unknown or revoked)");
  request.token_name = record->name;
}

std::string Service::authorize_headers(const std::string& method, const std::string& target,
                                       const std::string& authorization) const {
  Request request;
  request.method = method;
  request.authorization = authorization;
  try {
    split_target(target, request.path, request.query);
  } catch (const std::exception&) {
    return {};  // handle() says what is wrong with the target
  }
  Router::Match match;
  try {
    match = router_.match(request.method, request.path);
  } catch (const std::exception&) {
    return {};  // an unknown route or method: handle() says so
  }
  authorize(*match.route, request);
  return request.token_name;
}

Outcome Service::handle(Request& request, const std::string& target, Runs here) {
  Outcome out;
  out.route = router_.routes().size();
  try {
    if (here == Runs::io) split_target(target, request.path, request.query, &request.raw_query);
    const auto match = router_.match(request.method, request.path);
    out.route = match.index;
    request.params = match.params;
    check_query(*match.route, request);
    authorize(*match.route, request);
    // Routes leave the I/O threads; the model pool may also run quick handlers that found
    // they need it (best known -> predicted).
    if (here == Runs::io && match.route->runs != Runs::io) {
      out.defer_to = match.route->runs;
      return out;
    }
    out.response = dispatch(*match.route, request, here);
    if (out.response.needs_model) {
      // The handler found it must fit a model: run it again on the model pool.
      out.defer_to = Runs::model;
      return out;
    }
    if (match.route->changes_measurements && out.response.status < 300) {
      generation_.fetch_add(1, std::memory_order_release);
    }
  } catch (...) {
    out.response = error_response(std::current_exception());
  }
  return out;
}

std::vector<Outcome> Service::handle_batch(std::vector<Request*>& requests) {
  std::vector<Outcome> out(requests.size());
  // Requests of one route, in arrival order.
  std::map<std::size_t, std::vector<std::size_t>> by_route;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    out[i].route = router_.routes().size();
    try {
      const auto match = router_.match(requests[i]->method, requests[i]->path);
      out[i].route = match.index;
      by_route[match.index].push_back(i);
    } catch (...) {
      out[i].response = error_response(std::current_exception());
    }
  }
  bool wrote = false;
  for (auto& [route_index, members] : by_route) {
    const auto& route = router_.routes()[route_index];
    if (!route.batch_handler) {
      for (auto i : members) out[i] = handle(*requests[i], {}, Runs::writer);
      continue;
    }
    std::vector<Request*> batch;
    for (auto i : members) {
      requests[i]->running_on = Runs::writer;
      batch.push_back(requests[i]);
    }
    std::vector<Response> responses;
    try {
      responses = route.batch_handler(batch);
    } catch (...) {
      responses.assign(batch.size(), error_response(std::current_exception()));
    }
    for (std::size_t k = 0; k < members.size(); ++k) {
      out[members[k]].response = std::move(responses[k]);
      wrote = wrote || (route.changes_measurements && out[members[k]].response.status < 300);
    }
  }
  if (wrote) generation_.fetch_add(1, std::memory_order_release);
  return out;
}

Response Service::error_response(std::exception_ptr error) {
  auto reply = error_reply(error);
  auto response = Response::json(reply.body, reply.status);
  response.headers = std::move(reply.headers);
  return response;
}

Response Service::dispatch(const Route& route, Request& request, Runs here) {
  request.running_on = here;
  auto response = route.handler(request);
  if (response.status == 200 && route.success_status != 200 && !route.may_update)
    response.status = route.success_status;
  return response;
}

// --- machines

Response Service::create_machine(Request& request) {
  const auto body = parse_json_body(request.body);
  JsonReader r(body);
  MachineInfo info;
  info.name = checked_name(r, "name", true);
  const auto* fingerprint = r.optional_object("fingerprint");
  r.finish();
  const auto known = store_.find_machine(info.name);
  // Registering a known name again without a fingerprint keeps the one stored.
  if (known && !fingerprint) return Response::json(machine_json(*known));
  if (fingerprint) {
    check_json_size(*fingerprint, "fingerprint", kMaxFingerprintBytes,
                    " (what the machine is: CPU, GPUs, memory)");
    info.fingerprint = *fingerprint;
  }
  refresh_fingerprint_hash(info);
  return Response::json(machine_json(store_.upsert_machine(info)), known ? 200 : 201);
}

Response Service::list_machines(Request& request) {
  return Response::json(listing_page(request, "machines", reader().list_machines(),
                                     [](const db::MachineRecord& m) { return machine_json(m); }));
}

// --- studies

Response Service::create_study(Request& request) {
  const auto body = parse_json_body(request.body);
  JsonReader r(body);
  db::NewStudy study;
  study.name = checked_name(r, "name", false);
  if (!study.name.empty()) {
    in_field("name", [&] { db::check_study_name(study.name); });
  }
  const auto kernel_name = checked_name(r, "kernel", true);
  const auto* space_json = r.optional_object("space");
  const auto machine_name = checked_name(r, "machine", true);
  const auto* task = r.optional_object("task");
  const auto* task_features = r.optional_object("task_features");
  const auto objective = r.optional_string("objective");
  if (objective) check_name_in(*objective, "objective", "\"objective\"");
  const auto direction = r.optional_choice("direction", {"minimize", "maximize"});
  study.direction = db::direction_from_string(direction.value_or("minimize"));
  const auto strategy = r.optional_choice("strategy", strategy_names());
  const auto* strategy_options = r.optional_object("strategy_options");
  study.budget = r.optional_integer("budget", 1, db::kMaxStudyBudget);
  const bool transfer = r.optional_bool("transfer").value_or(true);
  const auto* prior_machines = r.optional_array("prior_machines");
  const auto seed = r.optional_integer("seed", 0);
  const auto unit = r.optional_string("unit");
  const auto* measurement = r.optional_object("measurement");
  r.finish();
  if (unit && unit->size() > kMaxUnitBytes) {
    throw FieldError("unit", "\"unit\" must be at most " + std::to_string(kMaxUnitBytes) +
                                 " bytes (\"s\", \"ms\", \"GFLOP/s\"), got " +
                                 std::to_string(unit->size()));
  }
  if (unit && !unit->empty()) check_name_in(*unit, "unit", "\"unit\"");
  // A rate (GFLOP/s) minimised would make the slowest configuration the best, as tunebase
  // sweep --unit GFLOP/s without --maximize would: the direction must be said. An objective
  // named as a rate with no unit is one too.
  const bool rate_unit = unit && is_rate_unit(*unit);
  const bool no_unit = !unit || unit->empty();  // "unit": "" says no more than none
  if (!direction && (rate_unit || (no_unit && objective && is_rate_unit(*objective)))) {
    throw FieldError("direction", std::string(rate_unit ? "\"unit\" \"" + *unit
                                                        : "\"objective\" \"" + *objective) +
                                      "\" is a rate, where higher is better: give \"direction\": "
                                      "\"maximize\" (or \"direction\": \"minimize\" to minimise "
                                      "it anyway; a study minimises its objective unless told "
                                      "otherwise)");
  }
  if (task) check_json_size(*task, "task", kMaxTaskBytes, " (a description of the input)");
  if (task_features) check_json_size(*task_features, "task_features", kMaxTaskBytes);
  if (strategy_options) {
    check_json_size(*strategy_options, "strategy_options", kMaxStrategyOptionsBytes);
  }
  if (measurement) {
    check_json_size(*measurement, "measurement", kMaxMeasurementBytes,
                    " (how the objective is measured: {\"rtol\": 1e-08, \"clock\": \"wall\"})");
  }
  if (prior_machines) {
    if (prior_machines->size() > kMaxPriorMachines) {
      throw FieldError("prior_machines", "\"prior_machines\" may name at most " +
                                             std::to_string(kMaxPriorMachines) + " machines, got " +
                                             std::to_string(prior_machines->size()));
    }
    for (std::size_t i = 0; i < prior_machines->size(); ++i) {
      const auto field = "prior_machines[" + std::to_string(i) + "]";
      if (!(*prior_machines)[i].is_string()) {
        throw FieldError(field, "\"prior_machines\" must list machine names (strings), got " +
                                    (*prior_machines)[i].dump());
      }
      check_name_in((*prior_machines)[i].get<std::string>(), field, "\"" + field + "\"");
    }
  }

  // The space: given, or the latest version of a known kernel.
  std::optional<SearchSpace> space;
  if (space_json) {
    space = in_field("space", [&] {
      // Kernel Tuner's tune_params keep their order (the body parsed again, ordered).
      if (space_json->contains("tune_params") || space_json->contains("ConfigurationSpace")) {
        return SearchSpace::from_document(
            parse_json_text<nlohmann::ordered_json>(request.body, "the request body")["space"]);
      }
      return SearchSpace::from_json(*space_json);
    });
  } else if (auto known = store_.find_kernel(kernel_name)) {
    space = SearchSpace::from_json(known->space);
  } else {
    throw FieldError("space",
                     "kernel \"" + kernel_name + "\" is not known yet, so \"space\" is required");
  }
  in_field("space", [&] {
    if (space->enumerable() && space->valid_count() == 0) {
      throw InvalidInput("no configuration of the space satisfies its constraints");
    }
    // Not enumerated: every strategy starts from random draws, and a space none of whose
    // draws is valid (x == 0.5 on a real) would be answered "no new configuration" forever.
    Rng rng(0);
    return space->sample(rng);
  });
  const nlohmann::json options = strategy_options ? *strategy_options : nlohmann::json::object();
  in_field("strategy_options", [&] {
    auto made = make_strategy(strategy.value_or("bo"), options);
    require_own_options(strategy.value_or("bo"), options);
    return made;
  });
  if (strategy) in_field("strategy", [&] { require_searchable(*strategy, *space); });

  if (!study.name.empty()) {
    if (const auto existing = store_.find_study(study.name)) {
      throw study_exists(*existing, measurement ? *measurement : nlohmann::json::object());
    }
  }
  const auto machine = store_.find_machine(machine_name);
  if (!machine) {
    throw FieldError("machine", "unknown machine \"" + machine_name +
                                    "\"; register it with POST /v1/machines (GET /v1/machines "
                                    "lists the known ones)");
  }
  if (prior_machines) {
    in_field("prior_machines", [&] {
      require_prior_machines(store_, prior_machines->get<std::vector<std::string>>());
    });
  }
  if (task_features) check_task_features(store_, kernel_name, task, *task_features);
  // Values reported without a unit are taken to be in the one the kernel's data is in (an
  // imported Kernel Tuner cache's milliseconds, for one); "" given: plain numbers.
  // A unit of time however written ("sec", "MS", "µs") is stored by its short name, as
  // tunebase sweep --unit stores it.
  std::optional<std::string> unit_taken;
  if (!unit) {
    unit_taken = kernel_unit(store_, kernel_name, objective, study.direction);
  } else if (!unit->empty()) {
    const auto time = short_time_unit(*unit);
    unit_taken = time.empty() ? *unit : time;
  }
  // Left out, the objective is named by the unit taken, as tunebase sweep names it ("time",
  // "GFLOP/s", "value"): GET /v1/best?objective= finds it by that name.
  study.objective = objective.value_or(
      default_objective_name(unit_taken.value_or(""), study.direction == db::Direction::minimize));
  const auto kernel = store_.upsert_kernel(kernel_name, *space);
  const auto task_record =
      store_.upsert_task(kernel_name, task ? *task : nlohmann::json::object(),
                         task_features ? *task_features : nlohmann::json::object());
  study.kernel = kernel.id;
  study.machine = machine->id;
  study.task = task_record.id;
  study.settings = {{"transfer", transfer}, {"strategy_options", options}};
  if (prior_machines) study.settings["prior_machines"] = *prior_machines;
  if (seed) study.settings["seed"] = *seed;
  if (unit_taken) study.settings["unit"] = *unit_taken;
  // Kept as tunebase sweep keeps its evaluator's: workers measuring otherwise are refused, and
  // priors and the measured best take only studies measured alike (db::measurement_of). {} is
  // no setting, as with none.
  if (measurement && !measurement->empty()) study.settings["measurement"] = *measurement;
  if (strategy) {
    study.strategy = *strategy;
  } else {
    // Unless chosen, the strategy follows what there is to learn from: bo-transfer when other
    // machines or tasks measured this kernel version (and transfer is on), else bo; and it
    // goes on following it (a study made before its priors were imported takes them then).
    study.settings["strategy_default"] = true;
    study.strategy = default_strategy(
        has_priors(store_, target_prior_query(kernel, machine->id, task_record.id, study.objective,
                                              study.direction, study.settings)));
  }
  const auto created = [&] {
    try {
      return store_.create_study(study);
    } catch (const Conflict&) {
      // Another request made a study of this name since it was looked for: answered as if
      // it had been there, so that every worker of a get-or-create race learns its id.
      if (const auto existing = store_.find_study(study.name)) {
        throw study_exists(*existing, db::measurement_of(study.settings));
      }
      throw;
    }
  }();
  auto response = Response::json(study_json(reader(), created, true), 201);
  response.headers.emplace_back("Location", "/v1/studies/" + std::to_string(created.id.value));
  return response;
}

Response Service::list_studies(Request& request) {
  const auto kernel = request.query_value("kernel").value_or("");
  auto studies = [&] {
    // By name: the one study of that name (names are unique), for a client that gets or
    // creates a study by its name.
    if (const auto name = checked_query_name(request, "name")) {
      std::vector<db::StudyRecord> named;
      if (auto s = reader().find_study(*name); s && (kernel.empty() || s->kernel_name == kernel)) {
        named.push_back(std::move(*s));
      }
      return named;
    }
    return reader().list_studies(kernel);
  }();
  return Response::json(listing_page(request, "studies", studies, [&](const db::StudyRecord& s) {
    return study_json(reader(), s, false);
  }));
}

Response Service::get_study(Request& request) {
  const db::StudyId id{request.id_param("id")};
  const auto study = reader().get_study(id);
  auto j = study_json(reader(), study, true);
  const auto best = reader().best_trial(id);
  j["best"] = best ? trial_json(*best) : nlohmann::json(nullptr);
  j["failure_reasons"] = failure_reasons_json(reader(), id);
  return Response::json(j);
}

// Streamed a page at a time, as exports are: a study of any size is never one reply in memory.
Response Service::list_trials(Request& request) {
  const db::StudyId id{request.id_param("id")};
  db::TrialRange range;
  if (const auto status = request.query_value("status")) {
    if (*status == "lease_ended") {
      range.lease_ended = true;
    } else {
      range.status = trial_status_from_string(*status);
    }
  }
  range.client_id = checked_query_name(request, "client_id");
  if (request.query_value("after")) range.after = integer_query(request, "after");
  // With a limit, one trial more than it is read: whether there is a next page.
  const bool limited = request.query_value("limit").has_value();
  const auto limit = limited ? static_cast<std::size_t>(integer_query(request, "limit"))
                             : std::numeric_limits<std::size_t>::max();
  // NotFound before anything is sent.
  auto pages = std::make_shared<db::TrialPages>(
      reader(), id, range, std::min(limit, db::TrialPages::kDefaultPageTrials - 1) + 1);
  auto response = Response::text("{\"study_id\":" + std::to_string(id.value) + ",\"trials\":[",
                                 "application/json");
  struct Walk {
    std::size_t listed = 0;
    std::int64_t last = 0;
    bool ended = false;
  };
  auto walk = std::make_shared<Walk>();
  response.more = [pages, walk, limited, limit](std::string& out) {
    if (walk->ended) return false;
    const auto page = pages->next();
    bool more = false;  // a trial beyond the limit: there is a next page
    for (const auto& t : page) {
      if (walk->listed == limit) {
        more = true;
        break;
      }
      if (walk->listed++ > 0) out += ',';
      out += db::json_text(trial_json(t));
      walk->last = t.id.value;
    }
    walk->ended = page.empty() || more;
    if (!walk->ended) return true;
    out += ']';
    if (limited) out += ",\"next_after\":" + (more ? std::to_string(walk->last) : "null");
    out += '}';
    return true;
  };
  return response;
}

Response Service::get_trial(Request& request) {
  return Response::json(trial_json(reader().get_trial(db::TrialId{request.id_param("id")})));
}

// --- ask / tell

Response Service::release_trial(Request& request) {
  const db::TrialId id{request.id_param("id")};
  const auto body = parse_json_body(request.body);
  JsonReader r(body);
  const auto client_id = checked_name(r, "client_id", true);
  r.finish();
  return Response::json(trial_json(studies_.release(id, client_id)));
}

Response Service::extend_lease(Request& request) {
  const db::TrialId id{request.id_param("id")};
  const auto body = parse_json_body(request.body);
  JsonReader r(body);
  const auto client_id = checked_name(r, "client_id", true);
  const double lease = read_lease_seconds(r);
  r.finish();
  return Response::json(trial_json(studies_.extend(id, client_id, lease)));
}

Response Service::relevance(Request& request) {
  const db::StudyId id{request.id_param("id")};
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : studies_.relevance(id))
    list.push_back({{"name", r.name}, {"share", r.share}});
  nlohmann::json reply{{"study_id", id.value}, {"parameters", list}};
  if (list.empty()) reply["reason"] = no_relevance_reason(reader(), id);
  return Response::json(reply);
}

Response Service::stop_study(Request& request) {
  const db::StudyId id{request.id_param("id")};
  require_no_fields(request);
  const auto stopped = studies_.stop(id);
  return Response::json(study_json(reader(), stopped, false));
}

Response Service::resume_study(Request& request) {
  const db::StudyId id{request.id_param("id")};
  std::optional<std::int64_t> budget;
  if (!request.body.empty()) {
    const auto body = parse_json_body(request.body);
    JsonReader r(body);
    budget = r.optional_integer("budget", 1, db::kMaxStudyBudget);
    r.finish();
  }
  const auto resumed = studies_.resume(id, budget);
  return Response::json(study_json(reader(), resumed, false));
}

Response Service::delete_study(Request& request) {
  const db::StudyId id{request.id_param("id")};
  require_no_fields(request);  // before anything irreversible
  const auto leases = request.query_value("force") == "true" ? db::Store::LiveLeases::end
                                                             : db::Store::LiveLeases::refuse;
  const auto [record, deleted] = studies_.remove(id, leases);
  return Response::json({{"deleted", id.value},
                         {"name", record.name},
                         {"trials", deleted.trials},
                         {"leases_ended", deleted.leases_ended}});
}

Response Service::suggest(Request& request) {
  const db::StudyId id{request.id_param("id")};
  const auto body = parse_json_body(request.body);
  JsonReader r(body);
  const auto n = r.optional_integer("n", 1, kMaxSuggestionsPerRequest).value_or(1);
  const auto client_id = checked_name(r, "client_id", true);
  const double lease = read_lease_seconds(r);
  const bool resume = r.optional_bool("resume_leases").value_or(true);
  r.finish();
  const auto result = studies_.suggest(id, static_cast<std::size_t>(n), client_id, lease, resume);
  metrics_->record_suggestions(result.propose_seconds, result.leases.size());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& l : result.leases) {
    list.push_back({{"trial_id", l.trial.value},
                    {"config", l.config},
                    {"lease_expires_at", l.expires_at},
                    {"resumed", l.resumed}});
  }
  nlohmann::json j{{"study_id", id.value},
                   {"suggestions", list},
                   {"done", result.done},
                   {"propose_seconds", result.propose_seconds},
                   {"model", result.model}};
  if (!result.reason.empty()) j["reason"] = result.reason;
  // Live leases that end without a result free their places: ask again when the first ends
  // (at least 1 s, at most an hour; a release may free one sooner).
  if (result.leases.empty() && !result.done) {
    j["retry_after_seconds"] = std::clamp(result.retry_after_seconds.value_or(1.0), 1.0, 3600.0);
  }
  return Response::json(j);
}

std::vector<Response> Service::report_results(std::vector<Request*>& requests) {
  std::vector<Response> out(requests.size());
  std::vector<StudyManager::Report> reports;
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      const db::TrialId id{requests[i]->id_param("id")};
      const auto body = parse_json_body(requests[i]->body);
      JsonReader r(body);
      auto client_id = checked_name(r, "client_id", true);
      auto result = read_result(r);
      r.finish();
      reports.push_back({id, std::move(client_id), std::move(result)});
      positions.push_back(i);
    } catch (...) {
      out[i] = error_response(std::current_exception());
    }
  }
  auto outcomes = studies_.report_all(reports);
  for (std::size_t k = 0; k < outcomes.size(); ++k) {
    if (outcomes[k].error) {
      out[positions[k]] = error_response(outcomes[k].error);
      continue;
    }
    auto reply = trial_json(*outcomes[k].record);
    if (outcomes[k].already_stored) {
      reply["already_stored"] = true;
    } else {
      metrics_->record_result(reports[k].result.status);
    }
    out[positions[k]] = Response::json(reply);
  }
  return out;
}

std::vector<Response> Service::add_measurements(std::vector<Request*>& requests) {
  std::vector<Response> out(requests.size());
  std::vector<StudyManager::MeasurementBatch> batches;
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      StudyManager::MeasurementBatch batch;
      batch.study = db::StudyId{requests[i]->id_param("id")};
      (void)studies_.space(batch.study);  // an unknown study is a 404 whatever the body holds
      const auto body = parse_json_body(requests[i]->body);
      JsonReader r(body);
      batch.client_id = checked_name(r, "client_id", false);
      if (batch.client_id.empty()) batch.client_id = "external";
      const auto& list = r.required_array("measurements");
      r.finish();
      if (list.empty() || list.size() > kMaxMeasurementsPerRequest) {
        throw FieldError("measurements", "\"measurements\" must hold 1 to " +
                                             std::to_string(kMaxMeasurementsPerRequest) +
                                             " entries");
      }
      for (std::size_t j = 0; j < list.size(); ++j) {
        JsonReader item(list[j], "measurements[" + std::to_string(j) + "]");
        batch.configs.push_back(item.required_object("config"));
        batch.results.push_back(read_result(item));
        item.finish();
      }
      batches.push_back(std::move(batch));
      positions.push_back(i);
    } catch (...) {
      out[i] = error_response(std::current_exception());
    }
  }
  auto outcomes = studies_.add_measurements_all(batches);
  for (std::size_t k = 0; k < outcomes.size(); ++k) {
    if (outcomes[k].error) {
      out[positions[k]] = error_response(outcomes[k].error);
      continue;
    }
    const auto& outcome = outcomes[k];
    nlohmann::json ids = nlohmann::json::array();
    for (const auto& t : outcome.trials) ids.push_back(t.value);
    nlohmann::json reply{{"study_id", batches[k].study.value}, {"trial_ids", ids}};
    // A retry of results stored already: answered with their trials, stored once. 201 when
    // anything new was stored.
    if (outcome.already_stored > 0) reply["already_stored"] = outcome.already_stored;
    const bool stored_any = outcome.already_stored < outcome.trials.size();
    if (stored_any) {
      for (const auto& m : batches[k].results) metrics_->record_result(m.status);
    }
    out[positions[k]] = Response::json(reply, stored_any ? 201 : 200);
  }
  return out;
}

// --- queries

Response Service::best(Request& request) {
  // The rules POST /v1/machines applies: a name no machine can have is a mistake.
  const auto kernel = *checked_query_name(request, "kernel");
  const auto machine_name = *checked_query_name(request, "machine");
  std::optional<db::TaskId> task;
  if (request.query_value("task")) task = db::TaskId{integer_query(request, "task")};
  // An input given by its features (a problem size at configure time): the stored task with
  // those features, else an input measured nowhere, predicted from the others by them.
  std::optional<nlohmann::json> features;
  if (const auto text = request.query_value("task_features")) {
    if (task) {
      throw FieldError("query.task_features",
                       "give task (a stored input's id) or task_features (an input by its "
                       "features), not both");
    }
    features = in_field("query.task_features", [&] {
      return parse_json_text(*text, "task_features", DuplicateKeys::refuse);
    });
    if (!features->is_object() || features->empty()) {
      throw FieldError("query.task_features",
                       "task_features is a JSON object of numbers, as a study's "
                       "(task_features={\"n\":4096}); got " +
                           db::json_text(*features).substr(0, 80));
    }
    check_feature_numbers(*features, "query.task_features");
  }
  // Left out, the direction is the kernel's studies' (read below, past the cache).
  std::optional<db::Direction> asked_direction;
  if (const auto d = request.query_value("direction")) {
    asked_direction = db::direction_from_string(*d);
  }
  const auto objective = checked_query_name(request, "objective").value_or("");

  // The question without the machine (what every unregistered machine shares), and with it.
  const std::string query_key =
      kernel + '\n' + (task ? std::to_string(task->value) : "") + '\n' +
      (features ? db::json_text(*features) : std::string()) + '\n' +
      (asked_direction ? std::string(db::to_string(*asked_direction)) : std::string()) + '\n' +
      objective;
  const std::string cache_key = query_key + '\n' + machine_name;
  const auto generation = generation_.load(std::memory_order_acquire);
  const auto now = std::chrono::steady_clock::now();
  // What the machine has tried of the kernel (failures too: a prediction leaves out what
  // failed there): a cached prediction is reused only while it is the same.
  const auto trials_here = [&]() -> std::int64_t {
    const auto m = reader().find_machine(machine_name);
    if (!m) return 0;
    std::int64_t n = 0;
    for (const auto& [study, counts] :
         reader().study_trial_counts({.kernel_name = kernel, .machine = m->id})) {
      // A pending trial that failed leaves the total as it was: failures count apart.
      n += counts.total +
           (std::int64_t{1} << 32) * (counts.failed + counts.timeout + counts.invalid);
    }
    return n;
  };
  std::optional<Response> cached_prediction;
  std::int64_t cached_trials_here = 0;
  {
    std::shared_lock lock(cache_mutex_);
    auto it = best_cache_.find(cache_key);
    if (it != best_cache_.end() && it->second.generation == generation &&
        now < it->second.expires) {
      if (!it->second.predicted) return it->second.response;
      cached_prediction = it->second.response;
      cached_trials_here = it->second.trials_here;
    }
  }
  if (cached_prediction && trials_here() != cached_trials_here) cached_prediction.reset();
  auto remember = [&](Response response, std::chrono::steady_clock::duration ttl, bool predicted) {
    const std::int64_t tried = predicted ? trials_here() : 0;
    std::unique_lock lock(cache_mutex_);
    // Bounded: names are the client's to choose.
    if (best_cache_.size() >= kMaxCachedAnswers) best_cache_.clear();
    best_cache_[cache_key] = {generation, now + ttl, response, predicted, tried};
    return response;
  };

  // An unknown kernel, objective or task is a mistake to report, not something to predict for.
  if (!cached_prediction && !reader().find_kernel(kernel)) {
    throw NotFound("unknown kernel \"" + kernel + "\"; " + stored_kernels_text(reader()));
  }
  if (!objective.empty()) {
    bool measured = false;
    for (const auto& s : reader().list_studies(kernel))
      measured = measured || s.objective == objective;
    if (!measured) {
      throw NotFound("kernel \"" + kernel + "\" has no studies of objective \"" + objective +
                     "\"; its studies measure " + stored_objectives_text(reader(), kernel) +
                     " (leave out objective for any)");
    }
  }
  // A machine the store does not know yet measured nothing: it gets a prediction, which is
  // what a build system asks for on a new machine at configure time.
  const auto machine = reader().find_machine(machine_name);
  // An input given by its features: the stored input with those features (one this machine
  // measured, when several have them), before the direction is read from its studies.
  std::vector<std::string> notes;
  if (features) {
    std::vector<db::TaskId> matching;
    std::set<std::string> known_names;
    for (const auto& t : reader().list_tasks(kernel)) {
      const auto f = task_features_of(t);
      for (const auto& [name, value] : f.items()) known_names.insert(name);
      if (f == *features) matching.push_back(t.id);
    }
    const auto measured_here = [&](db::TaskId t) {
      if (!machine) return false;
      for (const auto& s : reader().list_studies(kernel)) {
        if (s.machine_id == machine->id && s.task_id == t) return true;
      }
      return false;
    };
    if (!matching.empty()) {
      const auto here = std::find_if(matching.begin(), matching.end(), measured_here);
      task = here != matching.end() ? *here : matching.front();
      if (matching.size() > 1) {
        notes.push_back(std::to_string(matching.size()) +
                        " stored inputs have these task_features; answered for task " +
                        std::to_string(task->value) + " (task=ID asks for another)");
      }
    }
    std::string unknown;
    for (const auto& [name, value] : features->items()) {
      if (!known_names.count(name)) unknown += (unknown.empty() ? "\"" : ", \"") + name + "\"";
    }
    std::string missing;
    for (const auto& n : known_names) {
      if (!features->contains(n)) missing += (missing.empty() ? "\"" : ", \"") + n + "\"";
    }
    if (!missing.empty() && matching.empty()) {
      notes.push_back("task_features lacks " + missing +
                      ", which stored inputs have: the model takes the middle of their range");
    }
    if (!unknown.empty() && matching.empty()) {
      std::string names;
      for (const auto& n : known_names) names += (names.empty() ? "" : ", ") + n;
      notes.push_back("no stored input of kernel \"" + kernel + "\" has the feature " + unknown +
                      ", which the model leaves out (theirs: " +
                      (names.empty() ? std::string("none") : names) + ")");
    }
  }
  const bool new_input = features && !task;
  // Left out, the direction of this machine's studies of the kernel, else of all of them.
  const auto kernel_direction = studies_direction(
      reader(), kernel, objective, machine ? std::optional(machine->id) : std::nullopt, task);
  const auto direction =
      asked_direction.value_or(kernel_direction.value_or(db::Direction::minimize));
  if (task) {
    const auto t = reader().get_task(*task);
    if (t.kernel_name != kernel) {
      throw FieldError("query.task", "task " + std::to_string(task->value) +
                                         " is an input of kernel \"" + t.kernel_name +
                                         "\", not \"" + kernel + "\"");
    }
  }
  // An input measured nowhere has no measured best, here or anywhere.
  const auto trial = machine && !new_input
                         ? reader().best_trial(kernel, machine->id, task, direction, objective)
                         : std::nullopt;
  if (trial) {
    const auto study = reader().get_study(trial->study_id);
    nlohmann::json j{{"source", "measured"},
                     {"kernel", kernel},
                     {"machine", machine_name},
                     {"config", trial->config},
                     {"objective", trial->result.objective},
                     {"unit", unit_json(study)},
                     {"objective_name", study.objective},
                     {"trial_id", trial->id.value},
                     {"study_id", study.id.value},
                     {"study", study.name},
                     {"task_id", study.task_id.value}};
    // Measured both ways here (a time and a rate, say), the direction left out picked one.
    const auto other =
        direction == db::Direction::minimize ? db::Direction::maximize : db::Direction::minimize;
    if (!asked_direction && reader().best_trial(kernel, machine->id, task, other, objective)) {
      const std::string name(db::to_string(other));
      notes.push_back("studies of both directions measured kernel \"" + kernel + "\" on \"" +
                      machine_name + "\": this is the " + std::string(db::to_string(direction)) +
                      " one; direction=" + name + " gives the other");
    }
    const auto few =
        measured_configurations(reader(), kernel, *machine, task, direction, objective, study);
    j["measured_configurations"] = few.configurations;
    if (!few.other_spaces.empty()) notes.push_back(few.other_spaces);
    if (!few.other_measurements.empty()) notes.push_back(few.other_measurements);
    if (!few.note.empty()) notes.push_back(few.note);
    if (!notes.empty()) j["note"] = joined_notes(notes);
    return remember(Response::json(j), options_.best_cache_ttl, false);
  }
  // A prediction stays cached longer (it needs a model fit), but never past a measurement on
  // the machine, which another process (a sweep, an import) may have stored since: the query
  // above sees those at once.
  if (cached_prediction) return *cached_prediction;
  // A machine that is not registered is said to be, as tunebase best says it: a misspelt name
  // would otherwise get a new machine's prediction without a word. A name registered but for
  // case or spaces is probably a slip; else the note names the machines registered.
  const auto predicted_answer = [&](const PredictedBest& prediction) {
    auto j = predicted_best_json(kernel, machine_name, prediction);
    if (task) j["task_id"] = task->value;
    auto said = notes;
    if (prediction.forecast.interval_unknown) said.emplace_back(kIntervalUnknownNote);
    if (const auto outside = features_outside_note(prediction); !outside.empty()) {
      said.push_back(outside);
    }
    if (new_input) {
      j["task_features"] = *features;
      said.push_back(
          "an input measured nowhere: predicted from the inputs measured, by their features; "
          "its objective may lie far outside the interval, which is the measured inputs' "
          "(the configuration is the better guess)");
    }
    if (!machine) {
      std::string note =
          "machine \"" + machine_name + "\" is not registered: predicted as for a new machine";
      if (const auto similar = similar_machine_name(reader(), machine_name); !similar.empty()) {
        note += "; did you mean \"" + similar + "\"?";
      } else if (const auto known = stored_machines_text(reader(), "GET /v1/machines lists all");
                 !known.empty()) {
        note += " (registered: " + known + ")";
      }
      said.push_back(std::move(note));
    }
    if (!said.empty()) j["note"] = joined_notes(said);
    return j;
  };
  // A machine the store does not know gets the same prediction under any name: one model fit
  // answers every new CI runner (each name used to pay its own, seconds on a busy server).
  if (!machine) {
    std::shared_lock lock(cache_mutex_);
    auto it = unregistered_predictions_.find(query_key);
    if (it != unregistered_predictions_.end() && it->second.generation == generation &&
        now < it->second.expires) {
      auto prediction = it->second.prediction;
      lock.unlock();
      return remember(Response::json(predicted_answer(prediction)), kPredictedBestTtl, true);
    }
  }
  // Nothing measured here: a prediction from other machines' measurements needs a model fit.
  if (request.running_on != Runs::model) return Response::model_needed();
  const auto predicted =
      new_input ? studies_.predict_best(kernel, machine ? std::optional(machine->id) : std::nullopt,
                                        std::nullopt, direction, objective, *features,
                                        reader().find_kernel(kernel)->version)
                : studies_.predict_best(kernel, machine ? std::optional(machine->id) : std::nullopt,
                                        task, direction, objective);
  if (predicted && !machine) {
    std::unique_lock lock(cache_mutex_);
    if (unregistered_predictions_.size() >= kMaxCachedAnswers) unregistered_predictions_.clear();
    unregistered_predictions_[query_key] = {generation, now + kPredictedBestTtl, *predicted};
  }
  if (!predicted) {
    std::string filters = "direction " + std::string(db::to_string(direction));
    if (!objective.empty()) filters += ", objective \"" + objective + "\"";
    if (task) filters += ", task " + std::to_string(task->value);
    // A build system asking for a throughput without direction=maximize got only this 404.
    const auto other =
        direction == db::Direction::minimize ? db::Direction::maximize : db::Direction::minimize;
    const std::string other_name(db::to_string(other));
    const bool other_way =
        machine && reader().best_trial(kernel, machine->id, task, other, objective).has_value();
    // Evaluations that all failed are something measured, just nothing that worked.
    const auto all_failed = machine && !new_input
                                ? all_failed_here(reader(), kernel, machine->id, task, objective)
                                : std::nullopt;
    if (all_failed) {
      filters += "; " + all_failed_text(*all_failed, [](db::StudyId id) {
                   const auto n = std::to_string(id.value);
                   return "GET /v1/studies/" + n + " (tunebase trials --study " + n + ")";
                 });
    }
    throw NotFound(std::string(all_failed ? "no successful measurement" : "nothing measured") +
                   " for kernel \"" + kernel + "\" on machine \"" + machine_name + "\" (" +
                   filters + ")" +
                   (other_way ? "; what was measured there is in studies that " + other_name +
                                    ": ask with direction=" + other_name
                    : kernel_direction == other
                        ? "; the kernel's studies all " + other_name +
                              ": ask with direction=" + other_name + " (or leave it out)"
                        : ", and too few measurements of it on other machines to predict "
                          "from" +
                              measured_otherwise_text(reader(), kernel)));
  }
  return remember(Response::json(predicted_answer(*predicted)), kPredictedBestTtl, true);
}

Response Service::predict(Request& request) {
  const auto body = parse_json_body(request.body);
  JsonReader r(body);
  const db::StudyId id{r.required_integer("study_id", 1)};
  const auto& list = r.required_array("configs");
  r.finish();
  if (list.empty() || list.size() > kMaxPredictConfigs) {
    throw FieldError(
        "configs", "\"configs\" must hold 1 to " + std::to_string(kMaxPredictConfigs) + " entries");
  }
  const auto space = studies_.space(id);
  std::vector<Configuration> configs;
  for (std::size_t i = 0; i < list.size(); ++i) {
    configs.push_back(in_field("configs[" + std::to_string(i) + "]",
                               [&] { return space->config_from_json(list[i]); }));
  }
  const auto forecasts = studies_.predict(id, configs);
  if (forecasts.empty()) {
    throw too_few_for_a_model(reader(), id);
  }
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < forecasts.size(); ++i) {
    out.push_back(forecast_json(space->config_to_json(configs[i]), forecasts[i]));
  }
  return Response::json(
      {{"study_id", id.value}, {"unit", unit_json(reader().get_study(id))}, {"predictions", out}});
}

// --- import / export

Response Service::import_file(Request& request) {
  // The upload is parsed from memory: no name from the request reaches the filesystem.
  MeasuredDataset dataset;
  if (request.content_type.starts_with("multipart/")) {
    throw FieldError("body",
                     "the file came as a multipart form (curl -F); send the file itself as the "
                     "body: curl --data-binary @FILE -H 'Content-Type: application/octet-stream'");
  }
  try {
    dataset = in_field("body", [&] {
      return parse_measurements(request.body, "the uploaded file", kMaxImportTextBytes);
    });
  } catch (const IoError& e) {
    throw FieldError("body", e.what());
  }
  db::ImportOptions options;
  options.machine_name = checked_query_name(request, "machine").value_or("");
  options.kernel_name = checked_query_name(request, "kernel").value_or("");
  if (auto s = request.query_value("study_name")) options.study_name = *s;
  if (auto input = request.query_value("input")) {
    options.input = in_field(
        "query.input", [&] { return parse_json_text(*input, "input", DuplicateKeys::refuse); });
  }
  options.client_id = "import:" + request.token_name;
  const auto result = store_.import_dataset(dataset, options);
  studies_.note_import();  // the studies of other machines of its kernel learn from it now
  // A study loaded before (an earlier import of this input) learns of its new trials.
  studies_.reread(result.study);
  auto notes = dataset.notes;
  for (auto& n : import_notes(result, options.input.has_value(), !dataset.task().empty(),
                              "kernel=", "input={\"problem_size\": [...]}")) {
    notes.push_back(std::move(n));
  }
  auto response = Response::json({{"machine_id", result.machine.value},
                                  {"kernel_id", result.kernel.value},
                                  {"kernel", result.kernel_name},
                                  {"task_id", result.task.value},
                                  {"study_id", result.study.value},
                                  {"trials", result.trials},
                                  {"failed", result.failed},
                                  {"format", dataset.format},
                                  {"other_kernel_versions", result.other_kernel_versions},
                                  {"already_stored", result.already_stored},
                                  {"input_added", result.input_added},
                                  {"notes", notes}},
                                 result.imported_before() ? 200 : 201);
  // The study the new measurements are stored in.
  if (response.status == 201) {
    response.headers.emplace_back("Location", "/v1/studies/" + std::to_string(result.study.value));
  }
  return response;
}

Response Service::export_study(Request& request) {
  const db::StudyId id{request.id_param("id")};
  const auto format = db::export_format_from_string(request.query_value("format").value_or("json"));
  const bool csv = format == db::ExportFormat::csv;
  // A Kernel Tuner cache is named as Kernel Tuner names its own.
  const std::string filename = "study-" + std::to_string(id.value) +
                               (csv                                ? ".csv"
                                : format == db::ExportFormat::json ? ".json"
                                                                   : "-cache.json");
  // NotFound (and a study Kernel Tuner's format cannot hold) before any byte is sent; the
  // trials follow a page at a time.
  auto source = in_field("query.format",
                         [&] { return std::make_shared<db::StudyExport>(reader(), id, format); });
  std::string first;
  source->next(first);
  auto response =
      Response::text(std::move(first), csv ? "text/csv; charset=utf-8" : "application/json");
  response.more = [source](std::string& out) { return source->next(out); };
  response.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + filename + "\"");
  return response;
}

}  // namespace tunebase::api
