#include "db/store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "db/json_text.h"
#include "db/schema.h"

namespace tunebase::db {

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json raw_to_json(const std::vector<double>& raw) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : raw) {
    if (std::isfinite(v)) {
      out.push_back(v);
    } else {
      out.push_back(nullptr);
    }
  }
  return out;
}

std::string format_number(double v) {
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  if (ec != std::errc()) return std::to_string(v);
  return std::string(buf.data(), end);
}

std::string measurement_text(const nlohmann::json& settings) {
  if (settings.empty()) return "no settings kept";
  // Settings come from any client (POST /v1/studies): one line, and a few words each.
  constexpr std::size_t kMaxSettingChars = 80;
  const auto one_line = [&](const std::string& text) {
    std::string out(utf8_prefix(text, kMaxSettingChars));
    for (auto& ch : out) {
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
    }
    return out.size() < text.size() ? out + "..." : out;
  };
  std::string text;
  for (const auto& [name, value] : settings.items()) {
    text += (text.empty() ? "" : ", ") + one_line(name) + " " +
            one_line(value.is_string() ? value.get<std::string>() : value.dump());
  }
  return text;
}

namespace {

constexpr std::size_t kTokenBytes = 32;
constexpr std::int64_t kMillisPerSecond = 1000;
constexpr double kMaxLeaseSeconds = 365.0 * 24 * 3600;

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string now_text() { return format_timestamp(std::chrono::system_clock::now()); }

nlohmann::json parse_json_column(const std::string& text, const Database& db,
                                 std::string_view column) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw StorageError("database " + db.path() + " is corrupt: column " + std::string(column) +
                       " holds text that is not JSON: " + text.substr(0, 80));
  }
  return j;
}

std::vector<double> raw_from_json(const nlohmann::json& j) {
  std::vector<double> out;
  if (!j.is_array()) return out;
  out.reserve(j.size());
  for (const auto& v : j) {
    out.push_back(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

// Binds a result's columns status, objective, raw, cost_seconds, message, metrics to the
// parameters first .. first + 5.
Statement& bind_result(Statement& st, int first, const Measurement& m) {
  return st.bind(first, to_string(m.status))
      .bind(first + 1, std::isfinite(m.objective) ? m.objective : std::nan(""))
      .bind(first + 2, json_text(raw_to_json(m.raw)))
      .bind(first + 3, m.cost_seconds)
      .bind(first + 4, m.message)
      .bind(first + 5, json_text(m.metrics.is_null() ? nlohmann::json::object() : m.metrics));
}

std::string hex(const unsigned char* bytes, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 0xf];
  }
  return out;
}

std::string sha256_hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    throw StorageError("computing a SHA-256 digest with OpenSSL failed");
  }
  return hex(digest.data(), length);
}

bool is_unique_violation(const SqliteError& e) {
  return e.extended_code() == SQLITE_CONSTRAINT_UNIQUE ||
         e.extended_code() == SQLITE_CONSTRAINT_PRIMARYKEY;
}

void check_result(const Measurement& m, std::string_view where) {
  if (m.status == TrialStatus::pending) {
    throw InvalidInput(std::string(where) +
                       ": a result cannot have status pending; report ok, failed, timeout or "
                       "invalid (leases are taken with add_pending_trial)");
  }
  if (m.status == TrialStatus::ok && !std::isfinite(m.objective)) {
    throw InvalidInput(std::string(where) +
                       ": a result with status ok needs a finite objective value (got " +
                       format_number(m.objective) + "); report a failure status instead");
  }
  if (!std::isfinite(m.cost_seconds) || m.cost_seconds < 0) {
    throw InvalidInput(std::string(where) + ": cost_seconds must be a finite number >= 0 (got " +
                       format_number(m.cost_seconds) + ")");
  }
}

void check_config(const nlohmann::json& config, std::string_view key, std::string_view where) {
  if (!config.is_object()) {
    throw InvalidInput(std::string(where) +
                       ": a configuration is a JSON object {\"parameter\": value, ...}, got " +
                       json_text(config).substr(0, 80));
  }
  if (key.empty()) {
    throw InvalidInput(std::string(where) +
                       ": the configuration key is empty (use SearchSpace::key)");
  }
}

// Column lists and row readers. Each reader expects the columns in the order of its list.
constexpr std::string_view kMachineColumns = "id, name, fingerprint, fingerprint_hash, created_at";
constexpr std::string_view kKernelColumns = "id, name, version, space, created_at";
constexpr std::string_view kTaskColumns =
    "id, kernel_name, description, features, hash, created_at";
constexpr std::string_view kStudySelect =
    "SELECT s.id, s.name, s.kernel_id, s.machine_id, s.task_id, s.objective, s.direction, "
    "s.strategy, s.budget, s.settings, s.status, s.created_at, k.name, k.version, m.name "
    "FROM studies s JOIN kernels k ON k.id = s.kernel_id JOIN machines m ON m.id = s.machine_id ";
constexpr std::string_view kTrialColumns =
    "t.id, t.study_id, t.config, t.config_key, t.status, t.objective, t.raw, t.cost_seconds, "
    "t.message, t.metrics, t.client_id, t.lease_expires_at, t.created_at, t.started_at, "
    "t.finished_at";
constexpr std::string_view kTokenColumns = "id, name, created_at, revoked_at";

std::string sql(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += p;
  return out;
}

MachineRecord read_machine(const Statement& st, const Database& db) {
  MachineRecord r;
  r.id = MachineId{st.column_int64(0)};
  r.name = st.column_text(1);
  r.fingerprint = parse_json_column(st.column_text(2), db, "machines.fingerprint");
  r.fingerprint_hash = st.column_text(3);
  r.created_at = st.column_text(4);
  return r;
}

KernelRecord read_kernel(const Statement& st, const Database& db) {
  KernelRecord r;
  r.id = KernelId{st.column_int64(0)};
  r.name = st.column_text(1);
  r.version = st.column_text(2);
  r.space = parse_json_column(st.column_text(3), db, "kernels.space");
  r.created_at = st.column_text(4);
  return r;
}

TaskRecord read_task(const Statement& st, const Database& db) {
  TaskRecord r;
  r.id = TaskId{st.column_int64(0)};
  r.kernel_name = st.column_text(1);
  r.description = parse_json_column(st.column_text(2), db, "tasks.description");
  r.features = parse_json_column(st.column_text(3), db, "tasks.features");
  r.hash = st.column_text(4);
  r.created_at = st.column_text(5);
  return r;
}

StudyRecord read_study(const Statement& st, const Database& db) {
  StudyRecord r;
  r.id = StudyId{st.column_int64(0)};
  r.name = st.column_text(1);
  r.kernel_id = KernelId{st.column_int64(2)};
  r.machine_id = MachineId{st.column_int64(3)};
  r.task_id = TaskId{st.column_int64(4)};
  r.objective = st.column_text(5);
  r.direction = direction_from_string(st.column_text(6));
  r.strategy = st.column_text(7);
  r.budget = st.column_optional_int64(8);
  r.settings = parse_json_column(st.column_text(9), db, "studies.settings");
  r.status = study_status_from_string(st.column_text(10));
  r.created_at = st.column_text(11);
  r.kernel_name = st.column_text(12);
  r.kernel_version = st.column_text(13);
  r.machine_name = st.column_text(14);
  return r;
}

TrialRecord read_trial(const Statement& st, const Database& db) {
  TrialRecord r;
  r.id = TrialId{st.column_int64(0)};
  r.study_id = StudyId{st.column_int64(1)};
  r.config = parse_json_column(st.column_text(2), db, "trials.config");
  r.config_key = st.column_text(3);
  r.result.status = trial_status_from_string(st.column_text(4));
  r.result.objective = st.column_double(5);
  r.result.raw = raw_from_json(parse_json_column(st.column_text(6), db, "trials.raw"));
  r.result.cost_seconds = st.column_double(7);
  r.result.message = st.column_text(8);
  r.result.metrics = parse_json_column(st.column_text(9), db, "trials.metrics");
  r.client_id = st.column_text(10);
  r.lease_expires_at = st.column_optional_text(11);
  r.created_at = st.column_text(12);
  r.started_at = st.column_optional_text(13);
  r.finished_at = st.column_optional_text(14);
  return r;
}

TokenRecord read_token(const Statement& st) {
  TokenRecord r;
  r.id = TokenId{st.column_int64(0)};
  r.name = st.column_text(1);
  r.created_at = st.column_text(2);
  r.revoked_at = st.column_optional_text(3);
  return r;
}

// The INSERT of a finished trial, shared by add_trial(s) and import_dataset.
constexpr std::string_view kInsertFinishedTrial =
    "INSERT INTO trials (study_id, config, config_key, status, objective, raw, cost_seconds, "
    "message, metrics, client_id, created_at, finished_at) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)";

// How the trials of a machine's earlier studies of a kernel (by study) meet a file's entries
// (by configuration key): how many configurations both hold, how many of those with the same
// result (times compared in the file's unit, `unit`), and every key each study holds. With
// `only_task`, only the studies of that input. Studies measured here, not imported, count
// too: a sweep exported as a Kernel Tuner cache and imported again is no new measurement.
// Times converted between units (by an export, and here) may differ in their last bits.
constexpr double kSameTimeShare = 1e-12;
struct ImportOverlap {
  bool imported = false;
  std::size_t shared = 0;
  std::size_t same = 0;
  std::unordered_set<std::string> keys;
};
std::map<std::int64_t, ImportOverlap> import_overlaps(
    Database& db, const std::string& kernel_name, MachineId machine, const TaskId* only_task,
    const std::unordered_map<std::string, const Observation*>& by_key, const std::string& unit,
    const std::string& what) {
  std::map<std::int64_t, ImportOverlap> out;
  auto st = db.prepare(
      "SELECT t.study_id, t.config_key, t.status, t.objective, s.strategy, s.settings "
      "FROM trials t JOIN studies s ON s.id = t.study_id JOIN kernels k ON k.id = s.kernel_id "
      "WHERE k.name = ?1 AND s.machine_id = ?2 AND (?3 IS NULL OR s.task_id = ?3)",
      what);
  st.bind(1, kernel_name).bind(2, machine.value);
  if (only_task) st.bind(3, only_task->value);
  std::unordered_map<std::int64_t, double> to_unit;  // study -> factor of its values into `unit`
  while (st.step()) {
    const std::int64_t study = st.column_int64(0);
    auto& o = out[study];
    o.imported = st.column_text(4) == "import";
    auto factor = to_unit.find(study);
    if (factor == to_unit.end()) {
      StudyRecord record;
      record.strategy = st.column_text(4);
      record.settings = parse_json_column(st.column_text(5), db, "studies.settings");
      const auto its = objective_unit(record);
      const bool times = is_time_unit(its) && is_time_unit(unit);
      factor = to_unit.emplace(study, times ? time_unit_factor(its, unit) : 1.0).first;
    }
    auto key = st.column_text(1);
    if (const auto it = by_key.find(key); it != by_key.end()) {
      ++o.shared;
      const auto& r = it->second->result;
      const bool ok = st.column_text(2) == "ok";
      const double value = st.column_double(3) * factor->second;
      const bool same_time =
          std::abs(value - r.objective) <= kSameTimeShare * std::abs(r.objective);
      if (ok == r.ok() && (!ok || same_time)) ++o.same;
    }
    o.keys.insert(std::move(key));
  }
  return out;
}

