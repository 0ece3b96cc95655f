// Readers of Kernel Tuner cache files and T4 results, on small files written here.
#include "core/measurements.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

using ::testing::HasSubstr;

// zlib windowBits for a gzip wrapper (15-bit window + 16), as gzip(1) writes.
constexpr int kGzipWindowBits = 15 + 16;
constexpr int kZlibMemLevel = 8;

std::string gzip(const std::string& text) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, kGzipWindowBits, kZlibMemLevel,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  std::string out(deflateBound(&zs, text.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Kernel Tuner cache with one success (with a GFLOP/s metric) and two failures. The key
/// "32,2,1.0" is written the way Python's str() writes a float.
const std::string kKernelTunerCache = R"({
  "device_name": "Test GPU", "kernel_name": "vector_add", "problem_size": [1024],
  "tune_params_keys": ["block_size_x", "tile", "scale"],
  "tune_params": {"block_size_x": [16, 32], "tile": [1, 2], "scale": [0.5, 1.0]},
  "objective": "time",
  "cache": {
    "16,1,0.5": {"block_size_x": 16, "tile": 1, "scale": 0.5, "time": 1.5,
                 "times": [1.25, 1.75], "GFLOP/s": 100.0, "compile_time": 200.0,
                 "verification_time": 0, "benchmark_time": 3.0},
    "32,2,1.0": {"block_size_x": 32, "tile": 2, "scale": 1.0, "time": "CompilationFailedConfig"},
    "16,2,1.0": {"block_size_x": 16, "tile": 2, "scale": 1.0, "time": "RuntimeFailedConfig"}
  }})";

/// T4 results in seconds, parameters in a non-alphabetical order, every invalidity kind.
const std::string kT4Results = R"({
  "schema_version": "1.0.0",
  "metadata": {"timeunit": "seconds"},
  "results": [
    {"configuration": {"zeta": 32, "alpha": "fast"}, "invalidity": "correct", "correctness": 1,
     "times": {"compilation": 0.5, "runtimes": [0.002, 0.004]},
     "measurements": [{"name": "time", "value": 0.003, "unit": "s"},
                      {"name": "GB/s", "value": 250.0, "unit": ""}]},
    {"configuration": {"zeta": 8, "alpha": "fast"}, "invalidity": "compile", "correctness": 0,
     "times": {"compilation": 1.0},
     "measurements": [{"name": "time", "value": "CompilationFailedConfig", "unit": ""}]},
    {"configuration": {"zeta": 16, "alpha": "slow"}, "invalidity": "runtime", "correctness": 0,
     "times": {}},
    {"configuration": {"zeta": 16, "alpha": "fast"}, "invalidity": "timeout", "correctness": 0,
     "times": {}},
    {"configuration": {"zeta": 8, "alpha": "slow"}, "invalidity": "correct", "correctness": 1,
     "times": {"runtimes": [0.001, 0.003]}}
  ]})";

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InvalidInput";
  return {};
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse_measurements(text, "broken.json"); });
}

// A cache that says which way its objective is better (tunebase's export of a study of GFLOP/s)
// is read as that objective: its time is a metric, and an entry without the objective fails
// only when its time names a failure.
TEST(KernelTunerCache, ReadsTheObjectiveItSaysIsBetterHigher) {
  auto rate = nlohmann::json::parse(kKernelTunerCache);
  rate["objective"] = "GFLOP/s";
  rate["objective_higher_is_better"] = true;
  const auto d = parse_measurements(rate.dump(), "rate.json");
  EXPECT_EQ(d.objective, "GFLOP/s");
  EXPECT_TRUE(d.maximize);
  EXPECT_TRUE(d.notes.empty());
  ASSERT_EQ(d.entries.size(), 3u);
  EXPECT_EQ(d.entries[0].result.objective, 100.0);
  EXPECT_EQ(d.entries[0].result.metrics["time"], 1.5);
  EXPECT_TRUE(d.entries[0].result.raw.empty());  // its times are of time, not of GFLOP/s
  EXPECT_EQ(d.entries[1].result.status, TrialStatus::failed);
  // Refused, saying what is wrong.
  rate["cache"]["16,1,0.5"].erase("GFLOP/s");
  EXPECT_EQ(parse_error(rate.dump()),
            "broken.json: cache entry \"16,1,0.5\" has no number in \"GFLOP/s\", the cache's "
            "objective, and no \"time\" naming its failure (such as \"RuntimeFailedConfig\")");
  rate["objective_higher_is_better"] = "yes";
  EXPECT_EQ(parse_error(rate.dump()),
            "broken.json: \"objective_higher_is_better\" must be true or false, beside the name "
            "of the entries' field it is about in \"objective\"; got string \"yes\" and "
            "\"objective\": string \"GFLOP/s\"");
  rate["objective"] = "time";
  rate["objective_higher_is_better"] = true;
  EXPECT_EQ(parse_error(rate.dump()),
            "broken.json: \"objective_higher_is_better\" is true for the objective \"time\"; a "
            "time is better lower");
}

