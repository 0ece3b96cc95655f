// Access to ../shared/data from tests; tests that need it skip with a clear message without it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

namespace tunebase::testing {

/// The shared data folder: $TUNEBASE_SHARED_DATA, else the path configured at build time.
/// Empty when neither exists.
std::optional<std::filesystem::path> shared_data_dir();

/// Full path of `relative` inside the shared data folder, or nullopt when absent.
std::optional<std::filesystem::path> shared_file(const std::string& relative);

/// A fresh temporary directory removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Writes `text` gzip-compressed to `path` (a failure is a test failure); returns `path`.
std::string write_gzip(const std::string& path, const std::string& text);

}  // namespace tunebase::testing

/// Declares `var` as the path of a shared data file, or skips the test saying what is missing.
#define TUNEBASE_SHARED_FILE_OR_SKIP(var, relative)                                           \
  const auto var##_opt = ::tunebase::testing::shared_file(relative);                          \
  if (!var##_opt) {                                                                           \
    GTEST_SKIP() << "needs ../shared/data/" << (relative)                                     \
                 << " (set TUNEBASE_SHARED_DATA to the shared data folder to run this test)"; \
  }                                                                                           \
  const std::string var = var##_opt->string()
