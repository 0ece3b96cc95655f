#include "core/failure_reasons.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tunebase {
namespace {

TEST(FailureReason, KernelTunersFailuresAreTheirOwnReasons) {
  EXPECT_EQ(failure_reason("CompilationFailedConfig"), "CompilationFailedConfig");
  EXPECT_EQ(failure_reason("RuntimeFailedConfig"), "RuntimeFailedConfig");
  EXPECT_EQ(failure_reason("InvalidConfig"), "InvalidConfig");
  EXPECT_EQ(failure_reason(""), "(no message)");
}

TEST(FailureReason, ACommandsExitCodeAndFirstStderrLineStayAndItsTextGoes) {
  const auto one = failure_reason("`./bench --bs 32` exited with code 1; stderr: out of memory");
  EXPECT_EQ(one, "`<command>` exited with code 1; stderr: out of memory");
  EXPECT_EQ(failure_reason("`./bench --bs 64` exited with code 1; stderr: out of memory\nat 3"),
            one);
  EXPECT_EQ(failure_reason("run 2 of 3: `./bench --bs 8` exited with code 1"),
            "`<command>` exited with code 1");
  EXPECT_EQ(failure_reason("`./bench --bs 8` exited with code 139"),
            "`<command>` exited with code 139 = signal 11 (SIGSEGV)");
  EXPECT_EQ(failure_reason("`./bench` was killed by signal 9 (Killed); stderr: x"),
            "`<command>` was killed by signal 9 (Killed); stderr: x");
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

TEST(FailureReason, ALongReasonIsWholeAndCutOnlyToShow) {
  const auto reason = failure_reason(std::string(500, 'x'));
  EXPECT_EQ(reason, std::string(500, 'x'));
  const auto shown = shortened(reason, kMaxReasonBytes);
  EXPECT_EQ(shown.size(), kMaxReasonBytes + 3);
  EXPECT_EQ(shown.substr(shown.size() - 3), "...");
}

TEST(FailureReason, APythonTracebackIsItsException) {
  const auto value = failure_reason(
      "Traceback (most recent call last):\n  File \"k.py\", line 3, in <module>\n"
      "    run()\nValueError: bad block size 128\n");
  EXPECT_EQ(value, "ValueError: bad block size N");
  EXPECT_EQ(failure_reason("Traceback (most recent call last):\n  File \"k.py\", line 3\n"
                           "KeyError: 'tile'"),
            "KeyError: 'tile'");
  EXPECT_EQ(failure_reason("`python k.py` exited with code 1; stderr: Traceback (most recent "
                           "call last):\n  File \"k.py\", line 3\nKeyError: 'tile'"),
            "`<command>` exited with code 1; stderr: KeyError: 'tile'");
}

TEST(FailureReason, ACommandsStderrTellsItsFailuresApart) {
  const auto cannot_open = failure_reason(
      "`./b 3` exited with code 1; stderr: error: cannot open /tmp/data/input_3.bin");
  EXPECT_EQ(cannot_open, "`<command>` exited with code 1; stderr: error: cannot open <path>");
  EXPECT_EQ(failure_reason("`./b 4` exited with code 1; stderr: \n\nerror: cannot open "
                           "/tmp/data/input_4.bin\nmore"),
            cannot_open);
  EXPECT_NE(failure_reason("`./b 5` exited with code 1"), cannot_open);
}

TEST(FailureReason, ErrorCodesStay) {
  EXPECT_EQ(failure_reason("open failed: errno=12"), "open failed: errno=12");
  EXPECT_EQ(failure_reason("launch failed with code -2"), "launch failed with code -2");
  EXPECT_EQ(failure_reason("cudaMalloc: cudaError 2"), "cudaMalloc: cudaError 2");
  EXPECT_EQ(failure_reason("clBuildProgram returned -11"), "clBuildProgram returned -11");
  EXPECT_EQ(failure_reason("hipLaunch failed, code 0x1f"), "hipLaunch failed, code 0x1f");
  EXPECT_NE(failure_reason("open failed: errno=12"), failure_reason("open failed: errno=2"));
}

TEST(FailureReason, PathsTimesAndIdsAreWholeTokens) {
  EXPECT_EQ(failure_reason("cannot open data/input_3.bin"), "cannot open <path>");
  EXPECT_EQ(failure_reason("cannot open C:\\work\\in.bin"), "cannot open <path>");
  EXPECT_EQ(failure_reason("/tmp/x/kernel.cu(12): error: bad"), "<path>(N): error: bad");
  EXPECT_EQ(failure_reason("cannot open '/tmp/a b'"), "cannot open '<path> b'");
  EXPECT_EQ(failure_reason("at 2026-11-24T15:26:03.5Z worker stopped"), "at <time> worker stopped");
  EXPECT_EQ(failure_reason("at 2026-11-24 15:26:03 worker stopped"), "at <time> worker stopped");
  EXPECT_EQ(failure_reason("worker w-3f2a1c lost"), "worker <id> lost");
  EXPECT_EQ(failure_reason("job 123e4567-e89b-12d3-a456-426614174000 lost"), "job <id> lost");
  EXPECT_EQ(failure_reason("kernel_bx128_by4.cu failed"), "<id> failed");
  EXPECT_EQ(failure_reason("kern_128_4 failed"), "<id> failed");
  EXPECT_EQ(failure_reason("float4 on sm_80 in 42ms"), "float4 on sm_80 in Nms");
  // A formula is not a path: PETSc's check of the true residual keeps its norm.
  EXPECT_EQ(failure_reason("KSP reported CONVERGED_RTOL after 2 iterations but the true residual "
                           "||b-Ax||/||b|| = 0.998 is above the tolerance 1e-06"),
            "KSP reported CONVERGED_RTOL after N iterations but the true residual "
            "||b-Ax||/||b|| = N is above the tolerance N");
}

TEST(FailureReason, DetailsStartAtASemicolonOutsideBrackets) {
  EXPECT_EQ(failure_reason("bad value (a; b) here; detail 3"), "bad value (a; b) here");
  EXPECT_EQ(failure_reason("bad value [a; b]; detail"), "bad value [a; b]");
}

TEST(FailureReason, AShellsExitCodeOfASignalNamesTheSignal) {
  EXPECT_EQ(failure_reason("`./b` exited with code 137"),
            "`<command>` exited with code 137 = signal 9 (SIGKILL)");
  EXPECT_EQ(failure_reason("`./b` exited with code 134; stderr: abort"),
            "`<command>` exited with code 134 = signal 6 (SIGABRT); stderr: abort");
  EXPECT_EQ(failure_reason("`./b` exited with code 2"), "`<command>` exited with code 2");
  EXPECT_EQ(failure_reason("read 137 bytes"), "read N bytes");
}

TEST(FailureBreakdown, GroupsCountsAndKeepsTheMostFrequentMessageAsExample) {
  const std::vector<FailureMessages> messages{
      {TrialStatus::failed, "CompilationFailedConfig", 700},
      {TrialStatus::failed, "`b 1` exited with code 1; stderr: a", 5},
      {TrialStatus::failed, "`b 2` exited with code 1; stderr: a", 9},
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
  EXPECT_EQ(b.reasons[3].reason, "`<command>` exited with code 1; stderr: a");
  EXPECT_EQ(b.reasons[3].count, 14);
  EXPECT_EQ(b.reasons[3].example, "`b 2` exited with code 1; stderr: a");
  EXPECT_EQ(b.other_trials, 0);

  const auto capped = failure_breakdown(messages, 2);
  EXPECT_EQ(capped.reasons.size(), 2u);
  EXPECT_EQ(capped.other_reasons, 3u);
  EXPECT_EQ(capped.other_trials, 35);
  EXPECT_EQ(capped.total(), 755);
}

TEST(FailureBreakdown, EveryStatusKeepsItsMostFrequentReasonAndOthersAreByStatus) {
  std::vector<FailureMessages> messages;
  for (int k = 0; k < 12; ++k) {
    messages.push_back(
        {TrialStatus::failed, "error " + std::string(1, static_cast<char>('a' + k)), 3});
  }
  messages.push_back({TrialStatus::timeout, "`b` timed out after 3 s", 3});
  messages.push_back({TrialStatus::invalid, "InvalidConfig", 1});
  const auto b = failure_breakdown(messages);
  ASSERT_EQ(b.reasons.size(), kMaxFailureReasons);
  const auto has = [&](TrialStatus s) {
    return std::any_of(b.reasons.begin(), b.reasons.end(),
                       [&](const FailureReason& r) { return r.status == s; });
  };
  EXPECT_TRUE(has(TrialStatus::timeout));
  EXPECT_TRUE(has(TrialStatus::invalid));
  ASSERT_EQ(b.others.size(), 1u);
  EXPECT_EQ(b.others[0].status, TrialStatus::failed);
  EXPECT_EQ(b.others[0].reasons, 4u);
  EXPECT_EQ(b.others[0].trials, 12);
  EXPECT_EQ(b.total(), 40);
}

TEST(FailureBreakdown, CaseIsIgnoredAndTheMostFrequentSpellingShown) {
  const auto b = failure_breakdown(
      {{TrialStatus::failed, "Out of memory", 2}, {TrialStatus::failed, "out of memory", 5}});
  ASSERT_EQ(b.reasons.size(), 1u);
  EXPECT_EQ(b.reasons[0].count, 7);
  EXPECT_EQ(b.reasons[0].reason, "out of memory");
}

TEST(FailureBreakdown, ALongExampleIsCut) {
  const auto b = failure_breakdown({{TrialStatus::failed, "boom " + std::string(1000, 'y'), 1}});
  EXPECT_EQ(b.reasons[0].example.size(), kMaxExampleBytes + 3);
}

}  // namespace
}  // namespace tunebase
