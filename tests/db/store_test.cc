// The typed Store API: round trips of every table, atomicity, leases, best trial, priors,
// export, tokens, and concurrent writers.
#include "db/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <set>
#include <sstream>
#include <thread>

#include "core/machine.h"
#include "db/json_text.h"
#include "db/sqlite.h"
#include "db/study_export.h"
#include "tests/db/db_test_util.h"
#include "tests/support/shared_data.h"

namespace tunebase::db {
namespace {

using ::testing::HasSubstr;
using tunebase::testing::TempDir;
using namespace std::chrono_literals;

class StoreTest : public ::testing::Test {
 protected:
  std::string path() const { return dir_.file("tunebase.db"); }
  /// A lease of an hour, for `client`, of the configuration {size, "row"}.
  TrialId lease_row(StudyId study, int size, const std::string& client) {
    return store_.add_pending_trial(study, testing::config_json(size, "row"),
                                    std::to_string(size) + ",row", client, 60);
  }
  /// A study of kernel "demo" on machine "m1" measuring times in `unit`; `n` is its request,
  /// for more studies of the same machine and task.
  StudyRecord study_in(const std::string& unit, NewStudy& n) {
    const auto first = testing::make_study(store_, "first");
    n.name = "in " + unit;
    n.kernel = first.kernel_id;
    n.machine = first.machine_id;
    n.task = first.task_id;
    n.settings = {{"unit", unit}};
    return store_.create_study(n);
  }
  /// Another study like `n` (study_in's kernel, machine and task), named `name`, in `unit`
  /// ("": none).
  StudyRecord also_in(const std::string& unit, const std::string& name, NewStudy& n) {
    n.name = name;
    n.settings = unit.empty() ? nlohmann::json::object() : nlohmann::json{{"unit", unit}};
    return store_.create_study(n);
  }
  TempDir dir_;
  Store store_{dir_.file("tunebase.db")};
};

// --- round trips

TEST_F(StoreTest, MachineRoundTripAndFingerprintUpdate) {
  auto info = detect_machine();
  info.name = "bench-node";
  const auto first = store_.upsert_machine(info);
  EXPECT_GT(first.id.value, 0);
  EXPECT_EQ(first.fingerprint, info.fingerprint);
  EXPECT_EQ(first.fingerprint_hash, info.fingerprint_hash);
  EXPECT_NO_THROW(parse_timestamp(first.created_at));

  info.fingerprint["devices"].push_back({{"name", "Test GPU"}, {"platform", "test"}});
  refresh_fingerprint_hash(info);
  const auto second = store_.upsert_machine(info);
  EXPECT_EQ(second.id, first.id);
  EXPECT_NE(second.fingerprint_hash, first.fingerprint_hash);
  EXPECT_EQ(store_.get_machine(first.id).fingerprint["devices"].size(), 1u);
  EXPECT_EQ(store_.find_machine("bench-node")->fingerprint_hash, info.fingerprint_hash);
  EXPECT_FALSE(store_.find_machine("other").has_value());
  EXPECT_EQ(store_.list_machines().size(), 1u);
  EXPECT_THROW(store_.get_machine(MachineId{999}), NotFound);
  info.name = "";
  EXPECT_THROW(store_.upsert_machine(info), InvalidInput);
}

TEST_F(StoreTest, KernelVersionsFollowTheSpace) {
  const auto space = testing::small_space();
  const auto k1 = store_.upsert_kernel("demo", space);
  EXPECT_EQ(k1.version, space.fingerprint());
  EXPECT_EQ(SearchSpace::from_json(k1.space).fingerprint(), space.fingerprint());
  EXPECT_EQ(store_.upsert_kernel("demo", space).id, k1.id);  // same space, same version

  const SearchSpace bigger({ordinal("block", {Value{std::int64_t{16}}, Value{std::int64_t{32}}})},
                           {});
  const auto k2 = store_.upsert_kernel("demo", bigger);
  EXPECT_NE(k2.id, k1.id);
  EXPECT_NE(k2.version, k1.version);
  EXPECT_EQ(store_.find_kernel("demo")->id, k2.id);  // newest version by default
  EXPECT_EQ(store_.find_kernel("demo", k1.version)->id, k1.id);
  EXPECT_FALSE(store_.find_kernel("nope").has_value());
  EXPECT_EQ(store_.list_kernels().size(), 2u);
  EXPECT_EQ(store_.get_kernel(k1.id).name, "demo");
}

TEST_F(StoreTest, TasksAreKeyedByDescription) {
  const nlohmann::json description = {{"matrix", "bcsstk13"}, {"n", 2003}};
  const auto t1 = store_.upsert_task("spmv", description);
  EXPECT_EQ(t1.description, description);
  EXPECT_TRUE(t1.features.empty());
  const auto t2 = store_.upsert_task("spmv", description, {{"rows", 2003}, {"nnz", 83883}});
  EXPECT_EQ(t2.id, t1.id);
  EXPECT_EQ(t2.features["nnz"], 83883);
  // Without features the stored ones are kept, and other features do not replace them (earlier
  // studies' transfer stands on them).
  EXPECT_EQ(store_.upsert_task("spmv", description).features["nnz"], 83883);
  EXPECT_EQ(store_.upsert_task("spmv", description, {{"nnz", 1}}).features["nnz"], 83883);
  EXPECT_NE(store_.upsert_task("gemm", description).id, t1.id);
  EXPECT_EQ(store_.list_tasks("spmv").size(), 1u);
  EXPECT_EQ(store_.list_tasks().size(), 2u);
  EXPECT_EQ(store_.get_task(t1.id).hash, stable_json_hash(description));
}

TEST_F(StoreTest, StudyRoundTripAndChecks) {
  const auto s = testing::make_study(store_, "gemm-a100");
  const auto got = store_.get_study(s.id);
  EXPECT_EQ(got.name, "gemm-a100");
  EXPECT_EQ(got.kernel_name, "demo");
  EXPECT_EQ(got.machine_name, "m1");
  EXPECT_EQ(got.objective, "time");
  EXPECT_EQ(got.direction, Direction::minimize);
  EXPECT_EQ(got.strategy, "bo");
  EXPECT_EQ(got.status, StudyStatus::active);
  EXPECT_FALSE(got.budget.has_value());
  EXPECT_EQ(store_.find_study("gemm-a100")->id, s.id);

  NewStudy dup;
  dup.name = "gemm-a100";
  dup.kernel = s.kernel_id;
  dup.machine = s.machine_id;
  dup.task = s.task_id;
  EXPECT_THROW(store_.create_study(dup), Conflict);

  NewStudy bad = dup;
  bad.name = "other";
  bad.machine = MachineId{999};
  EXPECT_THROW(store_.create_study(bad), NotFound);
  bad.machine = s.machine_id;
  bad.task = store_.upsert_task("another-kernel", {{"n", 1}}).id;
  EXPECT_THROW(store_.create_study(bad), InvalidInput);
  bad.task = s.task_id;
  bad.budget = -1;
  EXPECT_THROW(store_.create_study(bad), InvalidInput);

  NewStudy full = dup;
  full.name = "max";
  full.objective = "GFLOP/s";
  full.direction = Direction::maximize;
  full.strategy = "random";
  full.budget = 50;
  full.settings = {{"seed", 7}};
  const auto m = store_.create_study(full);
  EXPECT_EQ(m.direction, Direction::maximize);
  EXPECT_EQ(m.budget, 50);
  EXPECT_EQ(m.settings["seed"], 7);

  store_.set_study_status(m.id, StudyStatus::completed);
  EXPECT_EQ(store_.get_study(m.id).status, StudyStatus::completed);
  EXPECT_THROW(store_.set_study_status(StudyId{999}, StudyStatus::stopped), NotFound);
  EXPECT_EQ(store_.list_studies().size(), 2u);
  EXPECT_EQ(store_.list_studies("demo").size(), 2u);
  EXPECT_TRUE(store_.list_studies("nothing").empty());
}

TEST_F(StoreTest, ABudgetCanBeChangedAndALiveLeaseKeepsAStudyActive) {
  const auto s = testing::make_study(store_, "s");
  store_.set_study_budget(s.id, 12);
  EXPECT_EQ(store_.get_study(s.id).budget, 12);
  store_.set_study_budget(s.id, std::nullopt);
  EXPECT_FALSE(store_.get_study(s.id).budget.has_value());
  EXPECT_THAT([&] { store_.set_study_budget(s.id, -1); },
              ThrowsMessage<InvalidInput>(HasSubstr("a budget must be 0 to")));
  EXPECT_THROW(store_.set_study_budget(StudyId{999}, 3), NotFound);

  const auto lease =
      store_.add_pending_trial(s.id, testing::config_json(16, "row"), "16,row", "worker", 3600.0);
  EXPECT_FALSE(store_.complete_unless_leased(s.id));
  EXPECT_EQ(store_.get_study(s.id).status, StudyStatus::active);
  store_.complete_trial(lease, Measurement::success(1.0));
  EXPECT_TRUE(store_.complete_unless_leased(s.id));
  EXPECT_EQ(store_.get_study(s.id).status, StudyStatus::completed);
  EXPECT_THROW(store_.complete_unless_leased(StudyId{999}), NotFound);
}

TEST_F(StoreTest, TrialRoundTripKeepsEveryField) {
  const auto s = testing::make_study(store_, "s");
  auto ok = Measurement::success(1.25, {1.5, 1.25, 1.0}, 0.75);
  ok.message = "fine";
  ok.metrics = {{"GFLOP/s", 812.5}};
  const auto id = store_.add_trial(s.id, testing::config_json(16, "row"), "16,row", ok, "w1");
  const auto failed = Measurement::failure(TrialStatus::failed, "CompilationFailedConfig", 0.1);
  const auto id2 = store_.add_trial(s.id, testing::config_json(32, "col"), "32,col", failed);

  const auto all = store_.trials(s.id);
  ASSERT_EQ(all.size(), 2u);
  const auto& t = all[0];
  EXPECT_EQ(t.id, id);
  EXPECT_EQ(t.study_id, s.id);
  EXPECT_EQ(t.config, testing::config_json(16, "row"));
  EXPECT_EQ(t.config_key, "16,row");
  EXPECT_EQ(t.result.status, TrialStatus::ok);
  EXPECT_DOUBLE_EQ(t.result.objective, 1.25);
  EXPECT_EQ(t.result.raw, (std::vector<double>{1.5, 1.25, 1.0}));
  EXPECT_DOUBLE_EQ(t.result.cost_seconds, 0.75);
  EXPECT_EQ(t.result.message, "fine");
  EXPECT_EQ(t.result.metrics["GFLOP/s"], 812.5);
  EXPECT_EQ(t.client_id, "w1");
  EXPECT_TRUE(t.finished_at.has_value());
  EXPECT_FALSE(t.lease_expires_at.has_value());

  const auto f = store_.get_trial(id2);
  EXPECT_EQ(f.result.status, TrialStatus::failed);
  EXPECT_TRUE(std::isnan(f.result.objective));
  EXPECT_EQ(f.result.message, "CompilationFailedConfig");

  const auto counts = store_.trial_counts(s.id);
  EXPECT_EQ(counts.total, 2);
  EXPECT_EQ(counts.ok, 1);
  EXPECT_EQ(counts.failed, 1);
}

TEST_F(StoreTest, BadTrialsAreRefused) {
  const auto s = testing::make_study(store_, "s");
  const auto cfg = testing::config_json(16, "row");
  EXPECT_THROW(store_.add_trial(s.id, cfg, "16,row", Measurement::success(std::nan(""))),
               InvalidInput);
  Measurement pending;
  pending.status = TrialStatus::pending;
  EXPECT_THROW(store_.add_trial(s.id, cfg, "16,row", pending), InvalidInput);
  EXPECT_THROW(store_.add_trial(s.id, nlohmann::json::array(), "k", Measurement::success(1)),
               InvalidInput);
  EXPECT_THROW(store_.add_trial(s.id, cfg, "", Measurement::success(1)), InvalidInput);
  EXPECT_THROW(store_.add_trial(StudyId{999}, cfg, "16,row", Measurement::success(1)), NotFound);
  EXPECT_THROW(store_.trials(StudyId{999}), NotFound);
  EXPECT_TRUE(store_.trials(s.id).empty());
}

TEST_F(StoreTest, GeneratedStudyNamesAreUniqueEvenWithinOneMillisecond) {
  const auto s = testing::make_study(store_, "first");
  NewStudy unnamed;
  unnamed.kernel = s.kernel_id;
  unnamed.machine = s.machine_id;
  unnamed.task = s.task_id;
  std::set<std::string> names;
  for (int i = 0; i < 5; ++i) names.insert(store_.create_study(unnamed).name);
  EXPECT_EQ(names.size(), 5u);
  for (const auto& name : names) EXPECT_EQ(name.rfind(s.kernel_name + "@", 0), 0u) << name;
}

TEST_F(StoreTest, DataSurvivesReopening) {
  const auto s = testing::make_study(store_, "s");
  store_.add_trial(s.id, testing::config_json(16, "row"), "16,row", Measurement::success(3.0));
  const auto before = export_study(store_, s.id, ExportFormat::json);
  Store again(path());
  EXPECT_EQ(export_study(again, s.id, ExportFormat::json), before);
}

TEST_F(StoreTest, FittedModelsAreSavedByKeyAndReplaced) {
  EXPECT_TRUE(store_.fitted_models().empty());
  store_.save_fitted_models({{"00ab", {{"name", "V100"}, {"hyperparameters", {{"noise", 0.1}}}}},
                             {"00cd", {{"name", "P100"}, {"hyperparameters", {{"noise", 0.2}}}}}});
  store_.save_fitted_models({{"00ab", {{"name", "V100"}, {"hyperparameters", {{"noise", 0.3}}}}}});
  Store again(path());
  const auto saved = again.fitted_models();
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved["00ab"]["hyperparameters"]["noise"], 0.3);
  EXPECT_EQ(saved["00cd"]["name"], "P100");
  // Malformed input is refused before anything is written.
  EXPECT_THROW(store_.save_fitted_models(nlohmann::json::array()), InvalidInput);
  EXPECT_THROW(store_.save_fitted_models({{"00ef", {{"name", "ok"}}}, {"", {{"name", "x"}}}}),
               InvalidInput);
  EXPECT_EQ(store_.fitted_models().size(), 2u);
}

TEST_F(StoreTest, SavedFittedModelsAreNoChangeOfTheData) {
  // Caches of what was read (api::PriorCache) are dropped when (data_version, changes_made)
  // moves: the models a prediction saves must not drop the cache that prediction filled.
  const auto study = testing::make_study(store_, "s");
  const auto before = store_.changes_made();
  store_.save_fitted_models({{"00ab", {{"name", "V100"}, {"hyperparameters", {{"noise", 0.1}}}}}});
  EXPECT_EQ(store_.changes_made(), before);
  store_.add_trial(study.id, testing::config_json(4, "row"), "4,row", Measurement::success(1.0));
  EXPECT_GT(store_.changes_made(), before);
}

TEST(Timestamps, FormatAndParseRoundTrip) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1714564800123));
  EXPECT_EQ(format_timestamp(t), "2024-05-01T12:00:00.123Z");
  EXPECT_EQ(parse_timestamp("2024-05-01T12:00:00.123Z"), t);
  EXPECT_EQ(parse_timestamp("2024-05-01T12:00:00Z"), t - 123ms);
  EXPECT_THROW(parse_timestamp("2024-05-01 12:00"), InvalidInput);
  EXPECT_THROW(parse_timestamp("2024-05-01T12:00:00.123"), InvalidInput);
}