std::int64_t insert_finished_trial(Statement& insert, const Database& db, StudyId study,
                                   const nlohmann::json& config, std::string_view key,
                                   const Measurement& m, std::string_view client_id,
                                   const std::string& now) {
  insert.reset();
  insert.bind(1, study.value).bind(2, json_text(config)).bind(3, key);
  bind_result(insert, 4, m).bind(10, client_id).bind(11, now);
  insert.run();
  return db.last_insert_rowid();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Enums and timestamps

void check_name(std::string_view name, std::string_view what) {
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  const bool blank = name.find_first_not_of(' ') == std::string_view::npos;
  bool utf8 = true;  // nlohmann's strict dump is the check (a percent-encoded %FF gets here)
  try {
    (void)nlohmann::json(std::string(name)).dump();
  } catch (const nlohmann::json::type_error&) {
    utf8 = false;
  }
  if (name.size() > kMaxNameBytes || control || blank || !utf8) {
    const auto shown = nlohmann::json(std::string(name.substr(0, 80)))
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    throw InvalidInput(std::string(what) + " must be 1 to " + std::to_string(kMaxNameBytes) +
                       " bytes of text (UTF-8), not only spaces, without tabs, line breaks or "
                       "other control characters; got " +
                       (name.empty() ? std::string("an empty name") : shown) +
                       (name.size() > kMaxNameBytes ? " (" + std::to_string(name.size()) + " bytes)"
                                                    : std::string()));
  }
}

void check_study_name(std::string_view name) {
  check_name(name, "a study name");
  if (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw InvalidInput("a study name of digits only (\"" + std::string(name) +
                       "\") would read as a study id; add a letter");
  }
}

std::string_view to_string(Direction d) {
  return d == Direction::maximize ? "maximize" : "minimize";
}

Direction direction_from_string(std::string_view s) {
  if (s == "minimize") return Direction::minimize;
  if (s == "maximize") return Direction::maximize;
  throw InvalidInput("unknown direction \"" + std::string(s) + "\"; allowed: minimize, maximize");
}

std::string_view to_string(StudyStatus s) {
  switch (s) {
    case StudyStatus::active:
      return "active";
    case StudyStatus::completed:
      return "completed";
    case StudyStatus::stopped:
      return "stopped";
  }
  return "active";
}

StudyStatus study_status_from_string(std::string_view s) {
  for (auto status : {StudyStatus::active, StudyStatus::completed, StudyStatus::stopped}) {
    if (s == to_string(status)) return status;
  }
  throw InvalidInput("unknown study status \"" + std::string(s) +
                     "\"; allowed: active, completed, stopped");
}

std::string format_timestamp(std::chrono::system_clock::time_point t) {
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  // Floor division, so that times before 1970 still get a millisecond part in [0, 999].
  std::int64_t seconds = millis / kMillisPerSecond;
  std::int64_t rest = millis % kMillisPerSecond;
  if (rest < 0) {
    rest += kMillisPerSecond;
    --seconds;
  }
  const std::time_t tt = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(rest));
  return buf;
}

std::chrono::system_clock::time_point parse_timestamp(std::string_view text) {
  const std::string s(text);
  std::tm tm{};
  int millis = 0;
  int consumed = 0;
  const int fields = std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
                                 &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed);
  bool good = fields == 6;
  std::size_t pos = static_cast<std::size_t>(consumed);
  if (good && pos < s.size() && s[pos] == '.') {
    int digits = 0;
    ++pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      if (digits < 3) millis = millis * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    for (int d = digits; d < 3; ++d) millis *= 10;
    good = digits > 0;
  }
  good = good && pos + 1 == s.size() && s[pos] == 'Z';
  if (!good) {
    throw InvalidInput("timestamp \"" + s + "\" is not ISO-8601 UTC like 2024-05-01T12:00:00.000Z");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::time_t seconds = timegm(&tm);
  return std::chrono::system_clock::time_point(std::chrono::seconds(seconds)) +
         std::chrono::milliseconds(millis);
}

// ---------------------------------------------------------------------------------------------
// Store

struct Store::Impl {
  Impl(const std::string& path, const StoreOptions& options)
      : db(path, DatabaseOptions{options.read_only, options.busy_timeout}) {
    migrate(db);
  }

  Database db;
  std::mutex mutex;
  /// Rows save_fitted_models changed: a cache of models, not data (changes_made leaves them out).
  std::int64_t model_changes = 0;

  void require_writable(std::string_view what) const {
    if (db.read_only()) {
      throw SqliteError("database " + db.path() + " is read-only: it was opened read-only, and " +
                            std::string(what) + " needs write access",
                        SQLITE_READONLY);
    }
  }

  // --- lookups that assume the mutex is held
  std::optional<MachineRecord> find_machine(std::string_view name) {
    auto st = db.prepare(sql({"SELECT ", kMachineColumns, " FROM machines WHERE name = ?1"}),
                         "looking up a machine");
    st.bind(1, name);
    if (!st.step()) return std::nullopt;
    return read_machine(st, db);
  }

  MachineRecord get_machine(MachineId id) {
    auto st = db.prepare(sql({"SELECT ", kMachineColumns, " FROM machines WHERE id = ?1"}),
                         "reading a machine");
    st.bind(1, id.value);
    if (!st.step()) throw NotFound("machine " + std::to_string(id.value) + " does not exist");
    return read_machine(st, db);
  }

  MachineRecord insert_or_update_machine(const MachineInfo& info, bool update_fingerprint) {
    const std::string hash =
        info.fingerprint_hash.empty() ? stable_json_hash(info.fingerprint) : info.fingerprint_hash;
    const std::string conflict = update_fingerprint
                                     ? "DO UPDATE SET fingerprint = excluded.fingerprint, "
                                       "fingerprint_hash = excluded.fingerprint_hash"
                                     : "DO UPDATE SET name = name";
    auto st =
        db.prepare(sql({"INSERT INTO machines (name, fingerprint, fingerprint_hash, created_at) "
                        "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) ",
                        conflict, " RETURNING ", kMachineColumns}),
                   "storing machine " + info.name);
    st.bind(1, info.name).bind(2, json_text(info.fingerprint)).bind(3, hash).bind(4, now_text());
    st.step();
    auto record = read_machine(st, db);
    st.run();
    return record;
  }

  KernelRecord get_kernel(KernelId id) {
    auto st = db.prepare(sql({"SELECT ", kKernelColumns, " FROM kernels WHERE id = ?1"}),
                         "reading a kernel");
    st.bind(1, id.value);
    if (!st.step()) throw NotFound("kernel " + std::to_string(id.value) + " does not exist");
    return read_kernel(st, db);
  }

  KernelRecord upsert_kernel(std::string_view name, const SearchSpace& space) {
    const std::string version = space.fingerprint();
    auto insert = db.prepare(
        "INSERT INTO kernels (name, version, space, created_at) VALUES (?1, ?2, ?3, ?4) "
        "ON CONFLICT (name, version) DO NOTHING",
        "storing kernel " + std::string(name));
    insert.bind(1, name).bind(2, version).bind(3, json_text(space.to_json())).bind(4, now_text());
    insert.run();
    auto st = db.prepare(
        sql({"SELECT ", kKernelColumns, " FROM kernels WHERE name = ?1 AND version = ?2"}),
        "reading kernel " + std::string(name));
    st.bind(1, name).bind(2, version);
    st.step();
    return read_kernel(st, db);
  }

  TaskRecord get_task(TaskId id) {
    auto st =
        db.prepare(sql({"SELECT ", kTaskColumns, " FROM tasks WHERE id = ?1"}), "reading a task");
    st.bind(1, id.value);
    if (!st.step()) throw NotFound("task " + std::to_string(id.value) + " does not exist");
    return read_task(st, db);
  }

  TaskRecord upsert_task(std::string_view kernel_name, const nlohmann::json& description,
                         const nlohmann::json& features) {
    const bool has_features = !features.is_null() && !features.empty();
    auto st = db.prepare(
        sql({"INSERT INTO tasks (kernel_name, description, features, hash, created_at) "
             "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (kernel_name, hash) DO UPDATE SET "
             "features = CASE WHEN ?6 AND features = '{}' THEN excluded.features ELSE features END "
             "RETURNING ",
             kTaskColumns}),
        "storing a task of kernel " + std::string(kernel_name));
    st.bind(1, kernel_name)
        .bind(2, json_text(description))
        .bind(3, json_text(has_features ? features : nlohmann::json::object()))
        .bind(4, stable_json_hash(description))
        .bind(5, now_text())
        .bind(6, has_features ? 1 : 0);
    st.step();
    auto record = read_task(st, db);
    st.run();
    return record;
  }

  std::optional<StudyRecord> find_study_where(std::string_view where, auto bind_value) {
    auto st = db.prepare(sql({kStudySelect, where}), "reading a study");
    st.bind(1, bind_value);
    if (!st.step()) return std::nullopt;
    return read_study(st, db);
  }

  StudyRecord get_study(StudyId id) {
    auto s = find_study_where("WHERE s.id = ?1", id.value);
    if (!s) throw NotFound("study " + std::to_string(id.value) + " does not exist");
    return *s;
  }

  void require_study(StudyId id) {
    auto st = db.prepare("SELECT 1 FROM studies WHERE id = ?1", "checking a study exists");
    st.bind(1, id.value);
    if (!st.step()) throw NotFound("study " + std::to_string(id.value) + " does not exist");
  }

  // What a study's budget counts: its results and its live leases.
  std::int64_t budget_used(StudyId id) {
    auto st = db.prepare(
        "SELECT count(*) FROM trials WHERE study_id = ?1 AND (finished_at IS NOT NULL OR "
        "status = 'pending')",
        "counting the results and leases of study " + std::to_string(id.value));
    st.bind(1, id.value);
    st.step();
    return st.column_int64(0);
  }

