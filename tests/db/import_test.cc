// import_dataset: a generated Kernel-Tuner-cache-like dataset and the real A100 GEMM cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <random>

#include "core/measurements.h"
#include "db/sqlite.h"
#include "db/store.h"
#include "db/study_export.h"
#include "tests/db/db_test_util.h"
#include "tests/support/shared_data.h"

namespace tunebase::db {
namespace {

using ::testing::HasSubstr;
using tunebase::testing::TempDir;

constexpr int kRepeats = 32;

std::vector<Value> ints(std::initializer_list<std::int64_t> v) {
  std::vector<Value> out;
  for (auto x : v) out.emplace_back(x);
  return out;
}

// Like a Kernel Tuner cache: every configuration of a small space measured `kRepeats` times
// with a time that depends on the parameters, every `failure_every`-th one failed to compile.
MeasuredDataset generated_dataset(const std::string& device, std::uint64_t seed,
                                  std::size_t failure_every = 17) {
  MeasuredDataset d;
  d.device_name = device;
  d.kernel_name = "convolution";
  d.format = "kernel_tuner";
  d.problem_size = {4096, 4096};
  d.space =
      SearchSpace({ordinal("block_size_x", ints({16, 32, 64, 128})),
                   ordinal("block_size_y", ints({1, 2, 4, 8})),
                   ordinal("tile_size_x", ints({1, 2, 4})), ordinal("use_padding", ints({0, 1}))},
                  {});
  Rng rng(seed);
  std::normal_distribution<double> noise(0.0, 0.01);
  std::size_t i = 0;
  for (const auto& config : d.space.valid_configurations()) {
    Observation o;
    o.config = config;
    if (++i % failure_every == 0) {
      o.result = Measurement::failure(TrialStatus::failed, "CompilationFailedConfig");
    } else {
      const double base = 1.0 + std::abs(std::log2(as_double(config[0]) / 64.0)) +
                          0.5 * std::abs(std::log2(as_double(config[1]) / 4.0)) +
                          0.1 * as_double(config[3]);
      std::vector<double> raw;
      for (int r = 0; r < kRepeats; ++r) raw.push_back(base * (1.0 + noise(rng)));
      o.result = Measurement::success(median(raw), raw);
    }
    d.entries.push_back(std::move(o));
  }
  return d;
}

TEST(Import, GeneratedCacheRoundTrips) {
  TempDir dir;
  Store store(dir.file("t.db"));
  const auto data = generated_dataset("Test GPU 1", 1);
  const auto result = store.import_dataset(data);
  EXPECT_EQ(result.trials, data.entries.size());
  EXPECT_EQ(result.failed, data.entries.size() / 17);

  const auto machine = store.get_machine(result.machine);
  EXPECT_EQ(machine.name, "Test GPU 1");
  EXPECT_EQ(machine.fingerprint["device_name"], "Test GPU 1");
  const auto kernel = store.get_kernel(result.kernel);
  EXPECT_EQ(kernel.name, "convolution");
  EXPECT_EQ(kernel.version, data.space.fingerprint());
  EXPECT_EQ(store.get_task(result.task).description["problem_size"], data.problem_size);
  const auto study = store.get_study(result.study);
  EXPECT_EQ(study.strategy, "import");
  EXPECT_EQ(study.status, StudyStatus::completed);

  const auto trials = store.trials(result.study);
  ASSERT_EQ(trials.size(), data.entries.size());
  double best = INFINITY;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const auto& entry = data.entries[i];
    EXPECT_EQ(trials[i].config_key, data.space.key(entry.config));
    EXPECT_EQ(trials[i].config, data.space.config_to_json(entry.config));
    EXPECT_EQ(trials[i].result.status, entry.result.status);
    if (entry.result.ok()) {
      EXPECT_DOUBLE_EQ(trials[i].result.objective, entry.result.objective);
      EXPECT_EQ(trials[i].result.raw, entry.result.raw);
      best = std::min(best, entry.result.objective);
    } else {
      EXPECT_EQ(trials[i].result.message, "CompilationFailedConfig");
    }
  }
  const auto top =
      store.best_trial("convolution", result.machine, result.task, Direction::minimize);
  ASSERT_TRUE(top.has_value());
  EXPECT_DOUBLE_EQ(top->result.objective, best);
}

// Imported, exported as a Kernel Tuner cache, and read again: the same measurements.
TEST(Import, AnImportExportedAsAKernelTunerCacheReadsBackTheSame) {
  TempDir dir;
  Store store(dir.file("t.db"));
  const auto data = generated_dataset("Test GPU 1", 1);
  const auto result = store.import_dataset(data);
  const auto text = export_study(store, result.study, ExportFormat::kernel_tuner);
  const auto back = parse_measurements(text, "export");
  EXPECT_EQ(back.device_name, "Test GPU 1");
  EXPECT_EQ(back.kernel_name, "convolution");
  EXPECT_EQ(back.problem_size, data.problem_size);
  EXPECT_EQ(back.space.fingerprint(), data.space.fingerprint());
  ASSERT_EQ(back.entries.size(), data.entries.size());
  for (std::size_t i = 0; i < data.entries.size(); ++i) {
    EXPECT_EQ(back.entries[i].config, data.entries[i].config);
    EXPECT_TRUE(same_result(back.entries[i].result, data.entries[i].result)) << i;
  }
}

// Cache keys are Python's str() of the values, as Kernel Tuner looks them up.
TEST(Import, AKernelTunerExportKeysRealsAsPythonWritesThem) {
  MeasuredDataset d;
  d.device_name = "gpu";
  d.kernel_name = "k";
  d.format = "kernel_tuner";
  d.space = SearchSpace({ordinal("eps", {Value{0.0001}, Value{1e-05}, Value{100000.0}}),
                         categorical("flags", {Value{std::string("-O2")}})},
                        {});
  for (const auto& config : d.space.valid_configurations()) {
    d.entries.push_back({config, Measurement::success(1.0, {1.0})});
  }
  TempDir dir;
  Store store(dir.file("t.db"));
  const auto result = store.import_dataset(d);
  const auto j =
      nlohmann::json::parse(export_study(store, result.study, ExportFormat::kernel_tuner));
  EXPECT_TRUE(j["cache"].contains("0.0001,-O2")) << j["cache"].dump();
  EXPECT_TRUE(j["cache"].contains("1e-05,-O2")) << j["cache"].dump();
  EXPECT_TRUE(j["cache"].contains("100000.0,-O2")) << j["cache"].dump();
}

// Kernel Tuner joins str() of every value with commas: a first value of "" still leaves its
// comma (",1"), and the export reads back.
TEST(Import, AKernelTunerExportKeysAnEmptyFirstValueWithItsComma) {
  MeasuredDataset d;
  d.device_name = "gpu";
  d.kernel_name = "k";
  d.format = "kernel_tuner";
  d.space = SearchSpace({categorical("flags", {Value{std::string()}, Value{std::string("-O3")}}),
                         ordinal("a", ints({1}))},
                        {});
  for (const auto& config : d.space.valid_configurations()) {
    d.entries.push_back({config, Measurement::success(1.0, {1.0})});
  }
  TempDir dir;
  Store store(dir.file("t.db"));
  const auto result = store.import_dataset(d);
  const auto text = export_study(store, result.study, ExportFormat::kernel_tuner);
  const auto j = nlohmann::json::parse(text);
  EXPECT_TRUE(j["cache"].contains(",1")) << j["cache"].dump();
  // An entry as Kernel Tuner writes it: the parameters in their order, then time and times.
  EXPECT_NE(text.find(R"(",1": {"flags":"","a":1,"time":1.0,"times":[1.0])"), std::string::npos)
      << text;
  EXPECT_TRUE(j["cache"].contains("-O3,1")) << j["cache"].dump();
  EXPECT_EQ(parse_measurements(text, "export").entries.size(), 2u);
}

// Kernel Tuner's True and False (read as 1 and 0) are written back as Python writes them: in
// the keys Kernel Tuner's simulation mode looks up (str(True)), and as JSON booleans.
TEST(Import, AKernelTunerExportKeysBooleansAsPythonWritesThem) {
  const std::string cache = R"({"device_name": "gpu", "kernel_name": "k",
    "tune_params_keys": ["bx", "unroll"], "tune_params": {"bx": [32, 64], "unroll": [true, false]},
    "objective": "time", "cache": {
      "32,True": {"bx": 32, "unroll": true, "time": 1.5, "times": [1.5]},
      "32,False": {"bx": 32, "unroll": false, "time": 2.5, "times": [2.5]},
      "64,True": {"bx": 64, "unroll": true, "time": "CompilationFailedConfig"}}})";
  TempDir dir;
  Store store(dir.file("t.db"));
  const auto first = store.import_dataset(parse_measurements(cache, "cache"));
  ASSERT_EQ(first.trials, 3u);
  const auto text = export_study(store, first.study, ExportFormat::kernel_tuner);
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["tune_params"]["unroll"], nlohmann::json::parse("[true, false]"));
  EXPECT_EQ(j["tune_params"]["bx"], nlohmann::json::parse("[32, 64]"));
  ASSERT_EQ(j["cache"].size(), 3u) << text;
  EXPECT_EQ(j["cache"]["32,True"]["unroll"], true) << text;
  EXPECT_EQ(j["cache"]["32,False"]["unroll"], false) << text;
  EXPECT_EQ(j["cache"]["64,True"]["time"], "CompilationFailedConfig") << text;
  // Read back into the same store: nothing new.
  const auto again = store.import_dataset(parse_measurements(text, "export"));
  EXPECT_EQ(again.study, first.study);
  EXPECT_EQ(again.kernel, first.kernel);
  EXPECT_EQ(again.trials, 0u);
  EXPECT_EQ(again.already_stored, 3u);
  EXPECT_EQ(store.list_studies().size(), 1u);
  // The stored space says so, and shares with the same space written with 1 and 0.
  const auto stored = store.get_kernel(first.kernel).space;
  EXPECT_EQ(stored["parameters"][1]["boolean"], true);
  const auto with_ints = SearchSpace::from_kernel_tuner(
      nlohmann::json::parse(R"({"bx": [32, 64], "unroll": [1, 0]})"), {}, {"bx", "unroll"});
  EXPECT_EQ(SearchSpace::parameters_fingerprint(stored), with_ints.parameters_fingerprint());
}

