// Tuning-quality metrics on hand-computed sequences, and the SVG plot.
#include "tuner/quality.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace tunebase {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTol = 1e-12;

TEST(Quantile, LinearInterpolationLikeNumpy) {
  // numpy.quantile([4, 1, 3, 2], [0, .25, .5, .75, 1]) = [1, 1.75, 2.5, 3.25, 4]
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.75), 3.25);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile({7.0}, 0.25), 7.0);
  // numpy.percentile(range(1, 21), 95) = 19.05
  std::vector<double> twenty;
  for (int i = 1; i <= 20; ++i) twenty.push_back(i);
  EXPECT_NEAR(quantile(twenty, 0.95), 19.05, kTol);
  EXPECT_THROW(quantile({}, 0.5), InvalidInput);
  EXPECT_THROW(quantile(v, 1.5), InvalidInput);
}

TEST(BestSoFar, SkipsFailuresAndKeepsTheBest) {
  const auto b = best_so_far({kNaN, 5, 7, 3, kNaN, 4});
  ASSERT_EQ(b.size(), 6u);
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(b[1], 5);
  EXPECT_EQ(b[2], 5);
  EXPECT_EQ(b[3], 3);
  EXPECT_EQ(b[4], 3);
  EXPECT_EQ(b[5], 3);
  EXPECT_EQ(best_so_far({5, 7, 3}, /*minimize=*/false), (std::vector<double>{5, 7, 7}));
}

TEST(FractionOfOptimum, MinimiseAndMaximise) {
  const auto f = fraction_of_optimum({kNaN, 5, 7, 3}, 3.0);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_DOUBLE_EQ(f[1], 0.6);
  EXPECT_DOUBLE_EQ(f[2], 0.6);
  EXPECT_DOUBLE_EQ(f[3], 1.0);
  const auto g = fraction_of_optimum({50, 95}, 100.0, /*minimize=*/false);
  EXPECT_DOUBLE_EQ(g[0], 0.5);
  EXPECT_DOUBLE_EQ(g[1], 0.95);
  EXPECT_EQ(evaluations_to_reach(g, 0.95), 2u);
  EXPECT_EQ(evaluations_to_reach(g, 0.99), std::nullopt);
  EXPECT_THROW(fraction_of_optimum({1.0}, 0.0), InvalidInput);
  EXPECT_THROW(fraction_of_optimum({1.0}, kNaN), InvalidInput);
}

TEST(EvaluationsToReach, FloatingPointFractionsCountAtTheLevel) {
  // 19/20 is 0.95 up to rounding.
  EXPECT_EQ(evaluations_to_reach(fraction_of_optimum({40, 20}, 19.0), 0.95), 2u);
  EXPECT_EQ(evaluations_to_reach({0.5, 0.9, 0.97}, 0.95), 3u);
}

/// Four seeds, optimum 10, budget 5 (fractions by hand):
///   A: 20 12 10.5 10 11 -> .5 .833 .952 1 1     reaches .90 at 3, .95 at 3, .99 at 4
///   B: fail 10.2 ...    -> 0 .980 ...           reaches .90 at 2, .95 at 2, .99 never
///   C: 30 25 (short)    -> .333 .4              never reaches anything
///   D: 10 then more     -> 1 ...                reaches all at 1; evaluations past 5 ignored
std::vector<RunTrace> four_seeds() {
  std::vector<RunTrace> runs(4);
  runs[0].objectives = {20, 12, 10.5, 10, 11};
  runs[1].objectives = {kNaN, 10.2, 10.2, 10.2, 10.2};
  runs[2].objectives = {30, 25};
  runs[3].objectives = {10, 12, 13, 14, 15, 16, 17};
  double ms = 1.0;
  for (auto& r : runs) {
    for (int i = 0; i < 5; ++i) r.suggest_ms.push_back(ms++);
  }
  return runs;
}