TEST(KernelTunerCache, ReadsSuccessesFailuresAndMetrics) {
  const MeasuredDataset d = parse_measurements(kKernelTunerCache, "cache.json");
  EXPECT_EQ(d.format, "kernel_tuner");
  EXPECT_TRUE(d.notes.empty());
  // Tuned by Kernel Tuner for another objective: its times are read all the same, with a note.
  auto rate = nlohmann::json::parse(kKernelTunerCache);
  rate["objective"] = "GFLOP/s";
  const auto by_rate = parse_measurements(rate.dump(), "rate.json");
  ASSERT_EQ(by_rate.notes.size(), 1u);
  EXPECT_THAT(by_rate.notes[0], HasSubstr("the cache names its objective \"GFLOP/s\"; tunebase "
                                          "reads each entry's \"time\""));
  EXPECT_DOUBLE_EQ(by_rate.entries[0].result.objective, d.entries[0].result.objective);
  EXPECT_EQ(by_rate.objective, "time");
  EXPECT_EQ(d.device_name, "Test GPU");
  EXPECT_EQ(d.kernel_name, "vector_add");
  EXPECT_EQ(d.problem_size, nlohmann::json::array({1024}));
  ASSERT_EQ(d.space.dimension(), 3u);
  EXPECT_EQ(d.space.parameter(0).name, "block_size_x");
  EXPECT_EQ(d.space.parameter(2).name, "scale");
  EXPECT_TRUE(d.space.constraints().empty());
  ASSERT_EQ(d.entries.size(), 3u);

  int ok = 0;
  int failed = 0;
  for (const auto& e : d.entries) {
    const std::string key = d.space.key(e.config);
    if (key == "16,1,0.5") {
      ++ok;
      EXPECT_TRUE(e.result.ok());
      EXPECT_DOUBLE_EQ(e.result.objective, 1.5);
      EXPECT_EQ(e.result.raw, (std::vector<double>{1.25, 1.75}));
      EXPECT_DOUBLE_EQ(e.result.metrics.at("GFLOP/s").get<double>(), 100.0);
      EXPECT_FALSE(e.result.metrics.contains("time"));
      EXPECT_FALSE(e.result.metrics.contains("block_size_x"));
      // compile + verification + benchmark time, milliseconds -> seconds
      EXPECT_DOUBLE_EQ(e.result.cost_seconds, 0.203);
    } else {
      ++failed;
      EXPECT_EQ(e.result.status, TrialStatus::failed);
      EXPECT_FALSE(e.result.ok());
      EXPECT_TRUE(std::isnan(e.result.objective));
      EXPECT_EQ(e.result.message,
                key == "32,2,1.0" ? "CompilationFailedConfig" : "RuntimeFailedConfig");
    }
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(failed, 2);
}

TEST(KernelTunerCache, AcceptsIntegralFloatKeysWrittenEitherWay) {
  std::string text = kKernelTunerCache;
  const auto at = text.find("\"32,2,1.0\"");
  text.replace(at, 10, "\"32,2,1\"");
  EXPECT_EQ(parse_measurements(text, "cache.json").entries.size(), 3u);
}

// A boolean tune parameter: Kernel Tuner keys its entries "32,True" (Python's str()), and its
// values read as 1 and 0.
TEST(KernelTunerCache, BooleanValuesAndTheirPythonKeysAreRead) {
  const std::string text = R"({"device_name": "gpu", "kernel_name": "k",
    "tune_params_keys": ["bx", "flag"], "tune_params": {"bx": [32], "flag": [true, false]},
    "cache": {"32,True": {"bx": 32, "flag": true, "time": 1.5, "times": [1.5]},
              "32,False": {"bx": 32, "flag": false, "time": 1.0, "times": [1.0]}}})";
  const auto d = parse_measurements(text, "cache.json");
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_EQ(d.entries[0].config[1], Value(std::int64_t{1}));
  EXPECT_EQ(d.entries[1].config[1], Value(std::int64_t{0}));
  // Keys whose booleans disagree with their entries' values (swapped) are still refused.
  std::string wrong = text;
  wrong.replace(wrong.find("\"32,True\""), 9, "\"32,Swap\"");
  wrong.replace(wrong.find("\"32,False\""), 10, "\"32,True\"");
  wrong.replace(wrong.find("\"32,Swap\""), 9, "\"32,False\"");
  EXPECT_THAT(parse_error(wrong), HasSubstr("does not match its values"));
}