  StudyRecord insert_study(const NewStudy& s, StudyStatus status) {
    check_study_name(s.name);
    if (s.budget && *s.budget < 0) {
      throw InvalidInput("study " + s.name + ": budget must be >= 0 (got " +
                         std::to_string(*s.budget) + ")");
    }
    const auto kernel = get_kernel(s.kernel);
    get_machine(s.machine);
    const auto task = get_task(s.task);
    if (task.kernel_name != kernel.name) {
      throw InvalidInput("study " + s.name + ": task " + std::to_string(s.task.value) +
                         " is a task of kernel " + task.kernel_name + ", not of " + kernel.name);
    }
    auto st = db.prepare(
        "INSERT INTO studies (name, kernel_id, machine_id, task_id, objective, direction, "
        "strategy, budget, settings, status, created_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        "creating study " + s.name);
    st.bind(1, s.name)
        .bind(2, s.kernel.value)
        .bind(3, s.machine.value)
        .bind(4, s.task.value)
        .bind(5, s.objective)
        .bind(6, to_string(s.direction))
        .bind(7, s.strategy)
        .bind(8, s.budget)
        .bind(9, json_text(s.settings.is_null() ? nlohmann::json::object() : s.settings))
        .bind(10, to_string(status))
        .bind(11, now_text());
    try {
      st.run();
    } catch (const SqliteError& e) {
      if (!is_unique_violation(e)) throw;
      const auto existing = find_study_where("WHERE s.name = ?1", s.name);
      throw Conflict("a study named \"" + s.name + "\" exists already" +
                     (existing ? ": study " + std::to_string(existing->id.value) : std::string()) +
                     "; choose another name, or continue that study");
    }
    return get_study(StudyId{db.last_insert_rowid()});
  }

  TrialRecord get_trial(TrialId id) {
    auto st = db.prepare(sql({"SELECT ", kTrialColumns, " FROM trials t WHERE t.id = ?1"}),
                         "reading a trial");
    st.bind(1, id.value);
    if (!st.step()) throw NotFound("trial " + std::to_string(id.value) + " does not exist");
    return read_trial(st, db);
  }

  // Throws Conflict when another trial of `key` in `study` (not `except`) has a result or a
  // live lease: a configuration is measured once per study, by one client at a time. Checked
  // inside the writing transaction, so it holds across processes sharing the file.
  void require_untaken(StudyId study, std::string_view key, std::string_view what,
                       TrialId except = TrialId{0}) {
    auto st = db.prepare(sql({"SELECT ", kTrialColumns,
                              " FROM trials t WHERE t.study_id = ?1 AND t.config_key = ?2 "
                              "AND t.id <> ?3 AND (t.finished_at IS NOT NULL OR t.status = "
                              "'pending') ORDER BY t.id LIMIT 1"}),
                         what);
    st.bind(1, study.value).bind(2, key).bind(3, except.value);
    if (!st.step()) return;
    const auto other = read_trial(st, db);
    const std::string config =
        "configuration " + json_text(other.config) + " of study " + std::to_string(study.value);
    if (other.finished_at) {
      throw Conflict(std::string(what) + ": " + config + " already has a result (trial " +
                     std::to_string(other.id.value) + ", status " +
                     std::string(to_string(other.result.status)) +
                     "); a configuration is measured once per study");
    }
    throw Conflict(std::string(what) + ": " + config + " is leased to client " +
                   nlohmann::json(other.client_id).dump() + " as trial " +
                   std::to_string(other.id.value) + " until " +
                   other.lease_expires_at.value_or("?") +
                   "; that client reports it with POST "
                   "/v1/trials/" +
                   std::to_string(other.id.value) + "/result");
  }
};

Store::Store(const std::string& path, StoreOptions options)
    : impl_(std::make_unique<Impl>(path, options)) {}

Store Store::open(const std::string& path, bool read_only) {
  StoreOptions options;
  options.read_only = read_only;
  return Store(path, options);
}

Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

const std::string& Store::path() const { return impl_->db.path(); }
bool Store::read_only() const { return impl_->db.read_only(); }

void Store::backup(const std::string& destination) {
  namespace fs = std::filesystem;
  if (destination.empty()) throw InvalidInput("give the backup's file name (a new file)");
  // Never over a file, nor beside journal files that SQLite would replay over the copy.
  for (const auto& file :
       {destination, destination + "-wal", destination + "-shm", destination + "-journal"}) {
    std::error_code error;
    if (fs::symlink_status(file, error).type() != fs::file_type::not_found) {
      throw InvalidInput("backup destination " + destination + ": " + file +
                         " exists; give a new file name (a backup never overwrites a file, and "
                         "SQLite would read a journal left beside it)");
    }
  }
  if (const auto folder = fs::path(destination).parent_path();
      !folder.empty() && !fs::is_directory(folder)) {
    throw InvalidInput("backup destination " + destination + ": no folder " + folder.string());
  }
  std::lock_guard lock(impl_->mutex);
  // A damaged file copied would look like a backup: said now, not when it is restored.
  if (const auto found = impl_->db.quick_check(); !found.empty()) {
    throw StorageError("database " + path() + " is corrupt (" + found +
                       "): a backup of it would hold the damage; restore an earlier backup");
  }
  // Written under a name of its own in the same folder, then renamed: a copy cut short never
  // has the destination's name.
  const auto folder = fs::path(destination).parent_path();
  const auto partial =
      (folder / (".tunebase-backup-" + std::to_string(::getpid()) + ".partial")).string();
  std::error_code error;
  for (const auto& f : {partial, partial + "-wal", partial + "-shm"}) fs::remove(f, error);
  // A folder that cannot be written to is named as given, not by the partial file's name in
  // SQLite's "unable to open database file".
  if (const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600); fd >= 0) {
    ::close(fd);
    fs::remove(partial, error);
  } else {
    const std::string why = std::strerror(errno);
    throw IoError("backup destination " + destination + ": the folder " +
                  (folder.empty() ? std::string(".") : folder.string()) + " is not writable (" +
                  why + "); give a folder you can write to");
  }
  try {
    impl_->db.backup_to(partial);
  } catch (...) {
    fs::remove(partial, error);
    throw;
  }
  fs::rename(partial, destination, error);
  if (error) {
    const auto why = error.message();
    fs::remove(partial, error);
    throw IoError("cannot move the backup to " + destination + ": " + why);
  }
}

std::string Store::quick_check() {
  std::lock_guard lock(impl_->mutex);
  return impl_->db.quick_check();
}

// --- machines

MachineRecord Store::upsert_machine(const MachineInfo& info) {
  std::lock_guard lock(impl_->mutex);
  check_name(info.name, "a machine name");
  impl_->require_writable("storing machine " + info.name);
  Transaction tx(impl_->db, "storing machine " + info.name);
  auto record = impl_->insert_or_update_machine(info, /*update_fingerprint=*/true);
  tx.commit();
  return record;
}

std::optional<MachineRecord> Store::find_machine(std::string_view name) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->find_machine(name);
}

MachineRecord Store::get_machine(MachineId id) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->get_machine(id);
}

std::vector<MachineRecord> Store::list_machines() const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(sql({"SELECT ", kMachineColumns, " FROM machines ORDER BY id"}),
                              "listing machines");
  std::vector<MachineRecord> out;
  while (st.step()) out.push_back(read_machine(st, impl_->db));
  return out;
}

// --- kernels

KernelRecord Store::upsert_kernel(std::string_view name, const SearchSpace& space) {
  std::lock_guard lock(impl_->mutex);
  check_name(name, "a kernel name");
  const std::string what = "storing kernel " + std::string(name);
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  auto record = impl_->upsert_kernel(name, space);
  tx.commit();
  return record;
}

KernelRecord Store::get_kernel(KernelId id) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->get_kernel(id);
}

std::optional<KernelRecord> Store::find_kernel(std::string_view name,
                                               std::string_view version) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(
      sql({"SELECT ", kKernelColumns,
           " FROM kernels WHERE name = ?1 AND (?2 = '' OR version = ?2) ORDER BY id DESC LIMIT 1"}),
      "looking up kernel " + std::string(name));
  st.bind(1, name).bind(2, version);
  if (!st.step()) return std::nullopt;
  return read_kernel(st, impl_->db);
}

std::vector<KernelRecord> Store::list_kernels() const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(sql({"SELECT ", kKernelColumns, " FROM kernels ORDER BY id"}),
                              "listing kernels");
  std::vector<KernelRecord> out;
  while (st.step()) out.push_back(read_kernel(st, impl_->db));
  return out;
}

// --- tasks

TaskRecord Store::upsert_task(std::string_view kernel_name, const nlohmann::json& description,
                              const nlohmann::json& features) {
  std::lock_guard lock(impl_->mutex);
  check_name(kernel_name, "a task's kernel name");
  const std::string what = "storing a task of kernel " + std::string(kernel_name);
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  auto record = impl_->upsert_task(kernel_name, description, features);
  tx.commit();
  return record;
}

TaskRecord Store::get_task(TaskId id) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->get_task(id);
}

std::vector<TaskRecord> Store::list_tasks(std::string_view kernel_name) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(
      sql({"SELECT ", kTaskColumns, " FROM tasks WHERE ?1 = '' OR kernel_name = ?1 ORDER BY id"}),
      "listing tasks");
  st.bind(1, kernel_name);
  std::vector<TaskRecord> out;
  while (st.step()) out.push_back(read_task(st, impl_->db));
  return out;
}

// --- studies

StudyRecord Store::create_study(const NewStudy& study) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "creating study " + study.name;
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  NewStudy named = study;
  if (named.name.empty()) {
    // "<kernel>@<machine> <time>", made unique: two studies may start in the same millisecond.
    const std::string base = impl_->get_kernel(study.kernel).name + "@" +
                             impl_->get_machine(study.machine).name + " " + now_text();
    named.name = base;
    for (int n = 2; impl_->find_study_where("WHERE s.name = ?1", named.name); ++n) {
      named.name = base + " (" + std::to_string(n) + ")";
    }
  }
  auto record = impl_->insert_study(named, StudyStatus::active);
  tx.commit();
  return record;
}

StudyRecord Store::get_study(StudyId id) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->get_study(id);
}

std::optional<StudyRecord> Store::find_study(std::string_view name) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->find_study_where("WHERE s.name = ?1", name);
}

std::vector<StudyRecord> Store::list_studies(std::string_view kernel_name) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(sql({kStudySelect, "WHERE ?1 = '' OR k.name = ?1 ORDER BY s.id"}),
                              "listing studies");
  st.bind(1, kernel_name);
  std::vector<StudyRecord> out;
  while (st.step()) out.push_back(read_study(st, impl_->db));
  return out;
}

void Store::set_study_status(StudyId id, StudyStatus status) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "setting the status of study " + std::to_string(id.value);
  impl_->require_writable(what);
  auto st = impl_->db.prepare("UPDATE studies SET status = ?1 WHERE id = ?2", what);
  st.bind(1, to_string(status)).bind(2, id.value).run();
  if (impl_->db.changes() == 0) {
    throw NotFound("study " + std::to_string(id.value) + " does not exist");
  }
}

