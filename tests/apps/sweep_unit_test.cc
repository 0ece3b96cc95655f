#include <gtest/gtest.h>

#include <atomic>
#include <csignal>

#include "apps/cli.h"
#include "apps/sweep.h"

namespace tunebase::cli {

// The program's main defines them; sweep.cc reads them.
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_interrupt_signal{SIGINT};

namespace {

TEST(BusyMachineNote, SaidFromALoadOfHalfTheCores) {
  EXPECT_EQ(busy_machine_note(0.3, 2), "");
  EXPECT_EQ(busy_machine_note(0.99, 2), "");
  EXPECT_EQ(busy_machine_note(1.0, 2),
            "note: the machine is busy (load average 1.00 over the last minute, 2 cores): "
            "measurements may be slow and noisy, most of all with several threads; a quieter "
            "machine gives truer rankings");
  EXPECT_EQ(busy_machine_note(3.9, 8), "");
  EXPECT_NE(busy_machine_note(4.0, 8), "");
  // hardware_concurrency() may say 0: one core, then.
  EXPECT_NE(busy_machine_note(0.5, 0), "");
}

// The summary says what the default configuration is: the baseline of its speedup.
TEST(DefaultOrigin, SaysWhetherTheSpaceDeclaresTheDefaults) {
  const auto origin = [](const std::string& space) {
    return default_origin(SearchSpace::from_document(nlohmann::ordered_json::parse(space)));
  };
  auto o = origin(R"({"tune_params": {"bx": [32, 64], "by": [1, 2]}})");
  EXPECT_EQ(o.kind, "first_values");
  EXPECT_EQ(o.text, "first value of each parameter: the space declares no defaults");
  o = origin(R"({"parameters": [{"name": "a", "values": [1, 2], "default": 2},
                                {"name": "x", "type": "real", "low": 0, "high": 1,
                                 "default": 0.5}]})");
  EXPECT_EQ(o.kind, "declared");
  EXPECT_EQ(o.text, "the space's declared defaults");
  o = origin(R"({"parameters": [{"name": "a", "values": [1, 2], "default": 2},
                                {"name": "b", "values": [1, 2]},
                                {"name": "c", "values": [1, 2]}]})");
  EXPECT_EQ(o.kind, "partly_declared");
  EXPECT_EQ(o.text,
            "the space declares defaults for 1 of its 3 parameters, the others take their first "
            "value");
  // A real parameter without a default takes the middle of its interval, not its low end.
  o = origin(R"({"parameters": [{"name": "a", "values": [1, 2]},
                                {"name": "x", "type": "real", "low": 0, "high": 1}]})");
  EXPECT_EQ(o.kind, "first_values");
  EXPECT_EQ(o.text,
            "first value of each parameter (a real one the middle of its range, geometric on a "
            "log scale): the space declares no defaults");
  // One parameter left: "the other".
  o = origin(R"({"parameters": [{"name": "a", "values": [1, 2], "default": 2},
                                {"name": "b", "values": [1, 2]}]})");
  EXPECT_EQ(o.text,
            "the space declares defaults for 1 of its 2 parameters, the other takes its first "
            "value");
}

}  // namespace
}  // namespace tunebase::cli