// Keys as Kernel Tuner writes them, Python's str() of each value: a string holding a comma or
// starting with a space, next to a real that Python writes positionally.
TEST(KernelTunerCache, KeysOfStringsWithCommasAndSpacesAreRead) {
  const std::string text = R"({"device_name": "gpu", "kernel_name": "k",
    "tune_params_keys": ["eps", "flags"],
    "tune_params": {"eps": [0.0001], "flags": ["-a,-b", " sp"]},
    "cache": {
      "0.0001,-a,-b": {"eps": 0.0001, "flags": "-a,-b", "time": 1.0, "times": [1.0]},
      "0.0001, sp": {"eps": 0.0001, "flags": " sp", "time": "InvalidConfig", "times": [3.0]}}})";
  const auto d = parse_measurements(text, "cache.json");
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_EQ(d.entries[1].result.status, TrialStatus::invalid);
  EXPECT_EQ(d.entries[1].result.raw, std::vector<double>{3.0}) << "a failure keeps its times";
}

// Kernel Tuner writes its cache entry by entry, as json.dumps(header)[:-3] and then
// "key": {entry}, per configuration; an interrupted run leaves it open.
const std::string kOpenCacheHeader = R"({
"device_name": "Test GPU",
"kernel_name": "vector_add",
"tune_params_keys": ["block_size_x"],
"tune_params": {"block_size_x": [16, 32]},
"cache": {
)";

TEST(KernelTunerCache, AnOpenCacheIsReadAsKernelTunerReadsIt) {
  const std::string open = kOpenCacheHeader +
                           R"("16": {"block_size_x": 16, "time": 1.5},
"32": {"block_size_x": 32, "time": "RuntimeFailedConfig"},
)";
  const MeasuredDataset d = parse_measurements(open, "open.json");
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_DOUBLE_EQ(d.entries[0].result.objective, 1.5);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_THAT(d.notes[0], HasSubstr("not closed"));
  // No trailing comma, and a gzip of it, read alike.
  EXPECT_EQ(
      parse_measurements(gzip(open.substr(0, open.rfind(','))), "open.json.gz").entries.size(), 2u);
  // A closed cache is read strictly and has no note.
  EXPECT_TRUE(parse_measurements(kKernelTunerCache, "cache.json").notes.empty());
  // An entry cut in the middle is not what closing explains: the parser's error stands.
  const std::string cut = kOpenCacheHeader + R"("16": {"block_size_x": 16, "ti)";
  EXPECT_THAT(parse_error(cut), HasSubstr("is not valid JSON"));
  // Neither is a T4 file cut short.
  EXPECT_THAT(parse_error(R"({"schema_version": "1.0.0", "results": [)"),
              HasSubstr("is not valid JSON"));
}

TEST(KernelTunerCache, PythonNanAndInfinityAreReadAsNull) {
  std::string text = kKernelTunerCache;
  text.replace(text.find("\"GFLOP/s\": 100.0"), 16, "\"GFLOP/s\": NaN, \"power\": -Infinity");
  // The same words inside strings stay as they are.
  text.replace(text.find("\"vector_add\""), 12, "\"NaN Infinity\"");
  const MeasuredDataset d = parse_measurements(text, "nan.json");
  EXPECT_EQ(d.kernel_name, "NaN Infinity");
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_THAT(d.notes[0], HasSubstr("2 NaN or Infinity"));
  bool seen = false;
  for (const auto& e : d.entries) {
    if (!e.result.ok()) continue;
    seen = true;
    EXPECT_TRUE(e.result.metrics.at("GFLOP/s").is_null());
    EXPECT_TRUE(e.result.metrics.at("power").is_null());
    EXPECT_DOUBLE_EQ(e.result.objective, 1.5);
  }
  EXPECT_TRUE(seen);
  // A NaN time is no measurement: refused, naming the entry.
  std::string nan_time = kKernelTunerCache;
  nan_time.replace(nan_time.find("\"time\": 1.5"), 11, "\"time\": NaN");
  EXPECT_THAT(parse_error(nan_time), HasSubstr("\"time\" must be a number"));
  EXPECT_THAT(parse_error(nan_time), HasSubstr("got null (NaN and Infinity read as null)"));
}

