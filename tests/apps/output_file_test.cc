// Output files of the commands (benchmark reports, exports): whole or untouched.
#include "apps/output_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace tunebase::cli {
namespace {

namespace fs = std::filesystem;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tunebase_output_file_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::size_t files() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, AFileIsReplacedOnlyWhenCommitted) {
  const auto path = dir_ / "report.json";
  std::ofstream(path) << "earlier report";
  {
    OutputFile out(path.string());
    out.stream() << "half a report";
    // Not committed: a run that failed or was interrupted.
  }
  EXPECT_EQ(slurp(path), "earlier report");
  EXPECT_EQ(files(), 1u) << "the temporary file was left behind";
  {
    OutputFile out(path.string());
    out.stream() << "new report";
    out.commit();
  }
  EXPECT_EQ(slurp(path), "new report");
  EXPECT_EQ(files(), 1u);
}

TEST_F(OutputFileTest, ASymlinkIsFollowedNotReplaced) {
  const auto real = dir_ / "real.svg";
  const auto link = dir_ / "link.svg";
  std::ofstream(real) << "old";
  fs::create_symlink(real, link);
  OutputFile out(link.string());
  out.stream() << "new";
  out.commit();
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(real), "new");
}

TEST_F(OutputFileTest, UnwritablePathsFailAtOnceAndDevicesAreWrittenDirectly) {
  EXPECT_THROW(OutputFile(dir_.string()), IoError);                          // a directory
  EXPECT_THROW(OutputFile((dir_ / "absent" / "x.json").string()), IoError);  // no folder
  OutputFile null("/dev/null");
  null.stream() << "discarded";
  EXPECT_NO_THROW(null.commit());
  EXPECT_TRUE(fs::exists("/dev/null"));
}

}  // namespace
}  // namespace tunebase::cli
