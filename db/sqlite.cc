#include "db/sqlite.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>

namespace tunebase::db {

namespace {

struct CorruptionSeen {
  std::mutex mutex;
  std::map<std::string, std::string> by_path;
};

CorruptionSeen& corruption() {
  static CorruptionSeen seen;
  return seen;
}

void remember_corruption(const std::string& path, const std::string& message) {
  auto& seen = corruption();
  std::lock_guard lock(seen.mutex);
  seen.by_path.emplace(path, message);  // the first report stays
}

constexpr std::string_view kMemoryPath = ":memory:";

// Characters that must be percent-encoded in the path part of a SQLite "file:" URI.
std::string uri_escape(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool file_is_empty_or_absent(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return true;
  const auto size = std::filesystem::file_size(path, ec);
  return !ec && size == 0;
}

// Whether SQLite can keep its -wal and -shm files next to `path`: they exist already and are
// writable, or the folder lets this user create them.
bool folder_allows_journal(const std::string& path) {
  const auto folder = std::filesystem::absolute(path).parent_path();
  if (access(folder.c_str(), W_OK | X_OK) == 0) return true;
  for (const char* suffix : {"-wal", "-shm"}) {
    if (access((path + suffix).c_str(), W_OK) != 0) return false;
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Database

Database::Database(std::string path, DatabaseOptions options)
    : path_(std::move(path)), options_(options) {
  const bool in_memory = path_ == kMemoryPath;
  if (std::error_code ec; !in_memory && std::filesystem::is_directory(path_, ec)) {
    throw SqliteError("database " + path_ + " is a directory; give the path of a database file",
                      SQLITE_CANTOPEN);
  }
  if (options_.read_only && !in_memory) {
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec)) {
      throw SqliteError("database " + path_ +
                            " does not exist; a read-only open never creates a file (open it "
                            "for writing once to create it, or check the path)",
                        SQLITE_CANTOPEN);
    }
  }
  open_connection(/*immutable=*/false);
  try {
    configure();
  } catch (const SqliteError& e) {
    // A WAL database can only be read when its -shm index can be created or opened. In a
    // folder we cannot write, with no -wal file holding uncommitted-to-main pages, the main
    // file alone is the whole database: read it as immutable (a snapshot; later writes by
    // others are not seen, which a read-only folder makes unlikely).
    // (SQLITE_READONLY_CANTINIT, _DIRECTORY, _RECOVERY or CANTOPEN, by SQLite version.)
    const bool cannot_init_wal_index =
        e.primary_code() == SQLITE_READONLY || e.primary_code() == SQLITE_CANTOPEN;
    if (!options_.read_only || in_memory || !cannot_init_wal_index ||
        !file_is_empty_or_absent(path_ + "-wal")) {
      throw;
    }
    db_.reset();
    open_connection(/*immutable=*/true);
    configure();
  }
}

void Database::open_connection(bool immutable) {
  // A reader that may write the file and its folder opens it read-write with query_only: the
  // last connection to close then removes -wal and -shm, which a read-only connection cannot,
  // so every query (tunebase best at configure time) left them behind.
  const bool query_only =
      options_.read_only && !immutable && path_ != kMemoryPath &&
      access(path_.c_str(), R_OK | W_OK) == 0 &&
      access(std::filesystem::absolute(path_).parent_path().c_str(), W_OK | X_OK) == 0;
  int flags = options_.read_only && !query_only
                  ? SQLITE_OPEN_READONLY
                  : SQLITE_OPEN_READWRITE | (options_.read_only ? 0 : SQLITE_OPEN_CREATE);
  std::string name = path_;
  if (immutable) {
    flags |= SQLITE_OPEN_URI;
    name = "file:" + uri_escape(path_) + "?immutable=1";
  }
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(name.c_str(), &raw, flags, nullptr);
  db_.reset(raw);  // sqlite3_open_v2 hands back a handle even on failure; it must be closed
  if (rc != SQLITE_OK) {
    if (!raw) {
      throw SqliteError("cannot open database " + path_ + ": " + sqlite3_errstr(rc), rc);
    }
    fail(sqlite3_extended_errcode(raw), "opening the file");
  }
  sqlite3_extended_result_codes(raw, 1);
  if (query_only) exec("PRAGMA query_only = ON", "making the connection read-only");
}

void Database::configure() {
  sqlite3_busy_timeout(db_.get(), static_cast<int>(options_.busy_timeout.count()));
  exec("PRAGMA foreign_keys = ON", "enabling foreign keys");
  if (!options_.read_only && sqlite3_db_readonly(db_.get(), "main") == 1) {
    throw SqliteError("database " + path_ +
                          " is read-only: the file is not writable by this user, and this "
                          "command writes to it; fix the permissions of the file (commands "
                          "that only read, such as best, studies and export, work as it is)",
                      SQLITE_READONLY);
  }
  // Without its -wal and -shm files SQLite fails at the first read or write, with a message
  // that does not name the folder. Say so now.
  if (!options_.read_only && path_ != kMemoryPath && !folder_allows_journal(path_)) {
    const auto folder = std::filesystem::absolute(path_).parent_path().string();
    throw SqliteError("database " + path_ + " is read-only: SQLite cannot create " + path_ +
                          "-wal and -shm because the folder " + folder +
                          " is not writable by this user, and this command writes to the "
                          "database; fix the permissions of the folder (commands that only "
                          "read, such as best, studies and export, work as it is)",
                      SQLITE_READONLY);
  }
  // -wal and -shm files left behind by another user (or mode 0444) let the file open, and then
  // every write fails. Say so now, naming the file.
  if (!options_.read_only && path_ != kMemoryPath) {
    for (const char* suffix : {"-wal", "-shm"}) {
      const std::string side = path_ + suffix;
      if (access(side.c_str(), F_OK) == 0 && access(side.c_str(), W_OK) != 0) {
        throw SqliteError("database " + path_ + " is read-only: " + side +
                              " exists but is not writable by this user; fix its permissions "
                              "(or its owner), or remove it once no process uses the database",
                          SQLITE_READONLY);
      }
    }
  }
  // Reading the schema is the first access to the file: this is where a file that is not a
  // database, or a WAL index that cannot be created, shows up.
  prepare("SELECT count(*) FROM sqlite_schema", "reading the schema").run();
  if (options_.read_only) return;

  // Switching to WAL needs no lock when the file already is in WAL mode (the usual case).
  auto mode = prepare("PRAGMA journal_mode = WAL", "switching to WAL journal mode");
  if (mode.step()) {
    const std::string got = mode.column_text(0);
    if (got != "wal" && got != "memory") {
      throw SqliteError("database " + path_ + " could not switch to WAL journal mode (it is in " +
                            got + " mode); the file system may not support shared memory",
                        SQLITE_ERROR);
    }
  }
  exec("PRAGMA synchronous = FULL", "setting synchronous=FULL");
}

void Database::exec(std::string_view sql, std::string_view what) {
  const std::string text(sql);
  char* message = nullptr;
  const int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, &message);
  sqlite3_free(message);  // sqlite3_errmsg() still holds the same text for fail()
  if (rc != SQLITE_OK) fail(sqlite3_extended_errcode(db_.get()), what);
}

Statement Database::prepare(std::string_view sql, std::string_view what) {
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    fail(rc, what);
  }
  return Statement(*this, stmt, std::string(what));
}

std::int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

std::int64_t Database::changes() const { return sqlite3_changes64(db_.get()); }
std::int64_t Database::total_changes() const { return sqlite3_total_changes64(db_.get()); }

bool Database::in_transaction() const { return sqlite3_get_autocommit(db_.get()) == 0; }

std::optional<std::string> corruption_seen(const std::string& path) {
  auto& seen = corruption();
  std::lock_guard lock(seen.mutex);
  const auto it = seen.by_path.find(path);
  if (it == seen.by_path.end()) return std::nullopt;
  return it->second;
}

void Database::backup_to(const std::string& path) const {
  Database copy(path);
  sqlite3_backup* backup = sqlite3_backup_init(copy.handle(), "main", db_.get(), "main");
  if (!backup) copy.fail(sqlite3_extended_errcode(copy.handle()), "starting a backup of " + path_);
  // Every page in one step: one read transaction, so a writer elsewhere cannot make the copy
  // restart, and the copy is of one moment.
  const int rc = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) fail(rc, "copying " + path_ + " to " + path);
}