TEST(QualityReport, HandComputedSeedsIncludingNeverReaching) {
  const QualityReport r = quality_report("random", "toy.json", 10.0, 5, four_seeds());
  EXPECT_EQ(r.seeds, 4u);
  EXPECT_EQ(r.budget, 5u);
  ASSERT_EQ(r.evals_to.size(), 3u);

  // 0.90 and 0.95: evaluations {3, 2, 5 (never -> budget), 1} -> sorted 1 2 3 5
  for (int i : {0, 1}) {
    EXPECT_DOUBLE_EQ(r.evals_to[i].evaluations.median, 2.5);
    EXPECT_DOUBLE_EQ(r.evals_to[i].evaluations.q1, 1.75);
    EXPECT_DOUBLE_EQ(r.evals_to[i].evaluations.q3, 3.5);
    EXPECT_DOUBLE_EQ(r.evals_to[i].never, 0.25);
  }
  // 0.99: {4, 5, 5, 1} -> sorted 1 4 5 5
  EXPECT_DOUBLE_EQ(r.evals_to[2].evaluations.median, 4.5);
  EXPECT_DOUBLE_EQ(r.evals_to[2].evaluations.q1, 3.25);
  EXPECT_DOUBLE_EQ(r.evals_to[2].evaluations.q3, 5.0);
  EXPECT_DOUBLE_EQ(r.evals_to[2].never, 0.5);

  // After 10 evaluations, past the budget of 5: not reached, so undefined.
  ASSERT_EQ(r.fraction_at.size(), 4u);
  EXPECT_EQ(r.fraction_at[0].evaluations, 10u);
  for (const auto& cp : r.fraction_at) {
    EXPECT_TRUE(std::isnan(cp.fraction.median)) << cp.evaluations;
    EXPECT_TRUE(std::isnan(cp.fraction.q1)) << cp.evaluations;
    EXPECT_TRUE(std::isnan(cp.fraction.q3)) << cp.evaluations;
  }
  // After the budget's 5 evaluations, a run that ended sooner (its space exhausted) holds its
  // last value: 1, 10/10.2, 0.4, 1.
  const double b = 10.0 / 10.2;
  EXPECT_NEAR(r.curve[4].median, (b + 1.0) / 2, kTol);
  EXPECT_NEAR(r.curve[4].q1, 0.4 + 0.75 * (b - 0.4), kTol);
  EXPECT_NEAR(r.curve[4].q3, 1.0, kTol);

  // The curve after 2 evaluations: A .833, B .980, C .4, D 1.
  ASSERT_EQ(r.curve.size(), 5u);
  EXPECT_NEAR(r.curve[1].median, (10.0 / 12 + b) / 2, kTol);

  // suggest_ms pooled over seeds: 1..20.
  EXPECT_DOUBLE_EQ(r.suggest_ms_median, 10.5);
  EXPECT_NEAR(r.suggest_ms_p95, 19.05, kTol);
}

