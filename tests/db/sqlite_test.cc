// The SQLite wrappers, and what a user sees when the file is unusable: not SQLite, read-only,
// locked. After every failure nothing stored has changed.
#include "db/sqlite.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "db/schema.h"
#include "db/store.h"
#include "tests/db/db_test_util.h"
#include "tests/support/shared_data.h"

namespace tunebase::db {
namespace {

using ::testing::HasSubstr;
using tunebase::testing::TempDir;
namespace fs = std::filesystem;

// Runs `f`, expecting a StorageError; returns its message ("" when none was thrown).
template <class F>
std::string storage_error_of(F&& f) {
  try {
    f();
  } catch (const StorageError& e) {
    return e.what();
  }
  return "";
}

TEST(Sqlite, BindsAndReadsEveryType) {
  TempDir dir;
  Database db(dir.file("t.db"));
  db.exec("CREATE TABLE t (i INTEGER, d REAL, s TEXT, n, b BLOB)", "creating a table");
  const std::vector<std::byte> blob = {std::byte{0}, std::byte{1}, std::byte{255}};
  auto insert = db.prepare("INSERT INTO t VALUES (?1, ?2, :s, ?4, ?5)", "inserting");
  insert.bind(1, std::int64_t{1} << 40)
      .bind(2, 2.5)
      .bind(":s", "text, with comma")
      .bind(4, nullptr);
  insert.bind_blob(5, blob);
  insert.run();
  insert.reset();
  insert.bind(1, 7).bind(2, std::nan("")).bind(":s", std::optional<std::string>{}).run();

  auto q = db.prepare("SELECT i, d, s, n, b FROM t ORDER BY rowid", "reading");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_int64(0), std::int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(q.column_double(1), 2.5);
  EXPECT_EQ(q.column_text(2), "text, with comma");
  EXPECT_TRUE(q.column_is_null(3));
  EXPECT_EQ(q.column_blob(4), blob);
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_int64(0), 7);
  EXPECT_TRUE(std::isnan(q.column_double(1)));  // NaN is stored as NULL
  EXPECT_FALSE(q.column_optional_text(2).has_value());
  EXPECT_FALSE(q.step());
}

TEST(Sqlite, ErrorsNameTheFileAndTheWork) {
  TempDir dir;
  Database db(dir.file("t.db"));
  const auto message = storage_error_of([&] { db.prepare("SELEC nonsense", "reading widgets"); });
  EXPECT_THAT(message, HasSubstr(dir.file("t.db")));
  EXPECT_THAT(message, HasSubstr("reading widgets"));
  EXPECT_THAT(message, HasSubstr("syntax error"));
  auto st = db.prepare("SELECT ?1", "binding");
  EXPECT_THROW(st.bind(":missing", 1), StorageError);
  EXPECT_THROW(st.bind(3, 1), StorageError);
}

TEST(Sqlite, UsesWalFullSyncAndForeignKeys) {
  TempDir dir;
  Database db(dir.file("t.db"));
  auto mode = db.prepare("PRAGMA journal_mode", "reading");
  ASSERT_TRUE(mode.step());
  EXPECT_EQ(mode.column_text(0), "wal");
  auto sync = db.prepare("PRAGMA synchronous", "reading");
  ASSERT_TRUE(sync.step());
  EXPECT_EQ(sync.column_int64(0), 2);  // FULL
  auto fk = db.prepare("PRAGMA foreign_keys", "reading");
  ASSERT_TRUE(fk.step());
  EXPECT_EQ(fk.column_int64(0), 1);
}

TEST(Sqlite, TransactionRollsBackUnlessCommitted) {
  TempDir dir;
  Database db(dir.file("t.db"));
  db.exec("CREATE TABLE t (x INTEGER)", "creating");
  {
    Transaction tx(db, "a test");
    db.exec("INSERT INTO t VALUES (1)", "inserting");
  }
  {
    Transaction tx(db, "a test");
    db.exec("INSERT INTO t VALUES (2)", "inserting");
    tx.commit();
  }
  try {
    Transaction tx(db, "a test");
    db.exec("INSERT INTO t VALUES (3)", "inserting");
    throw std::runtime_error("failure in the middle");
  } catch (const std::runtime_error&) {
  }
  auto q = db.prepare("SELECT group_concat(x) FROM t", "reading");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_text(0), "2");
  EXPECT_FALSE(db.in_transaction());
}

// --- files that are not usable

