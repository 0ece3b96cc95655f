#include "kernels/command.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "core/error.h"
#include "tests/support/process_limits.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

using testing::TempDir;

SearchSpace make_space() {
  return SearchSpace(
      {ordinal("bs", {std::int64_t{8}, std::int64_t{16}, std::int64_t{32}}, std::int64_t{16}),
       categorical("mode", {std::string("fast"), std::string("two words")}, std::string("fast"))},
      {});
}

Configuration config(std::int64_t bs, const std::string& mode) { return {bs, mode}; }

CommandOptions quick(double timeout = 10.0) {
  CommandOptions o;
  o.timeout_seconds = timeout;
  return o;
}

TEST(LastNumber, FindsTheLastStandaloneNumber) {
  EXPECT_EQ(last_number("time: 3.5 ms"), 3.5);
  EXPECT_EQ(last_number("a 1\nb 2\nc 17\n"), 17.0);
  EXPECT_EQ(last_number("result=-2.5e-3"), -2.5e-3);
  EXPECT_EQ(last_number("took 1.5ms"), 1.5);
  EXPECT_EQ(last_number("value .25 on x86_64"), 0.25);
  EXPECT_EQ(last_number("[3/10] +4"), 4.0);
  EXPECT_FALSE(last_number("no numbers here, gpu0 x86").has_value());
  EXPECT_FALSE(last_number("").has_value());
}

TEST(LastNumber, NanOrInfAsTheLastNumberGivesNone) {
  // A broken measurement printed last must not let an earlier number stand in for it.
  for (const char* text : {"time 3.5\nnan", "1 -nan", "2 INF ms", "3 time=+Infinity", "4 1e999"}) {
    std::string why;
    EXPECT_FALSE(last_number(text, &why).has_value()) << text;
    EXPECT_NE(why.find("the program printed"), std::string::npos) << why;
  }
  std::string why;
  EXPECT_FALSE(last_number("a 1\nNaN", &why).has_value());
  EXPECT_NE(why.find("printed NaN"), std::string::npos) << why;
  // Words that only begin like them are words.
  EXPECT_EQ(last_number("5 nanoseconds"), 5.0);
  EXPECT_EQ(last_number("6 info"), 6.0);
  EXPECT_EQ(last_number("nan at first, then 7"), 7.0);
}

TEST(LastNumber, ACommaAfterADigitMakesItAmbiguous) {
  for (const char* text : {"total 1,234.5", "time 2,5 s"}) {
    std::string why;
    EXPECT_FALSE(last_number(text, &why).has_value()) << text;
    EXPECT_NE(why.find("without a comma, or give --regex"), std::string::npos) << why;
  }
  std::string why;
  last_number("total 1,234.5 ms", &why);
  EXPECT_NE(why.find("'1,234.5'"), std::string::npos) << why;
  EXPECT_EQ(last_number("a, 5"), 5.0);
  EXPECT_EQ(last_number("x,5"), 5.0);
  EXPECT_EQ(last_number("1, 2"), 2.0);
  // A number with its own decimal point after the comma is one of a list (CSV, JSON).
  EXPECT_EQ(last_number("n,time_ms\n1024,0.33\n"), 0.33);
  EXPECT_EQ(last_number("[1.2,1.3]"), 1.3);
  EXPECT_FALSE(last_number("total 1,234").has_value());
}

