#include "core/space.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <fstream>
#include <functional>
#include <set>

#include "core/error.h"
#include "core/measurements.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

using nlohmann::json;

SearchSpace small_space() {
  return SearchSpace::from_json(json::parse(R"({
    "parameters": [
      {"name": "bx", "type": "ordinal", "values": [16, 32, 64, 128]},
      {"name": "by", "type": "integer", "low": 1, "high": 8, "step": 1},
      {"name": "fmt", "type": "categorical", "values": ["csr", "sell"]},
      {"name": "omega", "type": "real", "low": 0.5, "high": 1.5}
    ],
    "constraints": ["32 <= bx * by <= 256", "fmt == 'sell' or by % 2 == 0"]
  })"));
}

SearchSpace discrete_space() {
  return SearchSpace::from_json(json::parse(R"({
    "parameters": [
      {"name": "bx", "values": [16, 32, 64, 128]},
      {"name": "by", "type": "integer", "low": 1, "high": 8},
      {"name": "fmt", "type": "categorical", "values": ["csr", "sell"]}
    ],
    "constraints": ["32 <= bx * by <= 256", "fmt == 'sell' or by % 2 == 0"]
  })"));
}

std::size_t brute_force_count(const SearchSpace& s) {
  std::size_t count = 0;
  for (const auto& bx : s.parameter(0).values)
    for (const auto& by : s.parameter(1).values)
      for (const auto& fmt : s.parameter(2).values) {
        const auto x = std::get<std::int64_t>(bx) * std::get<std::int64_t>(by);
        const bool sell = std::get<std::string>(fmt) == "sell";
        if (x >= 32 && x <= 256 && (sell || std::get<std::int64_t>(by) % 2 == 0)) ++count;
      }
  return count;
}

TEST(SearchSpace, T1NumbersWrittenAsStringsAreNumbersAndTwoFormatsAtOnceAreRefused) {
  const auto t1 = [](const char* values) {
    return nlohmann::ordered_json::parse(
        std::string(R"({"ConfigurationSpace": {"TuningParameters": [{"Name": "bx", "Type": "int",
            "Values": )") +
        values + R"(, "Default": 1}], "Conditions": [{"Expression": "bx > 1"}]}})");
  };
  const auto space = SearchSpace::from_document(t1(R"(["1", "2", "4"])"));
  ASSERT_EQ(space.parameter(0).values.size(), 3u);
  EXPECT_EQ(space.config_to_json(space.valid_configurations().front())["bx"], 2);
  try {
    (void)SearchSpace::from_document(t1(R"(["1", "x"])"));
    FAIL() << "a non-number under Type int";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("its Type is int but it lists \"x\""), std::string::npos)
        << e.what();
  }
  // Kernel Tuner's tune_params with tunebase's constraints: one would be left unread.
  EXPECT_THROW((void)SearchSpace::from_document(nlohmann::ordered_json::parse(
                   R"({"tune_params": {"z": [1, 2]}, "constraints": ["z > 1"]})")),
               InvalidInput);
}

// A default written 2.0 for a listed 2 (or 1 for a listed 1.0) gives the listed value in a
// configuration: the baseline is not a second configuration that a search then measures again
// as 2. The space keeps the default as written: its fingerprint, which studies made with it
// were stored under, stays.
TEST(SearchSpace, ADefaultOfAnotherTypeGivesTheListedValue) {
  const auto t1 = SearchSpace::from_document(nlohmann::ordered_json::parse(
      R"({"ConfigurationSpace": {"TuningParameters": [{"Name": "b", "Type": "float",
          "Values": "[1.0, 2.5]", "Default": 1}], "Conditions": []}})"));
  EXPECT_EQ(t1.config_to_json(t1.default_configuration())["b"].dump(), "1.0");
  EXPECT_EQ(t1.key(t1.default_configuration()), t1.key(t1.valid_configurations()[0]));
  const auto own = SearchSpace::from_document(nlohmann::ordered_json::parse(
      R"({"parameters": [{"name": "a", "type": "ordinal", "values": [1, 2], "default": 2.0}]})"));
  EXPECT_EQ(own.config_to_json(own.default_configuration())["a"].dump(), "2");
  EXPECT_EQ(own.config_to_json(own.config_from_json(nlohmann::json::object(), true))["a"].dump(),
            "2");
  EXPECT_EQ(own.to_json()["parameters"][0]["default"].dump(), "2.0");
}

// A T1 Default outside its Values is replaced by the first value, and the space says so.
TEST(SearchSpace, AT1DefaultOutsideItsValuesIsReplacedAndNoted) {
  const auto space = SearchSpace::from_document(nlohmann::ordered_json::parse(
      R"({"ConfigurationSpace": {"TuningParameters": [
          {"Name": "bx", "Type": "int", "Values": "[1, 2, 4]", "Default": 3},
          {"Name": "s", "Type": "string", "Values": "['x', 'y']", "Default": "y"}],
          "Conditions": []}})"));
  EXPECT_EQ(space.config_text(space.default_configuration()), R"({"bx":1,"s":"y"})");
  EXPECT_EQ(space.notes(),
            std::vector<std::string>{"T1 parameter 'bx': its Default 3 is not among its Values; "
                                     "the first value, 1, is its default"});
  const SearchSpace copy = space;
  EXPECT_EQ(copy.notes(), space.notes());
  // The replaced Default is not the space's: "y" is, the 1 of bx is only its first value.
  EXPECT_FALSE(space.parameter(0).default_declared);
  EXPECT_TRUE(space.parameter(1).default_declared);
}

// Whether a default was given or is the first value (the middle of an interval): a sweep tells
// its user which baseline its speedup is over.
TEST(SearchSpace, KnowsWhichDefaultsItDeclares) {
  const auto own = SearchSpace::from_json(nlohmann::json::parse(R"({"parameters": [
      {"name": "a", "type": "ordinal", "values": [1, 2], "default": 2},
      {"name": "b", "type": "ordinal", "values": [1, 2]},
      {"name": "n", "type": "integer", "low": 0, "high": 3, "default": 0},
      {"name": "m", "type": "integer", "low": 0, "high": 3},
      {"name": "x", "type": "real", "low": 0, "high": 1, "default": 0.25},
      {"name": "y", "type": "real", "low": 0, "high": 1}]})"));
  std::vector<bool> declared;
  for (const auto& p : own.parameters()) declared.push_back(p.default_declared);
  // A default equal to the first value (n) is declared all the same.
  EXPECT_EQ(declared, (std::vector<bool>{true, false, true, false, true, false}));
  // Kernel Tuner's tune_params have no defaults.
  const auto kernel_tuner = SearchSpace::from_document(
      nlohmann::ordered_json::parse(R"({"tune_params": {"bx": [32, 64], "by": [1, 2]}})"));
  for (const auto& p : kernel_tuner.parameters()) EXPECT_FALSE(p.default_declared) << p.name;
}