TEST(KernelTunerCache, EntriesKeepTheFileOrder) {
  // The order Kernel Tuner measured them in, not the keys sorted.
  const MeasuredDataset d = parse_measurements(kKernelTunerCache, "cache.json");
  ASSERT_EQ(d.entries.size(), 3u);
  EXPECT_EQ(d.space.key(d.entries[0].config), "16,1,0.5");
  EXPECT_EQ(d.space.key(d.entries[1].config), "32,2,1.0");
  EXPECT_EQ(d.space.key(d.entries[2].config), "16,2,1.0");
}

TEST(KernelTunerCache, AConfigurationIsMeasuredOnce) {
  // The same values under a key written another way.
  std::string text = kKernelTunerCache;
  text.replace(text.find("\"16,2,1.0\""), 10, "\"16, 1, 0.5\"");
  const std::string values = "\"tile\": 2, \"scale\": 1.0, \"time\": \"Runtime";
  text.replace(text.find(values), values.size(),
               "\"tile\": 1, \"scale\": 0.5, \"time\": \"Runtime");
  EXPECT_THAT(
      parse_error(text),
      HasSubstr("cache entries \"16,1,0.5\" and \"16, 1, 0.5\" are the same configuration"));
  // One key twice (the JSON parser would keep the last silently).
  std::string twice = kKernelTunerCache;
  twice.replace(twice.find("\"16,2,1.0\": {\"block_size_x\": 16, \"tile\": 2"), 42,
                "\"32,2,1.0\": {\"block_size_x\": 32, \"tile\": 2");
  EXPECT_THAT(parse_error(twice), HasSubstr("lists the key \"32,2,1.0\" twice"));
}

TEST(KernelTunerCache, OldFailureMarkIsAFailure) {
  std::string text = kKernelTunerCache;
  text.replace(text.find("\"CompilationFailedConfig\""), 25, "1e+20");
  const MeasuredDataset d = parse_measurements(text, "old.json");
  ASSERT_EQ(d.entries.size(), 3u);
  EXPECT_EQ(d.entries[1].result.status, TrialStatus::failed);
  EXPECT_THAT(d.entries[1].result.message, HasSubstr("mark of a failed configuration"));
}

TEST(KernelTunerCache, RepeatedTimesAndCostsAreNotNegative) {
  std::string text = kKernelTunerCache;
  text.replace(text.find("[1.25, 1.75]"), 12, "[-5, 1.75]");
  EXPECT_THAT(parse_error(text),
              HasSubstr("cache entry \"16,1,0.5\": \"times\" must be times of 0 or more, but "
                        "holds number -5"));
  text = kKernelTunerCache;
  text.replace(text.find("\"compile_time\": 200.0"), 21, "\"compile_time\": -2");
  EXPECT_THAT(parse_error(text), HasSubstr("cache entry \"16,1,0.5\": \"compile_time\" must be a "
                                           "time of 0 ms or more, got -2"));
}

TEST(BrokenFiles, AStudyExportIsNamedAsSuch) {
  EXPECT_THAT(parse_error(R"({"format": "tunebase-study", "format_version": 1, "trials": []})"),
              HasSubstr("is a tunebase study export"));
}

TEST(T4Results, ATimeMeasurementsOwnUnitWins) {
  const auto file = [](const std::string& unit) {
    return R"({"schema_version": "1.0.0", "metadata": {"timeunit": "seconds"}, "results": [
      {"configuration": {"bs": 32}, "invalidity": "correct",
       "times": {"runtimes": [0.0025]},
       "measurements": [{"name": "time", "value": 2500, "unit": ")" +
           unit + R"("}]}]})";
  };
  const MeasuredDataset us = parse_measurements(file("us"), "us.json");
  EXPECT_DOUBLE_EQ(us.entries[0].result.objective, 2.5);
  EXPECT_DOUBLE_EQ(us.entries[0].result.raw[0], 2.5);  // runtimes in the metadata's unit
  // No unit of its own: the metadata's.
  EXPECT_DOUBLE_EQ(parse_measurements(file(""), "s.json").entries[0].result.objective, 2.5e6);
  EXPECT_THAT(parse_error(file("furlongs")),
              HasSubstr("results[0]: the unit of the time measurement, \"furlongs\" is not a time "
                        "unit; allowed: seconds, milliseconds, microseconds, nanoseconds"));
  EXPECT_TRUE(us.notes.empty());
  // No unit anywhere: milliseconds, with a note.
  const MeasuredDataset unnamed = parse_measurements(
      R"({"schema_version": "1.0.0", "results": [{"configuration": {"bs": 32},
          "invalidity": "correct", "measurements": [{"name": "time", "value": 2.5}]}]})",
      "none.json");
  EXPECT_DOUBLE_EQ(unnamed.entries[0].result.objective, 2.5);
  ASSERT_EQ(unnamed.notes.size(), 1u);
  EXPECT_THAT(unnamed.notes[0], HasSubstr("read as milliseconds"));
}

