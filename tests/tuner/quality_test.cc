// Tuning-quality metrics on hand-computed sequences, and the SVG plot.
#include "tuner/quality.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
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

/// Four seeds, optimum 10, budget 10 (fractions by hand):
///   A: fail, 20 x 8, 12.5   -> 0, .5 ... .5, .8      the 10th evaluation counts
///   B: 40 x 9, 10           -> .25 ... .25, 1
///   C: 25 20 (short)        -> .4 .5                 holds .5 after it ended
///   D: 16 x 10, 10, 10      -> .625 ...              the 11th and 12th are past the budget
std::vector<RunTrace> ten_evaluation_seeds() {
  std::vector<RunTrace> runs(4);
  runs[0].objectives = {kNaN, 20, 20, 20, 20, 20, 20, 20, 20, 12.5};
  runs[1].objectives = {40, 40, 40, 40, 40, 40, 40, 40, 40, 10};
  runs[2].objectives = {25, 20};
  runs[3].objectives = std::vector<double>(10, 16.0);
  runs[3].objectives.insert(runs[3].objectives.end(), {10.0, 10.0});
  return runs;
}

TEST(QualityReport, FractionAfterTenEvaluationsCountsTheTenthAndHoldsShortRuns) {
  const QualityReport r = quality_report("random", "toy.json", 10.0, 10, ten_evaluation_seeds());
  ASSERT_EQ(r.fraction_at.size(), 4u);
  EXPECT_EQ(r.fraction_at[0].evaluations, 10u);
  // After 10: A .8, B 1, C .5, D .625 -> sorted .5 .625 .8 1
  const auto& ten = r.fraction_at[0].fraction;
  EXPECT_NEAR(ten.median, (0.625 + 0.8) / 2, kTol);
  EXPECT_NEAR(ten.q1, 0.5 + 0.75 * (0.625 - 0.5), kTol);
  EXPECT_NEAR(ten.q3, 0.8 + 0.25 * (1.0 - 0.8), kTol);
  // 25, 50 and 100 lie past the budget of 10.
  for (std::size_t i = 1; i < r.fraction_at.size(); ++i) {
    EXPECT_TRUE(std::isnan(r.fraction_at[i].fraction.median)) << r.fraction_at[i].evaluations;
  }

  const nlohmann::json j = r.to_json();
  const auto& at_ten = j.at("fraction_at").at("10");
  EXPECT_NEAR(at_ten.at("median").get<double>(), (0.625 + 0.8) / 2, kTol);
  EXPECT_NEAR(at_ten.at("q1").get<double>(), 0.59375, kTol);
  EXPECT_NEAR(at_ten.at("q3").get<double>(), 0.85, kTol);
  EXPECT_TRUE(j.at("fraction_at").at("25").at("median").is_null());
}

/// Three seeds of budget 100, optimum 10:
///   A: 20 x 99, 10       -> .5 until the 100th evaluation, then 1
///   B: 25 x 29, 20       -> .4 until the 30th, then .5 held (the run ends after 30)
///   C: 40 x 100, 10 ...  -> .25; its 101st evaluation is past the budget
std::vector<RunTrace> hundred_evaluation_seeds() {
  std::vector<RunTrace> runs(3);
  runs[0].objectives = std::vector<double>(99, 20.0);
  runs[0].objectives.push_back(10.0);
  runs[1].objectives = std::vector<double>(29, 25.0);
  runs[1].objectives.push_back(20.0);
  runs[2].objectives = std::vector<double>(100, 40.0);
  runs[2].objectives.push_back(10.0);
  return runs;
}

TEST(QualityReport, EveryCheckpointUpToABudgetOfAHundredIsReported) {
  const QualityReport r = quality_report("bo", "toy.json", 10.0, 100, hundred_evaluation_seeds());
  ASSERT_EQ(r.fraction_at.size(), 4u);
  // {evaluations, median, q1, q3} by hand, three seeds: q1 and q3 halfway between neighbours.
  const std::vector<std::array<double, 4>> expected = {
      {10, 0.4, 0.325, 0.45},    // A .5, B .4, C .25
      {25, 0.4, 0.325, 0.45},    // the same
      {50, 0.5, 0.375, 0.5},     // A .5, B .5, C .25
      {100, 0.5, 0.375, 0.75}};  // A 1, B .5, C .25
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& cp = r.fraction_at[i];
    EXPECT_EQ(cp.evaluations, static_cast<std::size_t>(expected[i][0]));
    EXPECT_NEAR(cp.fraction.median, expected[i][1], kTol) << cp.evaluations;
    EXPECT_NEAR(cp.fraction.q1, expected[i][2], kTol) << cp.evaluations;
    EXPECT_NEAR(cp.fraction.q3, expected[i][3], kTol) << cp.evaluations;
  }
  const nlohmann::json j = r.to_json();
  EXPECT_NEAR(j.at("fraction_at").at("100").at("median").get<double>(), 0.5, kTol);
  EXPECT_NEAR(j.at("fraction_at").at("100").at("q3").get<double>(), 0.75, kTol);
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

// Default study names (kernel, machine, a timestamp) are far longer than the legend's 200
// pixels: the canvas widens so that each is shown whole, not cut off at the same prefix.
TEST(QualitySvg, LongLegendLabelsFitInsideTheCanvas) {
  const std::string a = "import convolution_kernel on NVIDIA A100-PCIE-40GB (task 1)";
  const std::string b = "import convolution_kernel on NVIDIA RTX A4000 (task 2)";
  const std::string svg = quality_svg({quality_report(a, "toy", 10.0, 5, four_seeds()),
                                       quality_report(b, "toy", 10.0, 5, four_seeds())},
                                      "t");
  boost::property_tree::ptree tree;
  std::istringstream in(svg);
  ASSERT_NO_THROW(boost::property_tree::read_xml(in, tree)) << svg;
  const double width = tree.get<double>("svg.<xmlattr>.width");
  int legend_entries = 0;
  for (const auto& [name, child] : tree.get_child("svg")) {
    if (name != "text" || child.get_value<std::string>() != a) continue;
    ++legend_entries;
    const double x = child.get<double>("<xmlattr>.x");
    // At 12-pixel sans-serif a character is at most about 7 pixels wide.
    EXPECT_LE(x + 7.0 * static_cast<double>(a.size()), width) << svg;
  }
  EXPECT_EQ(legend_entries, 1);
  EXPECT_THAT(svg, HasSubstr(">" + b + "<"));
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