// Python reads a tuple and a comma before the closing bracket as it reads a list; an integer
// beyond 64 bits is refused, not rounded to a double.
TEST(SearchSpace, T1ValuesReadPythonsTuplesAndTrailingCommas) {
  const auto t1 = [](const std::string& values) {
    return SearchSpace::from_document(nlohmann::ordered_json::parse(
        R"({"ConfigurationSpace": {"TuningParameters": [{"Name": "bx", "Type": "int",
            "Values": ")" +
        values + R"("}], "Conditions": []}})"));
  };
  for (const char* values : {"[1, 2,]", "(1, 2)", " ( 1 , 2 , ) "}) {
    EXPECT_EQ(t1(values).parameter(0).values,
              (std::vector<Value>{std::int64_t{1}, std::int64_t{2}}))
        << values;
  }
  EXPECT_EQ(t1("(4,)").parameter(0).values, std::vector<Value>{std::int64_t{4}});
  try {
    (void)t1("[99999999999999999999, 1]");
    FAIL() << "an integer beyond 64 bits was read";
  } catch (const InvalidInput& e) {
    EXPECT_NE(
        std::string(e.what()).find("holds the integer 99999999999999999999 at [0], beyond 64 bits"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)t1("[1, 2"), InvalidInput);
  EXPECT_THROW((void)t1("(1, 2]"), InvalidInput);
  EXPECT_THROW((void)t1("(1)"), InvalidInput);  // the number 1 in Python, no tuple
}

// What people read lists a configuration's parameters as declared; a JSON object sorts them.
TEST(SearchSpace, ConfigTextKeepsTheDeclaredOrder) {
  const SearchSpace space({ordinal("z", {Value{std::int64_t{1}}}),
                           categorical("a", {Value{std::string("p")}}), ordinal("m", {Value{0.5}})},
                          {});
  const auto c = space.default_configuration();
  EXPECT_EQ(space.config_text(c), R"({"z":1,"a":"p","m":0.5})");
  // A stored configuration, with a name the space no longer has: declared ones first.
  auto stored = space.config_to_json(c);
  stored["old"] = 3;
  EXPECT_EQ(config_text(stored, space.to_json()), R"({"z":1,"a":"p","m":0.5,"old":3})");
  EXPECT_EQ(config_text(stored, nlohmann::json()), stored.dump());
}

TEST(SearchSpace, EnumeratesExactlyTheValidConfigurations) {
  auto s = discrete_space();
  EXPECT_DOUBLE_EQ(s.cartesian_size(), 64.0);
  const auto& valid = s.valid_configurations();
  EXPECT_EQ(valid.size(), brute_force_count(s));
  std::set<std::string> keys;
  for (const auto& c : valid) {
    EXPECT_TRUE(s.is_valid(c)) << s.key(c);
    keys.insert(s.key(c));
  }
  EXPECT_EQ(keys.size(), valid.size()) << "duplicates in the enumeration";
}

TEST(SearchSpace, SamplingIsUniformOverTheValidSet) {
  auto s = discrete_space();
  const std::size_t n = s.valid_configurations().size();
  Rng rng(7);
  std::map<std::string, int> counts;
  const int draws = 200 * static_cast<int>(n);
  for (int i = 0; i < draws; ++i) counts[s.key(s.sample(rng))]++;
  EXPECT_EQ(counts.size(), n);
  for (const auto& [key, c] : counts) {
    EXPECT_GT(c, 120) << key;
    EXPECT_LT(c, 280) << key;
  }
}

// The space of a Kernel Tuner user's report, with the counts Python gives.
SearchSpace reported_space(const std::string& restriction) {
  return SearchSpace::from_document(nlohmann::ordered_json{
      {"tune_params",
       {{"a", {1, 2, 4, 8, 16, 32, 64}}, {"b", {1, 2, 3, 4, 5, 6}}, {"c", {0, 1, 2}}}},
      {"restrictions", {restriction}}});
}

TEST(SearchSpace, AndOrSelectOperandsAsInPython) {
  EXPECT_EQ(reported_space("(a and b) == b").valid_configurations().size(), 126u);
  EXPECT_EQ(reported_space("(c or b) == 2").valid_configurations().size(), 49u);
  EXPECT_EQ(reported_space("(c > 0 and a // c or 0) > 4").valid_configurations().size(), 42u);
}