TEST(BadFiles, NotSqliteIsReportedAndLeftAlone) {
  TempDir dir;
  const auto path = dir.file("notes.db");
  std::string garbage;
  for (int i = 0; i < 64; ++i) garbage += "this is a text file, not a database\n";
  testing::write_bytes(path, garbage);

  for (bool read_only : {false, true}) {
    const auto message =
        storage_error_of([&] { Store store(path, StoreOptions{.read_only = read_only}); });
    EXPECT_THAT(message, HasSubstr(path + " is not a SQLite database")) << read_only;
  }
  EXPECT_EQ(testing::read_bytes(path), garbage);
  EXPECT_FALSE(fs::exists(path + "-wal"));
}

// A table of 2,000 rows over many pages, closed (checkpointed), then a page in the middle of the
// file overwritten: what a bad disk or a copy cut short leaves.
std::string corrupt_database(TempDir& dir, const std::string& name) {
  const auto path = dir.file(name);
  {
    Database db(path);
    db.exec("CREATE TABLE t (i INTEGER PRIMARY KEY, s TEXT)", "creating a table");
    db.exec("BEGIN", "starting");
    auto insert = db.prepare("INSERT INTO t (s) VALUES (?1)", "inserting");
    for (int i = 0; i < 2000; ++i) {
      insert.bind(1, std::string(200, static_cast<char>('a' + i % 26))).step();
      insert.reset();
    }
    db.exec("COMMIT", "committing");
  }
  auto bytes = testing::read_bytes(path);
  const std::size_t page = 4096;
  EXPECT_GT(bytes.size(), 40 * page);
  std::fill(bytes.begin() + 20 * page, bytes.begin() + 21 * page, '\xff');
  testing::write_bytes(path, bytes);
  return path;
}

TEST(BadFiles, CorruptionIsFoundByQuickCheckAndRemembered) {
  TempDir dir;
  const auto path = corrupt_database(dir, "checked.db");
  Database db(path);
  EXPECT_FALSE(corruption_seen(path).has_value());
  const auto found = db.quick_check();
  EXPECT_FALSE(found.empty());
  EXPECT_EQ(found.find('\n'), std::string::npos) << found;
  ASSERT_TRUE(corruption_seen(path).has_value());
  EXPECT_THAT(*corruption_seen(path), HasSubstr(path + " is corrupt ("));
  // A sound file passes, and is not marked.
  Database sound(dir.file("sound.db"));
  sound.exec("CREATE TABLE t (i INTEGER)", "creating a table");
  EXPECT_EQ(sound.quick_check(), "");
  EXPECT_FALSE(corruption_seen(dir.file("sound.db")).has_value());
}

TEST(BadFiles, AQueryThatMeetsCorruptionMarksTheFile) {
  TempDir dir;
  const auto path = corrupt_database(dir, "read.db");
  Database db(path);
  const auto message = storage_error_of([&] {
    auto st = db.prepare("SELECT sum(length(s)) FROM t", "reading every row");
    while (st.step()) {
    }
  });
  EXPECT_THAT(message, HasSubstr("is corrupt"));
  ASSERT_TRUE(corruption_seen(path).has_value());
  EXPECT_THAT(*corruption_seen(path), HasSubstr("while reading every row"));
}

TEST(BadFiles, GzipFileIsNotADatabase) {
  TempDir dir;
  // A Kernel Tuner cache, as a database path may be given one by mistake.
  const auto path = tunebase::testing::write_gzip(
      dir.file("K20.json.gz"),
      R"({"device_name": "K20", "tune_params": {"a": [1, 2]}, "cache": {}})");
  const auto before = testing::read_bytes(path);
  EXPECT_THAT(storage_error_of([&] { Store store(path); }), HasSubstr("is not a SQLite database"));
  EXPECT_EQ(testing::read_bytes(path), before);
}

TEST(BadFiles, OtherApplicationsDatabaseIsRefused) {
  TempDir dir;
  const auto path = dir.file("other.db");
  {
    Database db(path);
    db.exec("CREATE TABLE customers (id INTEGER)", "creating");
  }
  EXPECT_THAT(storage_error_of([&] { Store store(path); }), HasSubstr("not a tunebase one"));
  Database db(path);
  auto q = db.prepare("SELECT count(*) FROM sqlite_schema WHERE name = 'trials'", "reading");
  q.step();
  EXPECT_EQ(q.column_int64(0), 0);
}