TEST(Import, AFileWithoutItsInputLearnsItFromItsTwinAndLeavesNoTaskBehind) {
  TempDir dir;
  const auto path = dir.file("t.db");
  Store store(path);
  const auto twin = generated_dataset("Test GPU 1", 1);
  ASSERT_FALSE(twin.task().empty());
  auto t4 = twin;  // T4 files name no input
  t4.problem_size = nullptr;
  const auto first = store.import_dataset(t4);
  EXPECT_TRUE(store.get_task(first.task).description.empty());
  // The twin names the input: the same measurements, so nothing new, but the study is now of
  // that input.
  const auto second = store.import_dataset(twin);
  EXPECT_EQ(second.study, first.study);
  EXPECT_EQ(second.trials, 0u);
  EXPECT_TRUE(second.input_added);
  EXPECT_EQ(store.get_study(first.study).task_id, second.task);
  EXPECT_EQ(store.get_task(second.task).description, twin.task());
  // The T4 file again: nothing new, and nothing stored (no task of its own).
  const auto before = testing::snapshot(path);
  const auto tasks = store.list_tasks().size();
  const auto third = store.import_dataset(t4);
  EXPECT_EQ(third.study, first.study);
  EXPECT_FALSE(third.input_added);
  EXPECT_EQ(third.task, second.task);
  EXPECT_EQ(store.list_tasks().size(), tasks);
  EXPECT_EQ(testing::snapshot(path), before);
  // Given another input now, it is said which one the study keeps.
  ImportOptions elsewhere;
  elsewhere.input = nlohmann::json{{"problem_size", {9, 9}}};
  const auto fourth = store.import_dataset(t4, elsewhere);
  EXPECT_EQ(fourth.input_kept, twin.task().dump());
  EXPECT_EQ(testing::snapshot(path), before);
  // A T4 file given its input is filed with it from the start.
  ImportOptions with_input;
  with_input.input = nlohmann::json{{"problem_size", {1, 2}}};
  const auto given = store.import_dataset(generated_dataset("Test GPU 2", 2), with_input);
  EXPECT_EQ(store.get_task(given.task).description, *with_input.input);
}