// As doubles, a * 2**60 + 1 and a * 2**60 were equal for a >= 8: 54 of Python's 126.
TEST(SearchSpace, IntegerOverflowInARestrictionIsAnErrorNotFewerConfigurations) {
  try {
    (void)reported_space("a * 2**60 + 1 > a * 2**60").valid_configurations();
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("evaluating \"a * 2**60 + 1 > a * 2**60\": integer "
                                         "overflow in 8 * 1152921504606846976"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(reported_space("a * 2**56 + 1 > a * 2**56").valid_configurations().size(), 126u);
}

// The message from_document refuses `text` with, or "accepted".
std::string document_error(const std::string& text) {
  try {
    (void)SearchSpace::from_document(nlohmann::ordered_json::parse(text));
  } catch (const InvalidInput& e) {
    return std::string(e.what());
  }
  return std::string("accepted");
}

TEST(SearchSpace, AValueThatIsNeitherNumberNorStringIsNamedOnce) {
  const auto message = document_error(R"({"tune_params": {"a": [1, null]}})");
  EXPECT_EQ(message, "tune_params 'a': expected a number or a string, got null");
  EXPECT_EQ(document_error(R"({"tune_params": {"a": [1, [2]]}})"),
            "tune_params 'a': expected a number or a string, got the array [2]");
}

// Kernel Tuner takes True and False as tune_params values; Python holds them equal to 1 and 0.
TEST(SearchSpace, BooleanTuneParamsAreReadAsOneAndZero) {
  const auto space = SearchSpace::from_document(
      nlohmann::ordered_json::parse(R"({"tune_params": {"use_shmem": [true, false],
                                                         "bx": [16, 32]},
                                        "restrictions": ["use_shmem == True or bx == 32"]})"));
  ASSERT_EQ(space.valid_count(), 3u);
  const auto& p = space.parameter(0);
  ASSERT_EQ(p.values.size(), 2u);
  EXPECT_TRUE(same_value(p.values[0], Value{std::int64_t{1}}));
  EXPECT_TRUE(same_value(p.values[1], Value{std::int64_t{0}}));
  // A configuration or a cache entry that says true is the configuration with 1.
  const auto c = space.config_from_json({{"use_shmem", true}, {"bx", 16}});
  EXPECT_EQ(space.config_to_json(c), (nlohmann::json{{"use_shmem", 1}, {"bx", 16}}));
}

// A list of True and False is remembered as Python's booleans (a Kernel Tuner cache made from
// the space writes them so), but measures what the same space of 1 and 0 measures; spaces
// without booleans keep the JSON, and so the fingerprints, they had.
TEST(SearchSpace, BooleanTuneParamsAreRememberedButShareWithOneAndZero) {
  const auto with_bools = SearchSpace::from_document(nlohmann::ordered_json::parse(
      R"({"tune_params": {"bx": [16, 32], "use_shmem": [true, false]}})"));
  const auto with_ints = SearchSpace::from_document(
      nlohmann::ordered_json::parse(R"({"tune_params": {"bx": [16, 32], "use_shmem": [1, 0]}})"));
  EXPECT_FALSE(with_bools.parameter(0).python_bool);
  EXPECT_TRUE(with_bools.parameter(1).python_bool);
  EXPECT_FALSE(with_ints.parameter(1).python_bool);
  const auto stored = with_bools.to_json();
  EXPECT_EQ(stored["parameters"][1]["boolean"], true);
  EXPECT_FALSE(stored["parameters"][0].contains("boolean"));
  for (const auto& p : with_ints.to_json()["parameters"]) EXPECT_FALSE(p.contains("boolean"));
  // Read back from its JSON (a stored kernel version's), it is the same space.
  const auto again = SearchSpace::from_json(stored);
  EXPECT_TRUE(again.parameter(1).python_bool);
  EXPECT_EQ(again.fingerprint(), with_bools.fingerprint());
  // Another kernel version, but the same parameters: measurements transfer between them.
  EXPECT_NE(with_bools.fingerprint(), with_ints.fingerprint());
  EXPECT_EQ(with_bools.parameters_fingerprint(), with_ints.parameters_fingerprint());
  EXPECT_EQ(SearchSpace::parameters_fingerprint(stored), with_ints.parameters_fingerprint());
  EXPECT_EQ(with_bools.parameters_difference(with_ints), "");
  // People read them as they were written; the stored JSON stays 1 and 0.
  const auto c = with_bools.config_from_json({{"bx", 32}, {"use_shmem", true}});
  EXPECT_EQ(with_bools.config_text(c), R"({"bx":32,"use_shmem":true})");
  EXPECT_EQ(config_text(with_bools.config_to_json(c), stored), R"({"bx":32,"use_shmem":true})");
  EXPECT_EQ(with_ints.config_text(c), R"({"bx":32,"use_shmem":1})");
  EXPECT_EQ(with_bools.config_to_json(c)["use_shmem"], 1);
  // Its errors name them so too.
  try {
    (void)with_bools.config_from_json({{"bx", 32}, {"use_shmem", 2}});
    ADD_FAILURE() << "use_shmem 2 taken";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("one of [true, false]"), std::string::npos) << e.what();
  }
  try {
    (void)SearchSpace::from_document(
        nlohmann::ordered_json::parse(R"({"tune_params": {"b": [true, false, true]}})"));
    ADD_FAILURE() << "a value listed twice taken";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("lists the value true twice"), std::string::npos)
        << e.what();
  }
  // Only values 0 and 1 can be booleans.
  const auto refused = [](const char* text) {
    try {
      (void)SearchSpace::from_json(nlohmann::json::parse(text));
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refused(R"({"parameters": [{"name": "u", "values": [0, 2], "boolean": true}]})"),
            "parameter 'u': \"boolean\": true says its values are False and True (0 and 1), but "
            "it has the value 2");
  EXPECT_EQ(refused(R"({"parameters": [{"name": "u", "values": [0, 1], "boolean": "yes"}]})"),
            "parameter 'u': \"boolean\" must be true or false, got \"yes\"");
  EXPECT_EQ(refused(R"({"parameters": [{"name": "u", "type": "real", "low": 0, "high": 1,
                                        "boolean": true}]})"),
            "parameter 'u': \"boolean\": true says its values are False and True (0 and 1), but "
            "it is a real interval");
}

// A misspelt "restrictions" was dropped: every configuration was searched.
TEST(SearchSpace, UnknownKernelTunerKeysAreRefused) {
  for (const char* key : {"restriction", "Restrictions"}) {
    const auto message = document_error(std::string(R"({"tune_params": {"a": [1, 2]}, ")") + key +
                                        R"(": ["a > 1"]})");
    EXPECT_EQ(message.rfind(std::string("unknown key \"") + key +
                                "\" in a Kernel Tuner space; allowed: tune_params, restrictions "
                                "(and, in a Kernel Tuner cache file, device_name, kernel_name, ",
                            0),
              0u)
        << message;
  }
  EXPECT_NE(document_error(R"({"tune_params": {"a": [1, 2]}, "constants": {"n": 4}})")
                .find("\"constants\" is not supported in a Kernel Tuner space: restrictions may "
                      "name only the parameters in tune_params"),
            std::string::npos);
  // The keys of Kernel Tuner's cache files (older ones lack problem_size, objective and
  // schema_version).
  EXPECT_EQ(document_error(R"({"schema_version": "1.0.0", "device_name": "A100",
      "kernel_name": "gemm", "problem_size": [4096, 4096], "tune_params_keys": ["a"],
      "tune_params": {"a": [1, 2]}, "objective": "time", "cache": {},
      "restrictions": ["a > 1"]})"),
            "accepted");
}

// A gzip-compressed space was "not valid JSON (at byte 1)".
TEST(SearchSpace, GzipSpaceFilesAreRead) {
  tunebase::testing::TempDir dir;
  const auto space = SearchSpace::load(tunebase::testing::write_gzip(
      dir.file("space.json.gz"),
      R"({"tune_params": {"b": [1, 2, 4], "a": [8, 16]}, "restrictions": ["a * b <= 16"]})"));
  ASSERT_EQ(space.dimension(), 2u);
  EXPECT_EQ(space.parameter(0).name, "b");
  EXPECT_EQ(space.valid_count(), std::optional<std::size_t>(3));
}

