#include "kernels/format_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/error.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

using ::tunebase::testing::TempDir;

const char* const kHeader =
    "group,name,id,kind,rows,cols,nonzeros,posdef,psym,nsym,row_min,row_q1,row_median,row_q3,"
    "row_max,row_mean,row_variance,row_skewness,row_kurtosis,row_hyperskewness,"
    "row_hyperflatness";

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

/// Three machines whose fastest format follows the row imbalance row_max / row_mean:
/// balanced rows favour ELL, imbalanced ones COO; CSR is never the fastest on A and B.
/// ELL fails (empty cell) on A for the most imbalanced matrices, as out-of-memory ELL does.
/// Machine C is noise.
std::string make_dataset(const TempDir& dir, int matrices) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> imbalance_draw(0.0, 2.0);  // log10 of max/mean
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  std::ostringstream a, b, c;
  for (auto* s : {&a, &b, &c}) *s << kHeader << ",csr,ell,coo\n";
  for (int i = 0; i < matrices; ++i) {
    const double log_imbalance = imbalance_draw(rng);
    const double mean = 10.0;
    const double max = mean * std::pow(10.0, log_imbalance);
    const int rows = 1000 + 10 * i;
    std::ostringstream props;
    props << "G,m" << i << "," << i << ",\"graph, synthetic\"," << rows << "," << rows << ","
          << rows * 10 << ",0,1,1,1,8,10,12," << max << "," << mean << ",4,0.5,3,1,10";
    const double csr = 1e-4 * noise(rng);
    const bool balanced = log_imbalance < 1.0;
    const double ell = balanced ? 0.5 * csr * noise(rng) : 3.0 * csr * noise(rng);
    const double coo = balanced ? 1.5 * csr * noise(rng) : 0.6 * csr * noise(rng);
    const bool ell_failed = log_imbalance > 1.8;
    a << props.str() << "," << csr << "," << (ell_failed ? "" : std::to_string(ell)) << "," << coo
      << "\n";
    b << props.str() << "," << csr * 2 << "," << ell * 2 * noise(rng) << "," << coo * 2 * noise(rng)
      << "\n";
    c << props.str() << "," << csr << "," << csr * noise(rng) << "," << csr * noise(rng) << "\n";
  }
  write(dir.file("A.csv"), a.str());
  write(dir.file("B.csv"), b.str());
  write(dir.file("C.csv"), c.str());
  return dir.path().string();
}

FormatSelectionOptions small_options() {
  FormatSelectionOptions o;
  o.folds = 3;
  o.trees = 20;
  return o;
}

TEST(SpmvDataset, ReadsMachinesFormatsAndQuotedCells) {
  TempDir dir;
  const SpmvDataset d = read_spmv_dataset(make_dataset(dir, 30));
  ASSERT_EQ(d.machines, (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(d.formats[0], (std::vector<std::string>{"csr", "ell", "coo"}));
  ASSERT_EQ(d.matrices.size(), 30u);
  EXPECT_EQ(d.matrices[3], "G/m3");
  // The quoted kind "graph, synthetic" must not shift the numeric columns.
  const auto rows_k =
      static_cast<std::size_t>(std::find(d.property_names.begin(), d.property_names.end(), "rows") -
                               d.property_names.begin());
  EXPECT_DOUBLE_EQ(d.properties[3][rows_k], 1030.0);
  EXPECT_EQ(d.machine_index("B"), 1u);
  EXPECT_THROW(d.machine_index("Z"), NotFound);
}

TEST(SpmvDataset, MalformedFilesAreRejectedWithFileAndLine) {
  TempDir dir;
  write(dir.file("bad.csv"),
        std::string(kHeader) + ",csr\nG,m,1,k,2,2,2,0,1,1,1,1,1,1,1,1,0,0,0,0,0,abc\n");
  try {
    read_spmv_dataset(dir.path().string());
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bad.csv:2"), std::string::npos) << m;
    EXPECT_NE(m.find("'abc'"), std::string::npos) << m;
  }
  write(dir.file("bad.csv"), std::string(kHeader) + ",csr\nG,m,1\n");
  EXPECT_THROW(read_spmv_dataset(dir.path().string()), InvalidInput);
  write(dir.file("bad.csv"), "group,rows,csr\nG,1,1\n");
  EXPECT_THROW(read_spmv_dataset(dir.path().string()), InvalidInput);
  EXPECT_THROW(read_spmv_dataset(dir.file("missing")), IoError);
}

TEST(FormatSelection, LearnsTheRuleAndBeatsAlwaysCsr) {
  TempDir dir;
  const SpmvDataset d = read_spmv_dataset(make_dataset(dir, 240));
  const FormatSelectionReport r = evaluate_format_selection(d, 0, small_options());
  EXPECT_EQ(r.target, "A");
  EXPECT_EQ(r.matrices, 240u);
  std::map<std::string, SelectionScore> by;
  for (const auto& s : r.scores) by[s.method] = s;
  ASSERT_EQ(by.size(), 5u);
  EXPECT_DOUBLE_EQ(by["always-csr"].accuracy, 0.0);
  EXPECT_GT(by["always-csr"].geomean_slowdown, 1.5);
  for (const char* forest : {"forest-properties", "forest-transfer"}) {
    EXPECT_GT(by[forest].accuracy, 0.9) << forest;
    EXPECT_LT(by[forest].geomean_slowdown, 1.1) << forest;
    EXPECT_LT(by[forest].unavailable_picks, 12u) << forest;
  }
  // Machine B ranks formats like A, so copying its fastest format works too.
  EXPECT_GT(by["nearest-machine"].accuracy, 0.8);
}

TEST(FormatSelection, SelectorUsesOtherMachinesOnlyWhenAsked) {
  TempDir dir;
  const SpmvDataset d = read_spmv_dataset(make_dataset(dir, 60));
  std::vector<std::size_t> all(60);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const FormatSelector plain(d, 0, all, false, small_options());
  const FormatSelector transfer(d, 0, all, true, small_options());
  EXPECT_EQ(plain.candidates(), (std::vector<std::string>{"csr", "ell", "coo"}));
  // Two other machines, 3 formats each plus a log time per non-zero.
  EXPECT_EQ(transfer.features(d, 0).size(), plain.features(d, 0).size() + 2 * (3 + 1));
  EXPECT_LT(plain.predict(d, 5), 3u);
}

TEST(FormatSelection, RealGinkgoDataLoads) {
  TUNEBASE_SHARED_FILE_OR_SKIP(csv, "sparse/spmv/Xeon_Gold_6230.csv");
  const std::string dir = csv.substr(0, csv.rfind('/'));
  const SpmvDataset d = read_spmv_dataset(dir);
  EXPECT_EQ(d.machines.size(), 5u);
  const std::size_t xeon = d.machine_index("Xeon_Gold_6230");
  EXPECT_EQ(d.formats[xeon], (std::vector<std::string>{"csr", "coo", "ell", "sellp", "hybrid"}));
  const auto it = std::find(d.matrices.begin(), d.matrices.end(), "ACUSIM/Pres_Poisson");
  ASSERT_NE(it, d.matrices.end());
  // README example: CSR SpMV of Pres_Poisson took 117 microseconds on the Xeon.
  EXPECT_NEAR(d.times[xeon][static_cast<std::size_t>(it - d.matrices.begin())][0], 0.000117493,
              1e-9);
}

}  // namespace
}  // namespace tunebase
