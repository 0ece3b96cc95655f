#include "core/comparison.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tunebase {
namespace {

MachineTrial ran(const std::string& key, double value, std::int64_t id) {
  return {key, {{"k", key}}, TrialStatus::ok, value, id};
}
MachineTrial failed(const std::string& key, std::int64_t id,
                    TrialStatus status = TrialStatus::failed) {
  return {key, {{"k", key}}, status, 0.0, id};
}

TEST(RankCorrelation, TiesShareTheirAverageRank) {
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
  EXPECT_EQ(average_ranks({7, 7, 7}), (std::vector<double>{2, 2, 2}));
}

TEST(RankCorrelation, IsSpearmansRho) {
  // Any increasing function of x keeps its ranking; a decreasing one reverses it.
  EXPECT_DOUBLE_EQ(*spearman_correlation({1, 2, 3, 4}, {1, 8, 27, 64}), 1.0);
  EXPECT_DOUBLE_EQ(*spearman_correlation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // With a tie: ranks of y are 1, 2, 3.5, 5, 3.5 (statistics.correlation of the ranks).
  EXPECT_NEAR(*spearman_correlation({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 0.8207826816681233, 1e-12);
  EXPECT_FALSE(spearman_correlation({1, 2, 3}, {2, 2, 2}));
  EXPECT_FALSE(spearman_correlation({1}, {1}));
}

// Machine a: value = i for configurations c0..c9. Machine b: twice as slow, c0 and c1
// swapped, c9 failing, c8 never measured, plus c10 that a never measured.
MachineComparison generated(bool minimize = true) {
  MachineTrials a{"a", {}};
  MachineTrials b{"b", {}};
  for (int i = 0; i < 10; ++i) {
    const auto key = "c" + std::to_string(i);
    a.trials.push_back(ran(key, 1.0 + i, i + 1));
    if (i == 8) continue;
    if (i == 9) {
      b.trials.push_back(failed(key, 100 + i));
      continue;
    }
    const double value = i == 0 ? 2.0 * 2 : (i == 1 ? 2.0 * 1 : 2.0 * (1 + i));
    b.trials.push_back(ran(key, value, 100 + i));
  }
  b.trials.push_back(ran("c10", 100.0, 200));
  return compare_machines({a, b}, minimize);
}

TEST(CompareMachines, CountsWhatEachMeasuredAndWhatTheyShare) {
  const auto c = generated();
  ASSERT_EQ(c.machines.size(), 2u);
  EXPECT_EQ(c.machines[0].configurations, 10u);
  EXPECT_EQ(c.machines[0].ok, 10u);
  EXPECT_EQ(c.machines[1].configurations, 10u);
  EXPECT_EQ(c.machines[1].ok, 9u);
  EXPECT_EQ(c.machines[1].failed, 1u);
  EXPECT_EQ(c.machines[0].best->config_key, "c0");
  EXPECT_EQ(c.machines[1].best->config_key, "c1");
  ASSERT_EQ(c.pairs.size(), 1u);
  const auto& p = c.pairs[0];
  EXPECT_EQ(p.measured_on_both, 9u);  // c0..c7, c9
  EXPECT_EQ(p.common, 8u);            // c0..c7
  // One swap of neighbours among 8: rho = 1 - 6 * 2 / (8 * 63).
  EXPECT_NEAR(*p.spearman, 1.0 - 12.0 / 504.0, 1e-12);
  EXPECT_EQ(p.top_k, 8u);
  EXPECT_EQ(p.top_k_overlap, 8u);
  EXPECT_EQ(p.runs_on_a_fails_on_b, 1u);
  EXPECT_EQ(p.runs_on_b_fails_on_a, 0u);
  ASSERT_EQ(p.fails_on_one.size(), 1u);
  EXPECT_EQ(p.fails_on_one[0].config_key, "c9");
  EXPECT_EQ(p.fails_on_one[0].fails_on, "b");
  EXPECT_EQ(p.fails_on_one[0].trial_id, 109);
}

TEST(CompareMachines, TakesEachMachinesBestToTheOther) {
  const auto& p = generated().pairs[0];
  // a's best c0 takes 4 on b, whose best is 2: half as fast.
  EXPECT_EQ(p.a_best_on_b.config_key, "c0");
  EXPECT_EQ(p.a_best_on_b.status, TrialStatus::ok);
  EXPECT_DOUBLE_EQ(*p.a_best_on_b.value, 4.0);
  EXPECT_DOUBLE_EQ(*p.a_best_on_b.fraction_of_best, 0.5);
  // b's best c1 takes 2 on a, whose best is 1.
  EXPECT_DOUBLE_EQ(*p.b_best_on_a.fraction_of_best, 0.5);
}

TEST(CompareMachines, MaximizingTakesTheLargestAsBest) {
  const auto c = generated(false);
  EXPECT_EQ(c.machines[0].best->config_key, "c9");
  EXPECT_EQ(c.machines[1].best->config_key, "c10");
  const auto& p = c.pairs[0];
  // a's best fails on b; b's best was never measured on a.
  EXPECT_EQ(p.a_best_on_b.status, TrialStatus::failed);
  EXPECT_FALSE(p.a_best_on_b.fraction_of_best);
  EXPECT_FALSE(p.b_best_on_a.status);
  // Top 8 common by largest value are the same 8.
  EXPECT_EQ(p.top_k_overlap, 8u);
}

TEST(CompareMachines, ARepeatedConfigurationCountsOnceAtItsBestAndRunsIfItEverRan) {
  MachineTrials a{"a",
                  {ran("x", 5, 1), ran("x", 3, 2), failed("y", 3), ran("y", 9, 4), ran("z", 1, 5)}};
  MachineTrials b{"b", {ran("x", 1, 6), ran("y", 2, 7), ran("z", 3, 8)}};
  const auto c = compare_machines({a, b}, true);
  EXPECT_EQ(c.machines[0].configurations, 3u);
  EXPECT_EQ(c.machines[0].ok, 3u);
  EXPECT_EQ(c.pairs[0].common, 3u);
  // a: z 1 < x 3 < y 9; b: x < y < z.
  EXPECT_NEAR(*c.pairs[0].spearman, -0.5, 1e-12);
}

TEST(CompareMachines, ComparesEveryPairOfThreeAndRefusesFewerThanTwoOrARepeat) {
  MachineTrials a{"a", {ran("x", 1, 1)}};
  MachineTrials b{"b", {ran("x", 1, 2)}};
  MachineTrials d{"d", {}};
  const auto c = compare_machines({a, b, d}, true);
  ASSERT_EQ(c.pairs.size(), 3u);
  EXPECT_EQ(c.pairs[2].a, "b");
  EXPECT_EQ(c.pairs[2].b, "d");
  EXPECT_FALSE(c.pairs[0].spearman);  // one common configuration
  EXPECT_FALSE(c.machines[2].best);
  EXPECT_THROW(compare_machines({a}, true), InvalidInput);
  EXPECT_THROW(compare_machines({a, a}, true), InvalidInput);
}

}  // namespace
}  // namespace tunebase
