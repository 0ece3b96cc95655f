#include "tests/support/shared_data.h"

#include <zlib.h>

#include <cstdlib>
#include <random>

namespace tunebase::testing {

std::optional<std::filesystem::path> shared_data_dir() {
  if (const char* env = std::getenv("TUNEBASE_SHARED_DATA"); env && *env) {
    if (std::filesystem::is_directory(env)) return std::filesystem::path(env);
    return std::nullopt;
  }
  std::filesystem::path built(TUNEBASE_DEFAULT_SHARED_DATA);
  if (std::filesystem::is_directory(built)) return built;
  return std::nullopt;
}

std::optional<std::filesystem::path> shared_file(const std::string& relative) {
  auto dir = shared_data_dir();
  if (!dir) return std::nullopt;
  auto p = *dir / relative;
  if (!std::filesystem::exists(p)) return std::nullopt;
  return p;
}

TempDir::TempDir() {
  std::random_device rd;
  auto base = std::filesystem::temp_directory_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto candidate = base / ("tunebase-test-" + std::to_string(rd()));
    if (std::filesystem::create_directory(candidate)) {
      path_ = candidate;
      return;
    }
  }
  throw std::runtime_error("could not create a temporary directory in " + base.string());
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string write_gzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  if (!f) return path;
  EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  EXPECT_EQ(gzclose(f), Z_OK);
  return path;
}

}  // namespace tunebase::testing