void Store::set_study_strategy(StudyId id, std::string_view strategy) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "setting the strategy of study " + std::to_string(id.value);
  impl_->require_writable(what);
  auto st = impl_->db.prepare("UPDATE studies SET strategy = ?1 WHERE id = ?2", what);
  st.bind(1, strategy).bind(2, id.value).run();
  if (impl_->db.changes() == 0) {
    throw NotFound("study " + std::to_string(id.value) + " does not exist");
  }
}

std::size_t Store::delete_study(StudyId id) { return delete_study(id, LiveLeases::refuse).trials; }

Store::DeletedStudy Store::delete_study(StudyId id, LiveLeases leases) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "deleting study " + std::to_string(id.value);
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  impl_->require_study(id);
  const auto study = impl_->get_study(id);
  if (study.status == StudyStatus::active) {
    throw Conflict("study " + std::to_string(id.value) + " \"" + study.name +
                   "\" is active (a sweep or workers may be tuning it): stop it first "
                   "(tunebase stop --study " +
                   std::to_string(id.value) + ", or POST /v1/studies/" + std::to_string(id.value) +
                   "/stop), then delete it");
  }
  // A stopped study's live leases may still report (a sweep mid-trial, a worker): their
  // results would find no trial. Unless told to end them, the deletion waits for them.
  auto pending = impl_->db.prepare(
      "SELECT id, client_id FROM trials WHERE study_id = ?1 AND status = 'pending' ORDER BY id",
      what);
  pending.bind(1, id.value);
  std::map<std::string, std::vector<std::int64_t>> leased;  // client -> trials
  std::size_t live = 0;
  while (pending.step()) {
    leased[pending.column_text(1)].push_back(pending.column_int64(0));
    ++live;
  }
  if (live > 0 && leases == LiveLeases::refuse) {
    constexpr std::size_t kMaxTrialsNamed = 10;
    std::string held;
    std::size_t named = 0;
    for (const auto& [client, trials] : leased) {
      if (named == kMaxTrialsNamed) break;
      held += std::string(held.empty() ? "" : "; ") + "client \"" + client +
              "\": " + (trials.size() == 1 ? "trial " : "trials ");
      for (std::size_t i = 0; i < trials.size() && named < kMaxTrialsNamed; ++i, ++named) {
        held += (i ? ", " : "") + std::to_string(trials[i]);
      }
    }
    if (named < live) held += "; and " + std::to_string(live - named) + " more";
    const auto study_id = std::to_string(id.value);
    throw Conflict("study " + study_id + " \"" + study.name + "\" has " + std::to_string(live) +
                   (live == 1 ? " live lease" : " live leases") + " (" + held +
                   "): delete it once they reported or ended, or end them as you delete it "
                   "(DELETE /v1/studies/" +
                   study_id +
                   "?force=true, tunebase delete --force: their results are refused "
                   "then); a client that is alive gives its own back with POST "
                   "/v1/trials/{id}/release");
  }
  impl_->db.prepare("DELETE FROM trials WHERE study_id = ?1", what).bind(1, id.value).run();
  const auto trials = static_cast<std::size_t>(impl_->db.changes());
  impl_->db.prepare("DELETE FROM studies WHERE id = ?1", what).bind(1, id.value).run();
  tx.commit();
  return {trials, live};
}

void Store::set_study_budget(StudyId id, std::optional<std::int64_t> budget) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "setting the budget of study " + std::to_string(id.value);
  if (budget && (*budget < 0 || *budget > kMaxStudyBudget)) {
    throw InvalidInput(what + ": a budget must be 0 to " + std::to_string(kMaxStudyBudget) +
                       " evaluations, got " + std::to_string(*budget));
  }
  impl_->require_writable(what);
  auto st = impl_->db.prepare("UPDATE studies SET budget = ?1 WHERE id = ?2", what);
  st.bind(1, budget).bind(2, id.value).run();
  if (impl_->db.changes() == 0) {
    throw NotFound("study " + std::to_string(id.value) + " does not exist");
  }
}

bool Store::complete_unless_leased(StudyId id) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "completing study " + std::to_string(id.value);
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  impl_->require_study(id);
  // One statement: a lease taken by another process cannot slip in between check and update.
  auto st = impl_->db.prepare(
      "UPDATE studies SET status = 'completed' WHERE id = ?1 AND status != 'stopped' AND NOT "
      "EXISTS (SELECT 1 FROM trials WHERE study_id = ?1 AND status = 'pending')",
      what);
  st.bind(1, id.value).run();
  const bool completed = impl_->db.changes() > 0;
  tx.commit();
  return completed;
}

bool Store::complete_if_spent(StudyId id, std::optional<std::int64_t> candidates) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "completing study " + std::to_string(id.value);
  impl_->require_writable(what);
  auto st = impl_->db.prepare(
      "UPDATE studies SET status = 'completed' WHERE id = ?1 AND status = 'active' AND NOT "
      "EXISTS (SELECT 1 FROM trials WHERE study_id = ?1 AND status = 'pending') AND (SELECT "
      "count(*) FROM trials WHERE study_id = ?1 AND finished_at IS NOT NULL) >= min(coalesce("
      "budget, ?2), coalesce(?2, budget))",
      what);
  st.bind(1, id.value).bind(2, candidates).run();
  return impl_->db.changes() > 0;
}

// --- trials

TrialId Store::add_trial(StudyId study, const nlohmann::json& config, std::string_view config_key,
                         const Measurement& result, std::string_view client_id) {
  NewTrial t{config, std::string(config_key), result, std::string(client_id)};
  return add_trials(study, {t}).front();
}

std::vector<TrialId> Store::add_trials(StudyId study, const std::vector<NewTrial>& trials) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "adding trials to study " + std::to_string(study.value);
  for (const auto& t : trials) {
    check_config(t.config, t.config_key, what);
    check_result(t.result, what);
  }
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  impl_->require_study(study);
  auto insert = impl_->db.prepare(kInsertFinishedTrial, what);
  const std::string now = now_text();
  std::vector<TrialId> ids;
  ids.reserve(trials.size());
  for (const auto& t : trials) {
    impl_->require_untaken(study, t.config_key, what);
    ids.push_back(TrialId{insert_finished_trial(insert, impl_->db, study, t.config, t.config_key,
                                                t.result, t.client_id, now)});
  }
  tx.commit();
  return ids;
}

TrialId Store::add_pending_trial(StudyId study, const nlohmann::json& config,
                                 std::string_view config_key, std::string_view client_id,
                                 double lease_seconds) {
  auto outcome =
      add_pending_trials(study, {{config, std::string(config_key)}}, client_id, lease_seconds)
          .front();
  if (outcome.error) std::rethrow_exception(outcome.error);
  return *outcome.trial;
}

std::vector<Store::LeaseOutcome> Store::add_pending_trials(StudyId study,
                                                           const std::vector<LeaseRequest>& batch,
                                                           std::string_view client_id,
                                                           double lease_seconds) {
  std::vector<LeaseOutcome> out(batch.size());
  if (batch.empty()) return out;
  std::lock_guard lock(impl_->mutex);
  const std::string what = "leasing " + std::to_string(batch.size()) +
                           " configuration(s) of study " + std::to_string(study.value);
  for (const auto& b : batch) check_config(b.config, b.config_key, what);
  if (!std::isfinite(lease_seconds) || lease_seconds <= 0 || lease_seconds > kMaxLeaseSeconds) {
    throw InvalidInput(what + ": lease_seconds must be in (0, " + format_number(kMaxLeaseSeconds) +
                       "], got " + format_number(lease_seconds));
  }
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  impl_->require_study(study);
  // The budget is checked here, in the transaction: another process sharing the file may
  // have leased since the caller counted what is left.
  const auto budget = impl_->get_study(study).budget;
  auto used = budget ? impl_->budget_used(study) : 0;
  const auto now = std::chrono::system_clock::now();
  const auto expires = now + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                 std::chrono::duration<double>(lease_seconds));
  auto st = impl_->db.prepare(
      "INSERT INTO trials (study_id, config, config_key, status, client_id, lease_expires_at, "
      "created_at, started_at) VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?6)",
      what);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& b = batch[i];
    const std::string item =
        "leasing configuration " + b.config_key + " of study " + std::to_string(study.value);
    // Refused configurations (taken meanwhile, maybe by another process) are reported one by
    // one; any other error undoes the whole batch, so that a failed request leases nothing.
    try {
      impl_->require_untaken(study, b.config_key, item);
    } catch (const Conflict&) {
      out[i].error = std::current_exception();
      continue;
    }
    if (budget && used >= *budget) {
      out[i].over_budget = true;
      out[i].error = std::make_exception_ptr(
          Conflict(item + ": the budget of study " + std::to_string(study.value) + " (" +
                   std::to_string(*budget) + " evaluations) is taken by " + std::to_string(used) +
                   " results and live leases"));
      continue;
    }
    ++used;
    st.reset();
    st.bind(1, study.value)
        .bind(2, json_text(b.config))
        .bind(3, b.config_key)
        .bind(4, client_id)
        .bind(5, format_timestamp(expires))
        .bind(6, format_timestamp(now));
    st.run();
    out[i].trial = TrialId{impl_->db.last_insert_rowid()};
    out[i].expires = expires;
  }
  tx.commit();
  return out;
}

TrialRecord Store::complete_trial(TrialId trial, const Measurement& result) {
  auto outcome = complete_trials({{trial, {}, result}}).front();
  if (outcome.error) std::rethrow_exception(outcome.error);
  return std::move(*outcome.record);
}