TEST(Import, TheSameMeasurementsAreStoredOnceAndAReRunNeedsAName) {
  TempDir dir;
  const auto path = dir.file("t.db");
  Store store(path);
  const auto data = generated_dataset("Test GPU 1", 1);
  const auto first = store.import_dataset(data);
  EXPECT_EQ(store.get_study(first.study).settings.value("unit", ""), "ms");
  const auto before = testing::snapshot(path);
  // Again (an import script run twice): nothing to add, and nothing changes.
  const auto repeated = store.import_dataset(data);
  EXPECT_EQ(repeated.study, first.study);
  EXPECT_EQ(repeated.trials, 0u);
  EXPECT_EQ(repeated.already_stored, 96u);
  EXPECT_EQ(testing::snapshot(path), before);
  // Under another study name: that would store every measurement twice.
  ImportOptions renamed;
  renamed.study_name = "re-measured";
  try {
    store.import_dataset(data, renamed);
    ADD_FAILURE() << "the same measurements under another name must be refused";
  } catch (const Conflict& e) {
    EXPECT_THAT(e.what(), HasSubstr("these measurements were imported before: study 1 \"import "
                                    "convolution on Test GPU 1 (task 1)\" (convolution on Test "
                                    "GPU 1) holds all 96 of them, with the same results"));
  }
  // Another space under the same default name is not "this dataset".
  auto other_space = data;
  other_space.space = SearchSpace({ordinal("block_size_x", ints({16, 32, 64, 128, 256}))}, {});
  for (auto& e : other_space.entries) e.config.resize(1);
  other_space.entries.resize(5);
  for (std::size_t i = 0; i < 5; ++i)
    other_space.entries[i].config = {other_space.space.parameter(0).values[i]};
  try {
    store.import_dataset(other_space);
    ADD_FAILURE() << "a second import under the same name must be refused";
  } catch (const Conflict& e) {
    EXPECT_THAT(e.what(), HasSubstr("another search space (tune_params) was imported before"));
    // Another kernel filed under this name by mistake takes --kernel; a new space, --study.
    EXPECT_THAT(e.what(), HasSubstr("if it is another kernel, give it its own name (tunebase "
                                    "import --kernel NAME"));
    EXPECT_THAT(e.what(), HasSubstr("else give another study name"));
  }
  // A broken file is told what is wrong with it, not that the name is taken.
  auto broken = data;
  broken.entries.front().result.cost_seconds = -1.0;
  try {
    store.import_dataset(broken);
    ADD_FAILURE() << "a negative cost must be refused";
  } catch (const Conflict& e) {
    ADD_FAILURE() << e.what();
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("cost_seconds must be a finite number >= 0"));
  }
  EXPECT_EQ(testing::snapshot(path), before);

  // Another run on the same device (other times) needs a study name of its own.
  const auto rerun = generated_dataset("Test GPU 1", 2);
  try {
    store.import_dataset(rerun);
    ADD_FAILURE() << "a re-run under the default name must be refused";
  } catch (const Conflict& e) {
    EXPECT_THAT(e.what(), HasSubstr("with other results (another run?) was imported before"));
  }
  EXPECT_EQ(testing::snapshot(path), before);
  const auto again = store.import_dataset(rerun, renamed);
  EXPECT_NE(again.study, first.study);
  EXPECT_EQ(again.machine, first.machine);
  EXPECT_EQ(again.kernel, first.kernel);
  EXPECT_EQ(again.task, first.task);

  // Another device shares kernel and task, and is a prior for the first.
  ImportOptions on_node;
  on_node.machine_name = "gpu-node-7";
  const auto other = store.import_dataset(generated_dataset("Test GPU 2", 2), on_node);
  EXPECT_EQ(store.get_machine(other.machine).name, "gpu-node-7");
  EXPECT_EQ(other.task, first.task);
  PriorQuery not_first;
  not_first.kernel_name = "convolution";
  not_first.exclude_machine = first.machine;
  EXPECT_EQ(store.prior_trials(not_first).size(), data.entries.size());
}