std::string Database::quick_check() {
  // The first problems are enough to tell a file is corrupt, and where.
  std::string found;
  try {
    auto st = prepare("PRAGMA quick_check(3)", "checking the file (PRAGMA quick_check)");
    while (st.step()) {
      std::string text = st.column_text(0);
      if (text == "ok") continue;
      if (text.starts_with("*** in database main ***")) text.erase(0, 24);
      std::size_t start = 0;
      while (start < text.size()) {
        auto end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        if (end > start) found += (found.empty() ? "" : "; ") + text.substr(start, end - start);
        start = end + 1;
      }
    }
  } catch (const SqliteError& e) {
    // A page so damaged that the check cannot walk past it (remembered by fail()).
    if (e.primary_code() != SQLITE_CORRUPT && e.primary_code() != SQLITE_NOTADB) throw;
    return sqlite3_errstr(e.primary_code());
  }
  if (!found.empty()) {
    remember_corruption(path_, "database " + path_ + " is corrupt (PRAGMA quick_check: " + found +
                                   "); restore it from a backup");
  }
  return found;
}

void Database::fail(int rc, std::string_view what) const {
  const std::string detail = db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc);
  const std::string doing(what);
  std::string message;
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      message = path_ + " is not a SQLite database (" + detail + ", while " + doing +
                "); give the path of a tunebase database, or a new file name to create one";
      remember_corruption(path_, message);
      break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      message = "database " + path_ + " is locked by another process: gave up after " +
                std::to_string(options_.busy_timeout.count()) + " ms while " + doing +
                " (another tunebase process or an sqlite3 shell holds a write transaction); "
                "retry later or stop the other writer";
      break;
    case SQLITE_READONLY:
      message =
          "database " + path_ + " is read-only: " + doing + " needs write access (" + detail +
          "); " +
          (options_.read_only ? std::string("it was opened read-only")
                              : "check that this user may write the file and its folder (SQLite "
                                "creates " +
                                    path_ + "-wal and -shm beside it)");
      break;
    case SQLITE_CANTOPEN:
      message = "cannot open database " + path_ + " while " + doing + ": " + detail +
                "; check that its folder exists and that the file and folder are readable" +
                (options_.read_only ? "" : " and writable");
      break;
    case SQLITE_CORRUPT:
      message = "database " + path_ + " is corrupt (" + detail + ", while " + doing +
                "); restore it from a backup";
      remember_corruption(path_, message);
      break;
    case SQLITE_FULL:
      message = "database " + path_ + ": the disk is full while " + doing;
      break;
    case SQLITE_IOERR:
      message = "database " + path_ + ": input/output error while " + doing + ": " + detail;
      break;
    default:
      message = "database " + path_ + ": " + doing + " failed: " + detail;
  }
  throw SqliteError(message, rc);
}