// --- atomicity: a failing multi-row write leaves nothing

// A trigger that makes SQLite itself refuse the row with this key, mid-transaction.
void inject_failure_on_key(const std::string& path, const std::string& key) {
  Database db(path);
  db.exec("CREATE TRIGGER inject_failure BEFORE INSERT ON trials WHEN NEW.config_key = '" + key +
              "' BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
          "adding a failure trigger");
}

TEST_F(StoreTest, FailingBatchLeavesNothing) {
  const auto s = testing::make_study(store_, "s");
  store_.add_trial(s.id, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  inject_failure_on_key(path(), "64,col");
  const auto before = testing::snapshot(path());

  std::vector<NewTrial> batch;
  batch.push_back({testing::config_json(32, "row"), "32,row", Measurement::success(2.0), "w"});
  batch.push_back({testing::config_json(64, "row"), "64,row", Measurement::success(3.0), "w"});
  batch.push_back({testing::config_json(64, "col"), "64,col", Measurement::success(4.0), "w"});
  try {
    store_.add_trials(s.id, batch);
    FAIL() << "the trigger must refuse the third row";
  } catch (const StorageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("injected failure"));
  }
  EXPECT_EQ(testing::snapshot(path()), before);
  EXPECT_EQ(store_.trials(s.id).size(), 1u);

  batch.pop_back();
  EXPECT_EQ(store_.add_trials(s.id, batch).size(), 2u);
  EXPECT_EQ(store_.trials(s.id).size(), 3u);
}

// --- leases

TEST_F(StoreTest, LeasesStayWithinTheBudgetWhateverTheCallerCounted) {
  // Two servers on one file each count what is left, then lease: the Store has the last word.
  const auto s = testing::make_study(store_, "s");
  store_.set_study_budget(s.id, 3);
  store_.add_trial(s.id, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  const auto outcomes = store_.add_pending_trials(s.id,
                                                  {{testing::config_json(32, "row"), "32,row"},
                                                   {testing::config_json(16, "row"), "16,row"},
                                                   {testing::config_json(64, "row"), "64,row"},
                                                   {testing::config_json(128, "row"), "128,row"}},
                                                  "w1", 60);
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[0].trial.has_value());
  // Taken: refused for that, not for the budget.
  EXPECT_FALSE(outcomes[1].trial.has_value());
  EXPECT_FALSE(outcomes[1].over_budget);
  EXPECT_TRUE(outcomes[2].trial.has_value());
  ASSERT_FALSE(outcomes[3].trial.has_value());
  EXPECT_TRUE(outcomes[3].over_budget);
  EXPECT_THAT([&] { std::rethrow_exception(outcomes[3].error); },
              ThrowsMessage<Conflict>(HasSubstr(
                  "the budget of study 1 (3 evaluations) is taken by 3 results and live leases")));
  EXPECT_EQ(store_.budget_used(s.id), 3);
  EXPECT_EQ(store_.trials(s.id).size(), 3u);
}

// A lease is extended while it runs; past its end it is over, also before expire_leases has
// marked it (a server that starts on leases that ended while it was down).
TEST_F(StoreTest, ALeaseIsExtendedOnlyBeforeItsEnd) {
  const auto s = testing::make_study(store_, "s");
  const auto live =
      store_.add_pending_trial(s.id, testing::config_json(16, "row"), "16,row", "w1", 60);
  const auto later = std::chrono::system_clock::now() + std::chrono::hours(2);
  EXPECT_TRUE(store_.extend_lease(live, later));
  EXPECT_EQ(*store_.get_trial(live).lease_expires_at, format_timestamp(later));
  const auto brief =
      store_.add_pending_trial(s.id, testing::config_json(32, "row"), "32,row", "w1", 0.05);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(store_.extend_lease(brief, later));
  EXPECT_NE(*store_.get_trial(brief).lease_expires_at, format_timestamp(later));
}