// A Kernel Tuner cache file serves as a space: its tune_params in the file's order (not sorted
// by name), its restrictions kept, and the cache itself (measured configurations) not a
// restriction of the space.
TEST(SearchSpace, AGeneratedKernelTunerCacheIsTheSpaceOfItsTuneParams) {
  tunebase::testing::TempDir dir;
  const auto path = tunebase::testing::write_gzip(dir.file("toy_cache.json.gz"), R"({
    "schema_version": "1.0.0", "device_name": "Toy GPU", "kernel_name": "toy",
    "problem_size": [64, 64], "tune_params_keys": ["wg", "tile", "alg"],
    "tune_params": {"wg": [32, 64, 128], "tile": [1, 2], "alg": ["a", "b"]},
    "restrictions": ["wg * tile <= 128"], "objective": "time",
    "cache": {"32,1,a": {"wg": 32, "tile": 1, "alg": "a", "time": 1.5},
              "64,2,b": {"wg": 64, "tile": 2, "alg": "b", "time": 0.9}}})");
  const auto space = SearchSpace::load(path);
  ASSERT_EQ(space.dimension(), 3u);
  EXPECT_EQ(space.parameter(0).name, "wg");
  EXPECT_EQ(space.parameter(1).name, "tile");
  EXPECT_EQ(space.parameter(2).name, "alg");
  EXPECT_EQ(space.parameter(0).values,
            (std::vector<Value>{Value(std::int64_t{32}), Value(std::int64_t{64}),
                                Value(std::int64_t{128})}));
  EXPECT_EQ(space.parameter(1).values,
            (std::vector<Value>{Value(std::int64_t{1}), Value(std::int64_t{2})}));
  EXPECT_EQ(space.parameter(2).values, (std::vector<Value>{Value("a"), Value("b")}));
  // wg * tile <= 128: (32, 1), (32, 2), (64, 1), (64, 2), (128, 1); times two algorithms.
  EXPECT_EQ(space.constraints().size(), 1u);
  EXPECT_EQ(space.valid_count(), std::optional<std::size_t>(10));
}

TEST(SearchSpace, AGzipKernelTunerCacheIsASpace) {
  TUNEBASE_SHARED_FILE_OR_SKIP(path, "gpu/gemm/A100.json.gz");
  const auto space = SearchSpace::load(path);
  EXPECT_EQ(space.parameters().front().name, "MWG");
  EXPECT_EQ(space.constraints().size(), 0u);
}

// Ten values each for eight parameters: one valid configuration in 10^8, the defaults, which
// random draws do not find.
TEST(SearchSpace, AHugeSpaceWhoseDefaultsAloneAreValidIsSearched) {
  tunebase::testing::TempDir dir;
  const auto write = [&](const std::string& restriction) {
    nlohmann::ordered_json tune_params;
    for (int i = 0; i < 8; ++i)
      tune_params["p" + std::to_string(i)] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const auto path = dir.file("huge.json");
    std::ofstream(path) << nlohmann::ordered_json{
        {"tune_params", tune_params},
        {"restrictions",
         {restriction}}}.dump();
    return path;
  };
  const auto space = SearchSpace::load(write("p0+p1+p2+p3+p4+p5+p6+p7 == 0"));
  Rng rng(3);
  EXPECT_EQ(space.key(space.sample(rng)), "0,0,0,0,0,0,0,0");
  // Neither the defaults nor the first values: refused, saying what was tried.
  try {
    (void)SearchSpace::load(write("p0+p1+p2+p3+p4+p5+p6+p7 == 72"));
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "no valid configuration found in 2000000 random draws, and neither the default "
                  "configuration nor the first values satisfy the constraints"),
              std::string::npos)
        << e.what();
  }
}

TEST(SearchSpace, HugeSpacesAreSampledWithoutEnumerating) {
  std::vector<Parameter> params;
  for (int i = 0; i < 12; ++i) params.push_back(integer_range("p" + std::to_string(i), 0, 9));
  SearchSpace s(params, {"p0 + p1 < 5", "p2 != p3"});
  EXPECT_FALSE(s.enumerable());
  EXPECT_THROW(s.valid_configurations(), InvalidInput);
  Rng rng(1);
  for (int i = 0; i < 100; ++i) {
    auto c = s.sample(rng);
    EXPECT_TRUE(s.is_valid(c));
    // The constraints checked here, not by the code that sampled.
    EXPECT_LT(std::get<std::int64_t>(c[0]) + std::get<std::int64_t>(c[1]), 5) << s.key(c);
    EXPECT_NE(std::get<std::int64_t>(c[2]), std::get<std::int64_t>(c[3])) << s.key(c);
  }
}

TEST(SearchSpace, ConditionalSpacesBeyondTheProductLimitAreEnumeratedWhenThePruningAllows) {
  // method a reads p0..p3, method b reads p4..p7, method c neither: a product of 3e8, but 20,001
  // valid configurations, and the enumeration prunes every pinned parameter at once.
  std::vector<Parameter> params = {categorical("method", {Value("a"), Value("b"), Value("c")})};
  std::vector<std::string> constraints;
  for (int i = 0; i < 8; ++i) {
    const std::string name = "p" + std::to_string(i);
    params.push_back(integer_range(name, 0, 9));
    constraints.push_back(name + " == 0 or method == \"" + (i < 4 ? "a" : "b") + "\"");
  }
  const SearchSpace conditional(params, constraints);
  ASSERT_GT(conditional.cartesian_size(), SearchSpace::kMaxEnumerate);
  ASSERT_TRUE(conditional.enumerable());
  EXPECT_EQ(conditional.valid_configurations().size(), 20001u);
  // A copy shares the enumeration rather than repeating it.
  const SearchSpace copy = conditional;
  EXPECT_EQ(&copy.valid_configurations(), &conditional.valid_configurations());

  // The same product with constraints that prune little: sampled, not enumerated.
  constraints.assign({"p0 + p1 != 3"});
  const SearchSpace loose(params, constraints);
  EXPECT_FALSE(loose.enumerable());
  EXPECT_THROW(loose.valid_configurations(), InvalidInput);
  Rng rng(2);
  EXPECT_TRUE(loose.is_valid(loose.sample(rng)));
}

// Valid configurations that are rare are enumerated (rejection sampling would hardly find
// them: here 40 of 2.56 million points, one constraint that prunes nothing); plentiful ones are
// sampled rather than kept (millions of configurations took gigabytes).
TEST(SearchSpace, RareValidConfigurationsAreEnumeratedAndPlentifulOnesSampled) {
  std::vector<Parameter> params;
  for (const char* name : {"a", "b", "c", "d"}) params.push_back(integer_range(name, 1, 40));
  const SearchSpace rare(params, {"a == b and b == c and c == d"});
  ASSERT_TRUE(rare.enumerable());
  EXPECT_EQ(rare.valid_configurations().size(), 40u);

  const SearchSpace plentiful(params, {"a + b + c + d <= 100"});
  EXPECT_FALSE(plentiful.enumerable());
  EXPECT_FALSE(plentiful.valid_count().has_value());
  Rng rng(4);
  EXPECT_TRUE(plentiful.is_valid(plentiful.sample(rng)));
}