std::vector<Store::CompletionOutcome> Store::complete_trials(const std::vector<Completion>& batch) {
  std::vector<CompletionOutcome> out(batch.size());
  if (batch.empty()) return out;
  std::lock_guard lock(impl_->mutex);
  const std::string what =
      batch.size() == 1 ? "storing the result of trial " + std::to_string(batch[0].trial.value)
                        : "storing the results of " + std::to_string(batch.size()) + " trials";
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  auto update = impl_->db.prepare(
      "UPDATE trials SET status = ?1, objective = ?2, raw = ?3, cost_seconds = ?4, message = ?5, "
      "metrics = ?6, finished_at = ?7 WHERE id = ?8 AND finished_at IS NULL",
      what);
  const std::string now = now_text();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& c = batch[i];
    const std::string item = "storing the result of trial " + std::to_string(c.trial.value);
    // A savepoint per result: one that fails half-way leaves the others of the batch intact.
    impl_->db.exec("SAVEPOINT one_result", item);
    try {
      check_result(c.result, item);
      const auto current = impl_->get_trial(c.trial);
      if (!c.client_id.empty() && current.client_id != c.client_id) {
        throw Forbidden("trial " + std::to_string(c.trial.value) + " belongs to client \"" +
                        current.client_id + "\", not \"" + c.client_id +
                        "\"; report results with the client_id the suggestion was made for");
      }
      if (current.finished_at) {
        // A client that lost the answer sends its result again: the same result is no conflict.
        const auto& had = current.result;
        const auto differing = differing_fields(had, c.result);
        if (differing.empty()) {
          out[i].record = current;
          out[i].already_stored = true;
          impl_->db.exec("RELEASE one_result", item);
          continue;
        }
        // What differs, with what this report says where it is short.
        std::string differs;
        for (const auto& field : differing) {
          differs += (differs.empty() ? "" : ", ") + field;
          if (field == "status") differs += " " + std::string(to_string(c.result.status));
          if (field == "value" && c.result.ok()) differs += " " + format_number(c.result.objective);
        }
        throw Conflict("trial " + std::to_string(c.trial.value) + " already has a result (status " +
                       std::string(to_string(had.status)) +
                       (had.ok() ? ", value " + format_number(had.objective) : std::string()) +
                       ", stored " + *current.finished_at + "); this report differs in " + differs +
                       ": a result is accepted once (sending the same result again is answered "
                       "with the stored trial; GET /v1/trials/" +
                       std::to_string(c.trial.value) + " shows it)");
      }
      if (current.result.status != TrialStatus::pending) {
        // A late result (the lease ended). A configuration is measured once: the result is
        // refused when another trial of it has one. When it was leased again and that lease
        // is unreported, the late result is stored and the newer lease withdrawn: a
        // measurement in hand beats one that may come, and refusing it let clients whose
        // evaluations outlast their leases pass one configuration back and forth for ever.
        const std::string late = item + " (" + current.result.message + ")";
        auto withdraw = impl_->db.prepare(
            "UPDATE trials SET status = 'timeout', lease_expires_at = ?1, message = 'lease "
            "withdrawn at ' || ?1 || ': the late result of trial ' || ?2 || ' measured its "
            "configuration meanwhile' WHERE study_id = ?3 AND config_key = ?4 AND status = "
            "'pending' AND id <> ?2",
            late);
        withdraw.bind(1, now)
            .bind(2, current.id.value)
            .bind(3, current.study_id.value)
            .bind(4, current.config_key)
            .run();
        impl_->require_untaken(current.study_id, current.config_key, late, current.id);
        // The ended lease gave its place in the budget back; the late result needs one.
        const auto budget = impl_->get_study(current.study_id).budget;
        const auto used = impl_->budget_used(current.study_id);
        if (budget && used >= *budget) {
          throw Conflict(late + ": the budget of study " + std::to_string(current.study_id.value) +
                         " (" + std::to_string(*budget) + " evaluations) is taken by " +
                         std::to_string(used) +
                         " results and live leases; a late result is stored only while the "
                         "budget has room");
        }
      }
      const auto& r = c.result;
      update.reset();
      bind_result(update, 1, r).bind(7, now).bind(8, c.trial.value).run();
      out[i].record = impl_->get_trial(c.trial);
      impl_->db.exec("RELEASE one_result", item);
    } catch (...) {
      out[i].error = std::current_exception();
      out[i].record.reset();
      if (!impl_->db.in_transaction()) {
        // SQLite rolled the whole transaction back (SQLITE_FULL, IOERR, NOMEM): the results
        // stored before went with it, and what follows would run outside any transaction.
        const auto error = out[i].error;
        for (auto& o : out) o = CompletionOutcome{.record = std::nullopt, .error = error};
        return out;
      }
      impl_->db.exec("ROLLBACK TO one_result", item);
      impl_->db.exec("RELEASE one_result", item);
    }
  }
  try {
    tx.commit();
  } catch (...) {
    for (auto& o : out) {
      o.record.reset();
      o.error = std::current_exception();
    }
  }
  return out;
}

namespace {

std::optional<std::string> optional_timestamp(
    std::optional<std::chrono::system_clock::time_point> t) {
  if (!t) return std::nullopt;
  return format_timestamp(*t);
}

}  // namespace

std::size_t Store::expire_leases(
    std::chrono::system_clock::time_point now,
    std::optional<std::chrono::system_clock::time_point> spare_ended_before) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "expiring leases";
  impl_->require_writable(what);
  auto st = impl_->db.prepare(
      "UPDATE trials SET status = 'timeout', message = 'lease expired at ' || lease_expires_at "
      "|| ' before client ' || quote(client_id) || ' reported a result' "
      "WHERE status = 'pending' AND lease_expires_at < ?1 AND (?2 IS NULL OR lease_expires_at "
      ">= ?2)",
      what);
  st.bind(1, format_timestamp(now)).bind(2, optional_timestamp(spare_ended_before)).run();
  return static_cast<std::size_t>(impl_->db.changes());
}

bool Store::release_lease(TrialId trial, std::string_view reason) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "releasing the lease of trial " + std::to_string(trial.value);
  impl_->require_writable(what);
  auto st = impl_->db.prepare(
      "UPDATE trials SET status = 'timeout', message = CASE WHEN ?2 = '' THEN 'lease released "
      "by client ' || quote(client_id) || ' without a result' ELSE 'lease of client ' || "
      "quote(client_id) || ' taken back without a result: ' || ?2 END, lease_expires_at = ?3 "
      "WHERE id = ?1 AND status = 'pending'",
      what);
  // The lease ends now: a client reading the trial sees when, not the hour it was given.
  st.bind(1, trial.value)
      .bind(2, reason)
      .bind(3, format_timestamp(std::chrono::system_clock::now()))
      .run();
  return impl_->db.changes() > 0;
}

bool Store::extend_lease(TrialId trial, std::chrono::system_clock::time_point expires,
                         std::optional<std::chrono::system_clock::time_point> spare_ended_before) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "extending the lease of trial " + std::to_string(trial.value);
  impl_->require_writable(what);
  auto st = impl_->db.prepare(
      "UPDATE trials SET lease_expires_at = ?2 WHERE id = ?1 AND status = 'pending' AND "
      "finished_at IS NULL AND (lease_expires_at >= ?3 OR lease_expires_at < ?4)",
      what);
  // A lease past its end is ended, also before expire_leases has marked it, unless spared as
  // expire_leases spares it.
  st.bind(1, trial.value)
      .bind(2, format_timestamp(expires))
      .bind(3, format_timestamp(std::chrono::system_clock::now()))
      .bind(4, optional_timestamp(spare_ended_before))
      .run();
  return impl_->db.changes() > 0;
}

TrialRecord Store::get_trial(TrialId id) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->get_trial(id);
}

std::vector<TrialRecord> Store::trials(StudyId study) const { return trials(study, {}); }

std::vector<TrialRecord> Store::trials(StudyId study, const TrialRange& range) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_study(study);
  auto st =
      impl_->db.prepare(sql({"SELECT ", kTrialColumns,
                             " FROM trials t WHERE t.study_id = ?1 AND t.id > ?2 AND t.id <= ?3"
                             " AND (?4 IS NULL OR (t.status = ?4 AND (t.status = 'pending' OR"
                             " t.finished_at IS NOT NULL)))"
                             " AND (?6 = 0 OR (t.status <> 'pending' AND t.finished_at IS NULL))"
                             " AND (?7 IS NULL OR t.client_id = ?7)"
                             " ORDER BY t.id LIMIT ?5"}),
                        "reading the trials of study " + std::to_string(study.value));
  st.bind(1, study.value).bind(2, range.after).bind(3, range.up_to);
  if (range.status) st.bind(4, std::string(to_string(*range.status)));
  // SQLite reads a negative LIMIT as none.
  st.bind(5, range.limit > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
                 ? std::int64_t{-1}
                 : static_cast<std::int64_t>(range.limit));
  st.bind(6, range.lease_ended ? 1 : 0);
  if (range.client_id) st.bind(7, *range.client_id);
  std::vector<TrialRecord> out;
  while (st.step()) out.push_back(read_trial(st, impl_->db));
  return out;
}

std::int64_t Store::last_trial_id(StudyId study) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_study(study);
  auto st = impl_->db.prepare("SELECT coalesce(max(id), 0) FROM trials WHERE study_id = ?1",
                              "reading the newest trial of study " + std::to_string(study.value));
  st.bind(1, study.value);
  st.step();
  return st.column_int64(0);
}

std::vector<std::string> Store::config_names(StudyId study, std::int64_t up_to) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_study(study);
  auto st =
      impl_->db.prepare("SELECT config FROM trials WHERE study_id = ?1 AND id <= ?2 ORDER BY id",
                        "reading the configurations of study " + std::to_string(study.value));
  st.bind(1, study.value).bind(2, up_to);
  std::vector<std::string> names;
  while (st.step()) {
    const auto config = parse_json_column(st.column_text(0), impl_->db, "trials.config");
    for (const auto& [name, value] : config.items()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

std::vector<std::string> Store::pending_keys(StudyId study) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(
      "SELECT config_key FROM trials WHERE study_id = ?1 AND status = 'pending' ORDER BY id",
      "reading the pending trials of study " + std::to_string(study.value));
  st.bind(1, study.value);
  std::vector<std::string> out;
  while (st.step()) out.push_back(st.column_text(0));
  return out;
}

std::int64_t Store::budget_used(StudyId study) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_study(study);
  return impl_->budget_used(study);
}

std::vector<StudyId> Store::study_ids() const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare("SELECT id FROM studies ORDER BY id", "listing study ids");
  std::vector<StudyId> ids;
  while (st.step()) ids.push_back(StudyId{st.column_int64(0)});
  return ids;
}

std::int64_t Store::data_version() const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare("PRAGMA data_version", "reading the data version");
  st.step();
  return st.column_int64(0);
}

std::int64_t Store::changes_made() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->db.total_changes() - impl_->model_changes;
}