// An error after which SQLite has rolled back the whole transaction (SQLITE_FULL, IOERR,
// NOMEM; here a trigger's RAISE(ROLLBACK)) takes the results before it too: every result of the
// batch is refused with it, nothing is stored, and the Store goes on working.
TEST_F(StoreTest, ABatchWhoseTransactionSQLiteRolledBackStoresNothing) {
  const auto s = testing::make_study(store_, "s");
  const auto a = lease_row(s.id, 16, "w1");
  const auto b = lease_row(s.id, 32, "w1");
  const auto c = lease_row(s.id, 64, "w1");
  {
    Database db(path());
    db.exec(
        "CREATE TRIGGER roll_back BEFORE UPDATE ON trials WHEN NEW.objective = 2.0 "
        "BEGIN SELECT RAISE(ROLLBACK, 'injected rollback'); END",
        "adding a rollback trigger");
  }
  const auto outcomes = store_.complete_trials({{a, "w1", Measurement::success(1.0)},
                                                {b, "w1", Measurement::success(2.0)},
                                                {c, "w1", Measurement::success(3.0)}});
  ASSERT_EQ(outcomes.size(), 3u);
  for (const auto& o : outcomes) {
    EXPECT_FALSE(o.record.has_value());
    ASSERT_TRUE(o.error);
    EXPECT_THAT([&] { std::rethrow_exception(o.error); },
                ThrowsMessage<StorageError>(HasSubstr("injected rollback")));
  }
  for (const auto id : {a, b, c}) {
    EXPECT_EQ(store_.get_trial(id).result.status, TrialStatus::pending);
  }
  EXPECT_DOUBLE_EQ(store_.complete_trial(a, Measurement::success(1.0)).result.objective, 1.0);
}

TEST_F(StoreTest, ABatchOfResultsCommitsOnceAndEachIsJudgedAlone) {
  const auto s = testing::make_study(store_, "s");
  const auto a = lease_row(s.id, 16, "w1");
  const auto b = lease_row(s.id, 32, "w1");
  const auto c = lease_row(s.id, 64, "w2");
  store_.complete_trial(b, Measurement::success(9.0));
  const auto outcomes = store_.complete_trials({{a, "w1", Measurement::success(1.0)},
                                                {b, "w1", Measurement::success(2.0)},
                                                {c, "w1", Measurement::success(3.0)},
                                                {TrialId{999}, "w1", Measurement::success(4.0)},
                                                {c, "w2", Measurement{}}});
  ASSERT_EQ(outcomes.size(), 5u);
  ASSERT_TRUE(outcomes[0].record.has_value());
  EXPECT_DOUBLE_EQ(outcomes[0].record->result.objective, 1.0);
  auto error_of = [&](std::size_t i) -> std::string {
    try {
      if (outcomes[i].error) std::rethrow_exception(outcomes[i].error);
    } catch (const Forbidden&) {
      return "forbidden";
    } catch (const Conflict&) {
      return "conflict";
    } catch (const NotFound&) {
      return "not found";
    } catch (const InvalidInput&) {
      return "invalid";
    }
    return "none";
  };
  EXPECT_EQ(error_of(1), "conflict");   // b already has a result
  EXPECT_EQ(error_of(2), "forbidden");  // c is leased to w2
  EXPECT_EQ(error_of(3), "not found");
  EXPECT_EQ(error_of(4), "invalid");  // "ok" without a value
  // What was refused changed nothing; what was accepted is stored.
  EXPECT_DOUBLE_EQ(store_.get_trial(b).result.objective, 9.0);
  EXPECT_EQ(store_.get_trial(c).result.status, TrialStatus::pending);
  Store again(path());
  EXPECT_DOUBLE_EQ(again.get_trial(a).result.objective, 1.0);
}

TEST_F(StoreTest, LeaseClaimCompleteOnce) {
  const auto s = testing::make_study(store_, "s");
  const auto cfg = testing::config_json(16, "row");
  const auto id = store_.add_pending_trial(s.id, cfg, "16,row", "worker-1", 60.0);
  const auto pending = store_.get_trial(id);
  EXPECT_EQ(pending.result.status, TrialStatus::pending);
  EXPECT_EQ(pending.client_id, "worker-1");
  ASSERT_TRUE(pending.lease_expires_at.has_value());
  ASSERT_TRUE(pending.started_at.has_value());
  EXPECT_GT(parse_timestamp(*pending.lease_expires_at), parse_timestamp(*pending.started_at));
  EXPECT_FALSE(pending.finished_at.has_value());
  EXPECT_EQ(store_.pending_keys(s.id), std::vector<std::string>{"16,row"});

  // Nobody else may lease the same configuration meanwhile.
  EXPECT_THROW(store_.add_pending_trial(s.id, cfg, "16,row", "worker-2", 60.0), Conflict);
  EXPECT_THROW(store_.add_pending_trial(s.id, cfg, "16,row", "w", 0.0), InvalidInput);

  const auto done = store_.complete_trial(id, Measurement::success(2.5, {2.4, 2.6}));
  EXPECT_EQ(done.result.status, TrialStatus::ok);
  EXPECT_DOUBLE_EQ(done.result.objective, 2.5);
  EXPECT_TRUE(done.finished_at.has_value());
  EXPECT_TRUE(store_.pending_keys(s.id).empty());
  EXPECT_THAT([&] { store_.complete_trial(id, Measurement::success(1.0)); },
              ThrowsMessage<Conflict>(HasSubstr("(status ok, value 2.5, stored ")));
  EXPECT_DOUBLE_EQ(store_.get_trial(id).result.objective, 2.5);
  // The same result again is a client's retry: the stored trial, nothing changed.
  const auto retry = store_.complete_trials({{id, "", Measurement::success(2.5, {2.4, 2.6})}});
  ASSERT_FALSE(retry[0].error);
  EXPECT_TRUE(retry[0].already_stored);
  EXPECT_EQ(retry[0].record->finished_at, done.finished_at);
  EXPECT_THROW(store_.complete_trial(id, Measurement::failure(TrialStatus::failed, "x")), Conflict);

  // A configuration is measured once per study: with a result it is not leased again.
  EXPECT_THAT([&] { store_.add_pending_trial(s.id, cfg, "16,row", "worker-2", 60.0); },
              ThrowsMessage<Conflict>(HasSubstr("already has a result (trial 1")));

  Measurement pending_result;
  pending_result.status = TrialStatus::pending;
  const auto id2 =
      store_.add_pending_trial(s.id, testing::config_json(32, "row"), "32,row", "worker-2", 60.0);
  EXPECT_THROW(store_.complete_trial(id2, pending_result), InvalidInput);
  EXPECT_THROW(store_.complete_trial(TrialId{12345}, Measurement::success(1.0)), NotFound);
  // A failure is a result too.
  const auto failed =
      store_.complete_trial(id2, Measurement::failure(TrialStatus::timeout, "ran 60 s"));
  EXPECT_EQ(failed.result.status, TrialStatus::timeout);
  EXPECT_FALSE(failed.lease_expired());
}

TEST_F(StoreTest, ExpiredLeaseAcceptsALateResultOnce) {
  const auto s = testing::make_study(store_, "s");
  const auto now = std::chrono::system_clock::now();
  const auto cfg = testing::config_json(32, "col");
  const auto id = store_.add_pending_trial(s.id, cfg, "32,col", "slow-worker", 30.0);
  const auto live = store_.add_pending_trial(s.id, testing::config_json(64, "col"), "64,col",
                                             "fast-worker", 3600.0);

  EXPECT_EQ(store_.expire_leases(now), 0u);
  EXPECT_EQ(store_.expire_leases(now + 120s), 1u);
  EXPECT_EQ(store_.expire_leases(now + 120s), 0u);  // nothing left to expire
  const auto expired = store_.get_trial(id);
  EXPECT_EQ(expired.result.status, TrialStatus::timeout);
  EXPECT_TRUE(expired.lease_expired());
  EXPECT_THAT(expired.result.message, HasSubstr("lease expired"));
  EXPECT_EQ(store_.get_trial(live).result.status, TrialStatus::pending);
  EXPECT_EQ(store_.pending_keys(s.id), std::vector<std::string>{"64,col"});

  // The configuration may be leased again. The late result of the first lease is a
  // measurement in hand: it is stored, once, and the newer lease, unreported, is withdrawn...
  const auto again = store_.add_pending_trial(s.id, cfg, "32,col", "worker-3", 30.0);
  EXPECT_NE(again, id);
  const auto late = store_.complete_trial(id, Measurement::success(9.0));
  EXPECT_EQ(late.result.status, TrialStatus::ok);
  EXPECT_FALSE(late.lease_expired());
  EXPECT_THROW(store_.complete_trial(id, Measurement::success(8.0)), Conflict);
  EXPECT_DOUBLE_EQ(store_.get_trial(id).result.objective, 9.0);
  const auto withdrawn = store_.get_trial(again);
  EXPECT_EQ(withdrawn.result.status, TrialStatus::timeout);
  EXPECT_THAT(withdrawn.result.message, HasSubstr("lease withdrawn at"));
  // ...so that its holder's result is refused, saying why. Nor is a new lease taken: the
  // configuration is measured.
  EXPECT_THAT([&] { store_.complete_trial(again, Measurement::success(7.0)); },
              ThrowsMessage<Conflict>(::testing::AllOf(
                  HasSubstr("the late result of trial 1 measured its configuration meanwhile"),
                  HasSubstr("already has a result (trial 1"))));
  EXPECT_THROW(store_.add_pending_trial(s.id, cfg, "32,col", "worker-4", 30.0), Conflict);
  EXPECT_EQ(store_.expire_leases(now + 240s), 0u);  // a withdrawn lease has ended already

  // A late result is refused once the newer lease has reported: measured once.
  const auto cfg2 = testing::config_json(16, "row");
  const auto slow = store_.add_pending_trial(s.id, cfg2, "16,row", "slow-worker", 30.0);
  EXPECT_EQ(store_.expire_leases(now + 360s), 1u);
  const auto quick = store_.add_pending_trial(s.id, cfg2, "16,row", "worker-5", 30.0);
  store_.complete_trial(quick, Measurement::success(5.0));
  EXPECT_THAT([&] { store_.complete_trial(slow, Measurement::success(6.0)); },
              ThrowsMessage<Conflict>(HasSubstr("already has a result (trial 5")));

  const auto counts = store_.trial_counts(s.id);
  EXPECT_EQ(counts.total, 5);
  EXPECT_EQ(counts.pending, 1);  // fast-worker's
  EXPECT_EQ(counts.ok, 2);
  // The withdrawn and the expired lease ended without a result: no evaluation timed out.
  EXPECT_EQ(counts.lease_ended, 2);
  EXPECT_EQ(counts.timeout, 0);
}