TEST(Import, ACacheThatGrewAddsItsNewEntriesToTheEarlierImport) {
  TempDir dir;
  Store store(dir.file("t.db"));
  const auto full = generated_dataset("Test GPU 1", 1);
  auto partial = full;  // a Kernel Tuner run imported while it was going
  partial.entries.resize(50);
  const auto first = store.import_dataset(partial);
  EXPECT_EQ(first.trials, 50u);
  EXPECT_EQ(first.already_stored, 0u);
  // Under another study name, the shared measurements would be stored twice.
  ImportOptions elsewhere;
  elsewhere.study_name = "copy";
  try {
    store.import_dataset(full, elsewhere);
    ADD_FAILURE() << "a grown cache under another name must be refused";
  } catch (const Conflict& e) {
    EXPECT_THAT(e.what(), HasSubstr("the file extends study 1"));
    EXPECT_THAT(e.what(), HasSubstr("to add its 46 new ones there"));
  }
  EXPECT_EQ(store.trials(first.study).size(), 50u);

  const auto grown = store.import_dataset(full);
  EXPECT_EQ(grown.study, first.study);
  EXPECT_EQ(grown.already_stored, 50u);
  EXPECT_EQ(grown.trials, full.entries.size() - 50);
  EXPECT_EQ(store.trials(first.study).size(), full.entries.size());
  EXPECT_EQ(store.get_study(first.study).budget, static_cast<std::int64_t>(full.entries.size()));
  EXPECT_EQ(store.list_studies("convolution").size(), 1u);
  // Nothing new the third time.
  const auto third = store.import_dataset(full);
  EXPECT_EQ(third.study, first.study);
  EXPECT_EQ(third.trials, 0u);
  EXPECT_EQ(store.trials(first.study).size(), full.entries.size());
  EXPECT_EQ(store.get_study(first.study).budget, static_cast<std::int64_t>(full.entries.size()));
}

