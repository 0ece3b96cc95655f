#include "db/schema.h"

#include <algorithm>
#include <string>

namespace tunebase::db {

namespace {

// Version 1: the first schema. JSON columns hold compact JSON text written by the store;
// timestamps are ISO-8601 UTC text ("2024-05-01T12:00:00.000Z"), which sorts by time.
//
// Trial life cycle:
//   pending (a client leased it; lease_expires_at set, finished_at NULL)
//     -> ok | failed | timeout | invalid      (result reported; finished_at set)
//     -> timeout with finished_at NULL        (lease expired, no result yet)
//          -> ok | failed | timeout | invalid (the late result, accepted once, while no other
//                                              trial of the configuration has a result and the
//                                              study's budget has room; a live lease of the
//                                              configuration is withdrawn: timeout)
//   pending -> timeout with finished_at NULL   (lease released by its client: release_lease)
// "finished_at IS NULL" therefore means "no result has been reported yet".
constexpr std::string_view kSchemaV1 = R"sql(
CREATE TABLE machines (
  id               INTEGER PRIMARY KEY,
  name             TEXT NOT NULL UNIQUE,
  fingerprint      TEXT NOT NULL,
  fingerprint_hash TEXT NOT NULL,
  created_at       TEXT NOT NULL
);

CREATE TABLE kernels (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  version    TEXT NOT NULL,          -- SearchSpace::fingerprint() of the space
  space      TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (name, version)
);

CREATE TABLE tasks (
  id          INTEGER PRIMARY KEY,
  kernel_name TEXT NOT NULL,         -- tasks outlive kernel versions
  description TEXT NOT NULL,
  features    TEXT NOT NULL,
  hash        TEXT NOT NULL,         -- stable hash of description
  created_at  TEXT NOT NULL,
  UNIQUE (kernel_name, hash)
);

CREATE TABLE studies (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  kernel_id  INTEGER NOT NULL REFERENCES kernels (id),
  machine_id INTEGER NOT NULL REFERENCES machines (id),
  task_id    INTEGER NOT NULL REFERENCES tasks (id),
  objective  TEXT NOT NULL,
  direction  TEXT NOT NULL CHECK (direction IN ('minimize', 'maximize')),
  strategy   TEXT NOT NULL,
  budget     INTEGER,
  settings   TEXT NOT NULL,
  status     TEXT NOT NULL CHECK (status IN ('active', 'completed', 'stopped')),
  created_at TEXT NOT NULL
);
-- best per (kernel, machine, task) and priors per kernel
CREATE INDEX studies_by_kernel_machine_task ON studies (kernel_id, machine_id, task_id);
CREATE INDEX studies_by_machine ON studies (machine_id);
CREATE INDEX studies_by_task ON studies (task_id);

CREATE TABLE trials (
  id               INTEGER PRIMARY KEY,
  study_id         INTEGER NOT NULL REFERENCES studies (id),
  config           TEXT NOT NULL,
  config_key       TEXT NOT NULL,
  status           TEXT NOT NULL
                   CHECK (status IN ('pending', 'ok', 'failed', 'timeout', 'invalid')),
  objective        REAL CHECK (status <> 'ok' OR objective IS NOT NULL),
  raw              TEXT NOT NULL DEFAULT '[]',
  cost_seconds     REAL NOT NULL DEFAULT 0,
  message          TEXT NOT NULL DEFAULT '',
  metrics          TEXT NOT NULL DEFAULT '{}',
  client_id        TEXT NOT NULL DEFAULT '',
  lease_expires_at TEXT,
  created_at       TEXT NOT NULL,
  started_at       TEXT,
  finished_at      TEXT
);
-- trials of a study in order; best of a study: (study_id, status = 'ok', min/max objective)
CREATE INDEX trials_by_study_status_objective ON trials (study_id, status, objective);
-- leases to expire
CREATE INDEX trials_pending_by_lease ON trials (lease_expires_at) WHERE status = 'pending';
-- one live lease per configuration and study: two workers never evaluate the same pending one
CREATE UNIQUE INDEX trials_one_pending_per_key ON trials (study_id, config_key)
  WHERE status = 'pending';

CREATE TABLE tokens (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  hash       TEXT NOT NULL UNIQUE,   -- SHA-256 of the token, hex; the token itself is not kept
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;
)sql";

// Version 2: fitted surrogate models of priors (transfer learning), keyed by a hash of the
// data and options they were fitted on, so that a prior's GP hyperparameters are optimised
// once and later processes only condition on them. `parameters` is JSON the surrogate module
// writes and reads; the store does not look inside.
constexpr std::string_view kSchemaV2 = R"sql(
CREATE TABLE fitted_models (
  key        TEXT PRIMARY KEY,
  name       TEXT NOT NULL,
  parameters TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
)sql";

// Version 3: the trials of one configuration in a study, found at once when a lease or a
// result is checked against those already there.
constexpr std::string_view kSchemaV3 = R"sql(
CREATE INDEX trials_by_study_key ON trials (study_id, config_key);
)sql";

// Version 4: study and trial ids are never used again once their study is deleted
// (AUTOINCREMENT): a client holding an old id (a worker's lease, a build script's study) must
// not reach another study's data. SQLite cannot add AUTOINCREMENT to a table, so both are
// built anew and filled from the old ones. Trials are built referencing the new studies
// table, so that no foreign key points to a dropped table at any moment; renaming studies_new
// rewrites that reference.
constexpr std::string_view kSchemaV4 = R"sql(
CREATE TABLE studies_new (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  name       TEXT NOT NULL UNIQUE,
  kernel_id  INTEGER NOT NULL REFERENCES kernels (id),
  machine_id INTEGER NOT NULL REFERENCES machines (id),
  task_id    INTEGER NOT NULL REFERENCES tasks (id),
  objective  TEXT NOT NULL,
  direction  TEXT NOT NULL CHECK (direction IN ('minimize', 'maximize')),
  strategy   TEXT NOT NULL,
  budget     INTEGER,
  settings   TEXT NOT NULL,
  status     TEXT NOT NULL CHECK (status IN ('active', 'completed', 'stopped')),
  created_at TEXT NOT NULL
);
INSERT INTO studies_new (id, name, kernel_id, machine_id, task_id, objective, direction,
                         strategy, budget, settings, status, created_at)
  SELECT id, name, kernel_id, machine_id, task_id, objective, direction, strategy, budget,
         settings, status, created_at FROM studies;

CREATE TABLE trials_new (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  study_id         INTEGER NOT NULL REFERENCES studies_new (id),
  config           TEXT NOT NULL,
  config_key       TEXT NOT NULL,
  status           TEXT NOT NULL
                   CHECK (status IN ('pending', 'ok', 'failed', 'timeout', 'invalid')),
  objective        REAL CHECK (status <> 'ok' OR objective IS NOT NULL),
  raw              TEXT NOT NULL DEFAULT '[]',
  cost_seconds     REAL NOT NULL DEFAULT 0,
  message          TEXT NOT NULL DEFAULT '',
  metrics          TEXT NOT NULL DEFAULT '{}',
  client_id        TEXT NOT NULL DEFAULT '',
  lease_expires_at TEXT,
  created_at       TEXT NOT NULL,
  started_at       TEXT,
  finished_at      TEXT
);
INSERT INTO trials_new (id, study_id, config, config_key, status, objective, raw, cost_seconds,
                        message, metrics, client_id, lease_expires_at, created_at, started_at,
                        finished_at)
  SELECT id, study_id, config, config_key, status, objective, raw, cost_seconds, message,
         metrics, client_id, lease_expires_at, created_at, started_at, finished_at FROM trials;

DROP TABLE trials;
DROP TABLE studies;
ALTER TABLE studies_new RENAME TO studies;
ALTER TABLE trials_new RENAME TO trials;

CREATE INDEX studies_by_kernel_machine_task ON studies (kernel_id, machine_id, task_id);
CREATE INDEX studies_by_machine ON studies (machine_id);
CREATE INDEX studies_by_task ON studies (task_id);
CREATE INDEX trials_by_study_status_objective ON trials (study_id, status, objective);
CREATE INDEX trials_pending_by_lease ON trials (lease_expires_at) WHERE status = 'pending';
CREATE UNIQUE INDEX trials_one_pending_per_key ON trials (study_id, config_key)
  WHERE status = 'pending';
CREATE INDEX trials_by_study_key ON trials (study_id, config_key);
)sql";