TEST(SearchSpace, MixedSpaceWithRealsSamplesAndChecks) {
  auto s = small_space();
  EXPECT_FALSE(s.enumerable());
  Rng rng(3);
  for (int i = 0; i < 200; ++i) {
    auto c = s.sample(rng);
    ASSERT_TRUE(s.is_valid(c));
    // "32 <= bx * by <= 256", "fmt == 'sell' or by % 2 == 0", checked here.
    const std::int64_t bx = std::get<std::int64_t>(c[0]);
    const std::int64_t by = std::get<std::int64_t>(c[1]);
    EXPECT_GE(bx * by, 32) << s.key(c);
    EXPECT_LE(bx * by, 256) << s.key(c);
    EXPECT_TRUE(std::get<std::string>(c[2]) == "sell" || by % 2 == 0) << s.key(c);
    const double omega = as_double(c[3]);
    EXPECT_GE(omega, 0.5);
    EXPECT_LE(omega, 1.5);
  }
}

TEST(SearchSpace, UnknownParameterInConstraintIsNamed) {
  try {
    SearchSpace({ordinal("a", {std::int64_t{1}, std::int64_t{2}})}, {"a < b"});
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("unknown parameter 'b'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("parameters are: a"), std::string::npos) << e.what();
  }
}

TEST(SearchSpace, ConstraintSyntaxErrorHasPosition) {
  try {
    SearchSpace({ordinal("a", {std::int64_t{1}})}, {"a <= = 2"});
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.position(), 5u);
  }
}

TEST(SearchSpace, NoValidConfigurationIsAnErrorOnLoad) {
  tunebase::testing::TempDir dir;
  const auto path = dir.file("empty.json");
  std::ofstream(path) << R"({"parameters": [{"name": "a", "values": [1, 2]}],
                             "constraints": ["a > 5"]})";
  try {
    SearchSpace::load(path);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("no configuration satisfies"), std::string::npos)
        << e.what();
  }
}

TEST(SearchSpace, MalformedSpaceFilesAreExplained) {
  tunebase::testing::TempDir dir;
  auto load_text = [&](const std::string& text) {
    const auto path = dir.file("s.json");
    std::ofstream(path) << text;
    return SearchSpace::load(path);
  };
  EXPECT_THROW(load_text("{\"parameters\": [ {\"name\": \"a\""), ParseError);
  EXPECT_THROW(load_text("[1, 2]"), InvalidInput);
  EXPECT_THROW(load_text(R"({"parameters": [{"name": "a", "type": "bogus", "values": [1]}]})"),
               InvalidInput);
  EXPECT_THROW(load_text(R"({"parameters": [{"name": "a", "values": []}]})"), InvalidInput);
  EXPECT_THROW(load_text(R"({"parameters": [{"name": "a", "values": [1], "colour": 3}]})"),
               InvalidInput);
  EXPECT_THROW(
      load_text(R"({"parameters": [{"name": "a", "values": [1]}, {"name": "a", "values": [2]}]})"),
      InvalidInput);
  EXPECT_THROW(load_text(R"({"parameters": [{"name": "a", "values": [1, 2], "default": 3}]})"),
               InvalidInput);
  EXPECT_THROW(load_text(R"({"parameters": [{"name": "r", "type": "real", "low": 2, "high": 1}]})"),
               InvalidInput);
  EXPECT_THROW(SearchSpace::load(dir.file("missing.json")), IoError);
}

// The message from_json refuses `text` with, or "accepted".
std::string from_json_error(const std::string& text) {
  try {
    SearchSpace::from_json(json::parse(text));
  } catch (const InvalidInput& e) {
    return std::string(e.what());
  }
  return std::string("accepted");
}

TEST(SearchSpace, AParameterWithoutATypeIsToldWhatTypesThereAre) {
  EXPECT_NE(from_json_error(R"({"parameters": [{"name": "x", "low": 0, "high": 3}]})")
                .find("parameter 'x': no \"type\" (and no \"values\"); allowed: integer, "
                      "ordinal, categorical, real"),
            std::string::npos);
  EXPECT_EQ(
      from_json_error(R"({"parameters": [{"name": "x", "type": "int", "low": 0, "high": 3}]})"),
      "accepted");
}

TEST(SearchSpace, ValuesThatCannotBeStoredFaithfullyAreRefused) {
  // 2^64 - 1 became -1 on the way to an int64.
  EXPECT_NE(
      from_json_error(R"({"parameters": [{"name": "a", "values": [18446744073709551615, 1]}]})")
          .find("out of range"),
      std::string::npos);
  EXPECT_NE(from_json_error(R"({"parameters": [{"name": "a", "type": "integer", "low": 0,
                      "high": 9223372036854775806}]})")
                .find("within +-2^53"),
            std::string::npos);
  // high - low overflows to infinity: nothing could ever be sampled.
  EXPECT_NE(from_json_error(R"({"parameters": [{"name": "r", "type": "real", "low": -9e307,
                      "high": 9e307}]})")
                .find("within a double's range"),
            std::string::npos);
  EXPECT_EQ(from_json_error(R"({"parameters": [{"name": "r", "type": "real", "low": -1e300,
                      "high": 1e300}]})"),
            "accepted");
  // Keys and exports write 1 and "1" alike.
  EXPECT_NE(from_json_error(R"({"parameters": [{"name": "c", "type": "categorical",
                      "values": [1, "1", 2.5]}]})")
                .find("cannot tell apart"),
            std::string::npos);
  EXPECT_EQ(from_json_error(R"({"parameters": [{"name": "c", "type": "categorical",
                      "values": [1, "one", 2.5]}]})"),
            "accepted");
  // "log" on an integer range is honoured (it was dropped), so it needs positive values.
  EXPECT_NE(
      from_json_error(R"({"parameters": [{"name": "n", "type": "integer", "low": 0, "high": 64,
                      "log": true}]})")
          .find("needs values > 0"),
      std::string::npos);
  const auto logged = SearchSpace::from_json(json::parse(
      R"({"parameters": [{"name": "n", "type": "integer", "low": 1, "high": 64, "log": true}]})"));
  EXPECT_TRUE(logged.parameters()[0].log_scale);
}