TEST(Import, AFileWithoutProblemSizeIsTheTaskItsReplayMeasures) {
  TempDir dir;
  Store store(dir.file("t.db"));
  auto data = generated_dataset("Test GPU 1", 1);
  data.problem_size = nullptr;
  const auto imported = store.import_dataset(data);
  // ReplayEvaluator::task() of such a file is {}: the same task, not a second input.
  EXPECT_EQ(store.get_task(imported.task).description, nlohmann::json::object());
  EXPECT_EQ(store.upsert_task("convolution", nlohmann::json::object()).id, imported.task);
}

TEST(Import, FailureLeavesNothing) {
  TempDir dir;
  const auto path = dir.file("t.db");
  { Store store(path); }
  const auto before = testing::snapshot(path);
  auto data = generated_dataset("Test GPU 1", 1);

  {
    // A malformed entry near the end.
    auto bad = data;
    bad.entries.back().config.pop_back();
    Store store(path);
    EXPECT_THROW(store.import_dataset(bad), InvalidInput);
    EXPECT_EQ(testing::snapshot(path), before);
    EXPECT_TRUE(store.list_machines().empty());
  }
  {
    // SQLite itself refusing a row in the middle.
    Database db(path);
    db.exec("CREATE TRIGGER inject_failure BEFORE INSERT ON trials WHEN NEW.config_key = '" +
                data.space.key(data.entries[data.entries.size() / 2].config) +
                "' BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
            "adding a failure trigger");
  }
  Store store(path);
  try {
    store.import_dataset(data);
    FAIL() << "the trigger must stop the import";
  } catch (const StorageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("injected failure"));
  }
  EXPECT_EQ(testing::snapshot(path), before);
}