TEST_F(StoreTest, AReleasedLeaseFreesItsConfiguration) {
  const auto s = testing::make_study(store_, "s");
  const auto cfg = testing::config_json(16, "row");
  const auto id = store_.add_pending_trial(s.id, cfg, "16,row", "cli", 3600.0);
  EXPECT_EQ(store_.budget_used(s.id), 1);
  store_.release_lease(id);
  const auto released = store_.get_trial(id);
  EXPECT_TRUE(released.lease_expired());
  EXPECT_THAT(released.result.message, HasSubstr("released by client 'cli'"));
  EXPECT_EQ(store_.budget_used(s.id), 0);
  const auto again = store_.add_pending_trial(s.id, cfg, "16,row", "w", 60.0);
  EXPECT_NE(again, id);
  // The counts tell an evaluation that ran out of time from a lease that ended without one.
  store_.complete_trial(again, Measurement::failure(TrialStatus::timeout, "ran past 10 s"));
  const auto counts = store_.trial_counts(s.id);
  EXPECT_EQ(counts.total, 2);
  EXPECT_EQ(counts.timeout, 1);
  EXPECT_EQ(counts.lease_ended, 1);
}

TEST_F(StoreTest, MeasurementsOfTakenConfigurationsAreRefused) {
  const auto s = testing::make_study(store_, "s");
  const auto leased =
      store_.add_pending_trial(s.id, testing::config_json(16, "row"), "16,row", "worker-1", 60.0);
  // A measurement of a leased configuration, or of one with a result, is refused whole.
  EXPECT_THAT(
      [&] {
        store_.add_trials(
            s.id, {{testing::config_json(32, "row"), "32,row", Measurement::success(1.0), "m"},
                   {testing::config_json(16, "row"), "16,row", Measurement::success(2.0), "m"}});
      },
      ThrowsMessage<Conflict>(HasSubstr("is leased to client \"worker-1\"")));
  EXPECT_EQ(store_.trial_counts(s.id).total, 1);
  store_.complete_trial(leased, Measurement::success(3.0));
  EXPECT_THAT(
      [&] {
        store_.add_trial(s.id, testing::config_json(16, "row"), "16,row",
                         Measurement::success(2.0));
      },
      ThrowsMessage<Conflict>(HasSubstr("already has a result")));
  // In a batch of leases, a taken configuration is refused alone.
  const auto outcomes = store_.add_pending_trials(
      s.id,
      {{testing::config_json(16, "row"), "16,row"}, {testing::config_json(8, "col"), "8,col"}},
      "worker-2", 60.0);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[0].error && !outcomes[0].trial);
  ASSERT_TRUE(outcomes[1].trial && !outcomes[1].error);
  EXPECT_EQ(store_.get_trial(*outcomes[1].trial).client_id, "worker-2");
  EXPECT_EQ(store_.trial_counts(s.id).total, 2);
}

// --- queries across studies

TEST_F(StoreTest, BestTrialForMinimiseAndMaximise) {
  const auto a = testing::make_study(store_, "a", "m1", 100);
  const auto b = testing::make_study(store_, "b", "m1", 200);
  const auto c = testing::make_study(store_, "c", "m1", 100, Direction::maximize, "GFLOP/s");
  const auto other = testing::make_study(store_, "d", "m2", 100);
  auto add = [&](const StudyRecord& s, std::int64_t block, const std::string& layout, double v) {
    return store_.add_trial(s.id, testing::config_json(block, layout),
                            testing::config_key(block, layout), Measurement::success(v));
  };
  add(a, 16, "row", 3.0);
  const auto best_a = add(a, 32, "row", 1.0);
  add(a, 64, "row", 2.0);
  store_.add_trial(a.id, testing::config_json(64, "col"), "64,col",
                   Measurement::failure(TrialStatus::failed, "crash"));
  const auto best_b = add(b, 16, "col", 0.5);
  add(c, 16, "row", 10.0);
  const auto best_c = add(c, 32, "row", 20.0);
  add(other, 16, "row", 0.1);
  store_.add_pending_trial(a.id, testing::config_json(16, "col"), "16,col", "w", 60);

  const auto t100 = a.task_id;
  const auto t200 = b.task_id;
  EXPECT_EQ(store_.best_trial("demo", a.machine_id, t100, Direction::minimize)->id, best_a);
  EXPECT_EQ(store_.best_trial("demo", a.machine_id, t200, Direction::minimize)->id, best_b);
  EXPECT_EQ(store_.best_trial("demo", a.machine_id, std::nullopt, Direction::minimize)->id, best_b);
  EXPECT_EQ(store_.best_trial("demo", a.machine_id, t100, Direction::maximize)->id, best_c);
  EXPECT_EQ(store_.best_trial("demo", a.machine_id, t100, Direction::maximize, "GFLOP/s")->id,
            best_c);
  EXPECT_FALSE(
      store_.best_trial("demo", a.machine_id, t100, Direction::minimize, "energy").has_value());
  EXPECT_FALSE(store_.best_trial("other", a.machine_id, t100, Direction::minimize).has_value());
  EXPECT_DOUBLE_EQ(
      store_.best_trial("demo", other.machine_id, t100, Direction::minimize)->result.objective,
      0.1);
}

// Counts across the studies a filter selects, each in one query: per study as trial_counts
// counts it, and the configurations measured, each once however many studies measured it.
TEST_F(StoreTest, CountsAcrossStudiesFollowTheFilterAndCountAConfigurationOnce) {
  const auto a = testing::make_study(store_, "a", "m1", 100);
  const auto b = testing::make_study(store_, "b", "m1", 200);
  const auto rate = testing::make_study(store_, "rate", "m1", 100, Direction::maximize, "GFLOP/s");
  const auto other = testing::make_study(store_, "other", "m2", 100);
  const auto empty = testing::make_study(store_, "empty", "m1", 300);
  const auto add = [&](const StudyRecord& s, std::int64_t block, const std::string& layout) {
    store_.add_trial(s.id, testing::config_json(block, layout), testing::config_key(block, layout),
                     Measurement::success(1.0));
  };
  add(a, 16, "row");
  add(a, 32, "row");
  store_.add_trial(a.id, testing::config_json(64, "col"), "64,col",
                   Measurement::failure(TrialStatus::failed, "crash"));
  lease_row(a.id, 8, "w");
  add(b, 16, "row");  // measured in a too: one configuration
  add(b, 64, "row");
  add(rate, 128, "row");
  add(other, 256, "row");

  const auto m1 = a.machine_id;
  const auto all = store_.study_trial_counts({.kernel_name = "demo"});
  ASSERT_EQ(all.size(), 4u);  // the study with no trials is absent
  EXPECT_FALSE(all.count(empty.id));
  for (const auto& [study, counts] : all) {
    const auto one = store_.trial_counts(study);
    EXPECT_EQ(counts.total, one.total);
    EXPECT_EQ(counts.ok, one.ok);
    EXPECT_EQ(counts.failed, one.failed);
    EXPECT_EQ(counts.pending, one.pending);
  }
  EXPECT_EQ(all.at(a.id).total, 4);
  EXPECT_EQ(all.at(a.id).pending, 1);
  const auto on_m1 =
      store_.study_trial_counts({.kernel_name = "demo", .machine = m1, .task = a.task_id});
  EXPECT_EQ(on_m1.size(), 2u);  // a and rate
  EXPECT_EQ(store_.study_trial_counts({.kernel_name = "demo", .objective = "GFLOP/s"}).size(), 1u);
  EXPECT_EQ(
      store_.study_trial_counts({.kernel_name = "demo", .direction = Direction::minimize}).size(),
      3u);
  EXPECT_TRUE(store_.study_trial_counts({.kernel_name = "nothing"}).empty());

  const StudyFilter times{.kernel_name = "demo", .machine = m1, .direction = Direction::minimize};
  EXPECT_EQ(store_.measured_configurations(times), 3);  // 16,row once; 32,row; 64,row
  auto of_a = times;
  of_a.task = a.task_id;
  EXPECT_EQ(store_.measured_configurations(of_a), 2);
  EXPECT_EQ(store_.measured_configurations({.kernel_name = "demo"}), 5);
  EXPECT_EQ(store_.measured_configurations({.kernel_name = "demo", .objective = "GFLOP/s"}), 1);
  EXPECT_EQ(store_.measured_configurations({.kernel_name = "demo", .machine = other.machine_id}),
            1);
}

// An import in ms and a client's study in s of one kernel on one machine: the best is the
// fastest, not the smallest number; values in units that are not of time are not converted.
TEST_F(StoreTest, BestTrialComparesTimesInDifferentUnitsAsTimes) {
  NewStudy n;
  const auto in_ms = study_in("ms", n);
  const auto in_s = also_in("s", "in s", n);
  const auto fastest = store_.add_trial(in_ms.id, testing::config_json(16, "row"), "16,row",
                                        Measurement::success(1.4));  // 1.4 ms
  store_.add_trial(in_s.id, testing::config_json(32, "row"), "32,row",
                   Measurement::success(0.5));  // 500 ms
  const auto machine = in_ms.machine_id;
  EXPECT_EQ(store_.best_trial("demo", machine, std::nullopt, Direction::minimize)->id, fastest);
  // Maximised times: the slowest.
  n.direction = Direction::maximize;
  const auto max_ms = also_in("ms", "max in ms", n);
  const auto max_s = also_in("s", "max in s", n);
  store_.add_trial(max_ms.id, testing::config_json(16, "row"), "16,row",
                   Measurement::success(900.0));  // 0.9 s
  const auto slowest = store_.add_trial(max_s.id, testing::config_json(16, "row"), "16,row",
                                        Measurement::success(2.0));
  EXPECT_EQ(store_.best_trial("demo", machine, std::nullopt, Direction::maximize)->id, slowest);
  // A study without a unit cannot be placed among times: left out while there are some.
  n.direction = Direction::minimize;
  const auto plain = also_in("", "plain", n);
  store_.add_trial(plain.id, testing::config_json(64, "row"), "64,row", Measurement::success(0.1));
  EXPECT_EQ(store_.best_trial("demo", machine, std::nullopt, Direction::minimize)->id, fastest);
}