TEST(T4Results, ANegativeTimeIsRefusedWithT4sWayOfMarkingAFailure) {
  const std::string text = R"({"schema_version": "1.0.0", "results": [
      {"configuration": {"bs": 32}, "invalidity": "correct",
       "measurements": [{"name": "time", "value": -1, "unit": "ms"}]}]})";
  EXPECT_THAT(parse_error(text), HasSubstr("(a T4 result that failed has an \"invalidity\" other "
                                           "than \"correct\")"));
}

TEST(T4Results, ResultsThatNameAnotherObjectiveAreReadByTheirTimeWithANote) {
  EXPECT_TRUE(parse_measurements(kT4Results, "results_T4.json").notes.empty());
  auto t4 = nlohmann::json::parse(kT4Results);
  for (auto& r : t4["results"]) r["objectives"] = {"time"};
  EXPECT_TRUE(parse_measurements(t4.dump(), "results_T4.json").notes.empty());
  for (auto& r : t4["results"]) r["objectives"] = {"GB/s"};
  const auto by_rate = parse_measurements(t4.dump(), "rate_T4.json");
  ASSERT_EQ(by_rate.notes.size(), 1u);
  EXPECT_THAT(by_rate.notes[0], HasSubstr("the results name their objectives [\"GB/s\"]; tunebase "
                                          "reads each result's \"time\""));
  EXPECT_DOUBLE_EQ(by_rate.entries[0].result.objective, 3.0);
}

TEST(T4Results, AConfigurationIsMeasuredOnce) {
  const std::string text = R"({"schema_version": "1.0.0", "results": [
      {"configuration": {"bs": 32}, "invalidity": "correct", "times": {"runtimes": [1.0]}},
      {"configuration": {"bs": 64}, "invalidity": "compile"},
      {"configuration": {"bs": 32.0}, "invalidity": "correct", "times": {"runtimes": [2.0]}}]})";
  EXPECT_THAT(parse_error(text), HasSubstr("results[0] and results[2] are the same configuration "
                                           "{\"bs\":32}; a configuration is measured once"));
}

TEST(T4Results, ReadsStatusesUnitsAndParameterOrder) {
  const MeasuredDataset d = parse_measurements(kT4Results, "results_T4.json");
  EXPECT_EQ(d.format, "t4");
  ASSERT_EQ(d.space.dimension(), 2u);
  // The file's order, not the alphabetical one.
  EXPECT_EQ(d.space.parameter(0).name, "zeta");
  EXPECT_EQ(d.space.parameter(1).name, "alpha");
  // Values seen, sorted numerically (not as text: 8 < 16 < 32).
  const auto& zeta = d.space.parameter(0).values;
  ASSERT_EQ(zeta.size(), 3u);
  EXPECT_EQ(to_string(zeta[0]), "8");
  EXPECT_EQ(to_string(zeta[1]), "16");
  EXPECT_EQ(to_string(zeta[2]), "32");
  EXPECT_EQ(d.space.parameter(1).kind, ParamKind::categorical);

  ASSERT_EQ(d.entries.size(), 5u);
  const auto& first = d.entries[0].result;
  ASSERT_TRUE(first.ok());
  // seconds -> milliseconds, as in Kernel Tuner caches
  EXPECT_DOUBLE_EQ(first.objective, 3.0);
  EXPECT_DOUBLE_EQ(first.raw[0], 2.0);
  EXPECT_DOUBLE_EQ(first.raw[1], 4.0);
  EXPECT_DOUBLE_EQ(first.metrics.at("GB/s").get<double>(), 250.0);
  EXPECT_DOUBLE_EQ(first.metrics.at("compile_time").get<double>(), 500.0);

  EXPECT_EQ(d.entries[1].result.status, TrialStatus::failed);
  EXPECT_EQ(d.entries[1].result.message, "CompilationFailedConfig");
  EXPECT_EQ(d.entries[2].result.status, TrialStatus::failed);
  EXPECT_THAT(d.entries[2].result.message, HasSubstr("runtime"));
  EXPECT_EQ(d.entries[3].result.status, TrialStatus::timeout);
  // No time measurement: the mean of the runtimes, as Kernel Tuner computes time.
  ASSERT_TRUE(d.entries[4].result.ok());
  EXPECT_DOUBLE_EQ(d.entries[4].result.objective, 2.0);
}