TEST(SearchSpace, FieldsThatWouldBeIgnoredAreRefused) {
  const auto says = [&](const std::string& text, const std::string& part) {
    const auto message = from_json_error(text);
    EXPECT_NE(message.find(part), std::string::npos) << text << " -> " << message;
  };
  // Kernel Tuner's word for constraints: they were dropped, and every configuration ran.
  says(R"({"parameters": [{"name": "a", "values": [1, 2]}], "restrictions": ["a > 1"]})",
       "unknown field \"restrictions\" in the space; allowed: parameters, constraints");
  // A stepped real was searched as a continuous one; "low" on a list meant nothing.
  says(R"({"parameters": [{"name": "r", "type": "real", "low": 0, "high": 1, "step": 0.1}]})",
       "parameter 'r': \"step\" does not apply to type real");
  says(R"({"parameters": [{"name": "a", "type": "ordinal", "values": [1, 2], "low": 1}]})",
       "\"low\" does not apply to type ordinal");
  says(R"({"parameters": [{"name": "c", "type": "categorical", "values": ["x"], "log": true}]})",
       "\"log\" does not apply to type categorical");
  says(R"({"parameters": [{"name": "r", "type": "real", "low": 0, "high": 1, "values": [1]}]})",
       "\"values\" does not apply to type real");
  // "log": 1 or "true" left the scale linear.
  says(R"({"parameters": [{"name": "r", "type": "real", "low": 1, "high": 9, "log": 1}]})",
       "parameter 'r': \"log\" must be true or false, got 1");
  // A number as the type was an internal error (a 500 from the API).
  says(R"({"parameters": [{"name": "a", "type": 5, "low": 1, "high": 2}]})",
       "parameter 'a': \"type\" must be a string");
  // A default of the wrong type names its parameter.
  says(R"({"parameters": [{"name": "n", "type": "integer", "low": 1, "high": 4,
           "default": "x"}]})",
       "parameter 'n': \"default\": expected a number");
  says(R"({"parameters": [{"name": "a", "values": [1, 2], "default": [1]}]})",
       "parameter 'a': \"default\": expected a number or a string");
  // What each type reads is still accepted, and so is what to_json writes.
  const auto full = SearchSpace::from_json(json::parse(R"({"parameters": [
      {"name": "n", "type": "integer", "low": 1, "high": 8, "step": 1, "log": true, "default": 2},
      {"name": "o", "type": "integer", "values": [1, 4], "log": true},
      {"name": "c", "type": "categorical", "values": ["x", "y"], "default": "y"},
      {"name": "r", "type": "real", "low": 1e-6, "high": 1e-2, "log": true, "default": 1e-4}],
      "constraints": ["n <= 8"]})"));
  EXPECT_EQ(SearchSpace::from_json(full.to_json()).fingerprint(), full.fingerprint());
}

TEST(SearchSpace, RealEndsAreTheDeclaredBounds) {
  const auto p = real_interval("tol", 1e-6, 1e-2, /*log_scale=*/true);
  EXPECT_EQ(unit_to_real(p, 0.0), 1e-6);  // exp(log(1e-6)) is 1.0000000000000004e-06
  EXPECT_EQ(unit_to_real(p, 1.0), 1e-2);
  EXPECT_EQ(unit_to_real(p, -3.0), 1e-6);
  for (const double u : {1e-12, 0.3, 0.999999999}) {
    const double x = unit_to_real(p, u);
    EXPECT_GE(x, 1e-6);
    EXPECT_LE(x, 1e-2);
  }
  const auto linear = real_interval("omega", 0.1, 0.7);
  EXPECT_EQ(unit_to_real(linear, 1.0), 0.7);
}

TEST(SearchSpace, ConfigurationJsonIsChecked) {
  auto s = discrete_space();
  auto c = s.config_from_json(json{{"bx", 32}, {"by", 2}, {"fmt", "csr"}});
  EXPECT_EQ(s.key(c), "32,2,csr");
  EXPECT_EQ(s.config_to_json(c), (json{{"bx", 32}, {"by", 2}, {"fmt", "csr"}}));
  EXPECT_THROW(s.config_from_json(json{{"bx", 32}, {"by", 2}, {"fmt", "csr"}, {"zz", 1}}),
               InvalidInput);
  EXPECT_THROW(s.config_from_json(json{{"bx", 33}, {"by", 2}, {"fmt", "csr"}}), InvalidInput);
  EXPECT_THROW(s.config_from_json(json{{"bx", 32}, {"by", 1}, {"fmt", "csr"}}), InvalidInput);
  EXPECT_THROW(s.config_from_json(json{{"bx", "x"}, {"by", 2}, {"fmt", "csr"}}), InvalidInput);
  EXPECT_THROW(s.config_from_json(json{{"bx", 32}}), InvalidInput);
  EXPECT_THROW(s.config_from_json(json::array()), InvalidInput);
  // 32.0 is the listed 32.
  EXPECT_EQ(s.key(s.config_from_json(json{{"bx", 32.0}, {"by", 2}, {"fmt", "csr"}})), "32,2,csr");
}

TEST(SearchSpace, StringValuesWithCommasNeverShareAKey) {
  const auto s = SearchSpace::from_json(json::parse(R"({"parameters": [
      {"name": "c1", "type": "categorical", "values": ["a", "a,b", "x\\"]},
      {"name": "c2", "type": "categorical", "values": ["b,c", "c", ",c"]}]})"));
  std::set<std::string> keys;
  for (const auto& c : s.valid_configurations()) keys.insert(s.key(c));
  EXPECT_EQ(keys.size(), s.valid_configurations().size());
  EXPECT_EQ(s.key(s.config_from_json(json{{"c1", "a,b"}, {"c2", "c"}})), "a\\,b,c");

  // An empty value alone (a flag left out) has a key too, unlike any other value's.
  const auto flag = SearchSpace::from_json(json::parse(R"({"parameters": [
      {"name": "flag", "type": "categorical", "values": ["", "e", "\\e", "-O3"]}]})"));
  keys.clear();
  for (const auto& c : flag.valid_configurations()) {
    EXPECT_FALSE(flag.key(c).empty());
    keys.insert(flag.key(c));
  }
  EXPECT_EQ(keys.size(), 4u);
}

TEST(SearchSpace, JsonRoundTripKeepsTheFingerprint) {
  auto s = small_space();
  auto again = SearchSpace::from_json(s.to_json());
  EXPECT_EQ(s.to_json(), again.to_json());
  EXPECT_EQ(s.fingerprint(), again.fingerprint());
  auto other = discrete_space();
  EXPECT_NE(s.fingerprint(), other.fingerprint());
}

TEST(SearchSpace, EncodingIsInUnitCubeWithOneHotCategoricals) {
  auto s = small_space();
  EXPECT_EQ(s.encoded_dimension(), 5u);
  Rng rng(5);
  for (int i = 0; i < 50; ++i) {
    auto x = s.encode(s.sample(rng));
    ASSERT_EQ(x.size(), 5u);
    for (double v : x) {
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0);
    }
    EXPECT_DOUBLE_EQ(x[2] + x[3], 1.0);
  }
}