TEST(QualityReport, JsonHasExactlyTheAgreedKeys) {
  const nlohmann::json j =
      quality_report("bo", "gemm/A100.json.gz", 10.0, 5, four_seeds()).to_json();
  EXPECT_EQ(j.at("strategy"), "bo");
  EXPECT_EQ(j.at("target"), "gemm/A100.json.gz");
  EXPECT_EQ(j.at("budget"), 5);
  EXPECT_EQ(j.at("seeds"), 4);
  EXPECT_EQ(j.at("optimum"), 10.0);

  ASSERT_EQ(j.at("evals_to").size(), 3u);
  for (const char* level : {"0.90", "0.95", "0.99"}) {
    const auto& e = j.at("evals_to").at(level);
    EXPECT_EQ(e.size(), 4u) << level;
    for (const char* k : {"median", "q1", "q3", "never"}) EXPECT_TRUE(e.contains(k)) << k;
  }
  EXPECT_EQ(j.at("evals_to").at("0.99").at("median"), 4.5);
  EXPECT_EQ(j.at("evals_to").at("0.99").at("never"), 0.5);

  ASSERT_EQ(j.at("fraction_at").size(), 4u);
  for (const char* n : {"10", "25", "50", "100"}) {
    const auto& f = j.at("fraction_at").at(n);
    EXPECT_EQ(f.size(), 3u) << n;
    // Past the budget of 5: null.
    for (const char* k : {"median", "q1", "q3"}) EXPECT_TRUE(f.at(k).is_null()) << k;
  }
  EXPECT_EQ(j.at("suggest_ms").size(), 2u);
  EXPECT_EQ(j.at("suggest_ms").at("median"), 10.5);

  // No proposal timed: null, not NaN (which JSON cannot hold).
  std::vector<RunTrace> untimed = {{{10.0}, {}}};
  const nlohmann::json u = quality_report("x", "t", 10.0, 1, untimed).to_json();
  EXPECT_TRUE(u.at("suggest_ms").at("p95").is_null());
}

TEST(QualityReport, RejectsMeaninglessInput) {
  EXPECT_THROW(quality_report("s", "t", 10.0, 5, {}), InvalidInput);
  EXPECT_THROW(quality_report("s", "t", 10.0, 0, four_seeds()), InvalidInput);
  EXPECT_THROW(quality_report("s", "t", -1.0, 5, four_seeds()), InvalidInput);
}

TEST(QualitySvg, WellFormedWithOnePathPerStrategy) {
  std::vector<QualityReport> reports = {
      quality_report("random", "toy", 10.0, 5, four_seeds()),
      quality_report("bo <GP & EI>", "toy", 10.0, 5, four_seeds()),
      quality_report("lhs", "toy", 10.0, 3, four_seeds())};
  const std::string svg = quality_svg(reports, "GEMM \"A100\" & friends");

  boost::property_tree::ptree tree;
  std::istringstream in(svg);
  ASSERT_NO_THROW(boost::property_tree::read_xml(in, tree)) << svg;
  const auto& root = tree.get_child("svg");

  int paths = 0;
  int polygons = 0;
  std::vector<std::string> texts;
  std::function<void(const boost::property_tree::ptree&)> walk =
      [&](const boost::property_tree::ptree& node) {
        for (const auto& [name, child] : node) {
          if (name == "path") ++paths;
          if (name == "polygon") ++polygons;
          if (name == "text") texts.push_back(child.get_value<std::string>());
          walk(child);
        }
      };
  walk(root);
  EXPECT_EQ(paths, 3);
  EXPECT_EQ(polygons, 3);
  auto has_text = [&](const std::string& t) {
    return std::find(texts.begin(), texts.end(), t) != texts.end();
  };
  EXPECT_TRUE(has_text("GEMM \"A100\" & friends"));  // title, unescaped by the parser
  EXPECT_TRUE(has_text("random"));                   // legend
  EXPECT_TRUE(has_text("bo <GP & EI>"));
  EXPECT_TRUE(has_text("evaluations"));  // axis label
  EXPECT_TRUE(has_text("0.5"));          // a y tick
  EXPECT_TRUE(has_text("5"));            // the last x tick
  EXPECT_THAT(svg, HasSubstr("#1f77b4"));
  EXPECT_THAT(svg, HasSubstr("#ff7f0e"));
  EXPECT_THAT(svg, Not(HasSubstr("<circle")));
}

TEST(QualitySvg, OneEvaluationIsADot) {
  const std::string svg =
      quality_svg({quality_report("random", "toy", 10.0, 1, four_seeds())}, "t");
  boost::property_tree::ptree tree;
  std::istringstream in(svg);
  ASSERT_NO_THROW(boost::property_tree::read_xml(in, tree)) << svg;
  EXPECT_THAT(svg, HasSubstr("<circle"));
}

}  // namespace
}  // namespace tunebase
