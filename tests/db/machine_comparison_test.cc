// Machine comparisons and failure breakdowns read from a store.
#include "db/machine_comparison.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/db/db_test_util.h"
#include "tests/support/shared_data.h"

namespace tunebase::db {
namespace {

using testing::config_json;
using testing::config_key;
using testing::make_study;

// The six configurations of small_space with `time(block, layout)` on a machine's study.
void measure(Store& store, const StudyRecord& study,
             const std::function<double(std::int64_t, const std::string&)>& time) {
  for (const std::int64_t block : {16, 32, 64}) {
    for (const std::string layout : {"row", "col"}) {
      const double t = time(block, layout);
      store.add_trial(study.id, config_json(block, layout), config_key(block, layout),
                      t > 0 ? Measurement::success(t)
                            : Measurement::failure(TrialStatus::failed,
                                                   "`./k --block " + std::to_string(block) +
                                                       "` exited with code 1; stderr: oom"));
    }
  }
}

TEST(CompareStoredMachines, ComparesTheMachinesOnTheirCommonInput) {
  tunebase::testing::TempDir dir;
  Store store(dir.file("c.db"));
  measure(store, make_study(store, "a", "m1"),
          [](std::int64_t b, const std::string& l) { return b + (l == "row" ? 0.0 : 1.0); });
  // m2: the same ranking, twice as slow, but 64/col fails.
  measure(store, make_study(store, "b", "m2"), [](std::int64_t b, const std::string& l) {
    return b == 64 && l == "col" ? 0.0 : 2.0 * b + (l == "row" ? 0.0 : 2.0);
  });
  const auto c = compare_stored_machines(store, {"demo", {"m1", "m2"}, std::nullopt, ""});
  EXPECT_EQ(c.objective, "time");
  EXPECT_EQ(c.task.description, nlohmann::json({{"n", 100}}));
  const auto& p = c.comparison.pairs.at(0);
  EXPECT_EQ(p.common, 5u);
  EXPECT_DOUBLE_EQ(*p.spearman, 1.0);
  EXPECT_DOUBLE_EQ(*p.a_best_on_b.fraction_of_best, 1.0);
  EXPECT_EQ(p.runs_on_a_fails_on_b, 1u);
  ASSERT_EQ(c.failures.at(0).size(), 1u);
  EXPECT_EQ(c.failures[0][0].message, "`./k --block 64` exited with code 1; stderr: oom");
}

TEST(CompareStoredMachines, SaysWhatIsWrongAndWhatThereIs) {
  tunebase::testing::TempDir dir;
  Store store(dir.file("c.db"));
  const auto up = [](std::int64_t b, const std::string&) { return double(b); };
  measure(store, make_study(store, "a", "m1"), up);
  measure(store, make_study(store, "b", "m2", 200), up);  // another input
  make_study(store, "idle", "m3");                        // a study with no trials
  const auto message = [&](const ComparisonQuery& q) {
    try {
      compare_stored_machines(store, q);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THROW(compare_stored_machines(store, {"nope", {"m1", "m2"}, {}, ""}), NotFound);
  EXPECT_NE(message({"nope", {"m1", "m2"}, {}, ""}).find("the kernels stored are demo"),
            std::string::npos);
  EXPECT_THROW(compare_stored_machines(store, {"demo", {"m1", "zz"}, {}, ""}), NotFound);
  EXPECT_NE(message({"demo", {"m1", "zz"}, {}, ""}).find("m1, m2, m3"), std::string::npos);
  EXPECT_THROW(compare_stored_machines(store, {"demo", {"m1"}, {}, ""}), InvalidInput);
  EXPECT_THROW(compare_stored_machines(store, {"demo", {"m1", "m1"}, {}, ""}), InvalidInput);
  // Different inputs: not comparable, and the message names both.
  EXPECT_THROW(compare_stored_machines(store, {"demo", {"m1", "m2"}, {}, ""}), InvalidInput);
  const auto inputs = message({"demo", {"m1", "m2"}, {}, ""});
  EXPECT_NE(inputs.find("{\"n\":100}"), std::string::npos) << inputs;
  EXPECT_NE(inputs.find("{\"n\":200}"), std::string::npos) << inputs;
  // m3 measured the input, but nothing ran: compared all the same, with no rank correlation,
  // as a pair of three machines is.
  const auto few = compare_stored_machines(store, {"demo", {"m1", "m3"}, {}, ""});
  ASSERT_EQ(few.comparison.pairs.size(), 1u);
  EXPECT_EQ(few.comparison.pairs[0].common, 0u);
  EXPECT_FALSE(few.comparison.pairs[0].spearman);
  EXPECT_TRUE(few.comparison.machines[0].best);
  EXPECT_FALSE(few.comparison.machines[1].best);
  // A misspelt machine: the one meant is named.
  const auto misspelt = message({"demo", {"m1", "M_2"}, {}, ""});
  EXPECT_NE(misspelt.find("did you mean \"m2\"?"), std::string::npos) << misspelt;
}

TEST(CompareStoredMachines, CountsConfigurationsThatFailOnOneByReason) {
  tunebase::testing::TempDir dir;
  Store store(dir.file("c.db"));
  const auto a = make_study(store, "a", "m1");
  measure(store, a, [](std::int64_t b, const std::string&) { return double(b); });
  const auto b = make_study(store, "b", "m2");
  for (const std::int64_t block : {16, 32, 64}) {
    for (const std::string layout : {"row", "col"}) {
      const auto result =
          block == 16
              ? (layout == "row" ? Measurement::success(1.0)
                                 : Measurement::failure(TrialStatus::failed, "RuntimeFailedConfig"))
              : Measurement::failure(TrialStatus::failed, "CompilationFailedConfig");
      store.add_trial(b.id, config_json(block, layout), config_key(block, layout), result);
    }
  }
  // Another space of the same kernel name: the comparison keeps its studies' own.
  store.upsert_kernel("demo", SearchSpace({categorical("layout", {Value{std::string("row")}}),
                                           ordinal("block", {Value{std::int64_t{16}}})},
                                          {}));
  const auto c = compare_stored_machines(store, {"demo", {"m1", "m2"}, {}, ""});
  EXPECT_EQ(c.space, store.get_kernel(a.kernel_id).space);
  EXPECT_EQ(c.comparison.pairs[0].runs_on_a_fails_on_b, 5u);
  ASSERT_EQ(c.failures.at(0).size(), 2u);
  EXPECT_EQ(c.failures[0][0].reason, "CompilationFailedConfig");
  EXPECT_EQ(c.failures[0][0].count, 4u);
  EXPECT_EQ(c.failures[0][0].failure.fails_on, "m2");
  EXPECT_EQ(c.failures[0][1].reason, "RuntimeFailedConfig");
  EXPECT_EQ(c.failures[0][1].count, 1u);
  EXPECT_EQ(c.failures[0][1].failure.config_key, "16,col");
}

TEST(FailureMessages, GroupsFinishedFailuresAndLeavesOutSuccessesAndEndedLeases) {
  tunebase::testing::TempDir dir;
  Store store(dir.file("f.db"));
  const auto study = make_study(store, "a", "m1");
  measure(store, study, [](std::int64_t b, const std::string&) { return b == 16 ? 1.0 : 0.0; });
  const auto lease = store.add_pending_trial(study.id, config_json(16, "row"), "lease", "c", 60);
  store.release_lease(lease);
  const auto messages = store.failure_messages(study.id);
  std::int64_t total = 0;
  for (const auto& m : messages) {
    EXPECT_EQ(m.status, TrialStatus::failed);
    total += m.count;
  }
  EXPECT_EQ(total, 4);
  EXPECT_EQ(messages.size(), 2u);  // --block 32 and --block 64
  const auto breakdown = failure_breakdown(messages);
  ASSERT_EQ(breakdown.reasons.size(), 1u);
  EXPECT_EQ(breakdown.reasons[0].reason, "`<command>` exited with code 1; stderr: oom");
  EXPECT_EQ(breakdown.reasons[0].count, 4);
}

TEST(FailureMessages, ALongStderrKeepsItsLastLineWhereTheErrorIs) {
  tunebase::testing::TempDir dir;
  Store store(dir.file("f.db"));
  const auto study = make_study(store, "a", "m1");
  // Two Python failures whose tracebacks are longer than what is read of a message's start.
  const std::string frames(3000, '.');
  int block = 16;
  for (const std::string exception : {"ValueError: bad block", "KeyError: 'tile'"}) {
    store.add_trial(study.id, config_json(block, "row"), config_key(block, "row"),
                    Measurement::failure(TrialStatus::failed,
                                         "`python k.py` exited with code 1; stderr: Traceback "
                                         "(most recent call last):\n" +
                                             frames + "\n" + exception + "\n"));
    block *= 2;
  }
  const auto breakdown = failure_breakdown(store.failure_messages(study.id));
  ASSERT_EQ(breakdown.reasons.size(), 2u);
  EXPECT_EQ(breakdown.reasons[0].reason,
            "`<command>` exited with code 1; stderr: KeyError: 'tile'");
  EXPECT_EQ(breakdown.reasons[1].reason,
            "`<command>` exited with code 1; stderr: ValueError: bad block");
}

}  // namespace
}  // namespace tunebase::db