namespace {

// Adds `n` trials of `status` to `c`; `unfinished`: they have no finished_at (a lease that
// ended with no result, when not pending).
void add_trial_count(TrialCounts& c, TrialStatus status, bool unfinished, std::int64_t n) {
  c.total += n;
  if (status != TrialStatus::pending && unfinished) {
    c.lease_ended += n;
    return;
  }
  switch (status) {
    case TrialStatus::pending:
      c.pending += n;
      break;
    case TrialStatus::ok:
      c.ok += n;
      break;
    case TrialStatus::failed:
      c.failed += n;
      break;
    case TrialStatus::timeout:
      c.timeout += n;
      break;
    case TrialStatus::invalid:
      c.invalid += n;
      break;
  }
}

// `version` of kernel `kernel_name` and every version of it with the same parameters and
// values (SearchSpace::parameters_fingerprint); none (any version) when `version` is empty.
std::vector<std::string> same_parameters_versions(Database& db, const std::string& kernel_name,
                                                  const std::string& version) {
  if (version.empty()) return {};
  std::vector<std::string> out{version};
  auto st = db.prepare("SELECT version, space FROM kernels WHERE name = ?1 ORDER BY id",
                       "reading the versions of kernel " + kernel_name);
  st.bind(1, kernel_name);
  std::vector<std::pair<std::string, std::string>> versions;  // (version, parameters)
  std::string wanted;
  while (st.step()) {
    const auto space = parse_json_column(st.column_text(1), db, "kernels.space");
    versions.emplace_back(st.column_text(0), SearchSpace::parameters_fingerprint(space));
    if (versions.back().first == version) wanted = versions.back().second;
  }
  for (const auto& [other, parameters] : versions) {
    if (other != version && !wanted.empty() && parameters == wanted) out.push_back(other);
  }
  return out;
}

// A study s's measurement settings (measurement_of) as SQL: compared with json(?N), studies
// measured alike are equal text, as settings are stored compact with sorted keys.
#define TUNEBASE_MEASUREMENT_OF_S "json(coalesce(json_extract(s.settings, '$.measurement'), '{}'))"

// The studies a StudyFilter selects (FROM studies s JOIN kernels k, parameters ?1 to ?7);
// bind_study_filter binds them.
constexpr std::string_view kStudyFilterWhere =
    "k.name = ?1 AND (?2 IS NULL OR s.machine_id = ?2) AND (?3 IS NULL OR s.task_id = ?3) AND "
    "(?4 IS NULL OR s.direction = ?4) AND (?5 = '' OR s.objective = ?5) AND "
    "(?6 = '[]' OR k.version IN (SELECT value FROM json_each(?6))) AND "
    "(?7 IS NULL OR " TUNEBASE_MEASUREMENT_OF_S " = json(?7))";

void bind_study_filter(Statement& st, Database& db, const StudyFilter& f) {
  st.bind(1, f.kernel_name).bind(5, f.objective);
  st.bind(6, json_text(same_parameters_versions(db, f.kernel_name, f.version)));
  if (f.machine) st.bind(2, f.machine->value);
  if (f.task) st.bind(3, f.task->value);
  if (f.direction) st.bind(4, to_string(*f.direction));
  if (f.measurement) st.bind(7, json_text(*f.measurement));
}

}  // namespace

TrialCounts Store::trial_counts(StudyId study) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_study(study);
  auto st = impl_->db.prepare(
      "SELECT status, finished_at IS NULL, count(*) FROM trials WHERE "
      "study_id = ?1 GROUP BY status, finished_at IS NULL",
      "counting the trials of study " + std::to_string(study.value));
  st.bind(1, study.value);
  TrialCounts c;
  while (st.step()) {
    add_trial_count(c, trial_status_from_string(st.column_text(0)), st.column_int64(1) != 0,
                    st.column_int64(2));
  }
  return c;
}

std::map<StudyId, TrialCounts> Store::study_trial_counts(const StudyFilter& filter) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(
      sql({"SELECT t.study_id, t.status, t.finished_at IS NULL, count(*) FROM studies s JOIN "
           "kernels k ON k.id = s.kernel_id JOIN trials t ON t.study_id = s.id WHERE ",
           kStudyFilterWhere, " GROUP BY t.study_id, t.status, t.finished_at IS NULL"}),
      "counting the trials of kernel " + filter.kernel_name);
  bind_study_filter(st, impl_->db, filter);
  std::map<StudyId, TrialCounts> out;
  while (st.step()) {
    add_trial_count(out[StudyId{st.column_int64(0)}], trial_status_from_string(st.column_text(1)),
                    st.column_int64(2) != 0, st.column_int64(3));
  }
  return out;
}

std::int64_t Store::measured_configurations(const StudyFilter& filter) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(
      sql({"SELECT count(DISTINCT t.config_key) FROM studies s JOIN kernels k ON k.id = "
           "s.kernel_id JOIN trials t ON t.study_id = s.id AND t.status = 'ok' WHERE ",
           kStudyFilterWhere}),
      "counting the configurations measured of kernel " + filter.kernel_name);
  bind_study_filter(st, impl_->db, filter);
  st.step();
  return st.column_int64(0);
}

std::vector<FailureMessages> Store::failure_messages(StudyId study, std::size_t edge_chars) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_study(study);
  // trials_by_study_status_objective finds them; a lease that ended has no finished_at.
  auto st = impl_->db.prepare(
      "SELECT status, CASE WHEN length(message) <= 2 * ?2 THEN message ELSE substr(message, 1, "
      "?2) || char(10) || substr(message, -?2) END AS m, count(*) FROM trials WHERE "
      "study_id = ?1 AND status IN ('failed', 'timeout', 'invalid') AND finished_at IS NOT "
      "NULL GROUP BY status, m",
      "reading why trials of study " + std::to_string(study.value) + " failed");
  st.bind(1, study.value).bind(2, static_cast<std::int64_t>(edge_chars));
  std::vector<FailureMessages> out;
  while (st.step()) {
    out.push_back(
        {trial_status_from_string(st.column_text(0)), st.column_text(1), st.column_int64(2)});
  }
  return out;
}

// --- queries across studies

std::optional<TrialRecord> Store::best_trial(std::string_view kernel_name, MachineId machine,
                                             std::optional<TaskId> task, Direction direction,
                                             std::string_view objective) const {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "finding the best trial of kernel " + std::string(kernel_name);
  auto studies = impl_->db.prepare(
      sql({kStudySelect,
           "WHERE k.name = ?1 AND s.machine_id = ?2 AND (?3 IS NULL OR s.task_id = ?3) AND "
           "s.direction = ?4 AND (?5 = '' OR s.objective = ?5) ORDER BY s.id"}),
      what);
  studies.bind(1, kernel_name)
      .bind(2, machine.value)
      .bind(4, to_string(direction))
      .bind(5, objective);
  if (task) studies.bind(3, task->value);
  const std::string_view order =
      direction == Direction::maximize ? "t.objective DESC" : "t.objective ASC";
  auto best_of_study = impl_->db.prepare(
      sql({"SELECT ", kTrialColumns, " FROM trials t WHERE t.study_id = ?1 AND t.status = 'ok' ",
           "ORDER BY ", order, ", t.id LIMIT 1"}),
      what);
  // Each study's best, with its unit. Studies that measure time are compared in seconds (an
  // import in ms against a client's study in s), and only they when there are any: a value in
  // another unit, or in none, cannot be placed among times. Otherwise values are compared as
  // stored.
  std::vector<std::pair<TrialRecord, std::string>> bests;
  std::map<std::int64_t, StudyRecord> study_of;  // every study by id, with a best or not
  while (studies.step()) {
    auto study = read_study(studies, impl_->db);
    best_of_study.reset();
    best_of_study.bind(1, study.id.value);
    if (best_of_study.step()) {
      bests.emplace_back(read_trial(best_of_study, impl_->db), objective_unit(study));
    }
    study_of.emplace(study.id.value, std::move(study));
  }
  const auto version_of = [&](const TrialRecord& t) -> const std::string& {
    return study_of.at(t.study_id.value).kernel_version;
  };
  const auto newest_best = [&] {
    return std::max_element(bests.begin(), bests.end(), [](const auto& a, const auto& b) {
      return a.first.study_id.value < b.first.study_id.value;
    });
  };
  // Only the studies of the parameters of the newest study with a best answer: a configuration
  // of a space the kernel has since changed (a parameter added) is no configuration of the
  // kernel now. Versions that differ only in constraints or defaults measure the same
  // configurations.
  if (!bests.empty()) {
    const auto versions = same_parameters_versions(impl_->db, std::string(kernel_name),
                                                   version_of(newest_best()->first));
    const std::set<std::string> answering(versions.begin(), versions.end());
    std::erase_if(bests, [&](const auto& b) { return !answering.contains(version_of(b.first)); });
    // Of those, only what the space of the newest study of those parameters allows, with results
    // or not: a configuration its constraint now forbids is no configuration of the kernel now.
    const StudyRecord* constraining = nullptr;
    for (const auto& [id, study] : study_of) {  // by id: the newest last
      if (answering.contains(study.kernel_version)) constraining = &study;
    }
    const bool other_constraints = std::any_of(bests.begin(), bests.end(), [&](const auto& b) {
      return version_of(b.first) != constraining->kernel_version;
    });
    if (other_constraints) {
      const auto newest_space =
          SearchSpace::from_json(impl_->get_kernel(constraining->kernel_id).space);
      const auto allowed = [&](const TrialRecord& t) {
        try {
          return newest_space.is_valid(newest_space.config_from_json(t.config));
        } catch (const InvalidInput&) {
          return false;
        }
      };
      auto ok_trials = impl_->db.prepare(
          sql({"SELECT ", kTrialColumns, " FROM trials t WHERE t.study_id = ?1 AND ",
               "t.status = 'ok' ORDER BY ", order, ", t.id"}),
          what);
      std::erase_if(bests, [&](auto& b) {
        if (allowed(b.first)) return false;
        ok_trials.reset();
        ok_trials.bind(1, b.first.study_id.value);
        while (ok_trials.step()) {
          auto t = read_trial(ok_trials, impl_->db);
          if (allowed(t)) {
            b.first = std::move(t);
            return false;
          }
        }
        return true;
      });
    }
  }
  // And only those measured as the newest of them were (measurement_of): a solve to a looser
  // tolerance is faster without being better, so the best of every setting would be the
  // loosest one's. measured_configurations says which were left out.
  if (!bests.empty()) {
    const auto measurement = [&](const TrialRecord& t) {
      return measurement_of(study_of.at(t.study_id.value).settings);
    };
    const auto answering = measurement(newest_best()->first);
    std::erase_if(bests, [&](const auto& b) { return measurement(b.first) != answering; });
  }
  const bool in_seconds =
      std::any_of(bests.begin(), bests.end(), [](const auto& b) { return is_time_unit(b.second); });
  if (in_seconds) std::erase_if(bests, [](const auto& b) { return !is_time_unit(b.second); });
  const auto value = [&](const std::pair<TrialRecord, std::string>& b) {
    return b.first.result.objective * (in_seconds ? time_unit_factor(b.second, "s") : 1.0);
  };
  const std::pair<TrialRecord, std::string>* best = nullptr;
  for (const auto& b : bests) {
    // Converted values that differ only by the rounding of the conversion (0.9 ms against
    // 900 us) are a tie: the earlier trial.
    const auto tie = [&] {
      return std::abs(value(b) - value(*best)) <=
             1e-12 * std::max(std::abs(value(b)), std::abs(value(*best)));
    };
    const bool better =
        !best || (tie() ? b.first.id < best->first.id
                        : (direction == Direction::maximize ? value(b) > value(*best)
                                                            : value(b) < value(*best)));
    if (better) best = &b;
  }
  if (!best) return std::nullopt;
  return best->first;
}

std::optional<TrialRecord> Store::best_trial(StudyId study) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(
      sql({"SELECT ", kTrialColumns,
           " FROM trials t JOIN studies s ON s.id = t.study_id WHERE t.study_id = ?1 AND "
           "t.status = 'ok' ORDER BY CASE WHEN s.direction = 'maximize' THEN -t.objective ELSE "
           "t.objective END, t.id LIMIT 1"}),
      "finding the best trial of study " + std::to_string(study.value));
  st.bind(1, study.value);
  if (!st.step()) return std::nullopt;
  return read_trial(st, impl_->db);
}