TEST(BadFiles, ReadOnlyOpenNeverCreatesAFile) {
  TempDir dir;
  const auto path = dir.file("missing.db");
  EXPECT_THAT(storage_error_of([&] { Store store(path, StoreOptions{.read_only = true}); }),
              HasSubstr("does not exist"));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(BadFiles, ReadOnlyStoreRefusesWritesAndChangesNothing) {
  TempDir dir;
  const auto path = dir.file("t.db");
  StudyId study;
  {
    Store store(path);
    study = testing::make_study(store, "s").id;
    store.add_trial(study, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  }
  const auto before = testing::snapshot(path);
  Store ro(path, StoreOptions{.read_only = true});
  EXPECT_TRUE(ro.read_only());
  EXPECT_EQ(ro.trials(study).size(), 1u);
  const auto message = storage_error_of([&] {
    ro.add_trial(study, testing::config_json(32, "row"), "32,row", Measurement::success(2.0));
  });
  EXPECT_THAT(message, HasSubstr("database " + path + " is read-only"));
  EXPECT_THROW(ro.create_token("ci"), StorageError);
  EXPECT_THROW(ro.upsert_kernel("x", testing::small_space()), StorageError);
  EXPECT_THROW(ro.expire_leases(std::chrono::system_clock::now()), StorageError);
  EXPECT_EQ(testing::snapshot(path), before);
}

TEST(BadFiles, AReaderLeavesNoWalOrShmFilesAndCannotWrite) {
  TempDir dir;
  const auto path = dir.file("t.db");
  {
    Store store(path);
    testing::make_study(store, "s");
  }
  {
    Store ro(path, StoreOptions{.read_only = true});
    EXPECT_EQ(ro.list_studies().size(), 1u);
    // Even SQL written past the store's own checks is refused.
    Database db(path, DatabaseOptions{.read_only = true});
    EXPECT_THROW(db.exec("DELETE FROM studies", "deleting behind the store's back"), StorageError);
  }
  // Queries (tunebase best at configure time) left both files beside the database.
  EXPECT_FALSE(fs::exists(path + "-wal"));
  EXPECT_FALSE(fs::exists(path + "-shm"));
  Store again(path);
  EXPECT_EQ(again.list_studies().size(), 1u);
}

TEST(BadFiles, EmptyFileOpenedReadOnlyHasNoSchema) {
  TempDir dir;
  const auto path = dir.file("empty.db");
  testing::write_bytes(path, "");
  EXPECT_THAT(storage_error_of([&] { Store store(path, StoreOptions{.read_only = true}); }),
              HasSubstr("opened read-only"));
  EXPECT_EQ(fs::file_size(path), 0u);
}

// A database file this user may read but not write.
TEST(BadFiles, WriteProtectedFile) {
  TempDir dir;
  const auto path = dir.file("t.db");
  StudyId study;
  {
    Store store(path);
    study = testing::make_study(store, "s").id;
    store.add_trial(study, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  }
  const auto before = testing::snapshot(path);
  const auto bytes_before = testing::read_bytes(path);
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  // The folder stays writable by everyone so that a reader can create the WAL index.
  fs::permissions(dir.path(), fs::perms::all);

  const auto result = testing::run_with_permissions([&]() -> std::string {
    std::string out;
    try {
      Store store(path);
      out += "opened for writing;";
    } catch (const StorageError& e) {
      out += std::string("write-open: ") + e.what() + ";";
    }
    try {
      Store store(path, StoreOptions{.read_only = true});
      out += "read " + std::to_string(store.trials(study).size()) + " trials;";
    } catch (const StorageError& e) {
      out += std::string("read-open failed: ") + e.what() + ";";
    }
    return out;
  });
  if (!result) GTEST_SKIP() << "cannot drop root privileges to test file permissions";
  EXPECT_THAT(*result, HasSubstr("write-open: database " + path + " is read-only"));
  EXPECT_THAT(*result, HasSubstr("read 1 trials;"));
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(testing::snapshot(path), before);
  EXPECT_EQ(testing::read_bytes(path), bytes_before);
}

// A writable file in a folder this user may not write: SQLite cannot create its -wal file.
TEST(BadFiles, ReadOnlyFolder) {
  TempDir outer;
  const auto folder = outer.path() / "ro";
  fs::create_directory(folder);
  const auto path = (folder / "t.db").string();
  StudyId study;
  {
    Store store(path);
    study = testing::make_study(store, "s").id;
    store.add_trial(study, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  }
  const auto before = testing::snapshot(path);
  // A read-only connection (the snapshot's) leaves -wal and -shm behind; the last read-write
  // connection to close removes them.
  { Store store(path); }
  ASSERT_FALSE(fs::exists(path + "-wal"));
  ASSERT_FALSE(fs::exists(path + "-shm"));
  fs::permissions(path, fs::perms::all);
  // r-x for everyone, the owner included (root ignores it; the check runs as another user).
  fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read |
                              fs::perms::others_exec);
  fs::permissions(outer.path(), fs::perms::all);
  const auto new_path = (folder / "new.db").string();

  const auto result = testing::run_with_permissions([&]() -> std::string {
    std::string out;
    try {
      Store store(path);
      out += "opened for writing;";
    } catch (const StorageError& e) {
      out += std::string("write-open: ") + e.what() + ";";
    }
    try {
      Store store(path, StoreOptions{.read_only = true});
      out += "read " + std::to_string(store.trials(study).size()) + " trials;";
    } catch (const StorageError& e) {
      out += std::string("read-open failed: ") + e.what() + ";";
    }
    try {
      Store store(new_path);
      out += "created;";
    } catch (const StorageError& e) {
      out += std::string("create: ") + e.what() + ";";
    }
    return out;
  });
  if (!result) GTEST_SKIP() << "cannot drop root privileges to test folder permissions";
  EXPECT_THAT(*result, HasSubstr("write-open: database " + path + " is read-only"));
  EXPECT_THAT(*result, HasSubstr("the folder " + folder.string() + " is not writable"));
  // What to do: fix the folder; reading works as it is (not "open it read-only", which a
  // command that writes cannot).
  EXPECT_THAT(*result, HasSubstr("fix the permissions of the folder (commands that only read"));
  EXPECT_THAT(*result, HasSubstr("read 1 trials;"));
  EXPECT_THAT(*result, HasSubstr("create: cannot open database " + new_path));
  EXPECT_FALSE(fs::exists(new_path));
  fs::permissions(folder, fs::perms::owner_all);
  EXPECT_EQ(testing::snapshot(path), before);
}

// -wal and -shm files this user cannot write (left by a read-only open as another user, say):
// opening for writing is refused at once, naming the file.
TEST(BadFiles, ReadOnlyWalAndShmLeftBehind) {
  TempDir dir;
  const auto path = dir.file("t.db");
  Store(path).create_token("t");
  fs::permissions(dir.path(), fs::perms::all);
  fs::permissions(path, fs::perms::all);
  for (const char* suffix : {"-wal", "-shm"}) {
    std::ofstream(path + suffix).flush();
    fs::permissions(path + suffix,
                    fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  }
  const auto result = testing::run_with_permissions([&]() -> std::string {
    try {
      Store store(path);
      return "opened for writing";
    } catch (const StorageError& e) {
      return std::string("write-open: ") + e.what();
    }
  });
  if (!result) GTEST_SKIP() << "cannot drop root privileges to test file permissions";
  EXPECT_THAT(*result,
              HasSubstr("write-open: database " + path + " is read-only: " + path + "-wal"));
  EXPECT_THAT(*result, HasSubstr("not writable by this user"));
}

TEST(BadFiles, LockedByAnotherWriter) {
  TempDir dir;
  const auto path = dir.file("t.db");
  StudyId study;
  {
    Store store(path);
    study = testing::make_study(store, "s").id;
    store.add_trial(study, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  }
  const auto before = testing::snapshot(path);

  Database other(path);
  other.exec("BEGIN EXCLUSIVE", "locking");
  other.exec("DELETE FROM trials", "writing inside the lock");

  // WAL: opening and reading still work while another process writes.
  Store store(path, StoreOptions{.busy_timeout = std::chrono::milliseconds(50)});
  EXPECT_EQ(store.trials(study).size(), 1u);
  const auto message = storage_error_of([&] {
    store.add_trial(study, testing::config_json(32, "row"), "32,row", Measurement::success(2.0));
  });
  EXPECT_THAT(message, HasSubstr("database " + path + " is locked by another process"));
  EXPECT_THAT(message, HasSubstr("50 ms"));
  EXPECT_THROW(store.create_token("ci"), StorageError);

  other.exec("ROLLBACK", "unlocking");
  EXPECT_EQ(testing::snapshot(path), before);
  // Once the lock is gone the same store writes again.
  store.add_trial(study, testing::config_json(32, "row"), "32,row", Measurement::success(2.0));
  EXPECT_EQ(store.trials(study).size(), 2u);
}

TEST(BadFiles, ExclusiveLockingModeBlocksEvenOpening) {
  TempDir dir;
  const auto path = dir.file("t.db");
  {
    Store store(path);
    testing::make_study(store, "s");
  }
  const auto before = testing::snapshot(path);
  Database other(path);
  other.exec("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; DELETE FROM trials;", "locking");
  const auto message = storage_error_of(
      [&] { Store store(path, StoreOptions{.busy_timeout = std::chrono::milliseconds(50)}); });
  EXPECT_THAT(message, HasSubstr("is locked by another process"));
  other.exec("ROLLBACK; PRAGMA locking_mode = NORMAL;", "unlocking");
  // The exclusive lock is released at the next access after NORMAL is set.
  other.prepare("SELECT count(*) FROM trials", "reading").run();
  EXPECT_EQ(testing::snapshot(path), before);
}

}  // namespace
}  // namespace tunebase::db
