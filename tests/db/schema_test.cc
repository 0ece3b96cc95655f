// Schema creation and migrations: fresh database, re-open, a database newer than this build.
#include "db/schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "db/sqlite.h"
#include "db/store.h"
#include "tests/db/db_test_util.h"
#include "tests/support/shared_data.h"

namespace tunebase::db {
namespace {

using ::testing::HasSubstr;
using tunebase::testing::TempDir;

std::int64_t count(Database& db, const std::string& sql) {
  auto st = db.prepare(sql, "counting");
  st.step();
  return st.column_int64(0);
}

TEST(Schema, MigrationsAreOrderedAndStartAtOne) {
  const auto& all = migrations();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().version, 1);
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i].version, all[i - 1].version + 1);
  EXPECT_EQ(latest_schema_version(), all.back().version);
}

TEST(Schema, FreshDatabaseGetsEveryTable) {
  TempDir dir;
  const auto path = dir.file("fresh.db");
  { Store store(path); }
  Database db(path);
  EXPECT_EQ(schema_version(db), latest_schema_version());
  for (const char* table : {"machines", "kernels", "tasks", "studies", "trials", "tokens"}) {
    EXPECT_EQ(count(db, std::string("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
                                    "name = '") +
                            table + "'"),
              1)
        << table;
  }
  // The hot queries have indexes.
  for (const char* index : {"studies_by_kernel_machine_task", "trials_by_study_status_objective",
                            "trials_pending_by_lease", "trials_one_pending_per_key"}) {
    EXPECT_EQ(count(db, std::string("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND "
                                    "name = '") +
                            index + "'"),
              1)
        << index;
  }
}

TEST(Schema, ReopeningAppliesNothingTwiceAndKeepsData) {
  TempDir dir;
  const auto path = dir.file("t.db");
  {
    Store store(path);
    testing::make_study(store, "kept");
  }
  {
    Store store(path);
    ASSERT_TRUE(store.find_study("kept").has_value());
  }
  Database db(path);
  EXPECT_EQ(count(db, "SELECT count(*) FROM schema_version"),
            static_cast<std::int64_t>(migrations().size()));
}

TEST(Schema, MigratingAnEmptyFileWorks) {
  TempDir dir;
  const auto path = dir.file("empty.db");
  testing::write_bytes(path, "");
  Store store(path);
  EXPECT_TRUE(store.list_studies().empty());
}

TEST(Schema, NewerDatabaseIsRefusedAndLeftAlone) {
  TempDir dir;
  const auto path = dir.file("future.db");
  {
    Store store(path);
    testing::make_study(store, "s");
  }
  const int future = latest_schema_version() + 1;
  {
    Database db(path);
    auto st = db.prepare(
        "INSERT INTO schema_version (version, description, applied_at) VALUES (?1, 'future', "
        "'2099-01-01T00:00:00.000Z')",
        "faking a newer version");
    st.bind(1, future).run();
  }
  const auto before = testing::read_bytes(path);
  for (bool read_only : {false, true}) {
    try {
      Store store(path, StoreOptions{.read_only = read_only});
      FAIL() << "opening a newer database must fail";
    } catch (const StorageError& e) {
      EXPECT_THAT(e.what(), HasSubstr("schema version " + std::to_string(future)));
      EXPECT_THAT(e.what(), HasSubstr("newer than this build"));
    }
  }
  Database db(path);
  EXPECT_EQ(schema_version(db), future);
  EXPECT_EQ(count(db, "SELECT count(*) FROM studies"), 1);
}

TEST(Schema, ReadOnlyOpenOfAnOldDatabaseAsksForAWritableOpen) {
  TempDir dir;
  const auto path = dir.file("old.db");
  {
    Database db(path);
    db.exec(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description TEXT NOT "
        "NULL, applied_at TEXT NOT NULL)",
        "making a version-0 database");
  }
  try {
    Store store(path, StoreOptions{.read_only = true});
    FAIL() << "a read-only open cannot migrate";
  } catch (const StorageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("open it once for writing"));
  }
  // Opened for writing, it is migrated.
  Store store(path);
  Database db(path);
  EXPECT_EQ(schema_version(db), latest_schema_version());
}