// PETSc solves to rtol 1e-3 are faster than to 1e-8 without being better: the best of one
// machine is of the studies measured as the newest one, and priors are of studies measured
// alike (studies that keep no settings, as GPU kernels and replays, are alike).
// Settings come from any client: as text they take one line, a few words each.
TEST(StoreText, MeasurementSettingsReadOnOneShortLine) {
  EXPECT_EQ(measurement_text({{"clock", "cpu"}, {"rtol", 1e-3}}), "clock cpu, rtol 0.001");
  EXPECT_EQ(measurement_text(nlohmann::json::object()), "no settings kept");
  const auto forged = measurement_text({{"how", "a\nconfig:    {\"bx\": 999}"}});
  EXPECT_EQ(forged.find('\n'), std::string::npos) << forged;
  const auto long_text = measurement_text({{"how", std::string(3000, 'x')}});
  EXPECT_LT(long_text.size(), 100u);
  EXPECT_THAT(long_text, ::testing::EndsWith("..."));
}

TEST_F(StoreTest, BestAndPriorsDoNotMixMeasurementSettings) {
  const nlohmann::json tight{{"clock", "wall"}, {"max_it", 10000}, {"rtol", 1e-8}};
  const nlohmann::json loose{{"clock", "wall"}, {"max_it", 10000}, {"rtol", 1e-3}};
  NewStudy n;
  const auto none = study_in("s", n);
  n.name = "tight";
  n.settings = {{"unit", "s"}, {"measurement", tight}};
  const auto tight_study = store_.create_study(n);
  n.name = "loose";
  n.settings = {{"unit", "s"}, {"measurement", loose}};
  const auto loose_study = store_.create_study(n);
  store_.add_trial(none.id, testing::config_json(16, "row"), "16,row", Measurement::success(0.5));
  const auto tight_best = store_.add_trial(tight_study.id, testing::config_json(32, "row"),
                                           "32,row", Measurement::success(2.0));
  const auto loose_best = store_.add_trial(loose_study.id, testing::config_json(64, "row"),
                                           "64,row", Measurement::success(1.0));
  const auto machine = none.machine_id;
  EXPECT_EQ(store_.best_trial("demo", machine, std::nullopt, Direction::minimize)->id, loose_best);
  n.name = "tight again";
  n.settings = {{"unit", "s"}, {"measurement", tight}};
  const auto again = store_.create_study(n);
  store_.add_trial(again.id, testing::config_json(16, "col"), "16,col", Measurement::success(3.0));
  EXPECT_EQ(store_.best_trial("demo", machine, std::nullopt, Direction::minimize)->id, tight_best);
  // Counted as the best is chosen: of the studies measured alike.
  StudyFilter alike{.kernel_name = "demo", .machine = machine, .measurement = tight};
  EXPECT_EQ(store_.measured_configurations(alike), 2);
  alike.measurement = nlohmann::json::object();
  ASSERT_EQ(store_.study_trial_counts(alike).size(), 1u);
  EXPECT_EQ(store_.study_trial_counts(alike).begin()->first, none.id);

  PriorQuery q;
  q.kernel_name = "demo";
  q.measurement = tight;
  ASSERT_EQ(store_.prior_trials(q).size(), 2u);
  EXPECT_EQ(store_.prior_trials(q)[0].trial, tight_best);
  ASSERT_EQ(store_.prior_counts(q).size(), 1u);
  EXPECT_EQ(store_.prior_counts(q)[0].ok, 2u);
  q.measurement = nlohmann::json::object();
  ASSERT_EQ(store_.prior_trials(q).size(), 1u);
  EXPECT_EQ(store_.prior_trials(q)[0].study, none.id);
  q.measurement.reset();  // any
  EXPECT_EQ(store_.prior_trials(q).size(), 4u);
}

// A Kernel Tuner cache records no restrictions: a space that restricts the same parameters
// and values measures the same function, and learns from it; other values do not.
TEST_F(StoreTest, PriorTrialsOfAVersionAreThoseOfEverySpaceWithItsParameters) {
  const auto imported = testing::make_study(store_, "imported", "m2");
  store_.add_trial(imported.id, testing::config_json(16, "row"), "16,row",
                   Measurement::success(1.0));
  const auto plain = testing::small_space();
  const SearchSpace restricted(plain.parameters(), {"block >= 32"});
  const auto kernel = store_.upsert_kernel("demo", restricted);
  ASSERT_NE(kernel.version, imported.kernel_version);
  PriorQuery q;
  q.kernel_name = "demo";
  q.version = kernel.version;
  ASSERT_EQ(store_.prior_trials(q).size(), 1u);
  EXPECT_EQ(store_.prior_trials(q)[0].kernel_version, imported.kernel_version);
  ASSERT_EQ(store_.prior_counts(q).size(), 1u);
  // Other values of a parameter: another function, as far as anyone knows.
  const SearchSpace wider({ordinal("block", {Value{std::int64_t{16}}, Value{std::int64_t{32}},
                                             Value{std::int64_t{64}}, Value{std::int64_t{128}}}),
                           plain.parameter(1)},
                          {});
  EXPECT_EQ(wider.parameters_difference(plain),
            "parameter block: ordinal 16, 32, 64 there, ordinal 16, 32, 64, 128 here");
  EXPECT_EQ(restricted.parameters_difference(plain), "");
  q.version = store_.upsert_kernel("demo", wider).version;
  EXPECT_TRUE(store_.prior_trials(q).empty());
  EXPECT_TRUE(store_.prior_counts(q).empty());
}

// Equal times in two units are a tie, whatever the rounding of the conversion (0.9 * 1e-3 is
// not 900 * 1e-6 in doubles): the earlier trial is the best.
TEST_F(StoreTest, EqualTimesInTwoUnitsAreATie) {
  NewStudy n;
  const auto in_ms = study_in("ms", n);
  const auto in_us = also_in("us", "in us", n);
  const auto earlier = store_.add_trial(in_ms.id, testing::config_json(16, "row"), "16,row",
                                        Measurement::success(0.9));
  store_.add_trial(in_us.id, testing::config_json(32, "row"), "32,row",
                   Measurement::success(900.0));
  EXPECT_EQ(store_.best_trial("demo", in_ms.machine_id, std::nullopt, Direction::minimize)->id,
            earlier);
}

// Priors are read in the unit the target measures: another unit of time is converted, a
// value in a unit that is not one of time (or in none) is left out among times.
TEST_F(StoreTest, PriorTrialsAreConvertedToTheQuerysUnitOfTime) {
  NewStudy n;
  const auto in_ms = study_in("ms", n);
  const auto score = also_in("GFLOP/s", "score", n);
  store_.add_trial(in_ms.id, testing::config_json(16, "row"), "16,row",
                   Measurement::success(1500.0));
  store_.add_trial(score.id, testing::config_json(16, "row"), "16,row", Measurement::success(3.0));
  PriorQuery q;
  q.kernel_name = "demo";
  q.exclude_study = StudyId{1};  // the fixture's first study, which has no trials anyway
  q.unit = "s";
  const auto priors = store_.prior_trials(q);
  ASSERT_EQ(priors.size(), 1u);  // a rate cannot be placed among times
  EXPECT_DOUBLE_EQ(priors[0].objective, 1.5);
  EXPECT_EQ(priors[0].unit, "s");
  ASSERT_EQ(store_.prior_counts(q).size(), 1u);  // nor counted among them
  EXPECT_EQ(store_.prior_counts(q)[0].ok, 1u);
  q.unit = "GFLOP/s";  // not a unit of time: every value as stored
  ASSERT_EQ(store_.prior_trials(q).size(), 2u);
  EXPECT_EQ(store_.prior_trials(q)[1].unit, "GFLOP/s");
  q.unit = "";
  EXPECT_EQ(store_.prior_counts(q)[0].ok, 2u);  // both studies: one machine and input
  EXPECT_DOUBLE_EQ(store_.prior_trials(q)[0].objective, 1500.0);
  EXPECT_EQ(store_.prior_trials(q)[0].unit, "ms");
  // Only one input's trials.
  q.task = TaskId{in_ms.task_id.value + 1000};
  EXPECT_TRUE(store_.prior_trials(q).empty());
  q.task = in_ms.task_id;
  EXPECT_EQ(store_.prior_trials(q).size(), 2u);
}