TEST(Gzip, RoundTripFromBytesAndFiles) {
  const std::string compressed = gzip(kKernelTunerCache);
  ASSERT_NE(compressed, kKernelTunerCache);
  EXPECT_EQ(gunzip_if_needed(compressed, "x.gz"), kKernelTunerCache);
  EXPECT_EQ(gunzip_if_needed(kKernelTunerCache, "x.json"), kKernelTunerCache);

  const MeasuredDataset from_bytes = parse_measurements(compressed, "upload");
  EXPECT_EQ(from_bytes.entries.size(), 3u);
  EXPECT_EQ(from_bytes.kernel_name, "vector_add");

  testing::TempDir dir;
  // Detected by the magic bytes, whatever the name says.
  const std::string misnamed = dir.file("cache.json");
  write_file(misnamed, compressed);
  EXPECT_EQ(read_maybe_gzipped(misnamed), kKernelTunerCache);
  EXPECT_EQ(read_measurements(misnamed).entries.size(), 3u);
  // The limit is the caller's: a matrix file is read whatever its size, measurements are not.
  EXPECT_THROW(read_maybe_gzipped(misnamed, 10), InvalidInput);
  EXPECT_EQ(read_maybe_gzipped(misnamed, std::numeric_limits<std::size_t>::max()),
            kKernelTunerCache);

  const std::string t4 = dir.file("results_T4.json.gz");
  write_file(t4, gzip(kT4Results));
  EXPECT_EQ(read_measurements(t4).entries.size(), 5u);
}

TEST(Gzip, ConcatenatedMembersDecompressInTurn) {
  const std::string half = kKernelTunerCache.substr(0, kKernelTunerCache.size() / 2);
  const std::string rest = kKernelTunerCache.substr(half.size());
  EXPECT_EQ(gunzip_if_needed(gzip(half) + gzip(rest), "two.gz"), kKernelTunerCache);
}

TEST(BrokenFiles, TruncatedGzipSaysSo) {
  const std::string compressed = gzip(kKernelTunerCache);
  for (std::size_t keep : {compressed.size() / 2, compressed.size() - 4, std::size_t{10}}) {
    const std::string message =
        error_of([&] { parse_measurements(compressed.substr(0, keep), "gemm/A100.json.gz"); });
    EXPECT_THAT(message, HasSubstr("gemm/A100.json.gz")) << keep;
    EXPECT_THAT(message, HasSubstr("gzip stream is truncated")) << keep;
  }
}

TEST(BrokenFiles, AGzipBombStopsAtTheLimit) {
  // 8 MiB of spaces compress to a few KiB; with a 4 MiB limit inflating stops, with a message.
  const std::string bomb = gzip(std::string(8u << 20, ' ') + kKernelTunerCache);
  ASSERT_LT(bomb.size(), 64u << 10);
  const std::string message = error_of([&] { parse_measurements(bomb, "bomb.json.gz", 4u << 20); });
  EXPECT_THAT(message, HasSubstr("bomb.json.gz: decompresses to more than 4 MiB of JSON"));
  const std::string plain(5u << 20, ' ');
  EXPECT_THAT(error_of([&] { parse_measurements(plain, "big.json", 4u << 20); }),
              HasSubstr("big.json: holds more than 4 MiB of JSON"));
  // Under the limit the same file reads.
  EXPECT_FALSE(parse_measurements(bomb, "bomb.json.gz", 16u << 20).entries.empty());
}

TEST(BrokenFiles, CorruptGzipSaysSo) {
  std::string compressed = gzip(kKernelTunerCache);
  for (std::size_t i = 20; i < 40; ++i) compressed[i] = static_cast<char>(compressed[i] ^ 0x5a);
  const std::string message = error_of([&] { parse_measurements(compressed, "c.json.gz"); });
  EXPECT_THAT(message, HasSubstr("c.json.gz"));
  EXPECT_THAT(message, HasSubstr("gzip stream is corrupt"));
}