TEST(Import, GemmSizedDatasetInOneTransaction) {
  // As many rows as the GEMM caches: 17,956. (Its speed is measured in bench/, not here.)
  constexpr std::size_t kGemmValid = 17956;
  auto data = generated_dataset("Big GPU", 3);
  const auto base = data.entries;
  data.space = SearchSpace({integer_range("i", 0, static_cast<std::int64_t>(kGemmValid) - 1)}, {});
  data.entries.clear();
  for (std::size_t i = 0; i < kGemmValid; ++i) {
    Observation o;
    o.config = {Value{static_cast<std::int64_t>(i)}};
    o.result = base[i % base.size()].result;
    data.entries.push_back(std::move(o));
  }
  TempDir dir;
  Store store(dir.file("t.db"));
  const auto start = std::chrono::steady_clock::now();
  const auto result = store.import_dataset(data);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::cout << "imported " << result.trials << " rows in " << took.count() << " s\n";
  EXPECT_EQ(result.trials, kGemmValid);
  EXPECT_EQ(store.trial_counts(result.study).total, static_cast<std::int64_t>(kGemmValid));
}

// A real cache (161 failures, compile and benchmark times) imported and exported again: every
// entry as the file holds it, and the same header.
TEST(Import, ARealCacheExportedAgainHoldsItsEntries) {
  TUNEBASE_SHARED_FILE_OR_SKIP(file, "gpu/convolution_hub/A4000.json.gz");
  const auto original = nlohmann::json::parse(read_maybe_gzipped(file));
  TempDir dir;
  Store store(dir.file("t.db"));
  const auto result = store.import_dataset(read_measurements(file));
  const auto exported =
      nlohmann::json::parse(export_study(store, result.study, ExportFormat::kernel_tuner));
  for (const auto* key :
       {"device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params"}) {
    EXPECT_EQ(exported[key], original[key]) << key;
  }
  ASSERT_EQ(exported["cache"].size(), original["cache"].size());
  // The header's fields and tune_params in the file's order (a JSON object would sort them).
  const auto text = export_study(store, result.study, ExportFormat::kernel_tuner);
  EXPECT_LT(text.find("\"problem_size\""), text.find("\"objective\""));
  EXPECT_LT(text.find("\"use_shmem\": ["), text.find("\"filter_height\": ["));
  std::size_t differ = 0;
  for (const auto& [key, entry] : original["cache"].items()) {
    ASSERT_TRUE(exported["cache"].contains(key)) << key;
    const auto& mine = exported["cache"][key];
    bool same = mine.size() == entry.size();
    for (const auto& [field, value] : entry.items()) {
      if (!mine.contains(field)) {
        same = false;
      } else if (value.is_number_float() && mine[field].is_number()) {
        same = same && std::abs(mine[field].get<double>() - value.get<double>()) <=
                           1e-12 * std::abs(value.get<double>());
      } else {
        same = same && mine[field] == value;
      }
    }
    if (!same && ++differ <= 3) ADD_FAILURE() << key << ": " << entry << " became " << mine;
  }
  EXPECT_EQ(differ, 0u);
}

TEST(Import, RealA100GemmCache) {
  TUNEBASE_SHARED_FILE_OR_SKIP(file, "gpu/gemm/A100.json.gz");
  const auto data = read_measurements(file);
  TempDir dir;
  const auto path = dir.file("t.db");
  ImportResult result;
  {
    Store store(path);
    const auto start = std::chrono::steady_clock::now();
    result = store.import_dataset(data);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::cout << "imported " << result.trials << " A100 GEMM rows in " << took.count() << " s\n";
  }
  Store store(path, StoreOptions{.read_only = true});
  EXPECT_EQ(result.trials, 17956u);
  EXPECT_EQ(result.failed, 0u);
  EXPECT_EQ(store.get_machine(result.machine).name, "A100-PCIE-40GB");
  EXPECT_EQ(store.get_kernel(result.kernel).name, "Xgemm");
  const auto best = store.best_trial("Xgemm", result.machine, result.task, Direction::minimize);
  ASSERT_TRUE(best.has_value());
  EXPECT_NEAR(best->result.objective, 8.51811, 1e-5);  // README: min time of gemm/A100
  EXPECT_EQ(best->result.raw.size(), 32u);
  EXPECT_EQ(best->config.size(), 15u);
}

}  // namespace
}  // namespace tunebase::db