std::string objective_unit(const StudyRecord& study) {
  const std::string fallback = study.strategy == "import" ? "ms" : "";
  if (!study.settings.is_object()) return fallback;
  const auto it = study.settings.find("unit");
  return it != study.settings.end() && it->is_string() ? it->get<std::string>() : fallback;
}

nlohmann::json measurement_of(const nlohmann::json& settings) {
  if (!settings.is_object()) return nlohmann::json::object();
  const auto it = settings.find("measurement");
  return it != settings.end() && it->is_object() ? *it : nlohmann::json::object();
}

namespace {

// The finished trials a PriorQuery selects (FROM and WHERE, parameters ?1 to ?13 but ?11, the
// limit), shared by prior_trials and prior_counts; bind_prior_query binds them. Settings are
// stored as compact JSON with sorted keys, so measurements alike are equal text once json()
// has read both.
constexpr std::string_view kPriorTrialsWhere =
    "FROM trials t JOIN studies s ON s.id = t.study_id JOIN kernels k ON k.id = s.kernel_id "
    "JOIN machines m ON m.id = s.machine_id "
    "WHERE k.name = ?1 AND (?2 = '[]' OR k.version IN (SELECT value FROM json_each(?2))) "
    "AND (?3 IS NULL OR s.machine_id <> ?3) "
    "AND (?4 IS NULL OR s.id <> ?4) AND (?5 IS NULL OR s.machine_id <> ?5 OR s.task_id <> ?6) "
    "AND (?7 = '' OR s.objective = ?7) AND (?8 IS NULL OR s.direction = ?8) "
    "AND (?9 = '[]' OR m.name IN (SELECT value FROM json_each(?9))) "
    "AND t.finished_at IS NOT NULL AND (?10 = 0 OR t.status = 'ok') "
    "AND (?12 IS NULL OR s.task_id = ?12) "
    "AND (?13 IS NULL OR " TUNEBASE_MEASUREMENT_OF_S " = json(?13))";

// The kernel versions a PriorQuery selects: `q.version` and every version of the kernel with
// the same parameters and values; none (any version) when it names none.
std::vector<std::string> prior_versions(Database& db, const PriorQuery& q) {
  return same_parameters_versions(db, q.kernel_name, q.version);
}

void bind_prior_query(Statement& st, Database& db, const PriorQuery& q) {
  st.bind(1, q.kernel_name).bind(2, json_text(prior_versions(db, q)));
  if (q.exclude_machine) st.bind(3, q.exclude_machine->value);
  if (q.exclude_study) st.bind(4, q.exclude_study->value);
  if (q.exclude_target)
    st.bind(5, q.exclude_target->first.value).bind(6, q.exclude_target->second.value);
  st.bind(7, q.objective);
  if (q.direction) st.bind(8, to_string(*q.direction));
  st.bind(9, json_text(q.machines)).bind(10, q.ok_only ? 1 : 0);
  st.bind(11, static_cast<std::int64_t>(q.limit));
  if (q.task) st.bind(12, q.task->value);
  if (q.measurement) st.bind(13, json_text(*q.measurement));
}

// How a study's values are read as priors: the unit they are given in, the factor into it, or
// left out. Times are learned from as times; a value in another unit, or none, cannot be
// placed among them.
struct PriorReading {
  std::string unit;
  double factor = 1.0;
  bool left_out = false;
};

PriorReading prior_reading(const PriorQuery& q, const std::string& settings,
                           const std::string& strategy, const Database& db) {
  StudyRecord study;
  study.settings = parse_json_column(settings, db, "studies.settings");
  study.strategy = strategy;
  PriorReading r{.unit = objective_unit(study)};
  if (is_time_unit(q.unit)) {
    r.left_out = !is_time_unit(r.unit);
    r.factor = time_unit_factor(r.unit, q.unit);
    r.unit = q.unit;
  }
  return r;
}

}  // namespace

std::vector<PriorTrial> Store::prior_trials(const PriorQuery& q) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(
      "SELECT s.id, s.machine_id, m.name, s.task_id, k.version, s.objective, s.direction, t.id, "
      "t.config, t.config_key, t.status, t.objective, s.settings, s.strategy " +
          std::string(kPriorTrialsWhere) +
          " ORDER BY t.id LIMIT CASE WHEN ?11 > 0 THEN ?11 ELSE -1 END",
      "reading the trials of kernel " + q.kernel_name);
  bind_prior_query(st, impl_->db, q);
  std::vector<PriorTrial> out;
  std::unordered_map<std::int64_t, PriorReading> readings;
  while (st.step()) {
    const StudyId study_id{st.column_int64(0)};
    auto reading = readings.find(study_id.value);
    if (reading == readings.end()) {
      reading = readings
                    .emplace(study_id.value,
                             prior_reading(q, st.column_text(12), st.column_text(13), impl_->db))
                    .first;
    }
    if (reading->second.left_out) continue;
    PriorTrial p;
    p.study = study_id;
    p.machine = MachineId{st.column_int64(1)};
    p.machine_name = st.column_text(2);
    p.task = TaskId{st.column_int64(3)};
    p.kernel_version = st.column_text(4);
    p.objective_name = st.column_text(5);
    p.direction = direction_from_string(st.column_text(6));
    p.trial = TrialId{st.column_int64(7)};
    p.config = parse_json_column(st.column_text(8), impl_->db, "trials.config");
    p.config_key = st.column_text(9);
    p.status = trial_status_from_string(st.column_text(10));
    p.objective = st.column_double(11) * reading->second.factor;
    p.unit = reading->second.unit;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<PriorCount> Store::prior_counts(const PriorQuery& q) const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(
      "SELECT s.id, m.name, s.task_id, s.settings, s.strategy, "
      "sum(t.status = 'ok'), count(*) " +
          std::string(kPriorTrialsWhere) + " GROUP BY s.id ORDER BY s.id",
      "counting the trials of kernel " + q.kernel_name);
  bind_prior_query(st, impl_->db, q);
  std::map<std::pair<std::string, std::int64_t>, PriorCount> counts;
  while (st.step()) {
    if (prior_reading(q, st.column_text(3), st.column_text(4), impl_->db).left_out) continue;
    auto& c = counts[{st.column_text(1), st.column_int64(2)}];
    c.machine_name = st.column_text(1);
    c.task = TaskId{st.column_int64(2)};
    c.ok += static_cast<std::size_t>(st.column_int64(5));
    c.finished += static_cast<std::size_t>(st.column_int64(6));
  }
  std::vector<PriorCount> out;
  for (auto& [key, c] : counts) out.push_back(std::move(c));
  return out;
}

// --- import / export

ImportResult Store::import_dataset(const MeasuredDataset& dataset, const ImportOptions& options) {
  return import_datasets({{dataset, options}}).front();
}

std::vector<ImportResult> Store::import_datasets(
    const std::vector<std::pair<MeasuredDataset, ImportOptions>>& datasets) {
  std::lock_guard lock(impl_->mutex);
  std::vector<ImportResult> results;
  // Read-only: import_one says what is wrong with a broken file before it says that.
  std::optional<Transaction> tx;
  if (!impl_->db.read_only()) tx.emplace(impl_->db, "importing measurements");
  bool changed = false;
  for (const auto& [dataset, options] : datasets) {
    // A savepoint per dataset: one imported before takes back the task or kernel version it
    // alone brought, and leaves the others' writes alone.
    impl_->db.exec("SAVEPOINT import_one", "importing measurements");
    bool keep = true;
    results.push_back(import_one(dataset, options, keep));
    if (!keep) impl_->db.exec("ROLLBACK TO import_one", "importing measurements");
    impl_->db.exec("RELEASE import_one", "importing measurements");
    changed = changed || keep;
  }
  if (changed && tx) tx->commit();
  return results;
}