TEST_F(StoreTest, PriorTrialsLeaveOutAMachineAStudyOrOtherVersions) {
  const auto a = testing::make_study(store_, "a", "m1");
  const auto b = testing::make_study(store_, "b", "m2");
  store_.add_trial(a.id, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  store_.add_trial(b.id, testing::config_json(16, "row"), "16,row", Measurement::success(2.0));
  store_.add_trial(b.id, testing::config_json(32, "row"), "32,row",
                   Measurement::failure(TrialStatus::invalid, "wrong result"));
  store_.add_pending_trial(b.id, testing::config_json(64, "row"), "64,row", "w", 60);

  PriorQuery demo;
  demo.kernel_name = "demo";
  const auto all = store_.prior_trials(demo);
  EXPECT_EQ(all.size(), 3u);  // pending trials are not priors
  PriorQuery without_a = demo;
  without_a.exclude_machine = a.machine_id;
  const auto others = store_.prior_trials(without_a);
  ASSERT_EQ(others.size(), 2u);
  EXPECT_EQ(others[0].machine, b.machine_id);
  EXPECT_EQ(others[0].task, b.task_id);
  EXPECT_EQ(others[0].config_key, "16,row");
  EXPECT_DOUBLE_EQ(others[0].objective, 2.0);
  EXPECT_EQ(others[1].status, TrialStatus::invalid);
  EXPECT_TRUE(std::isnan(others[1].objective));
  PriorQuery without_b = demo;
  without_b.exclude_study = b.id;
  EXPECT_EQ(store_.prior_trials(without_b).size(), 1u);
  PriorQuery at_version = demo;
  at_version.version = a.kernel_version;
  EXPECT_EQ(store_.prior_trials(at_version).size(), 3u);
  at_version.version = "0000";
  EXPECT_TRUE(store_.prior_trials(at_version).empty());

  // Counted per (machine, task) without being read: what prior_trials reads, ok and failed.
  const auto counts = store_.prior_counts(demo);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].machine_name, "m1");
  EXPECT_EQ(counts[0].ok, 1u);
  EXPECT_EQ(counts[1].machine_name, "m2");
  EXPECT_EQ(counts[1].task, b.task_id);
  EXPECT_EQ(counts[1].ok, 1u);
  EXPECT_EQ(counts[1].finished, 2u);
  EXPECT_EQ(store_.prior_counts(without_a).size(), 1u);
}

// A result ends the lease: what is shown (the API, listings, exports) has no lease time, while
// the stored one stays.
TEST_F(StoreTest, AFinishedTrialShowsNoLease) {
  const auto s = testing::make_study(store_, "s");
  const auto done =
      store_.add_pending_trial(s.id, testing::config_json(16, "row"), "16,row", "worker-1", 3600.0);
  const auto held =
      store_.add_pending_trial(s.id, testing::config_json(32, "col"), "32,col", "worker-1", 3600.0);
  EXPECT_EQ(store_.get_trial(done).shown_lease_expires_at(),
            store_.get_trial(done).lease_expires_at);
  store_.complete_trial(done, Measurement::success(2.5));
  const auto finished = store_.get_trial(done);
  EXPECT_TRUE(finished.lease_expires_at.has_value());
  EXPECT_FALSE(finished.shown_lease_expires_at().has_value());
  const auto j = nlohmann::json::parse(export_study(store_, s.id, ExportFormat::json));
  ASSERT_EQ(j["trials"].size(), 2u);
  EXPECT_TRUE(j["trials"][0]["lease_expires_at"].is_null()) << j["trials"][0].dump();
  EXPECT_TRUE(j["trials"][0]["finished_at"].is_string()) << j["trials"][0].dump();
  EXPECT_EQ(j["trials"][1]["lease_expires_at"], *store_.get_trial(held).lease_expires_at);
}

// --- export

TEST_F(StoreTest, ExportJsonAndCsv) {
  const auto s = testing::make_study(store_, "export me");
  store_.add_trial(s.id, testing::config_json(16, "row"), "16,row",
                   Measurement::success(1.5, {1.4, 1.6}), "w1");
  store_.add_trial(s.id, testing::config_json(32, "col"), "32,col",
                   Measurement::failure(TrialStatus::failed, "error: \"bad\", line 3"));

  const auto j = nlohmann::json::parse(export_study(store_, s.id, ExportFormat::json));
  EXPECT_EQ(j["format"], "tunebase-study");
  EXPECT_EQ(j["study"]["name"], "export me");
  EXPECT_EQ(j["kernel"]["name"], "demo");
  EXPECT_EQ(j["machine"]["name"], "m1");
  EXPECT_EQ(j["task"]["description"]["n"], 100);
  ASSERT_EQ(j["trials"].size(), 2u);
  EXPECT_EQ(j["trials"][0]["objective"], 1.5);
  EXPECT_EQ(j["trials"][0]["raw"], nlohmann::json({1.4, 1.6}));
  EXPECT_EQ(j["trials"][0]["config"]["layout"], "row");
  EXPECT_TRUE(j["trials"][1]["objective"].is_null());
  EXPECT_EQ(j["trials"][1]["status"], "failed");
  EXPECT_EQ(SearchSpace::from_json(j["kernel"]["space"]).dimension(), 2u);

  const auto csv = export_study(store_, s.id, ExportFormat::csv);
  std::istringstream in(csv);
  std::string header, row1, row2, extra;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_EQ(header,
            "trial_id,block,layout,status,objective,cost_seconds,client_id,created_at,"
            "finished_at,message,unit,raw,metrics\r");
  EXPECT_THAT(row1, ::testing::StartsWith("1,16,row,ok,1.5,0,w1,"));
  // The repeated measurements as JSON (no unit was given to this study).
  EXPECT_THAT(row1, ::testing::HasSubstr(",,\"[1.4,1.6]\","));
  EXPECT_THAT(row2, ::testing::StartsWith("2,32,col,failed,,0,,"));
  EXPECT_THAT(row2, ::testing::EndsWith(",\"error: \"\"bad\"\", line 3\",,,\r"));
  EXPECT_FALSE(std::getline(in, extra));
  EXPECT_THROW(export_study(store_, StudyId{42}, ExportFormat::csv), NotFound);
}

// A Kernel Tuner cache: times in milliseconds, failures by Kernel Tuner's names, the keys
// Kernel Tuner makes, no pending trial; refused, saying why, for what a cache cannot hold.
TEST_F(StoreTest, ExportAsAKernelTunerCache) {
  NewStudy n;
  const auto s = study_in("s", n);
  store_.add_trial(s.id, testing::config_json(16, "row"), "16,row",
                   Measurement::success(0.0015, {0.0014, 0.0015, 0.0016}, 2.0));
  store_.add_trial(s.id, testing::config_json(32, "row"), "32,row",
                   Measurement::failure(TrialStatus::failed, "CompilationFailedConfig"));
  store_.add_trial(s.id, testing::config_json(64, "row"), "64,row",
                   Measurement::failure(TrialStatus::invalid, "too many threads"));
  store_.add_trial(s.id, testing::config_json(16, "col"), "16,col",
                   Measurement::failure(TrialStatus::timeout, "ran past 10 s"));
  store_.add_pending_trial(s.id, testing::config_json(32, "col"), "32,col", "w", 60.0);

  const auto j = nlohmann::json::parse(export_study(store_, s.id, ExportFormat::kernel_tuner));
  EXPECT_EQ(j["device_name"], "m1");
  EXPECT_EQ(j["kernel_name"], "demo");
  EXPECT_EQ(j["tune_params_keys"], nlohmann::json({"block", "layout"}));
  EXPECT_EQ(j["tune_params"]["block"], nlohmann::json({16, 32, 64}));
  EXPECT_EQ(j["objective"], "time");
  const auto& cache = j["cache"];
  ASSERT_EQ(cache.size(), 4u) << cache.dump() << " (the pending trial is no entry)";
  EXPECT_DOUBLE_EQ(cache["16,row"]["time"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(cache["16,row"]["times"][2].get<double>(), 1.6);
  EXPECT_DOUBLE_EQ(cache["16,row"]["benchmark_time"].get<double>(), 2000.0);
  EXPECT_EQ(cache["16,row"]["block"], 16);
  EXPECT_EQ(cache["16,row"]["layout"], "row");
  EXPECT_EQ(cache["32,row"]["time"], "CompilationFailedConfig");
  EXPECT_EQ(cache["64,row"]["time"], "InvalidConfig");
  EXPECT_EQ(cache["16,col"]["time"], "RuntimeFailedConfig");

  // What Kernel Tuner's own reader (and tunebase import) takes back.
  const auto back =
      parse_measurements(export_study(store_, s.id, ExportFormat::kernel_tuner), "export");
  ASSERT_EQ(back.entries.size(), 4u);
  EXPECT_DOUBLE_EQ(back.entries[0].result.objective, 1.5);
  EXPECT_DOUBLE_EQ(back.entries[0].result.cost_seconds, 2.0);
  EXPECT_EQ(back.entries[1].result.status, TrialStatus::failed);

  // A rate, and a score it maximizes, are no times.
  const auto rate = also_in("GFLOP/s", "rate", n);
  n.direction = Direction::maximize;
  const auto score = also_in("", "score", n);
  for (const auto& [id, says] :
       {std::pair{rate.id,
                  "measures \"time\" in GFLOP/s (time units: s, ms, us, ns): export "
                  "it as json or csv"},
        std::pair{score.id, "maximizes its objective \"time\": export it as json or csv"}}) {
    try {
      export_study(store_, id, ExportFormat::kernel_tuner);
      FAIL() << "exported " << id.value;
    } catch (const InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr(says));
    }
  }
  EXPECT_THROW(export_format_from_string("kt"), InvalidInput);
}

// A study of another objective is a cache of it, as Kernel Tuner tunes one (objective="GFLOP/s",
// objective_higher_is_better=True), with the time measured beside it; read back, the same study.
TEST_F(StoreTest, ExportOfAnotherObjectiveAsAKernelTunerCacheReadsBack) {
  NewStudy n;
  n.direction = Direction::maximize;
  n.objective = "GFLOP/s";
  const auto s = study_in("GFLOP/s", n);
  auto fast = Measurement::success(40.0, {}, 0.5);
  fast.metrics = {{"time", 3.0}, {"times", {2.9, 3.1}}, {"compile_time", 20.0}};
  store_.add_trial(s.id, testing::config_json(16, "row"), "16,row", fast);
  store_.add_trial(s.id, testing::config_json(32, "row"), "32,row",
                   Measurement::success(10.0, {9.0, 11.0}, 1.0));  // measured no time
  store_.add_trial(s.id, testing::config_json(64, "row"), "64,row",
                   Measurement::failure(TrialStatus::failed, "CompilationFailedConfig"));
  StudyExport source(store_, s.id, ExportFormat::kernel_tuner);
  std::string text;
  while (source.next(text)) {
  }
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["objective"], "GFLOP/s");
  EXPECT_EQ(j["objective_higher_is_better"], true);
  EXPECT_EQ(j["cache"]["16,row"]["GFLOP/s"], 40.0);
  EXPECT_EQ(j["cache"]["16,row"]["time"], 3.0);
  EXPECT_EQ(j["cache"]["16,row"]["times"], nlohmann::json({2.9, 3.1}));
  EXPECT_EQ(j["cache"]["32,row"]["GFLOP/s"], 10.0);
  EXPECT_FALSE(j["cache"]["32,row"].contains("time")) << text;
  EXPECT_FALSE(j["cache"]["32,row"].contains("times")) << text;  // the repeats were GFLOP/s
  EXPECT_EQ(j["cache"]["64,row"]["time"], "CompilationFailedConfig");
  EXPECT_EQ(source.note(),
            "the cache's objective is each entry's \"GFLOP/s\" (objective_higher_is_better: "
            "true, as Kernel Tuner's tune_kernel takes them), not its \"time\", which holds the "
            "time in ms measured beside it, absent from the 1 of 2 successful entries whose "
            "trials measured none");

  const auto back = parse_measurements(text, "export");
  EXPECT_EQ(back.objective, "GFLOP/s");
  EXPECT_TRUE(back.maximize);
  TempDir other_dir;
  Store other(other_dir.file("other.db"));
  const auto imported = other.import_dataset(back);
  const auto study = other.get_study(imported.study);
  EXPECT_EQ(study.objective, "GFLOP/s");
  EXPECT_EQ(study.direction, Direction::maximize);
  EXPECT_EQ(objective_unit(study), "GFLOP/s");
  const auto trials = other.trials(imported.study);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].result.objective, 40.0);
  EXPECT_EQ(trials[0].result.metrics["time"], 3.0);
  EXPECT_EQ(trials[1].result.objective, 10.0);
  EXPECT_EQ(trials[2].result.status, TrialStatus::failed);
  // Again: nothing new.
  const auto again = other.import_dataset(parse_measurements(text, "export"));
  EXPECT_EQ(again.study, imported.study);
  EXPECT_EQ(again.trials, 0u);
  EXPECT_EQ(other.list_studies().size(), 1u);
  EXPECT_EQ(export_format_from_string("kernel_tuner"), ExportFormat::kernel_tuner);
}