TEST(BrokenFiles, NotJsonGivesThePosition) {
  const std::string text = "{\"cache\": {\"1\": {\"time\": 1.0,}}}";
  try {
    parse_measurements(text, "broken.json");
    FAIL() << "expected ParseError";
  } catch (const ParseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("broken.json is not valid JSON"));
    EXPECT_THAT(e.what(), HasSubstr("line 1, column"));
    EXPECT_EQ(e.position(), text.find(",}") + 1);  // the '}' where a key should be
  }
  // Nothing at all is said as such, not as JSON that ends at its first byte.
  EXPECT_THAT(parse_error(""), HasSubstr("is empty (no JSON in it)"));
  EXPECT_THAT(parse_error(" \n"), HasSubstr("is empty (only white space, no JSON)"));
  EXPECT_THAT(parse_error("[1, 2]"), HasSubstr("expected a JSON object"));
  EXPECT_THAT(parse_error(R"({"name": "x"})"), HasSubstr("neither a Kernel Tuner cache file"));
}

TEST(BrokenFiles, MissingKeysAreNamed) {
  nlohmann::json j = nlohmann::json::parse(kKernelTunerCache);
  for (const char* key : {"cache", "tune_params", "tune_params_keys"}) {
    nlohmann::json broken = j;
    broken.erase(key);
    const std::string message = parse_error(broken.dump());
    EXPECT_THAT(message, HasSubstr("broken.json"));
    EXPECT_THAT(message, HasSubstr(std::string("\"") + key + "\"")) << message;
  }
  nlohmann::json no_time = j;
  no_time["cache"]["16,1,0.5"].erase("time");
  EXPECT_THAT(parse_error(no_time.dump()), HasSubstr("has no \"time\""));
  nlohmann::json no_param = j;
  no_param["cache"]["16,1,0.5"].erase("tile");
  EXPECT_THAT(parse_error(no_param.dump()), HasSubstr("no value for parameter 'tile'"));

  nlohmann::json t4 = nlohmann::json::parse(kT4Results);
  t4["results"][2]["configuration"].erase("alpha");
  EXPECT_THAT(parse_error(t4.dump()), HasSubstr("results[2]: configuration has no value for "
                                                "parameter 'alpha'"));
  nlohmann::json t4_results = nlohmann::json::parse(kT4Results);
  t4_results.erase("results");
  EXPECT_THAT(parse_error(t4_results.dump()), HasSubstr("\"results\""));
}

TEST(BrokenFiles, KeyThatDoesNotMatchItsEntry) {
  nlohmann::json j = nlohmann::json::parse(kKernelTunerCache);
  j["cache"]["32,1,0.5"] = j["cache"]["16,1,0.5"];
  const std::string message = parse_error(j.dump());
  EXPECT_THAT(message, HasSubstr("cache entry \"32,1,0.5\" does not match its values"));
  EXPECT_THAT(message, HasSubstr("16,1,0.5"));
}

TEST(BrokenFiles, ValueOutsideTuneParams) {
  nlohmann::json j = nlohmann::json::parse(kKernelTunerCache);
  j["cache"]["64,1,0.5"] = j["cache"]["16,1,0.5"];
  j["cache"]["64,1,0.5"]["block_size_x"] = 64;
  const std::string message = parse_error(j.dump());
  EXPECT_THAT(message, HasSubstr("value 64 of parameter 'block_size_x' is not in tune_params"));
  EXPECT_THAT(message, HasSubstr("allowed: 16, 32"));
}

