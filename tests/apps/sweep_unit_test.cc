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

}  // namespace
}  // namespace tunebase::cli