// What a cache cannot say is left out or refused, never written wrong: a lease that ended is no
// result (its configuration measured later is), two configurations with one key cannot both be
// entries.
TEST_F(StoreTest, AKernelTunerExportKeepsTheMeasurementOverALeaseThatEnded) {
  NewStudy n;
  const auto s = study_in("us", n);
  store_.add_pending_trial(s.id, testing::config_json(16, "row"), "16,row", "gone", 30.0);
  ASSERT_EQ(store_.expire_leases(std::chrono::system_clock::now() + 120s), 1u);
  store_.add_trial(s.id, testing::config_json(32, "row"), "32,row",
                   Measurement::failure(TrialStatus::failed, "out of memory"));
  auto measured = Measurement::success(1400.0, {1400.0});
  measured.metrics = {{"GFLOP/s", 2.0}, {"power", std::numeric_limits<double>::quiet_NaN()}};
  store_.add_trial(s.id, testing::config_json(16, "row"), "16,row", measured);

  const auto j = nlohmann::json::parse(export_study(store_, s.id, ExportFormat::kernel_tuner));
  const auto& cache = j["cache"];
  ASSERT_EQ(cache.size(), 2u) << cache.dump();
  EXPECT_EQ(cache["16,row"]["time"], 1.4) << "1400 us is 1.4 ms: " << cache.dump();
  EXPECT_EQ(cache["16,row"]["times"], nlohmann::json({1.4}));
  EXPECT_EQ(cache["16,row"]["GFLOP/s"], 2.0);
  EXPECT_FALSE(cache["16,row"].contains("power")) << "NaN would be null: " << cache.dump();
  EXPECT_FALSE(cache["16,row"].contains("benchmark_time")) << "no cost was measured";
  EXPECT_EQ(cache["32,row"]["time"], "RuntimeFailedConfig");

  // Configurations whose keys are one text: refused before anything is written.
  const auto strings = store_.upsert_kernel(
      "strings",
      SearchSpace({categorical("a", {Value{std::string("x,y")}, Value{std::string("x")}}),
                   categorical("b", {Value{std::string("z")}, Value{std::string("y,z")}})},
                  {}));
  n.name = "commas";
  n.kernel = strings.id;
  n.task = store_.upsert_task("strings", nlohmann::json::object()).id;
  const auto commas = store_.create_study(n);
  store_.add_trial(commas.id, {{"a", "x,y"}, {"b", "z"}}, "x\\,y,z", Measurement::success(1.0));
  store_.add_trial(commas.id, {{"a", "x"}, {"b", "y,z"}}, "x,y\\,z", Measurement::success(2.0));
  try {
    export_study(store_, commas.id, ExportFormat::kernel_tuner);
    FAIL() << "two configurations were written under one key";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("have the same Kernel Tuner cache key \"x,y,z\""));
  }
  // A parameter named as the measurement's field.
  const auto timed = store_.upsert_kernel(
      "timed",
      SearchSpace({ordinal("time", {Value{std::int64_t{1}}, Value{std::int64_t{2}}})}, {}));
  n.name = "timed";
  n.kernel = timed.id;
  n.task = store_.upsert_task("timed", nlohmann::json::object()).id;
  const auto named_time = store_.create_study(n);
  EXPECT_THROW(export_study(store_, named_time.id, ExportFormat::kernel_tuner), InvalidInput);
}

TEST_F(StoreTest, DeletingAStudyTakesItsTrialsAndRefusesAnActiveOne) {
  const auto keep = testing::make_study(store_, "keep");
  const auto gone = testing::make_study(store_, "gone", "m2");
  for (const auto& s : {keep, gone}) {
    store_.add_trial(s.id, testing::config_json(16, "row"), "16,row", Measurement::success(1.0));
  }
  try {
    store_.delete_study(gone.id);
    FAIL() << "deleted an active study";
  } catch (const Conflict& e) {
    EXPECT_THAT(e.what(), HasSubstr("is active (a sweep or workers may be tuning it): stop it"));
  }
  EXPECT_EQ(store_.trials(gone.id).size(), 1u);
  store_.set_study_status(gone.id, StudyStatus::stopped);
  EXPECT_EQ(store_.delete_study(gone.id), 1u);
  EXPECT_FALSE(store_.find_study("gone").has_value());
  EXPECT_THROW(store_.delete_study(gone.id), NotFound);
  EXPECT_EQ(store_.trials(keep.id).size(), 1u);
  EXPECT_EQ(store_.list_studies().size(), 1u);
}

TEST(Backup, CopiesWhatIsStillInTheWalWhileAWriterHoldsTheFile) {
  tunebase::testing::TempDir dir;
  const auto path = dir.file("live.db");
  Store writer(path);  // open throughout: its commits stay in live.db-wal, not checkpointed
  const auto s = testing::make_study(writer, "live");
  for (int i = 0; i < 20; ++i) {
    writer.add_trial(s.id, testing::config_json(16 * (i + 1), "row"), std::to_string(i),
                     Measurement::success(1.0 + i));
  }
  ASSERT_GT(std::filesystem::file_size(path + "-wal"), 0u);
  Store reader(path, StoreOptions{.read_only = true});
  reader.backup(dir.file("copy.db"));
  for (const auto& f : std::filesystem::directory_iterator(dir.file(""))) {
    EXPECT_EQ(f.path().string().find(".partial"), std::string::npos) << f.path();
  }
  EXPECT_EQ(testing::snapshot(dir.file("copy.db")), testing::snapshot(path));
  Store copy(dir.file("copy.db"), StoreOptions{.read_only = true});
  EXPECT_EQ(copy.trials(copy.find_study("live")->id).size(), 20u);
  // Never over an existing file.
  try {
    reader.backup(dir.file("copy.db"));
    FAIL() << "overwrote a file";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("backup destination " + dir.file("copy.db") + ": " +
                                    dir.file("copy.db") + " exists"));
  }
  // Nor beside a journal SQLite would replay over the copy.
  testing::write_bytes(dir.file("other.db-wal"), "stale");
  EXPECT_THROW(reader.backup(dir.file("other.db")), InvalidInput);
  EXPECT_FALSE(std::filesystem::exists(dir.file("other.db")));
  EXPECT_THROW(reader.backup(""), InvalidInput);
  EXPECT_THROW(reader.backup(dir.file("no/such/folder/b.db")), InvalidInput);
}

TEST(StoreBackup, AFolderThatCannotBeWrittenToIsNamedAsGiven) {
  TempDir dir;
  const auto path = dir.file("live.db");
  { Store writer(path); }
  Store reader(path, StoreOptions{.read_only = true});
  // A folder of no write permission; root writes anywhere but in /proc.
  std::string folder = dir.file("locked");
  std::filesystem::create_directory(folder);
  std::filesystem::permissions(
      folder, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  if (::geteuid() == 0) folder = "/proc";
  const auto destination = folder + "/copy.db";
  try {
    reader.backup(destination);
    FAIL() << "backed up into " << folder;
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("backup destination " + destination + ": the folder " + folder +
                                    " is not writable ("));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr(".partial")));
  }
  std::filesystem::permissions(dir.file("locked"), std::filesystem::perms::owner_all);
}

TEST_F(StoreTest, ExportNamesALeaseThatEndedApartFromATimeout) {
  const auto s = testing::make_study(store_, "leases");
  store_.add_pending_trial(s.id, testing::config_json(16, "row"), "16,row", "gone", 30.0);
  store_.add_trial(s.id, testing::config_json(32, "col"), "32,col",
                   Measurement::failure(TrialStatus::timeout, "ran 60 s"));
  ASSERT_EQ(store_.expire_leases(std::chrono::system_clock::now() + 120s), 1u);
  const auto j = nlohmann::json::parse(export_study(store_, s.id, ExportFormat::json));
  ASSERT_EQ(j["trials"].size(), 2u);
  EXPECT_EQ(j["trials"][0]["status"], "lease_ended");
  EXPECT_EQ(j["trials"][1]["status"], "timeout");
  const auto csv = export_study(store_, s.id, ExportFormat::csv);
  EXPECT_THAT(csv, HasSubstr("\n1,16,row,lease_ended,"));
  EXPECT_THAT(csv, HasSubstr("\n2,32,col,timeout,"));
}

