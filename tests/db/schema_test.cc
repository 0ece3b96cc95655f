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

}  // namespace
}  // namespace tunebase::db