ImportResult Store::import_one(const MeasuredDataset& dataset, const ImportOptions& options,
                               bool& keep) {
  const std::string machine_name =
      options.machine_name.empty() ? dataset.device_name : options.machine_name;
  const std::string kernel_name =
      options.kernel_name.empty() ? dataset.kernel_name : options.kernel_name;
  const std::string what = "importing " + kernel_name + " measurements of " + machine_name;
  if (kernel_name.empty() && machine_name.empty()) {
    throw InvalidInput(
        "the measurements name no kernel and no device (T4 files have neither); give both: "
        "tunebase import --kernel NAME --machine NAME, or POST "
        "/v1/import?kernel=NAME&machine=NAME");
  }
  if (kernel_name.empty()) {
    throw InvalidInput(
        "the measurements name no kernel (T4 files have none); give one: "
        "tunebase import --kernel NAME, or POST /v1/import?kernel=NAME");
  }
  if (machine_name.empty()) {
    throw InvalidInput(
        "the measurements name no device (T4 files have none); give the machine: "
        "tunebase import --machine NAME, or POST /v1/import?machine=NAME");
  }
  check_name(kernel_name, "the kernel name");
  check_name(machine_name,
             options.machine_name.empty()
                 ? "the machine name (the file's device_name; give one to override it)"
                 : "the machine name");
  // Every entry is checked before anything is stored or compared with what is stored, so a
  // broken file is told what is wrong with it, not that a study of that name exists.
  const std::size_t dimension = dataset.space.dimension();
  for (std::size_t i = 0; i < dataset.entries.size(); ++i) {
    const auto& entry = dataset.entries[i];
    if (entry.config.size() != dimension) {
      throw InvalidInput(what + ", entry " + std::to_string(i) + ": the configuration has " +
                         std::to_string(entry.config.size()) + " values but the space has " +
                         std::to_string(dimension) + " parameters");
    }
    check_result(entry.result, what + ", configuration " + dataset.space.key(entry.config));
  }
  impl_->require_writable(what);
  ImportResult result;

  auto machine = impl_->find_machine(machine_name);
  if (!machine) {
    MachineInfo info;
    info.name = machine_name;
    info.fingerprint = {
        {"device_name", dataset.device_name}, {"source", "import"}, {"format", dataset.format}};
    refresh_fingerprint_hash(info);
    machine = impl_->insert_or_update_machine(info, /*update_fingerprint=*/false);
  }
  result.machine = machine->id;
  result.machine_name = machine_name;
  {
    // Spaces of other restrictions alone are priors of one another (PriorQuery::version).
    auto st = impl_->db.prepare("SELECT space FROM kernels WHERE name = ?1", what);
    st.bind(1, kernel_name);
    const auto parameters = dataset.space.parameters_fingerprint();
    while (st.step()) {
      const auto space = parse_json_column(st.column_text(0), impl_->db, "kernels.space");
      if (SearchSpace::parameters_fingerprint(space) != parameters) ++result.other_kernel_versions;
    }
  }
  result.kernel = impl_->upsert_kernel(kernel_name, dataset.space).id;
  result.kernel_name = kernel_name;
  const auto input = options.input.value_or(dataset.task());
  if (!input.is_object()) {
    throw InvalidInput(
        "the input of imported measurements is a JSON object (e.g. "
        "{\"problem_size\": [4096, 4096]}), got " +
        json_text(input));
  }
  result.task = impl_->upsert_task(kernel_name, input, options.task_features).id;
  // The entries' objective is in its own unit (GFLOP/s) when it is no time.
  const std::string unit = dataset.objective == "time" ? options.unit : dataset.objective;

  // What this machine's imports of the kernel hold already: the same measurements are not
  // stored twice under any study name, and a file that extends an import of this input (the
  // cache of a Kernel Tuner run that went on) adds its new entries to that study.
  std::unordered_map<std::string, const Observation*> by_key;
  for (const auto& entry : dataset.entries) by_key.emplace(dataset.space.key(entry.config), &entry);
  const TaskId* only_input = options.match_other_inputs ? nullptr : &result.task;
  for (const auto& [id, o] :
       import_overlaps(impl_->db, kernel_name, machine->id, only_input, by_key, unit, what)) {
    if (o.shared == 0 || o.same < o.shared) continue;
    const auto earlier = impl_->find_study_where("WHERE s.id = ?1", id);
    const std::string named = "study " + std::to_string(id) + " \"" + earlier->name + "\" (" +
                              kernel_name + " on " + machine_name + ")";
    if (o.shared == by_key.size()) {
      // Imported before: nothing to add, so that an import script may run again. Under
      // another study name it would be every measurement twice.
      if (!options.study_name.empty() && options.study_name != earlier->name) {
        throw Conflict("these measurements were imported before: " + named + " holds all " +
                       std::to_string(o.shared) + " of them, with the same results");
      }
      result.study = earlier->id;
      result.already_stored = o.shared;
      // Imported first from a file that named no input (T4), now from one that does: the
      // study learns its input. Otherwise nothing is stored (no task or kernel version that
      // this file alone would have brought).
      auto read_input = impl_->db.prepare("SELECT description FROM tasks WHERE id = ?1", what);
      read_input.bind(1, earlier->task_id.value).step();
      const auto earlier_input = read_input.column_text(0);
      const bool input_unknown = nlohmann::json::parse(earlier_input).empty();
      if (input_unknown && !input.empty() && earlier->task_id != result.task) {
        impl_->db.prepare("UPDATE studies SET task_id = ?1 WHERE id = ?2", what)
            .bind(1, result.task.value)
            .bind(2, id)
            .run();
        // A kernel version (space) of this file alone is not kept: the study keeps its own.
        if (result.kernel != earlier->kernel_id) {
          impl_->db
              .prepare(
                  "DELETE FROM kernels WHERE id = ?1 AND NOT EXISTS "
                  "(SELECT 1 FROM studies WHERE kernel_id = ?1)",
                  what)
              .bind(1, result.kernel.value)
              .run();
          result.kernel = earlier->kernel_id;
        }
        result.input_added = true;
        return result;
      }
      if (!input_unknown && earlier->task_id != result.task) result.input_kept = earlier_input;
      result.kernel = earlier->kernel_id;
      result.task = earlier->task_id;
      keep = false;
      return result;
    }
    // Another input or another search space: a study of its own. Only imports are extended:
    // a study measured here holds what it measured.
    if (!o.imported || earlier->task_id != result.task || earlier->kernel_id != result.kernel) {
      continue;
    }
    if (!options.study_name.empty() && options.study_name != earlier->name) {
      throw Conflict("the file extends " + named + ": the " + std::to_string(o.shared) +
                     " measurements they share are the same; import it without a study name "
                     "(or with \"" +
                     earlier->name + "\") to add its " + std::to_string(by_key.size() - o.shared) +
                     " new ones there");
    }
    result.study = earlier->id;
    result.already_stored = o.shared;
    auto insert = impl_->db.prepare(kInsertFinishedTrial, what);
    const std::string now = now_text();
    std::unordered_set<std::string> added;
    for (const auto& entry : dataset.entries) {
      auto key = dataset.space.key(entry.config);
      if (o.keys.count(key) || !added.insert(key).second) continue;
      insert_finished_trial(insert, impl_->db, result.study,
                            dataset.space.config_to_json(entry.config), key, entry.result,
                            options.client_id, now);
      ++result.trials;
      if (entry.result.status != TrialStatus::ok) ++result.failed;
    }
    impl_->db.prepare("UPDATE studies SET budget = coalesce(budget, 0) + ?1 WHERE id = ?2", what)
        .bind(1, static_cast<std::int64_t>(result.trials))
        .bind(2, id)
        .run();
    return result;
  }

  NewStudy study;
  study.name = options.study_name.empty() ? "import " + kernel_name + " on " + machine_name +
                                                " (task " + std::to_string(result.task.value) + ")"
                                          : options.study_name;
  study.kernel = result.kernel;
  study.machine = result.machine;
  study.task = result.task;
  study.objective = dataset.objective;
  study.direction = dataset.maximize ? Direction::maximize : Direction::minimize;
  study.strategy = "import";
  study.budget = static_cast<std::int64_t>(dataset.entries.size());
  study.settings = {
      {"format", dataset.format}, {"device_name", dataset.device_name}, {"unit", unit}};
  if (const auto existing = impl_->find_study_where("WHERE s.name = ?1", study.name)) {
    const std::string again =
        "; give another study name to import it (tunebase import --study NAME, or POST "
        "/v1/import?study_name=NAME)";
    if (existing->strategy != "import" || !options.study_name.empty()) {
      throw Conflict("a study named \"" + study.name + "\" exists already (" +
                     existing->kernel_name + " on " + existing->machine_name +
                     "); choose another study name");
    }
    throw Conflict("study \"" + study.name + "\" already exists: " +
                   (existing->kernel_id == result.kernel
                        ? std::string("a file of the same kernel, space, device and problem "
                                      "size with other results (another run?) was imported "
                                      "before")
                        : "a file of the same kernel name, device and problem size but "
                          "another search space (tune_params) was imported before; if it is "
                          "another kernel, give it its own name (tunebase import --kernel NAME, "
                          "or POST /v1/import?kernel=NAME), else" +
                              again.substr(1)) +
                   (existing->kernel_id == result.kernel ? again : std::string()));
  }
  result.study = impl_->insert_study(study, StudyStatus::completed).id;

  auto insert = impl_->db.prepare(kInsertFinishedTrial, what);
  const std::string now = now_text();
  for (const auto& entry : dataset.entries) {
    insert_finished_trial(insert, impl_->db, result.study,
                          dataset.space.config_to_json(entry.config),
                          dataset.space.key(entry.config), entry.result, options.client_id, now);
    ++result.trials;
    if (entry.result.status != TrialStatus::ok) ++result.failed;
  }
  return result;
}

// --- fitted models

void Store::save_fitted_models(const nlohmann::json& models) {
  if (!models.is_object()) throw InvalidInput("fitted models must be a JSON object by key");
  for (const auto& [key, value] : models.items()) {
    if (key.empty() || !value.is_object()) {
      throw InvalidInput("fitted model \"" + key +
                         "\" must have a non-empty key and an object "
                         "value");
    }
  }
  std::lock_guard lock(impl_->mutex);
  const std::string what = "saving fitted models";
  impl_->require_writable(what);
  Transaction tx(impl_->db, what);
  auto st = impl_->db.prepare(
      "INSERT INTO fitted_models (key, name, parameters, updated_at) VALUES (?1, ?2, ?3, ?4) "
      "ON CONFLICT (key) DO UPDATE SET name = excluded.name, parameters = excluded.parameters, "
      "updated_at = excluded.updated_at",
      what);
  const std::string now = now_text();
  const std::int64_t changes_before = impl_->db.total_changes();
  for (const auto& [key, value] : models.items()) {
    st.reset();
    st.bind(1, key)
        .bind(2, value.value("name", std::string()))
        .bind(3, json_text(value))
        .bind(4, now)
        .run();
  }
  tx.commit();
  impl_->model_changes += impl_->db.total_changes() - changes_before;
}

nlohmann::json Store::fitted_models() const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare("SELECT key, parameters FROM fitted_models ORDER BY key",
                              "reading fitted models");
  nlohmann::json out = nlohmann::json::object();
  while (st.step()) {
    out[st.column_text(0)] =
        parse_json_column(st.column_text(1), impl_->db, "fitted_models.parameters");
  }
  return out;
}

// --- API tokens

std::string Store::create_token(std::string_view name) {
  std::lock_guard lock(impl_->mutex);
  check_name(name, "a token name");
  const std::string what = "creating token " + std::string(name);
  impl_->require_writable(what);
  std::array<unsigned char, kTokenBytes> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw StorageError("OpenSSL could not produce random bytes for a new token");
  }
  const std::string token = hex(bytes.data(), bytes.size());
  auto st =
      impl_->db.prepare("INSERT INTO tokens (name, hash, created_at) VALUES (?1, ?2, ?3)", what);
  st.bind(1, name).bind(2, sha256_hex(token)).bind(3, now_text());
  try {
    st.run();
  } catch (const SqliteError& e) {
    if (!is_unique_violation(e)) throw;
    throw Conflict("an active token named \"" + std::string(name) +
                   "\" exists already; revoke it first or choose another name");
  }
  return token;
}

std::optional<TokenRecord> Store::verify_token(std::string_view token) const {
  std::lock_guard lock(impl_->mutex);
  if (token.empty()) return std::nullopt;
  auto st = impl_->db.prepare(
      sql({"SELECT ", kTokenColumns, " FROM tokens WHERE hash = ?1 AND revoked_at IS NULL"}),
      "checking a token");
  st.bind(1, sha256_hex(token));
  if (!st.step()) return std::nullopt;
  return read_token(st);
}

std::vector<TokenRecord> Store::list_tokens() const {
  std::lock_guard lock(impl_->mutex);
  auto st = impl_->db.prepare(sql({"SELECT ", kTokenColumns, " FROM tokens ORDER BY id"}),
                              "listing tokens");
  std::vector<TokenRecord> out;
  while (st.step()) out.push_back(read_token(st));
  return out;
}

void Store::revoke_token(std::string_view name) {
  std::lock_guard lock(impl_->mutex);
  const std::string what = "revoking token " + std::string(name);
  impl_->require_writable(what);
  auto st = impl_->db.prepare(
      "UPDATE tokens SET revoked_at = ?1 WHERE name = ?2 AND revoked_at IS NULL", what);
  st.bind(1, now_text()).bind(2, name).run();
  if (impl_->db.changes() == 0) {
    throw NotFound("no active token is named \"" + std::string(name) + "\"");
  }
}

}  // namespace tunebase::db