TEST(SearchSpace, NeighboursAreValidAndDifferInOneParameter) {
  auto s = discrete_space();
  Rng rng(11);
  for (const auto& c : s.valid_configurations()) {
    for (const auto& n : s.neighbours(c, rng)) {
      EXPECT_TRUE(s.is_valid(n));
      int differing = 0;
      for (std::size_t i = 0; i < c.size(); ++i) differing += !same_value(c[i], n[i]);
      EXPECT_EQ(differing, 1);
    }
  }
}

TEST(SearchSpace, KernelTunerTuneParamsKeepTheirOrder) {
  tunebase::testing::TempDir dir;
  const auto path = dir.file("kt.json");
  std::ofstream(path) << R"({"tune_params": {"zeta": [1, 2], "alpha": [4, 8, 16]},
                             "restrictions": ["zeta * alpha <= 16"]})";
  auto s = SearchSpace::load(path);
  EXPECT_EQ(s.parameter(0).name, "zeta");
  EXPECT_EQ(s.parameter(1).name, "alpha");
  EXPECT_EQ(s.valid_configurations().size(), 5u);
}

// The T1 files of the Benchmark Hub describe exactly the spaces their caches measured.
void expect_t1_matches_cache(const std::string& t1_path, const std::string& cache_path,
                             std::size_t expected) {
  auto space = SearchSpace::load(t1_path);
  const auto& valid = space.valid_configurations();
  EXPECT_EQ(valid.size(), expected);
  auto data = read_measurements(cache_path);
  ASSERT_EQ(data.entries.size(), expected);
  std::set<std::string> enumerated;
  for (const auto& c : valid) enumerated.insert(space.config_to_json(c).dump());
  std::size_t found = 0;
  for (const auto& e : data.entries) {
    found += enumerated.count(data.space.config_to_json(e.config).dump());
  }
  EXPECT_EQ(found, expected);
}

TEST(SearchSpace, T1ConvolutionMatchesTheMeasuredCache) {
  TUNEBASE_SHARED_FILE_OR_SKIP(t1, "gpu/t1/convolution_milo.json");
  TUNEBASE_SHARED_FILE_OR_SKIP(cache, "gpu/convolution_hub/A100.json.gz");
  expect_t1_matches_cache(t1, cache, 4362);
}

TEST(SearchSpace, T1DedispersionMatchesTheMeasuredCache) {
  TUNEBASE_SHARED_FILE_OR_SKIP(t1, "gpu/t1/dedispersion_milo.json");
  TUNEBASE_SHARED_FILE_OR_SKIP(cache, "gpu/dedispersion/A100.json.gz");
  expect_t1_matches_cache(t1, cache, 11130);
}

TEST(SearchSpace, LogScaleRealsStayWithinTheirBoundsAtTheEdges) {
  // exp(log(1e-2)) is 1e-2 plus one ulp: a neighbour at the top edge left the domain, and
  // the search dropped it (bo stopped after 3 of 12 evaluations).
  const auto space = SearchSpace::from_json(json::parse(
      R"({"parameters": [{"name": "tol", "type": "real", "low": 1e-6, "high": 1e-2,
                           "log": true}]})"));
  Rng rng(3);
  for (const double x : {1e-6 * 1.0001, 1e-2 * 0.9999}) {
    for (int i = 0; i < 20; ++i) {
      for (const auto& n : space.neighbours({Value{x}}, rng)) {
        EXPECT_TRUE(space.is_valid(n)) << to_string(n[0]);
      }
    }
  }
}

TEST(SearchSpace, ParametersWithManyValuesAreLookedUpByTable) {
  // A table answers what a scan would: 2 and 2.0 are one value, "2" is not a number.
  json values = json::array();
  json names = json::array();
  for (int i = 0; i < 1000; ++i) {
    values.push_back(i * 2);
    names.push_back("v" + std::to_string(i));
  }
  const auto s =
      SearchSpace::from_json({{"parameters",
                               {{{"name", "n"}, {"values", values}},
                                {{"name", "c"}, {"type", "categorical"}, {"values", names}}}}});
  const auto& n = s.parameters()[0];
  const auto& c = s.parameters()[1];
  ASSERT_TRUE(n.lookup && c.lookup);
  EXPECT_EQ(n.index_of(Value{std::int64_t{1998}}), 999u);
  EXPECT_EQ(n.index_of(Value{4.0}), 2u);
  EXPECT_FALSE(n.index_of(Value{3.0}));
  EXPECT_FALSE(n.index_of(Value{std::string("2")}));
  EXPECT_EQ(c.index_of(Value{std::string("v17")}), 17u);
  EXPECT_FALSE(c.index_of(Value{std::string("v1000")}));
  EXPECT_FALSE(c.index_of(Value{std::int64_t{3}}));
  EXPECT_TRUE(s.is_valid(s.config_from_json({{"n", 1024}, {"c", "v3"}})));
  EXPECT_FALSE(s.is_valid({Value{std::int64_t{1023}}, Value{std::string("v3")}}));
}

}  // namespace
}  // namespace tunebase

namespace tunebase {
namespace {

// Kernel Tuner looks up its cache by Python's str() of each value: what repr(x) printed.
TEST(PythonText, RealsAreWrittenAsPythonWritesThem) {
  const std::pair<double, const char*> cases[] = {{0.0001, "0.0001"},
                                                  {1e-05, "1e-05"},
                                                  {100000.0, "100000.0"},
                                                  {1e16, "1e+16"},
                                                  {1e15, "1000000000000000.0"},
                                                  {123456789012345680.0, "1.2345678901234568e+17"},
                                                  {0.5, "0.5"},
                                                  {1.0, "1.0"},
                                                  {-0.0, "-0.0"},
                                                  {-2.5e-7, "-2.5e-07"},
                                                  {3.14159, "3.14159"},
                                                  {1e22, "1e+22"},
                                                  {1.5e300, "1.5e+300"},
                                                  {5e-324, "5e-324"},
                                                  {0.1 + 0.2, "0.30000000000000004"},
                                                  {12345678901234567.0, "1.2345678901234568e+16"},
                                                  {999999999999999.9, "999999999999999.9"}};
  for (const auto& [value, python] : cases) EXPECT_EQ(python_text(Value{value}), python);
  EXPECT_EQ(python_text(Value{std::int64_t{-16}}), "-16");
  EXPECT_EQ(python_text(Value{std::string("a,b")}), "a,b");
}

}  // namespace
}  // namespace tunebase