// ---------------------------------------------------------------------------------------------
// Statement

void Statement::check_bind(int rc, int index) {
  if (rc == SQLITE_OK) return;
  if (rc == SQLITE_RANGE) {
    throw SqliteError("database " + db_->path() + ": parameter " + std::to_string(index) +
                          " is out of range while " + what_,
                      rc);
  }
  db_->fail(rc, what_);
}

Statement& Statement::bind(int index, std::int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_.get(), index, value), index);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  check_bind(std::isnan(value) ? sqlite3_bind_null(stmt_.get(), index)
                               : sqlite3_bind_double(stmt_.get(), index, value),
             index);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  // A default-constructed string_view has a null data(), which SQLite would bind as NULL.
  const char* data = text.data() ? text.data() : "";
  check_bind(
      sqlite3_bind_text64(stmt_.get(), index, data, text.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
  return *this;
}

Statement& Statement::bind(int index, std::nullptr_t) {
  check_bind(sqlite3_bind_null(stmt_.get(), index), index);
  return *this;
}

Statement& Statement::bind_blob(int index, std::span<const std::byte> bytes) {
  check_bind(sqlite3_bind_blob64(stmt_.get(), index, bytes.data(), bytes.size(), SQLITE_TRANSIENT),
             index);
  return *this;
}

int Statement::parameter_index(std::string_view name) const {
  const std::string text(name);
  const int index = sqlite3_bind_parameter_index(stmt_.get(), text.c_str());
  if (index == 0) {
    throw SqliteError(
        "database " + db_->path() + ": no parameter named " + text + " while " + what_,
        SQLITE_RANGE);
  }
  return index;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail(rc, what_);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

bool Statement::column_is_null(int column) const {
  return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL;
}

std::int64_t Statement::column_int64(int column) const {
  return sqlite3_column_int64(stmt_.get(), column);
}

double Statement::column_double(int column) const {
  if (column_is_null(column)) return std::nan("");
  return sqlite3_column_double(stmt_.get(), column);
}

std::string Statement::column_text(int column) const {
  const auto* text = sqlite3_column_text(stmt_.get(), column);
  if (!text) return {};
  const int bytes = sqlite3_column_bytes(stmt_.get(), column);
  return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(bytes));
}

std::optional<std::string> Statement::column_optional_text(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_text(column);
}

std::optional<std::int64_t> Statement::column_optional_int64(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_int64(column);
}

std::vector<std::byte> Statement::column_blob(int column) const {
  const void* data = sqlite3_column_blob(stmt_.get(), column);
  const int bytes = sqlite3_column_bytes(stmt_.get(), column);
  std::vector<std::byte> out(static_cast<std::size_t>(bytes));
  if (bytes > 0) std::memcpy(out.data(), data, out.size());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Transaction

Transaction::Transaction(Database& db, std::string what) : db_(db), what_(std::move(what)) {
  db_.exec("BEGIN IMMEDIATE", "starting a write transaction for " + what_);
}

Transaction::~Transaction() {
  // A failed statement may already have ended the transaction (SQLite rolls back on some
  // errors, e.g. SQLITE_FULL); only roll back what is still open. Never throw from here.
  if (open_ && db_.in_transaction()) {
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  db_.exec("COMMIT", "committing " + what_);
  open_ = false;
}

}  // namespace tunebase::db