TEST(CommandEvaluator, LastNumberOfStdoutIsTheObjective) {
  CommandEvaluator e(make_space(), "echo start 1; echo time {bs}", quick());
  EXPECT_EQ(e.kernel_name(), "command");
  EXPECT_TRUE(e.minimize());
  EXPECT_EQ(e.task()["command"], "echo start 1; echo time {bs}");
  const Measurement m = e.evaluate(config(32, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 32.0);
  EXPECT_EQ(m.raw, std::vector<double>{32.0});
  EXPECT_GT(m.cost_seconds, 0.0);
}

TEST(CommandEvaluator, PlaceholdersAndEnvironmentVariables) {
  CommandEvaluator e(make_space(),
                     "test \"$bs\" = {bs} && test \"$TUNEBASE_mode\" = \"$mode\" && "
                     "test \"$mode\" = {mode} && echo ${bs}00",
                     quick());
  EXPECT_EQ(e.command_for(config(8, "two words")),
            "test \"$bs\" = 8 && test \"$TUNEBASE_mode\" = \"$mode\" && test \"$mode\" = 'two "
            "words' && echo ${bs}00");
  const auto env = e.environment_for(config(8, "two words"));
  EXPECT_NE(std::find(env.begin(), env.end(), "TUNEBASE_bs=8"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "mode=two words"), env.end());
  const Measurement m = e.evaluate(config(8, "two words"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 800.0);
}

TEST(CommandEvaluator, LiteralBracesAreKept) {
  CommandEvaluator e(make_space(), "awk 'BEGIN {{ print {bs} * 2 }}' && echo {{bs}} { x }",
                     quick());
  EXPECT_EQ(e.command_for(config(16, "fast")), "awk 'BEGIN { print 16 * 2 }' && echo {bs} { x }");
  const Measurement m = e.evaluate(config(16, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 32.0);
}

TEST(CommandEvaluator, UnknownPlaceholderNamesItAndTheParameters) {
  try {
    CommandEvaluator e(make_space(), "./app --bs {bs} --tile {tile}", quick());
    FAIL() << "no error";
  } catch (const InvalidInput& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("{tile}"), std::string::npos) << message;
    EXPECT_NE(message.find("bs, mode"), std::string::npos) << message;
  }
}

TEST(CommandEvaluator, AParameterNameNoPlaceholderCanHoldIsNamed) {
  const SearchSpace space({ordinal("tile-x", {std::int64_t{1}, std::int64_t{2}})}, {});
  try {
    CommandEvaluator e(space, "./app --tile {tile-x}", quick());
    FAIL() << "no error: {tile-x} was passed to the shell as it is";
  } catch (const InvalidInput& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("{tile-x} in './app --tile {tile-x}' cannot be replaced"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("rename parameter 'tile-x'"), std::string::npos) << message;
  }
  // Unused in the command (the program may read TUNEBASE_tile-x), it is not an error.
  EXPECT_NO_THROW(CommandEvaluator(space, "./app", quick()));
}

TEST(CommandEvaluator, BadOptionsAreRejected) {
  CommandOptions bad_regex = quick();
  bad_regex.objective_regex = "time ([0-9";
  EXPECT_THROW(CommandEvaluator(make_space(), "echo 1", bad_regex), InvalidInput);
  EXPECT_THROW(CommandEvaluator(make_space(), "echo 1", quick(0.0)), InvalidInput);
  CommandOptions no_dir = quick();
  no_dir.working_directory = "/nonexistent/folder";
  EXPECT_THROW(CommandEvaluator(make_space(), "echo 1", no_dir), InvalidInput);
}

TEST(CommandEvaluator, RegexCaptureGroupOrWholeMatch) {
  CommandOptions o = quick();
  o.objective_regex = "time: ([-0-9.e]+) ms";
  CommandEvaluator group(make_space(), "echo 'gflops 99'; echo 'time: 2.5 ms'; echo done 7", o);
  Measurement m = group.evaluate(config(8, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 2.5);

  o.objective_regex = "[0-9]+\\.75";
  CommandEvaluator whole(make_space(), "echo 'a 1.75 b 3'", o);
  m = whole.evaluate(config(8, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 1.75);

  o.objective_regex = "status: (\\w+)";
  CommandEvaluator not_number(make_space(), "echo 'status: broken'", o);
  m = not_number.evaluate(config(8, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("'broken'"), std::string::npos) << m.message;

  // from_chars reads these; none is an objective (a sweep stopped at the first one).
  o.objective_regex = "val=(\\S+)";
  for (const char* printed : {"nan", "inf", "-inf", "NaN", "infinity"}) {
    CommandEvaluator not_finite(make_space(), std::string("echo val=") + printed, o);
    m = not_finite.evaluate(config(8, "fast"));
    EXPECT_EQ(m.status, TrialStatus::failed) << printed;
    EXPECT_NE(m.message.find("not a finite number"), std::string::npos) << m.message;
  }

  // The last match, as without a regex the last number counts.
  o.objective_regex = "t=([0-9.]+)";
  CommandEvaluator last_match(make_space(), "echo 't=1 t=2'; echo 't=3 t=4'; echo 'x=5'", o);
  m = last_match.evaluate(config(8, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 4.0);

  o.objective_regex = "GFLOPS=([0-9.]+)";
  CommandEvaluator no_match(make_space(), "echo 'time 3'", o);
  m = no_match.evaluate(config(8, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("matched nothing"), std::string::npos) << m.message;
}

TEST(CommandEvaluator, AHalfMegabyteLineDoesNotCrashTheRegex) {
  // One 500 KB line of digits after "time: " (a JSON document, a progress bar): libstdc++'s
  // regex would recurse once per digit and overflow the stack.
  const std::string long_line = "printf 'time: '; head -c 500000 /dev/zero | tr '\\0' 1; echo";
  CommandOptions o = quick();
  o.objective_regex = "time: ([0-9.]+) ms";
  CommandEvaluator e(make_space(), long_line + "; echo 'time: 2.5 ms'", o);
  Measurement m = e.evaluate(config(8, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 2.5);

  CommandEvaluator only_long(make_space(), long_line, o);
  m = only_long.evaluate(config(8, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("1 line longer than 4096 bytes not searched"), std::string::npos)
      << m.message.substr(0, 500);
}

TEST(CommandEvaluator, ACarriageReturnEndsALineForTheRegex) {
  CommandOptions o = quick();
  o.objective_regex = "^time: ([0-9.]+)$";
  CommandEvaluator e(make_space(), "printf 'step 1\\rtime: 4.5\\rstep 2\\n'", o);
  const Measurement m = e.evaluate(config(8, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 4.5);
}

TEST(CommandEvaluator, NonZeroExitFailsWithCodeAndStderr) {
  CommandEvaluator e(make_space(), "echo 12; echo 'bad block size {bs}' >&2; exit 3", quick());
  const Measurement m = e.evaluate(config(16, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("exited with code 3"), std::string::npos) << m.message;
  EXPECT_NE(m.message.find("bad block size 16"), std::string::npos) << m.message;
  EXPECT_FALSE(m.ok());
}

// A wrapper's convention for Kernel Tuner's failure classes (exported by those names).
TEST(CommandEvaluator, ExitCodesNameCompileFailuresAndInvalidConfigurations) {
  CommandEvaluator compile(make_space(), "echo 'nvcc: syntax error' >&2; exit 80", quick());
  const Measurement c = compile.evaluate(config(16, "fast"));
  EXPECT_EQ(c.status, TrialStatus::failed);
  EXPECT_EQ(c.message.rfind("CompilationFailedConfig: `", 0), 0u) << c.message;
  EXPECT_NE(c.message.find("exited with code 80"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("nvcc: syntax error"), std::string::npos) << c.message;

  CommandOptions twice = quick();
  twice.repeats = 2;
  CommandEvaluator invalid(make_space(), "exit 81", twice);
  const Measurement i = invalid.evaluate(config(16, "fast"));
  EXPECT_EQ(i.status, TrialStatus::invalid);
  EXPECT_EQ(i.message.rfind("InvalidConfig: run 1 of 2: `", 0), 0u) << i.message;

  // Any other code is a failure at run time, as before.
  CommandEvaluator other(make_space(), "exit 5", quick());
  const Measurement o = other.evaluate(config(16, "fast"));
  EXPECT_EQ(o.status, TrialStatus::failed);
  EXPECT_EQ(o.message.rfind("`exit 5` exited with code 5", 0), 0u) << o.message;
}

TEST(OutputMetrics, ReadsNameColonOrEqualsNumberLines) {
  const auto m = output_metrics(
      "GFLOP/s: 12.5\ntime: 0.4 ms\niterations=12\n  Elapsed time = 3e-3 s\r\n"
      "started 10:30:00\nnote: 3 of 5 passed\nbad: nan\n1x: 4\nscore: 7\nscore: 8\n");
  EXPECT_EQ(m.values, (std::vector<std::pair<std::string, double>>{{"GFLOP/s", 12.5},
                                                                   {"time", 0.4},
                                                                   {"iterations", 12.0},
                                                                   {"Elapsed time", 3e-3},
                                                                   {"score", 8.0}}));
  EXPECT_TRUE(m.dropped.empty());
}

TEST(OutputMetrics, KeepsTheFirstNamesAndShortNames) {
  std::string out = std::string(kMaxMetricNameBytes + 1, 'n') + ": 1\n";
  for (std::size_t i = 0; i <= kMaxOutputMetrics; ++i) out += "m" + std::to_string(i) + ": 1\n";
  const auto m = output_metrics(out);
  EXPECT_EQ(m.values.size(), kMaxOutputMetrics);
  EXPECT_EQ(m.dropped, (std::set<std::string>{std::string(kMaxMetricNameBytes + 1, 'n'),
                                              "m" + std::to_string(kMaxOutputMetrics)}));
}

TEST(CommandEvaluator, OutputLinesAreMetricsAndOneMayBeTheObjective) {
  const std::string cmd = "echo 'GFLOP/s: {bs}.5'; echo 'time: 0.4 ms'; echo 'done 7'";
  // Without --objective the last number stays the objective; the lines are metrics.
  CommandEvaluator plain(make_space(), cmd, quick());
  const Measurement m = plain.evaluate(config(32, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.objective, 7.0);
  EXPECT_EQ(m.metrics.at("GFLOP/s"), 32.5);
  EXPECT_EQ(m.metrics.at("time"), 0.4);
  EXPECT_TRUE(m.metrics.contains("wall_seconds"));

  CommandOptions o = quick();
  o.objective_metric = "GFLOP/s";
  CommandEvaluator named(make_space(), cmd, o);
  EXPECT_EQ(named.evaluate(config(16, "fast")).objective, 16.5);
  // A program that does not print it fails, saying which line was expected.
  CommandEvaluator missing(make_space(), "echo 'GB/s: 3'", o);
  const Measurement none = missing.evaluate(config(16, "fast"));
  EXPECT_EQ(none.status, TrialStatus::failed);
  EXPECT_NE(none.message.find("no line 'GFLOP/s: NUMBER'"), std::string::npos) << none.message;

  o.objective_regex = "x(.*)";
  EXPECT_THROW(CommandEvaluator(make_space(), cmd, o), InvalidInput);
}

TEST(CommandEvaluator, MetricsPastTheLimitAreNamedInTheMessage) {
  CommandEvaluator e(make_space(), "for i in $(seq 40); do echo \"m$i: $i\"; done", quick());
  const Measurement m = e.evaluate(config(16, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.metrics.size(), kMaxOutputMetrics + 1);  // and wall_seconds
  EXPECT_NE(m.message.find("8 metric(s) of the output not kept"), std::string::npos) << m.message;
  EXPECT_NE(m.message.find("'m40'"), std::string::npos) << m.message;
}

TEST(CommandEvaluator, KilledBySignalFails) {
  CommandEvaluator e(make_space(), "kill -9 $$", quick());
  const Measurement m = e.evaluate(config(16, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("signal 9"), std::string::npos) << m.message;
}

TEST(CommandEvaluator, NoNumberInOutputFails) {
  CommandEvaluator e(make_space(), "echo hello world", quick());
  const Measurement m = e.evaluate(config(16, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("no number"), std::string::npos) << m.message;
  EXPECT_NE(m.message.find("hello world"), std::string::npos) << m.message;
}

TEST(CommandEvaluator, NanPrintedLastFails) {
  CommandEvaluator e(make_space(), "echo 'warm-up 1.5 ms'; echo 'time: -nan ms'", quick());
  const Measurement m = e.evaluate(config(16, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("the program printed -nan"), std::string::npos) << m.message;
}

TEST(CommandEvaluator, ResultOnStderrIsQuotedWithAHint) {
  CommandEvaluator e(make_space(), "echo 'time: 2.5 ms' >&2", quick());
  const Measurement m = e.evaluate(config(16, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("stdout was empty"), std::string::npos) << m.message;
  EXPECT_NE(m.message.find("stderr: time: 2.5 ms"), std::string::npos) << m.message;
  EXPECT_NE(m.message.find("2>&1"), std::string::npos) << m.message;
}

TEST(CommandEvaluator, MessagesFromBinaryOutputAreValidUtf8) {
  const std::string replacement = "\xEF\xBF\xBD";
  // Invalid bytes, a truncated sequence, an escape sequence and a carriage return, on stdout
  // (no number) and on stderr (non-zero exit).
  for (const char* command : {"printf 'bad \\377\\376 \\303 \\033[mred\\r more\\n'",
                              "printf 'caf\\303\\251 \\300\\257 \\033[m\\r more\\n' >&2; exit 2"}) {
    CommandEvaluator e(make_space(), command, quick());
    const Measurement m = e.evaluate(config(16, "fast"));
    EXPECT_EQ(m.status, TrialStatus::failed);
    EXPECT_NO_THROW((void)nlohmann::json(m.message).dump()) << m.message;
    EXPECT_NE(m.message.find(replacement), std::string::npos) << m.message;
    EXPECT_EQ(m.message.find_first_of("\x1b\r"), std::string::npos) << m.message;
  }
  CommandEvaluator valid(make_space(), "printf 'caf\\303\\251 \\316\\273\\n' >&2; exit 2", quick());
  const Measurement m = valid.evaluate(config(16, "fast"));
  EXPECT_NE(m.message.find("caf\xC3\xA9 \xCE\xBB"), std::string::npos) << m.message;
  EXPECT_EQ(m.message.find(replacement), std::string::npos) << m.message;
}

TEST(CommandEvaluator, TimeoutKillsTheWholeProcessGroup) {
  TempDir dir;
  // The background sleeper would keep the pipes open for 30 s if the group survived.
  CommandEvaluator e(make_space(), "sleep 30 & echo 1; sleep 30", quick(0.3));
  const auto start = std::chrono::steady_clock::now();
  const Measurement m = e.evaluate(config(16, "fast"));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(m.status, TrialStatus::timeout);
  EXPECT_NE(m.message.find("timed out after 0.3 s"), std::string::npos) << m.message;
  EXPECT_LT(took, 5.0);
}

TEST(CommandEvaluator, RepeatsGiveTheMedianInTheWorkingDirectory) {
  TempDir dir;
  CommandOptions o = quick();
  o.repeats = 3;
  o.working_directory = dir.path().string();
  // Prints 10, 20, 30 on successive runs, counting in a file of the working directory.
  CommandEvaluator e(make_space(),
                     "n=$(cat count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > count; "
                     "echo $((n * 10))",
                     o);
  const Measurement m = e.evaluate(config(8, "fast"));
  ASSERT_EQ(m.status, TrialStatus::ok) << m.message;
  EXPECT_EQ(m.raw, (std::vector<double>{10.0, 20.0, 30.0}));
  EXPECT_EQ(m.objective, 20.0);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "count"));
  // A run that fails among several is named, and the runs before it are kept.
  CommandEvaluator second_fails(make_space(),
                                "n=$(cat count2 2>/dev/null || echo 0); n=$((n + 1)); "
                                "echo $n > count2; test $n -ne 2 || exit 4; echo 1",
                                o);
  const Measurement failed = second_fails.evaluate(config(8, "fast"));
  EXPECT_EQ(failed.status, TrialStatus::failed);
  EXPECT_EQ(failed.message.rfind("run 2 of 3: `", 0), 0u) << failed.message;
  EXPECT_EQ(failed.raw, (std::vector<double>{1.0}));
}

TEST(CommandEvaluator, AWorkingDirectoryGoneStopsTheSweepInsteadOfFailingEveryTrial) {
  auto dir = std::make_unique<TempDir>();
  CommandOptions o = quick();
  o.working_directory = dir->path().string();
  CommandEvaluator e(make_space(), "echo 1", o);
  ASSERT_TRUE(e.evaluate(config(8, "fast")).ok());
  dir.reset();  // removed while the sweep runs
  try {
    (void)e.evaluate(config(16, "fast"));
    ADD_FAILURE() << "a command ran in a removed working directory";
  } catch (const EvaluatorUnavailable& error) {
    EXPECT_NE(std::string(error.what()).find(o.working_directory), std::string::npos)
        << error.what();
  }
}

// The same when the command runs where tunebase runs (the CLI's case) and that is removed.
TEST(CommandEvaluator, TheProcessesWorkingDirectoryGoneStopsTheSweep) {
  const auto before = std::filesystem::current_path();
  CommandEvaluator e(make_space(), "echo 1", quick());
  {
    auto dir = std::make_unique<TempDir>();
    std::filesystem::current_path(dir->path());
    ASSERT_TRUE(e.evaluate(config(8, "fast")).ok());
    dir.reset();
    EXPECT_THROW((void)e.evaluate(config(16, "fast")), EvaluatorUnavailable);
  }
  std::filesystem::current_path(before);
  EXPECT_TRUE(e.evaluate(config(16, "fast")).ok());
}

TEST(CommandEvaluator, NoFreeDescriptorStopsTheSweepInsteadOfFailingEveryTrial) {
  CommandEvaluator e(make_space(), "echo 1", quick());
  {
    const testing::NoFreeDescriptors exhausted;
    EXPECT_THROW((void)e.evaluate(config(8, "fast")), EvaluatorUnavailable);
  }
  EXPECT_TRUE(e.evaluate(config(8, "fast")).ok());
}

TEST(CommandEvaluator, ACommandStoppedWithTunebaseIsNoFailureOfItsConfiguration) {
  std::atomic<bool> stopping{false};
  CommandOptions o = quick();
  o.stopping = &stopping;
  CommandEvaluator e(make_space(), "kill -TERM $$", o);
  // Killed by its own doing while tunebase runs on: the configuration's failure.
  const Measurement m = e.evaluate(config(8, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("killed by signal 15"), std::string::npos) << m.message;
  // The same signal while tunebase is being stopped (it reached the whole group): no result.
  stopping = true;
  EXPECT_THROW((void)e.evaluate(config(8, "fast")), EvaluationInterrupted);
  for (const char* stopped : {"kill -INT $$", "kill -HUP $$", "kill -KILL $$", "exit 143"}) {
    CommandEvaluator other(make_space(), stopped, o);
    EXPECT_THROW((void)other.evaluate(config(8, "fast")), EvaluationInterrupted) << stopped;
  }
  // Other failures while stopping are the configuration's.
  CommandEvaluator failing(make_space(), "exit 3", o);
  EXPECT_EQ(failing.evaluate(config(8, "fast")).status, TrialStatus::failed);
}

TEST(CommandEvaluator, AProgramTheShellCannotRunAtTheFirstRunStopsTheSweep) {
  TempDir dir;
  const auto not_executable = dir.file("bench.sh");
  std::ofstream(not_executable) << "#!/bin/sh\necho 1\n";
  for (const std::string& command : {dir.file("nosuch") + " {bs}", not_executable + " {bs}",
                                     std::string("nosuch-program-xyz --bs {bs}")}) {
    CommandEvaluator e(make_space(), command, quick());
    try {
      const auto m = e.evaluate(config(8, "fast"));
      ADD_FAILURE() << command << " was stored as a trial: " << m.message;
    } catch (const EvaluatorUnavailable& error) {
      EXPECT_NE(std::string(error.what()).find("cannot be run"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("/bin/sh: "), std::string::npos) << error.what();
    }
  }
}

TEST(CommandEvaluator, AProgramThatExitsAsTheShellWouldIsStillATrial) {
  TempDir dir;
  const auto marker = dir.file("ran");
  // Exits 127 after it ran once (its binary removed meanwhile, or its own exit code): the
  // configuration's failure, not the set-up's.
  CommandEvaluator later(
      make_space(),
      "if [ -e " + marker + " ]; then nosuch-program-xyz; else touch " + marker + "; echo 1; fi",
      quick());
  EXPECT_TRUE(later.evaluate(config(8, "fast")).ok());
  const Measurement m = later.evaluate(config(16, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("exited with code 127"), std::string::npos) << m.message;
  // 127 with a message that is not the shell's.
  CommandEvaluator own(make_space(), "echo 'input: not found' >&2; exit 127", quick());
  EXPECT_EQ(own.evaluate(config(8, "fast")).status, TrialStatus::failed);
  // A program a parameter names, which this configuration only may lack.
  CommandEvaluator named(make_space(), "nosuch-{bs}-xyz", quick());
  EXPECT_EQ(named.evaluate(config(8, "fast")).status, TrialStatus::failed);
}

TEST(CommandEvaluator, ANegativeTimeIsAFailedTrial) {
  CommandOptions ms = quick();
  ms.unit = "ms";
  CommandEvaluator time(make_space(), "echo -2.5", ms);
  const Measurement m = time.evaluate(config(8, "fast"));
  EXPECT_EQ(m.status, TrialStatus::failed);
  EXPECT_NE(m.message.find("the output was a negative time"), std::string::npos) << m.message;
  // A plain number, or another unit, may be negative.
  CommandEvaluator plain(make_space(), "echo -2.5", quick());
  EXPECT_EQ(plain.evaluate(config(8, "fast")).objective, -2.5);
  CommandOptions score = quick();
  score.unit = "dB";
  CommandEvaluator other(make_space(), "echo -2.5", score);
  EXPECT_EQ(other.evaluate(config(8, "fast")).objective, -2.5);
  // Zero or positive times are times.
  CommandEvaluator zero(make_space(), "echo 0", ms);
  EXPECT_TRUE(zero.evaluate(config(8, "fast")).ok());
}

TEST(CommandEvaluator, InvalidConfigurationIsATrial) {
  CommandEvaluator e(make_space(), "echo {bs}", quick());
  const Measurement m = e.evaluate(config(7, "fast"));
  EXPECT_EQ(m.status, TrialStatus::invalid);
}

TEST(RunCommand, CapturesBothStreamsAndLargeOutput) {
  const CommandResult r = run_command("seq 1 200000; echo oops >&2; exit 4", {"EXTRA=1"}, 10.0);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_EQ(last_number(r.out), 200000.0);
  const CommandResult env = run_command("echo $EXTRA", {"EXTRA=42"}, 10.0);
  EXPECT_EQ(env.out, "42\n");
}

}  // namespace
}  // namespace tunebase