constexpr std::string_view kCreateVersionTable = R"sql(
CREATE TABLE IF NOT EXISTS schema_version (
  version     INTEGER PRIMARY KEY,
  description TEXT NOT NULL,
  applied_at  TEXT NOT NULL
))sql";

bool has_table(Database& db, std::string_view name) {
  auto st = db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                       "looking for the schema_version table");
  st.bind(1, name);
  return st.step();
}

int read_version(Database& db) {
  if (!has_table(db, "schema_version")) {
    auto tables = db.prepare(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        "counting tables");
    tables.step();
    if (tables.column_int64(0) > 0) {
      throw SqliteError("database " + db.path() +
                            " is a SQLite database but not a tunebase one (it has tables but "
                            "no schema_version table); give the path of a tunebase database or "
                            "of a new file",
                        SQLITE_ERROR);
    }
    return 0;
  }
  auto st = db.prepare("SELECT coalesce(max(version), 0) FROM schema_version",
                       "reading the schema version");
  st.step();
  return static_cast<int>(st.column_int64(0));
}

}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> all = {
      {1, "machines, kernels, tasks, studies, trials, tokens", kSchemaV1},
      {2, "fitted models of priors", kSchemaV2},
      {3, "trials by study and configuration", kSchemaV3},
      {4, "study and trial ids never reused (AUTOINCREMENT)", kSchemaV4, false},
  };
  return all;
}