// A database of version 3 (ids chosen as max + 1), as the builds before version 4 wrote it.
std::string version_3_database(TempDir& dir) {
  const auto path = dir.file("v3.db");
  Database db(path);
  db.exec(
      "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description TEXT NOT NULL, "
      "applied_at TEXT NOT NULL)",
      "making a version-3 database");
  for (const auto& m : migrations()) {
    if (m.version > 3) break;
    db.exec(m.sql, "making a version-3 database");
    db.exec("INSERT INTO schema_version VALUES (" + std::to_string(m.version) + ", 'old', 'x')",
            "making a version-3 database");
  }
  return path;
}

TEST(Schema, Version4KeepsEveryRowAndNeverReusesADeletedStudysIds) {
  TempDir dir;
  const auto path = version_3_database(dir);
  {
    // Readable as it is, and left at version 3 by a reader.
    Store reader(path, StoreOptions{.read_only = true});
    EXPECT_TRUE(reader.list_studies().empty());
  }
  {
    Database db(path);
    EXPECT_EQ(schema_version(db), 3);
  }
  Store store(path);
  const auto kept = testing::make_study(store, "kept");
  const auto gone = testing::make_study(store, "gone", "m2");
  store.add_trial(kept.id, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  const auto last_trial = store.add_trial(gone.id, testing::config_json(16, "row"), "16,row",
                                          Measurement::success(2.0));
  store.set_study_status(gone.id, StudyStatus::stopped);
  store.delete_study(gone.id);
  const auto next = testing::make_study(store, "next", "m3");
  EXPECT_GT(next.id.value, gone.id.value);
  const auto next_trial = store.add_trial(next.id, testing::config_json(16, "row"), "16,row",
                                          Measurement::success(3.0));
  EXPECT_GT(next_trial.value, last_trial.value);
  EXPECT_EQ(store.trials(kept.id).size(), 1u);
  Database db(path);
  EXPECT_EQ(schema_version(db), latest_schema_version());
  EXPECT_EQ(count(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
}

TEST(Schema, Version4MigratesTheRowsOfAVersion3Database) {
  TempDir dir;
  const auto path = version_3_database(dir);
  {
    Database db(path);
    for (const char* sql :
         {"INSERT INTO machines VALUES (1, 'm', '{}', 'h', 't')",
          "INSERT INTO kernels VALUES (1, 'k', 'v', '{\"parameters\": []}', 't')",
          "INSERT INTO tasks VALUES (1, 'k', '{}', '{}', 'h', 't')",
          "INSERT INTO studies VALUES (7, 's', 1, 1, 1, 'time', 'minimize', 'bo', 10, '{}', "
          "'completed', 't')",
          "INSERT INTO trials (id, study_id, config, config_key, status, objective, created_at, "
          "finished_at) VALUES (41, 7, '{}', '', 'ok', 2.5, 't', 't')"}) {
      db.exec(sql, "filling a version-3 database");
    }
  }
  { Store store(path); }
  Database db(path);
  EXPECT_EQ(count(db, "SELECT id FROM studies WHERE name = 's'"), 7);
  EXPECT_EQ(count(db,
                  "SELECT count(*) FROM trials WHERE id = 41 AND study_id = 7 AND "
                  "objective = 2.5"),
            1);
  EXPECT_EQ(count(db, "SELECT seq FROM sqlite_sequence WHERE name = 'trials'"), 41);
  EXPECT_EQ(count(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
  // The indexes are there again.
  EXPECT_EQ(count(db,
                  "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN "
                  "('trials_one_pending_per_key', 'trials_by_study_key', "
                  "'studies_by_kernel_machine_task')"),
            3);
}

}  // namespace
}  // namespace tunebase::db
