// detect_machine(): the fingerprint of the machine the tests run on.
#include "core/machine.h"

#include <gtest/gtest.h>

#include <thread>

namespace tunebase {
namespace {

TEST(Machine, DetectsThisMachine) {
  const auto info = detect_machine();
  EXPECT_FALSE(info.name.empty());
  const auto& fp = info.fingerprint;
  ASSERT_TRUE(fp.is_object());
  EXPECT_EQ(fp.at("logical_cores").get<unsigned>(), std::thread::hardware_concurrency());
  EXPECT_GE(fp.at("physical_cores").get<unsigned>(), 1u);
  EXPECT_LE(fp.at("physical_cores").get<unsigned>(), fp.at("logical_cores").get<unsigned>());
  EXPECT_GT(fp.at("memory_bytes").get<std::uint64_t>(), 0u);
  EXPECT_EQ(fp.at("os"), "Linux");
  EXPECT_FALSE(fp.at("arch").get<std::string>().empty());
  EXPECT_FALSE(fp.at("compiler").get<std::string>().empty());
  EXPECT_TRUE(fp.at("devices").is_array());
  EXPECT_FALSE(fp.contains("hostname"));  // the name may change; the hardware did not
  EXPECT_EQ(info.fingerprint_hash, stable_json_hash(fp));
  EXPECT_EQ(detect_machine().fingerprint_hash, info.fingerprint_hash);  // stable
}

TEST(Machine, DevicesChangeTheHash) {
  auto info = detect_machine();
  const auto before = info.fingerprint_hash;
  info.fingerprint["devices"].push_back(
      {{"platform", "Portable Computing Language"}, {"name", "pthread-cpu"}});
  EXPECT_EQ(info.fingerprint_hash, before);  // only refreshed on request
  refresh_fingerprint_hash(info);
  EXPECT_NE(info.fingerprint_hash, before);
  EXPECT_EQ(info.fingerprint_hash.size(), 16u);
}

TEST(Machine, HashIgnoresKeyOrder) {
  const auto a = nlohmann::json::parse(R"({"a": 1, "b": [1, 2]})");
  const auto b = nlohmann::json::parse(R"({"b": [1, 2], "a": 1})");
  EXPECT_EQ(stable_json_hash(a), stable_json_hash(b));
  EXPECT_NE(stable_json_hash(a),
            stable_json_hash(nlohmann::json::parse(R"({"a": 2, "b": [1, 2]})")));
}

}  // namespace
}  // namespace tunebase
