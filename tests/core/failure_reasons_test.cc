#include "core/failure_reasons.h"

#include <gtest/gtest.h>

namespace tunebase {
namespace {

TEST(FailureReason, KernelTunersFailuresAreTheirOwnReasons) {
  EXPECT_EQ(failure_reason("CompilationFailedConfig"), "CompilationFailedConfig");
  EXPECT_EQ(failure_reason("RuntimeFailedConfig"), "RuntimeFailedConfig");
  EXPECT_EQ(failure_reason("InvalidConfig"), "InvalidConfig");
  EXPECT_EQ(failure_reason(""), "(no message)");
}

TEST(FailureReason, ACommandsExitCodeStaysAndItsTextAndOutputGo) {
  const auto one = failure_reason("`./bench --bs 32` exited with code 1; stderr: out of memory");
  EXPECT_EQ(one, "`<command>` exited with code 1");
  EXPECT_EQ(failure_reason("`./bench --bs 64` exited with code 1; stderr: other"), one);
  EXPECT_EQ(failure_reason("run 2 of 3: `./bench --bs 8` exited with code 1"), one);
  EXPECT_EQ(failure_reason("`./bench --bs 8` exited with code 139"),
            "`<command>` exited with code 139");
  EXPECT_EQ(failure_reason("`./bench` was killed by signal 9 (Killed); stderr: x"),
            "`<command>` was killed by signal 9 (Killed)");
  // A "; " inside the command is the command's.
  EXPECT_EQ(failure_reason("`a; b 3` exited with code 2"), "`<command>` exited with code 2");
}

TEST(FailureReason, NumbersAndPathsAreLeftOutButNotNamesWithDigits) {
  EXPECT_EQ(failure_reason("`./bench --bs 8` timed out after 10 s"),
            "`<command>` timed out after N s");
  EXPECT_EQ(failure_reason("`./bench --bs 8` timed out after 2.5 s"),
            "`<command>` timed out after N s");
  EXPECT_EQ(failure_reason("compile failed: /tmp/abc1/k.cl:12:3: error: float4 on sm_80\nmore"),
            "compile failed: <path>:N:N: error: float4 on sm_80");
  EXPECT_EQ(failure_reason("launch failed: took 42ms, 1e-3 left, 0x1f"),
            "launch failed: took Nms, N left, N");
}

TEST(FailureReason, AViolatedConstraintIsNamedAsWritten) {
  EXPECT_EQ(failure_reason("configuration {bx=64, by=32} violates constraint \"bx*by <= 1024\""),
            "configuration {...} violates constraint \"bx*by <= 1024\"");
}

TEST(FailureReason, ALongReasonIsCut) {
  const auto reason = failure_reason(std::string(500, 'x'));
  EXPECT_EQ(reason.size(), kMaxReasonBytes + 3);
  EXPECT_EQ(reason.substr(reason.size() - 3), "...");
}

TEST(FailureBreakdown, GroupsCountsAndKeepsTheMostFrequentMessageAsExample) {
  const std::vector<FailureMessages> messages{
      {TrialStatus::failed, "CompilationFailedConfig", 700},
      {TrialStatus::failed, "`b 1` exited with code 1; stderr: a", 5},
      {TrialStatus::failed, "`b 2` exited with code 1; stderr: b", 9},
      {TrialStatus::timeout, "`b 3` timed out after 3 s", 20},
      {TrialStatus::failed, "RuntimeFailedConfig", 20},
      {TrialStatus::invalid, "InvalidConfig", 1}};
  const auto b = failure_breakdown(messages);
  EXPECT_EQ(b.total(), 755);
  ASSERT_EQ(b.reasons.size(), 5u);
  EXPECT_EQ(b.reasons[0].reason, "CompilationFailedConfig");
  EXPECT_EQ(b.reasons[0].count, 700);
  // Ties: by status (failed before timeout), then reason.
  EXPECT_EQ(b.reasons[1].reason, "RuntimeFailedConfig");
  EXPECT_EQ(b.reasons[2].status, TrialStatus::timeout);
  EXPECT_EQ(b.reasons[3].reason, "`<command>` exited with code 1");
  EXPECT_EQ(b.reasons[3].count, 14);
  EXPECT_EQ(b.reasons[3].example, "`b 2` exited with code 1; stderr: b");
  EXPECT_EQ(b.other_trials, 0);

  const auto capped = failure_breakdown(messages, 2);
  EXPECT_EQ(capped.reasons.size(), 2u);
  EXPECT_EQ(capped.other_reasons, 3u);
  EXPECT_EQ(capped.other_trials, 35);
  EXPECT_EQ(capped.total(), 755);
}

TEST(FailureBreakdown, ALongExampleIsCut) {
  const auto b = failure_breakdown({{TrialStatus::failed, "boom " + std::string(1000, 'y'), 1}});
  EXPECT_EQ(b.reasons[0].example.size(), kMaxExampleBytes + 3);
}

}  // namespace
}  // namespace tunebase
