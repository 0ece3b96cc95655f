// RAII wrappers over the SQLite C API: a connection, prepared statements, and write
// transactions. Every failure becomes a tunebase::StorageError (a SqliteError) whose message
// names the database file, what was being done, and SQLite's own explanation.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tunebase::db {

/// A StorageError that keeps SQLite's extended result code, so that callers can tell a
/// uniqueness violation (SQLITE_CONSTRAINT_UNIQUE) from a locked file (SQLITE_BUSY).
class SqliteError : public StorageError {
 public:
  SqliteError(const std::string& message, int extended_code)
      : StorageError(message), extended_code_(extended_code) {}
  int extended_code() const { return extended_code_; }
  int primary_code() const { return extended_code_ & 0xff; }
  /// Another connection held the lock past the busy timeout: the same call may succeed later.
  bool busy() const { return primary_code() == SQLITE_BUSY || primary_code() == SQLITE_LOCKED; }

 private:
  int extended_code_;
};

/// What SQLite reported the first time it found the database at `path` corrupt (or not a
/// database) in this process, from any connection; none when it never did. Corruption does not
/// heal: a server that met it says so in its health check until it is restarted on a good file.
std::optional<std::string> corruption_seen(const std::string& path);

struct DatabaseOptions {
  /// Open for reading only. A read-only open never creates, migrates or writes the file.
  bool read_only = false;
  /// How long a statement waits for another connection's write lock before failing with
  /// "database X is locked by another process".
  std::chrono::milliseconds busy_timeout{5000};
};

class Statement;

/// One connection to one database file, configured for tunebase:
///  - journal_mode=WAL: readers never block the writer and the writer never blocks readers,
///    so an HTTP server can answer queries while a sweep writes.
///  - synchronous=FULL: in WAL mode NORMAL is already durable when the *application*
///    crashes, but a power cut or kernel crash can roll back the last commits. tunebase
///    promises that no acknowledged write is lost, and writes are rare (one per evaluated
///    configuration, each taking milliseconds to minutes), so one fsync per commit is cheap.
///  - foreign_keys=ON, busy_timeout from the options.
/// Not thread-safe: use one connection per thread, or guard it (as Store does). Statements
/// point to their Database: do not move a Database while statements of it exist.
class Database {
 public:
  explicit Database(std::string path, DatabaseOptions options = {});
  Database(Database&&) noexcept = default;
  Database& operator=(Database&&) noexcept = default;
  ~Database() = default;

  /// Runs one or more SQL statements that return no rows (DDL, pragmas, BEGIN/COMMIT).
  /// `what` says what this is for, in error messages ("creating the schema").
  void exec(std::string_view sql, std::string_view what);
  /// Prepares one statement; `what` is used in its error messages.
  Statement prepare(std::string_view sql, std::string_view what);

  std::int64_t last_insert_rowid() const;
  /// Rows changed by the most recent INSERT, UPDATE or DELETE.
  std::int64_t changes() const;
  /// Rows changed through this connection since it opened.
  std::int64_t total_changes() const;
  bool in_transaction() const;

  const std::string& path() const { return path_; }
  bool read_only() const { return options_.read_only; }
  std::chrono::milliseconds busy_timeout() const { return options_.busy_timeout; }
  sqlite3* handle() const { return db_.get(); }

  /// Throws the SqliteError for result code `rc`, phrased for a user: "X is not a SQLite
  /// database", "database X is read-only: ...", "database X is locked by another process".
  /// Corruption is remembered too (corruption_seen).
  [[noreturn]] void fail(int rc, std::string_view what) const;
  /// SQLite's quick_check (every page and index entry, not the index contents): empty when
  /// the file is sound, else what it found, which is remembered as corruption_seen. Reads
  /// the whole file: about a second per GB.
  std::string quick_check();
  /// Copies the whole database, as one read transaction sees it, to a new database file at
  /// `path` (SQLite's online backup API; works on a read-only connection).
  void backup_to(const std::string& path) const;

 private:
  struct Closer {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  void open_connection(bool immutable);
  void configure();

  std::string path_;
  DatabaseOptions options_;
  std::unique_ptr<sqlite3, Closer> db_;
};

/// A prepared statement. Parameters are 1-based (SQLite's convention); columns 0-based.
class Statement {
 public:
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;
  ~Statement() = default;

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  /// NaN is stored as NULL (SQLite's own rule), so bind NaN only where NULL is allowed.
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bind(int index, const std::string& text) {
    return bind(index, std::string_view(text));
  }
  Statement& bind(int index, std::nullptr_t);
  template <class T>
  Statement& bind(int index, const std::optional<T>& value) {
    if (!value) return bind(index, nullptr);
    return bind(index, *value);
  }
  Statement& bind_blob(int index, std::span<const std::byte> bytes);
  /// Binds a named parameter (":name", "@name" or "$name", prefix included).
  template <class T>
  Statement& bind(std::string_view name, const T& value) {
    return bind(parameter_index(name), value);
  }
  int parameter_index(std::string_view name) const;

  /// Advances to the next row: true when a row is available, false when done.
  bool step();
  /// Steps to completion, for statements that return no rows (or whose rows are ignored).
  void run();
  /// Rewinds the statement and clears its bindings, ready for new values.
  void reset();

  bool column_is_null(int column) const;
  std::int64_t column_int64(int column) const;
  /// NULL reads as NaN.
  double column_double(int column) const;
  std::string column_text(int column) const;
  std::optional<std::string> column_optional_text(int column) const;
  std::optional<std::int64_t> column_optional_int64(int column) const;
  std::vector<std::byte> column_blob(int column) const;

 private:
  friend class Database;
  struct Finalizer {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  Statement(const Database& db, sqlite3_stmt* stmt, std::string what)
      : db_(&db), stmt_(stmt), what_(std::move(what)) {}
  void check_bind(int rc, int index);

  const Database* db_;
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
  std::string what_;
};

/// BEGIN IMMEDIATE ... COMMIT. Taking the write lock at BEGIN (not at the first write) means
/// a transaction that read something never fails later because another writer got there
/// first; a busy database waits up to busy_timeout at BEGIN. Rolls back unless committed.
class Transaction {
 public:
  Transaction(Database& db, std::string what);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  /// Once commit() returns, the write is durable (synchronous=FULL).
  void commit();

 private:
  Database& db_;
  std::string what_;
  bool open_ = true;
};

}  // namespace tunebase::db
