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

TEST(FailureReason, ACommandsExitCodeAndTheLastLineOfItsStderrSayWhy) {
  const auto oom = failure_reason("`./bench --bs 32` exited with code 1; stderr: out of memory");
  EXPECT_EQ(oom, "`<command>` exited with code 1: out of memory");
  EXPECT_EQ(failure_reason("`./bench --bs 64` exited with code 1; stderr: warming up\n"
                           "out of memory\n"),
            oom);
  // Another cause with the same exit code is another reason.
  EXPECT_EQ(failure_reason("`./bench --bs 64` exited with code 1; stderr: error: cannot open "
                           "/tmp/data/input_3.bin"),
            "`<command>` exited with code 1: error: cannot open <path>");
  EXPECT_EQ(failure_reason("run 2 of 3: `./bench --bs 8` exited with code 1"),
            "`<command>` exited with code 1");
  EXPECT_EQ(failure_reason("`./bench --bs 8` exited with code 139"),
            "`<command>` exited with code 139");
  EXPECT_EQ(failure_reason("`./bench` was killed by signal 9 (Killed); stderr: x"),
            "`<command>` was killed by signal 9 (Killed): x");
  // A "; " inside the command is the command's.
  EXPECT_EQ(failure_reason("`a; b 3` exited with code 2"), "`<command>` exited with code 2");
}

TEST(FailureReason, APythonTracebackIsItsException) {
  const std::string tb =
      "Traceback (most recent call last):\n  File \"b.py\", line 3, in <module>\n    run()\n";
  EXPECT_EQ(failure_reason(tb + "ValueError: bad block size 128\n"),
            "ValueError: bad block size N");
  EXPECT_EQ(failure_reason(tb + "KeyError: 'tile'"), "KeyError: 'tile'");
  EXPECT_EQ(failure_reason("`python b.py` exited with code 1; stderr: " + tb + "KeyError: 'tile'"),
            "`<command>` exited with code 1: KeyError: 'tile'");
}

TEST(FailureReason, ErrorNumbersStay) {
  EXPECT_EQ(failure_reason("open failed: errno=2"), "open failed: errno=2");
  EXPECT_EQ(failure_reason("ioctl returned -22"), "ioctl returned -22");
  EXPECT_NE(failure_reason("ioctl returned -22"), failure_reason("ioctl returned -12"));
  EXPECT_EQ(failure_reason("launch: cudaError 700"), "launch: cudaError 700");
  EXPECT_EQ(failure_reason("failed with error code -12"), "failed with error code -12");
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
      {TrialStatus::failed, "`b 1` exited with code 1; stderr: a\nout of memory", 5},
      {TrialStatus::failed, "`b 2` exited with code 1; stderr: b\nout of memory", 9},
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
  EXPECT_EQ(b.reasons[3].reason, "`<command>` exited with code 1: out of memory");
  EXPECT_EQ(b.reasons[3].count, 14);
  EXPECT_EQ(b.reasons[3].example, "`b 2` exited with code 1; stderr: b\nout of memory");
  EXPECT_EQ(b.other_trials, 0);

  // Capped: each status keeps its most frequent reason before any status a second one, so
  // the 20 timeouts are listed, not the 20 runtime failures that tie with them.
  const auto capped = failure_breakdown(messages, 2);
  ASSERT_EQ(capped.reasons.size(), 2u);
  EXPECT_EQ(capped.reasons[0].reason, "CompilationFailedConfig");
  EXPECT_EQ(capped.reasons[1].status, TrialStatus::timeout);
  EXPECT_EQ(capped.other_reasons, 3u);
  EXPECT_EQ(capped.other_trials, 35);
  EXPECT_EQ(capped.other_trials_by_status.at(TrialStatus::failed), 34);
  EXPECT_EQ(capped.other_trials_by_status.at(TrialStatus::invalid), 1);
  EXPECT_EQ(capped.total(), 755);
  const auto three = failure_breakdown(messages, 3);
  ASSERT_EQ(three.reasons.size(), 3u);
  EXPECT_EQ(three.reasons[2].status, TrialStatus::invalid);
}

TEST(FailureBreakdown, ALongExampleIsCut) {
  const auto b = failure_breakdown({{TrialStatus::failed, "boom " + std::string(1000, 'y'), 1}});
  EXPECT_EQ(b.reasons[0].example.size(), kMaxExampleBytes + 3);
}

}  // namespace
}  // namespace tunebase