int latest_schema_version() { return migrations().back().version; }

int schema_version(Database& db) { return read_version(db); }

void migrate(Database& db) {
  const int latest = latest_schema_version();
  const int current = read_version(db);
  if (current > latest) {
    throw SqliteError("database " + db.path() + " has schema version " + std::to_string(current) +
                          ", newer than this build of tunebase knows (" + std::to_string(latest) +
                          "); use a newer tunebase",
                      SQLITE_ERROR);
  }
  if (current == latest) return;
  // A reader can use a database whose missing migrations change only how it is written.
  const bool readable =
      current > 0 && std::all_of(migrations().begin(), migrations().end(), [&](const Migration& m) {
        return m.version <= current || !m.needed_for_reads;
      });
  if (db.read_only() && readable) return;
  if (db.read_only()) {
    throw SqliteError(
        "database " + db.path() + " has schema version " + std::to_string(current) +
            " but this build of tunebase needs version " + std::to_string(latest) +
            (current == 0 ? " (it is empty)" : "") +
            "; it was opened read-only, so open it once for writing to create or upgrade it",
        SQLITE_READONLY);
  }
  for (const auto& m : migrations()) {
    if (m.version <= current) continue;
    const std::string what = "migrating the schema to version " + std::to_string(m.version);
    Transaction tx(db, what);
    // Another process may have applied it between our read and our write lock.
    if (read_version(db) >= m.version) continue;
    db.exec(kCreateVersionTable, what);
    db.exec(m.sql, what);
    auto record = db.prepare(
        "INSERT INTO schema_version (version, description, applied_at) "
        "VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
        what);
    record.bind(1, m.version).bind(2, m.description).run();
    tx.commit();
  }
}

}  // namespace tunebase::db
