// The tunebase schema and its migrations. The version applied last is recorded in the
// `schema_version` table; each migration runs in its own transaction, so a database is always
// at one known version, never in between.
#pragma once

#include <string_view>
#include <vector>

#include "db/sqlite.h"

namespace tunebase::db {

struct Migration {
  int version;
  std::string_view description;
  std::string_view sql;
  /// Whether reading needs it. One that changes only how the database is written (how new
  /// ids are chosen) leaves a database readable by a read-only connection before it is
  /// applied, which the next writer does.
  bool needed_for_reads = true;
};

/// Every migration, in the order applied. Append new ones; never edit a released one.
const std::vector<Migration>& migrations();
/// Version of the last migration: what this build writes and expects.
int latest_schema_version();

/// Version recorded in the database; 0 for an empty database. Throws StorageError for a
/// SQLite file that holds tables but no schema_version (not a tunebase database).
int schema_version(Database& db);

/// Brings the database to latest_schema_version(), one transaction per missing migration
/// (another process migrating at the same time is detected and skipped). Throws StorageError
/// when the database is newer than this build, or when opened read-only and not current.
void migrate(Database& db);

}  // namespace tunebase::db