namespace tunebase {
namespace {

// Kernel Tuner's lists of flags have no type: strings have no order, so they are categorical.
TEST(SearchSpace, AListOfStringsWithoutATypeIsCategorical) {
  const auto space = SearchSpace::from_json(nlohmann::json::parse(R"({"parameters": [
      {"name": "flags", "values": ["-O2", "-O3"]}, {"name": "n", "values": [1, 2, 4]}]})"));
  EXPECT_EQ(space.parameters()[0].kind, ParamKind::categorical);
  EXPECT_EQ(space.parameters()[1].kind, ParamKind::ordinal);
}

}  // namespace
}  // namespace tunebase

namespace tunebase {
namespace {

// Integers past 2^53 that are one double are refused, saying why (not "listed twice").
// Each range within its own limit, all together too many values to keep: refused before any list
// is made (500 such ranges, 32 KB of JSON, took 20 GB), in every format and from code.
TEST(SearchSpace, TheValuesOfAllParametersTogetherAreBounded) {
  json params = json::array();
  for (int i = 0; i < 3; ++i) {
    params.push_back(
        {{"name", "p" + std::to_string(i)}, {"type", "integer"}, {"low", 0}, {"high", 999998}});
  }
  const auto refusal = [](const std::function<void()>& build) {
    try {
      build();
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const auto said = refusal([&] { (void)SearchSpace::from_json({{"parameters", params}}); });
  EXPECT_NE(said.find("the parameters list 2999997 values in all (p0 999999, p1 999999, p2 "
                      "999999); a space may list at most 1000000: use larger steps, or real "
                      "parameters for wide ranges"),
            std::string::npos)
      << said;
  // As a file for the CLI (tunebase space, sweep --space).
  tunebase::testing::TempDir dir;
  const auto path = dir.file("wide.json");
  std::ofstream(path) << json{{"parameters", params}}.dump();
  EXPECT_NE(
      refusal([&] { (void)SearchSpace::load(path); }).find("a space may list at most 1000000"),
      std::string::npos);
  // Built in code, or from Kernel Tuner's lists.
  EXPECT_NE(refusal([] {
              SearchSpace({integer_range("a", 0, 999999), integer_range("b", 0, 1)}, {});
            }).find("the parameters list 1000002 values in all (a 1000000, b 2)"),
            std::string::npos);
  json many = json::array();
  for (int i = 0; i < 600000; ++i) many.push_back(i);
  EXPECT_NE(refusal([&] {
              (void)SearchSpace::from_kernel_tuner({{"x", many}, {"y", many}}, {});
            }).find("a space may list at most 1000000"),
            std::string::npos);
  // One parameter at its own limit is a space.
  EXPECT_EQ(SearchSpace::from_json({{"parameters", {params[0]}}}).parameters()[0].size(), 999999u);
}

// An integer range of a million values (almost) keeps its values and little more: a hash table of
// them, which took as much memory again (and sets to check them, twice that for a second), is not
// needed to find a value's position.
TEST(SearchSpace, AnIntegerRangeIsLookedUpWithoutATable) {
  const auto in_use = [] {
    const auto m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const auto before = in_use();
  const auto s = SearchSpace::from_json(
      {{"parameters",
        {{{"name", "n"}, {"type", "integer"}, {"low", -1}, {"high", -1 + 3 * 999989}, {"step", 3}},
         {{"name", "m"}, {"type", "integer"}, {"low", 0}, {"high", 9}}}}});
  const std::size_t held = in_use() - before;
  const auto& n = s.parameters()[0];
  ASSERT_EQ(n.size(), 999990u);
  EXPECT_LT(held, n.values.capacity() * sizeof(Value) * 5 / 4);
  // It answers what a table would.
  EXPECT_EQ(n.index_of(Value{std::int64_t{-1}}), 0u);
  EXPECT_EQ(n.index_of(Value{std::int64_t{-1 + 3 * 999989}}), 999989u);
  EXPECT_EQ(n.index_of(Value{5.0}), 2u);
  EXPECT_FALSE(n.index_of(Value{std::int64_t{0}}));
  EXPECT_FALSE(n.index_of(Value{std::int64_t{-4}}));
  EXPECT_FALSE(n.index_of(Value{std::int64_t{-1 + 3 * 999990}}));
  EXPECT_FALSE(n.index_of(Value{5.5}));
  EXPECT_FALSE(n.index_of(Value{1e300}));
  EXPECT_FALSE(n.index_of(Value{std::string("5")}));
  EXPECT_TRUE(s.is_valid(s.config_from_json({{"n", 1001}, {"m", 9}})));
  EXPECT_FALSE(s.is_valid({Value{std::int64_t{1000}}, Value{std::int64_t{9}}}));
  // Lists in order need no sets to be found distinct; out of order they are still checked.
  EXPECT_EQ(SearchSpace::from_json({{"parameters", {{{"name", "d"}, {"values", {8, 4, 2.5, 1}}}}}})
                .parameters()[0]
                .size(),
            4u);
  EXPECT_THROW(
      (void)SearchSpace::from_json({{"parameters", {{{"name", "d"}, {"values", {1, 4, 2, 4}}}}}}),
      InvalidInput);
  EXPECT_THROW(
      (void)SearchSpace::from_json({{"parameters", {{{"name", "d"}, {"values", {1, 2, 2.0}}}}}}),
      InvalidInput);
}

// A space is immutable: its copies (a session takes one, and the service keeps one per study)
// share its parameters rather than hold a million values each.
TEST(SearchSpace, ACopySharesTheParameters) {
  const auto s = SearchSpace::from_json(
      {{"parameters", {{{"name", "n"}, {"type", "integer"}, {"low", 0}, {"high", 999998}}}}});
  const auto in_use = [] {
    const auto m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const auto before = in_use();
  SearchSpace copy = s;
  EXPECT_LT(in_use() - before, std::size_t{1} << 20);
  EXPECT_EQ(&copy.parameters(), &s.parameters());
  EXPECT_EQ(copy.fingerprint(), s.fingerprint());
  // Moved from, a space is empty, as a moved-from vector is.
  const SearchSpace moved = std::move(copy);
  EXPECT_EQ(moved.dimension(), 1u);
  EXPECT_EQ(copy.dimension(), 0u);  // NOLINT(bugprone-use-after-move): what it holds is defined
  EXPECT_EQ(SearchSpace().dimension(), 0u);
}

TEST(SearchSpace, IntegersThatAreOneDoubleAreRefusedSayingWhy) {
  try {
    (void)SearchSpace::from_json(nlohmann::json::parse(
        R"({"parameters": [{"name": "a", "values": [9007199254740993, 9007199254740992]}]})"));
    FAIL() << "accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("which are one number as a double"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tunebase