TEST(BrokenFiles, WrongTypes) {
  nlohmann::json j = nlohmann::json::parse(kKernelTunerCache);
  {
    nlohmann::json b = j;
    b["cache"]["16,1,0.5"]["time"] = nlohmann::json::array({1.0});
    EXPECT_THAT(parse_error(b.dump()), HasSubstr("\"time\" must be a number"));
  }
  {
    // A number in quotes is no failure's name: a broken file, not a failed configuration.
    nlohmann::json b = j;
    b["cache"]["16,1,0.5"]["time"] = "1.5";
    EXPECT_THAT(parse_error(b.dump()),
                HasSubstr("\"time\" is the string \"1.5\"; a time is a number (milliseconds)"));
  }
  {
    nlohmann::json b = j;
    b["cache"]["16,1,0.5"]["times"] = {1.0, "fast"};
    EXPECT_THAT(parse_error(b.dump()), HasSubstr("must be a list of numbers"));
  }
  {
    nlohmann::json b = j;
    b["tune_params_keys"] = "block_size_x";
    EXPECT_THAT(parse_error(b.dump()), HasSubstr("\"tune_params_keys\" must be"));
  }
  {
    nlohmann::json b = j;
    b["cache"] = nlohmann::json::array();
    EXPECT_THAT(parse_error(b.dump()), HasSubstr("\"cache\" must be an object"));
  }
  {
    nlohmann::json b = j;
    // true and false are Python's 1 and 0 (read as those), a list is no value.
    b["cache"]["16,1,0.5"]["tile"] = nlohmann::json::array({1});
    EXPECT_THAT(parse_error(b.dump()),
                HasSubstr("parameter 'tile' must be a number, a string or true/false"));
  }
  {
    nlohmann::json b = j;
    b["device_name"] = 7;
    EXPECT_THAT(parse_error(b.dump()), HasSubstr("\"device_name\" must be a string"));
  }
  nlohmann::json t4 = nlohmann::json::parse(kT4Results);
  {
    nlohmann::json b = t4;
    b["results"][0]["invalidity"] = "exploded";
    const std::string message = parse_error(b.dump());
    EXPECT_THAT(message, HasSubstr("results[0]: unknown invalidity \"exploded\""));
    EXPECT_THAT(message, HasSubstr("allowed: correct, compile"));
  }
  {
    nlohmann::json b = t4;
    b["results"][0]["measurements"][0]["value"] = nullptr;
    EXPECT_THAT(parse_error(b.dump()), HasSubstr("\"time\" measurement is null"));
  }
  {
    nlohmann::json b = t4;
    b["schema_version"] = "2.0.0";
    EXPECT_THAT(parse_error(b.dump()), HasSubstr("not supported"));
  }
}

TEST(BrokenFiles, TimesMustBePositiveAndAFileMustHoldSome) {
  nlohmann::json j = nlohmann::json::parse(kKernelTunerCache);
  for (double bad : {-5.0, 0.0}) {
    nlohmann::json b = j;
    b["cache"]["16,1,0.5"]["time"] = bad;
    EXPECT_THAT(parse_error(b.dump()), HasSubstr("\"time\" must be a positive number"));
  }
  nlohmann::json t4 = nlohmann::json::parse(kT4Results);
  t4["results"][0]["measurements"][0]["value"] = -0.003;
  EXPECT_THAT(parse_error(t4.dump()), HasSubstr("results[0]"));

  nlohmann::json empty = j;
  empty["cache"] = nlohmann::json::object();
  EXPECT_THAT(parse_error(empty.dump()), HasSubstr("holds no measurements"));
}

TEST(BrokenFiles, HostileJsonIsRefusedNotFollowed) {
  // Nesting past the limit would exhaust the stack of nlohmann's (recursive) serialiser.
  const std::string deep =
      R"({"cache": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_THAT(parse_error(deep), HasSubstr("deeper than 64 levels"));
  EXPECT_THAT(parse_error(R"({"cache": {"1": {"time": 1e999}}})"), HasSubstr("out of range"));
  // 64 levels (the object and 63 arrays) parse and reach the format checks; 65 do not.
  const auto nested = [](int arrays) {
    return R"({"cache": )" + std::string(arrays, '[') + std::string(arrays, ']') + "}";
  };
  EXPECT_THAT(parse_error(nested(63)), HasSubstr("no \"tune_params_keys\""));
  EXPECT_THAT(parse_error(nested(64)), HasSubstr("deeper than 64 levels"));
}

TEST(BrokenFiles, MissingFileIsAnIoError) {
  testing::TempDir dir;
  EXPECT_THROW(read_measurements(dir.file("absent.json.gz")), IoError);
  EXPECT_THROW(read_maybe_gzipped(dir.path().string()), IoError);
}

// The name a study gives an objective left unnamed: sweeps and the API name it alike.
TEST(Units, AnObjectiveIsNamedByItsUnit) {
  EXPECT_EQ(default_objective_name("ms", true), "time");
  EXPECT_EQ(default_objective_name("seconds", false), "time");
  EXPECT_EQ(default_objective_name("", true), "time");
  EXPECT_EQ(default_objective_name("", false), "value");
  EXPECT_EQ(default_objective_name("GFLOP/s", false), "GFLOP/s");
  EXPECT_EQ(default_objective_name("GFLOP/s", true), "GFLOP/s");
}

}  // namespace
}  // namespace tunebase