TEST_F(StoreTest, CsvExportKeepsValuesAndNeutralisesFormulasInFreeText) {
  const auto s = testing::make_study(store_, "formulas");
  store_.add_trial(s.id, testing::config_json(-3, "=HYPERLINK(\"x\")"), "-3,=HYPERLINK",
                   Measurement::failure(TrialStatus::failed, "-1+2 @SUM(A1)"), "@w1");
  store_.add_trial(s.id, testing::config_json(4, "-O3"), "4,-O3",
                   Measurement::failure(TrialStatus::failed, "\tcmd"), "w=2");

  std::istringstream in(export_study(store_, s.id, ExportFormat::csv));
  std::string header, row1, row2;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  // Configuration values are written as they are, so that what a program reads back is in
  // the space; free text that clients write and a spreadsheet would run is shown as text.
  EXPECT_THAT(row1, ::testing::StartsWith("1,-3,\"=HYPERLINK(\"\"x\"\")\",failed,,0,'@w1,"));
  EXPECT_THAT(row1, ::testing::EndsWith(",'-1+2 @SUM(A1),,,\r"));
  EXPECT_THAT(row2, ::testing::StartsWith("2,4,-O3,failed,,0,w=2,"));
  EXPECT_THAT(row2, ::testing::EndsWith(",'\tcmd,,,\r"));
  // A real stays a real: 2.0, not 2.
  store_.add_trial(s.id, {{"block", 2.0}, {"layout", "row"}}, "2.0,row",
                   Measurement::failure(TrialStatus::failed, "x"));
  store_.add_trial(s.id, {{"block", 0.5}, {"layout", "row"}}, "0.5,row",
                   Measurement::failure(TrialStatus::failed, "x"));
  const auto csv = export_study(store_, s.id, ExportFormat::csv);
  EXPECT_THAT(csv, HasSubstr("\n3,2.0,row,failed,")) << csv;
  EXPECT_THAT(csv, HasSubstr("\n4,0.5,row,failed,")) << csv;
}

TEST_F(StoreTest, CsvRowsCarryTheUnitAndTheMetrics) {
  const auto machine = store_.get_study(testing::make_study(store_, "plain").id).machine_id;
  NewStudy timed;
  timed.name = "timed";
  timed.kernel = store_.find_kernel("demo")->id;
  timed.machine = machine;
  timed.task = store_.upsert_task("demo", {{"n", 100}}).id;
  timed.settings = {{"unit", "ms"}};
  const auto s = store_.create_study(timed);
  auto m = Measurement::success(2.0, {2.0, 2.1});
  m.metrics = {{"GFLOP/s", 512}};
  store_.add_trial(s.id, testing::config_json(16, "row"), "16,row", m);
  std::istringstream in(export_study(store_, s.id, ExportFormat::csv));
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  EXPECT_THAT(row, ::testing::EndsWith(",ms,\"[2.0,2.1]\",\"{\"\"GFLOP/s\"\":512}\"\r"));
}

TEST_F(StoreTest, CsvColumnsOfParametersNamedLikeTrialColumnsArePrefixed) {
  // Names that are not in the space follow the space's parameters.
  const auto s = testing::make_study(store_, "collide");
  store_.add_trial(s.id, nlohmann::json{{"status", 1}, {"message", "x"}, {"n", 2}}, "1,x,2",
                   Measurement::success(1.0), "w");
  std::istringstream in(export_study(store_, s.id, ExportFormat::csv));
  std::string header;
  std::getline(in, header);
  EXPECT_THAT(header, ::testing::HasSubstr("param_message"));
  EXPECT_THAT(header, ::testing::HasSubstr("param_status"));
  EXPECT_THAT(header, ::testing::StartsWith("trial_id,"));
  // Every column name once.
  std::istringstream columns(header.substr(0, header.size() - 1));
  std::set<std::string> seen;
  for (std::string c; std::getline(columns, c, ',');) EXPECT_TRUE(seen.insert(c).second) << c;
}

TEST_F(StoreTest, ExportsArePagedWithoutChangingTheText) {
  const auto s = testing::make_study(store_, "paged");
  for (int i = 0; i < 5; ++i) {
    store_.add_trial(s.id, testing::config_json(i, "row"), std::to_string(i) + ",row",
                     Measurement::success(1.0 + i), "w1");
  }
  for (const auto format : {ExportFormat::json, ExportFormat::csv}) {
    const auto whole = export_study(store_, s.id, format);
    for (const std::size_t page : {1u, 2u, 5u, 1000u}) {
      StudyExport source(store_, s.id, format, page);
      std::string text;
      std::size_t pieces = 0;
      while (source.next(text)) ++pieces;
      EXPECT_EQ(text, whole) << "page " << page;
      // The header, ceil(5 / page) pages, the end.
      EXPECT_EQ(pieces, 2 + (5 + page - 1) / page) << "page " << page;
      EXPECT_FALSE(source.next(text));
    }
  }
  EXPECT_EQ(nlohmann::json::parse(export_study(store_, s.id, ExportFormat::json)),
            study_to_json(store_, s.id));
}

TEST_F(StoreTest, AnExportHoldsTheTrialsTheStudyHadWhenItBegan) {
  const auto s = testing::make_study(store_, "growing");
  store_.add_trial(s.id, testing::config_json(1, "row"), "1,row", Measurement::success(1.0));
  StudyExport source(store_, s.id, ExportFormat::json, 1);
  std::string text;
  ASSERT_TRUE(source.next(text));
  store_.add_trial(s.id, testing::config_json(2, "row"), "2,row", Measurement::success(2.0));
  while (source.next(text)) {
  }
  EXPECT_EQ(nlohmann::json::parse(text)["trials"].size(), 1u);

  const auto empty = testing::make_study(store_, "empty");
  EXPECT_EQ(nlohmann::json::parse(export_study(store_, empty.id, ExportFormat::json))["trials"],
            nlohmann::json::array());
}

TEST_F(StoreTest, TrialRangesSelectByIdStatusAndCount) {
  const auto s = testing::make_study(store_, "ranges");
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    const auto m =
        i % 2 ? Measurement::failure(TrialStatus::failed, "no") : Measurement::success(1.0 + i);
    ids.push_back(
        store_.add_trial(s.id, testing::config_json(i, "row"), std::to_string(i) + ",row", m)
            .value);
  }
  auto id_list = [](const std::vector<TrialRecord>& trials) {
    std::vector<std::int64_t> out;
    for (const auto& t : trials) out.push_back(t.id.value);
    return out;
  };
  EXPECT_EQ(id_list(store_.trials(s.id, {})), ids);
  EXPECT_EQ(id_list(store_.trials(
                s.id, {.after = ids[1], .up_to = ids.back(), .status = {}, .limit = 2})),
            (std::vector<std::int64_t>{ids[2], ids[3]}));
  EXPECT_EQ(
      id_list(store_.trials(
          s.id, {.after = ids[0], .up_to = ids[4], .status = TrialStatus::failed, .limit = 10})),
      (std::vector<std::int64_t>{ids[1], ids[3]}));
  EXPECT_EQ(store_.last_trial_id(s.id), ids.back());
  EXPECT_EQ(store_.last_trial_id(testing::make_study(store_, "none").id), 0);
  EXPECT_EQ(store_.config_names(s.id, ids.back()), (std::vector<std::string>{"block", "layout"}));
}

// --- tokens

TEST_F(StoreTest, TokensAreStoredHashedAndRevocable) {
  const auto token = store_.create_token("ci");
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(store_.create_token("laptop"), token);

  const auto who = store_.verify_token(token);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->name, "ci");
  EXPECT_FALSE(store_.verify_token(token.substr(1) + "0").has_value());
  EXPECT_FALSE(store_.verify_token("").has_value());
  EXPECT_THROW(store_.create_token("ci"), Conflict);
  EXPECT_THROW(store_.create_token(""), InvalidInput);

  // The plain token is nowhere in the file.
  {
    Database db(path());
    auto st = db.prepare("SELECT count(*) FROM tokens WHERE hash = ?1 OR name = ?1", "reading");
    st.bind(1, token);
    st.step();
    EXPECT_EQ(st.column_int64(0), 0);
  }

  store_.revoke_token("ci");
  EXPECT_FALSE(store_.verify_token(token).has_value());
  EXPECT_THROW(store_.revoke_token("ci"), NotFound);
  const auto tokens = store_.list_tokens();
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_TRUE(tokens[0].revoked_at.has_value());
  EXPECT_FALSE(tokens[1].revoked_at.has_value());
  // A revoked name can be reused.
  const auto fresh = store_.create_token("ci");
  EXPECT_EQ(store_.verify_token(fresh)->name, "ci");
}

// --- concurrency

TEST_F(StoreTest, ThreadsAndProcessesShareTheFile) {
  const auto s = testing::make_study(store_, "s");
  constexpr int kThreads = 4;
  constexpr int kTrialsEach = 25;
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      // Half the writers share this Store (one connection), half open their own.
      std::optional<Store> own;
      if (w % 2 == 1) own.emplace(path());
      Store& store = own ? *own : store_;
      for (int i = 0; i < kTrialsEach; ++i) {
        const std::string key = std::to_string(w) + "," + std::to_string(i);
        store.add_trial(s.id, {{"w", w}, {"i", i}}, key, Measurement::success(w + i * 0.01));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_.trials(s.id).size(), static_cast<std::size_t>(kThreads * kTrialsEach));
}

}  // namespace
}  // namespace tunebase::db
