// End-to-end tests of the tunebase command line: real processes, real files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "core/space.h"
#include "db/store.h"
#include "tests/support/shared_data.h"

namespace tunebase {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A 1D Laplacian of n rows (symmetric, 2n - 1 stored entries) written to path.
std::string write_laplacian_1d(const std::string& path, int n) {
  std::ofstream out(path);
  out << "%%MatrixMarket matrix coordinate real symmetric\n"
      << n << " " << n << " " << 2 * n - 1 << "\n";
  for (int i = 1; i <= n; ++i) {
    out << i << " " << i << " 2\n";
    if (i < n) out << i + 1 << " " << i << " -1\n";
  }
  return path;
}

class Cli : public ::testing::Test {
 protected:
  CliRun run(const std::string& args) {
    const auto out = dir_.file("out.txt");
    const auto err = dir_.file("err.txt");
    const std::string cmd = std::string(TUNEBASE_CLI) + " " + args + " >" + out + " 2>" + err;
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }
  std::string db() const { return dir_.file("t.db"); }
  /// Sweeps study s1 of SpMV on a small 2D Laplacian in this test's database.
  CliRun sweep_s1(const std::string& strategy, int budget, int repeats) {
    return run("sweep --kernel spmv --problem laplacian2d --size 24 --strategy " + strategy +
               " --budget " + std::to_string(budget) + " --repeats " + std::to_string(repeats) +
               " --study s1 --no-progress --db " + db());
  }
  nlohmann::json trials(const std::string& study) {
    auto r = run("trials --study '" + study + "' --json --db " + db());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("trials");
  }
  /// Another writer's connection holding the database (BEGIN EXCLUSIVE) once study `name` has
  /// a trial leased; nullptr when that did not come within 4 s.
  sqlite3* hold_database_once_leased(const std::string& name) {
    sqlite3* other = nullptr;
    for (int i = 0; i < 200 && !other; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (trials_so_far(name) == 0) continue;
      if (sqlite3_open(db().c_str(), &other) != SQLITE_OK ||
          sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) != SQLITE_OK) {
        sqlite3_close(other);
        other = nullptr;
      }
    }
    return other;
  }
  /// How many trials study `name` has stored, 0 while it (or the database) does not exist: a
  /// sweep running beside the test may be creating the file when it is read.
  std::size_t trials_so_far(const std::string& name) {
    try {
      if (!std::filesystem::exists(db())) return 0;
      db::Store store(db(), {.read_only = true});  // a reader: never in a writer's way
      const auto study = store.find_study(name);
      return study ? store.trials(study->id).size() : 0;
    } catch (const std::exception&) {
      return 0;
    }
  }
  /// A space file of one integer x in 1..high; its path.
  std::string x_space(int high) {
    const auto path = dir_.file("space.json");
    std::ofstream(path) << R"({"parameters": [{"name": "x", "type": "integer", "low": 1, "high": )"
                        << high << "}]}";
    return path;
  }
  /// A space file of one integer x in 0..3.
  std::string x4_space() {
    const auto space_file = dir_.file("space.json");
    std::ofstream(space_file)
        << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 3}]})";
    return space_file;
  }
  /// Sweeps study `study` of `cmd` over x in 0..3 (exhaustively, in order) with `budget`.
  CliRun sweep_x4(const std::string& study, const std::string& cmd, int budget,
                  const std::string& extra = "") {
    return run("sweep --kernel command --space " + x4_space() + " --cmd '" + cmd +
               "' --strategy exhaustive --budget " + std::to_string(budget) + " --study " + study +
               " --no-progress " + extra + " --db " + db());
  }
  /// Raises the budget of `study` so that `n` more leases fit: a server leases only within it.
  static void make_room(db::Store& store, db::StudyId study, std::size_t n) {
    const auto budget = store.get_study(study).budget;
    const auto wanted = store.budget_used(study) + static_cast<std::int64_t>(n);
    if (budget && *budget < wanted) store.set_study_budget(study, wanted);
  }
  /// Leases configurations of `study` not measured yet, one per (client, seconds), as other
  /// processes sharing the database would hold them; returns their keys. The study must have
  /// `unmeasured` such configurations.
  std::vector<std::string> lease_unmeasured(
      const std::string& study, std::size_t unmeasured,
      const std::vector<std::pair<std::string, double>>& leases) {
    db::Store store(db());
    const auto s = *store.find_study(study);
    const auto space = SearchSpace::from_json(store.get_kernel(s.kernel_id).space);
    std::set<std::string> measured;
    for (const auto& t : store.trials(s.id)) measured.insert(t.config_key);
    std::vector<Configuration> fresh;
    for (const auto& c : space.valid_configurations()) {
      if (!measured.count(space.key(c))) fresh.push_back(c);
    }
    EXPECT_EQ(fresh.size(), unmeasured);
    std::vector<std::string> keys;
    make_room(store, s.id, leases.size());
    for (std::size_t i = 0; i < leases.size() && i < fresh.size(); ++i) {
      keys.push_back(space.key(fresh[i]));
      store.add_pending_trial(s.id, space.config_to_json(fresh[i]), keys.back(), leases[i].first,
                              leases[i].second);
    }
    return keys;
  }
  /// Starts `tunebase serve` on a free port of this test's database, stopped when the test
  /// ends; returns its URL and sets token_.
  std::string start_server() {
    const auto r = run("token create test --db " + db());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    token_ = r.out.substr(0, r.out.find('\n'));
    const auto out = dir_.file("serve.out");
    const std::string cmd = std::string(TUNEBASE_CLI) + " serve --port 0 --db " + db() + " >" +
                            out + " 2>" + dir_.file("serve.err");
    server_ = fork();
    EXPECT_GE(server_, 0);
    if (server_ == 0) {
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const std::string listening = "listening on ";
    for (int k = 0; k < 200; ++k) {
      const auto text = slurp(out);
      if (const auto at = text.find(listening); at != std::string::npos) {
        const auto end = text.find_first_of(" \n", at + listening.size());
        if (end != std::string::npos)
          return text.substr(at + listening.size(), end - at - listening.size());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the server did not start: " << slurp(dir_.file("serve.err"));
    return "";
  }
  void TearDown() override {
    if (server_ > 0) {
      kill(server_, SIGTERM);
      waitpid(server_, nullptr, 0);
    }
  }
  testing::TempDir dir_;
  pid_t server_ = 0;
  std::string token_;
};

TEST_F(Cli, SweepStoresEveryTrialAndResumes) {
  auto r = sweep_s1("random", 6, 3);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("best:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speedup"), std::string::npos) << r.out;
  EXPECT_EQ(trials("s1").size(), 6u);
  r = run("studies --db " + db());
  EXPECT_NE(r.out.find("6 trials, 6 ok, completed]"), std::string::npos) << r.out;
  // The default configuration is measured first, as the baseline. A resumed study keeps its
  // strategy, and says so when another is asked for.
  r = sweep_s1("lhs", 9, 3);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("keeps its strategy random"), std::string::npos) << r.err;
  const auto all = trials("s1");
  EXPECT_EQ(all.size(), 9u);
  std::set<std::string> configs;
  for (const auto& t : all) configs.insert(t["config"].dump());
  EXPECT_EQ(configs.size(), 9u) << "a resumed sweep repeated a configuration";
  // Trials as the API writes them (GET /v1/trials/{id}): the result is "value".
  EXPECT_TRUE(all[0].at("value").is_number()) << all[0].dump();
  EXPECT_EQ(all[0].at("study_id"), 1) << all[0].dump();
  // Each configuration was leased before it was measured; the result ended the lease.
  for (const auto& t : all) {
    EXPECT_TRUE(t.at("finished_at").is_string()) << t.dump();
    EXPECT_TRUE(t.at("lease_expires_at").is_null()) << t.dump();
    EXPECT_EQ(t.at("lease_expired"), false) << t.dump();
  }
  r = run("best --kernel spmv --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["source"], "measured");
  const double best_seconds = nlohmann::json::parse(r.out)["objective"];
  // As a Kernel Tuner cache (in milliseconds), which an import reads back.
  const auto cache = dir_.file("s1-cache.json");
  r = run("export --study s1 --format kernel_tuner -o " + cache + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto other_db = dir_.file("other.db");
  r = run("import " + cache + " --db " + other_db);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("imported 9 trials"), std::string::npos) << r.out;
  r = run("best --kernel spmv --json --db " + other_db);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["objective"].get<double>(), best_seconds * 1e3);
  r = run("export --study s1 --format csv --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 10);
  const auto csv = r.out;
  r = run("export --study s1 --format CSV --db " + db());  // as a user may write it
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, csv);
  r = run("studies --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto studies = nlohmann::json::parse(r.out)["studies"];
  ASSERT_EQ(studies.size(), 1u);
  EXPECT_EQ(studies[0]["name"], "s1");
  EXPECT_EQ(studies[0]["trials"]["total"], 9);
  EXPECT_TRUE(studies[0]["task"].contains("matrix")) << studies[0].dump();
  r = run("machines --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["machines"].size(), 1u);
  // This host, by its CPU model where the system names one.
  const auto cpu =
      nlohmann::json::parse(r.out)["machines"][0]["fingerprint"].value("cpu_model", "");
  if (!cpu.empty()) {
    EXPECT_NE(run("machines --db " + db()).out.find("  [CPU " + cpu + "]\n"), std::string::npos);
  }

  // To a file: the same text; never over the database itself (that emptied it), and a
  // failed export leaves no partial file.
  const auto file = dir_.file("s1.csv");
  r = run("export --study s1 --format csv -o " + file + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(file), csv);
  r = run("export --study s1 -o " + db() + " --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is the database"), std::string::npos) << r.err;
  EXPECT_EQ(trials("s1").size(), 9u);
  r = run("export --study s1 -o " + dir_.file("absent/s1.json") + " --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
}

// A space file checked before a sweep: its valid configurations counted (or estimated), and its
// default judged.
// As Kernel Tuner's brute_force: without --budget, exhaustive measures the whole space (40
// configurations, more than the default budget of 30); a smaller --budget says what it leaves.
TEST_F(Cli, ExhaustiveMeasuresTheWholeSpaceUnlessGivenABudget) {
  const auto space = dir_.file("ab.json");
  std::ofstream(space)
      << R"({"tune_params": {"a": [1, 2, 3, 4, 5, 6, 7, 8], "b": [1, 2, 3, 4, 5]}})";
  const auto sweep = "sweep --kernel command --space " + space +
                     " --cmd 'echo {a}.{b}' --strategy exhaustive --no-progress --db " + db();
  auto r = run(sweep + " --study all");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trials("all").size(), 40u);
  EXPECT_EQ(r.err.find("note: exhaustive"), std::string::npos) << r.err;
  r = run(sweep + " --study part --budget 10");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trials("part").size(), 10u);
  EXPECT_NE(r.err.find("note: exhaustive measures 10 of the 40 valid configurations"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, SpaceCountsTheValidConfigurationsAndJudgesTheDefault) {
  const auto small = dir_.file("small.json");
  std::ofstream(small)
      << R"({"tune_params": {"bx": [1, 2, 4, 8], "by": [1, 2, 4], "f": ["-O2", "-O3"]},
                             "restrictions": ["bx * by <= 8", "bx > 1"]})";
  auto r = run("space " + small);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("points:      24\n"), std::string::npos) << r.out;
  // bx in 2, 4, 8 with bx * by <= 8: 3 + 2 + 1 pairs, times 2 flags.
  EXPECT_NE(r.out.find("valid:       12 (50%)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(invalid: "), std::string::npos) << "bx = 1 breaks bx > 1: " << r.out;
  r = run("space --json " + small);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["valid"], 12);
  EXPECT_EQ(j["parameters"][2]["kind"], "categorical");
  EXPECT_FALSE(j["default_valid"].get<bool>());
  // A list of True and False reads as written.
  const auto flags = dir_.file("flags.json");
  std::ofstream(flags) << R"({"tune_params": {"bx": [16, 32], "use_shmem": [true, false]}})";
  r = run("space " + flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("use_shmem  ordinal, 2 values [true, false], default true"),
            std::string::npos)
      << r.out;

  // Too many to count: estimated from random points.
  const auto huge = dir_.file("huge.json");
  std::ofstream(huge) << R"({"tune_params": {"a": )" << nlohmann::json(std::vector<int>(1000, 0))
                      << R"(, "b": [0], "c": )" << nlohmann::json(std::vector<int>(1000, 0))
                      << R"(, "d": )" << nlohmann::json(std::vector<int>(100, 0)) << "}}";
  r = run("space " + huge);
  EXPECT_NE(r.exit_code, 0) << "duplicate values are refused: " << r.out;
  std::vector<int> thousand(1000);
  std::iota(thousand.begin(), thousand.end(), 0);
  std::ofstream(huge)
      << R"({"tune_params": {"a": )" << nlohmann::json(thousand) << R"(, "b": )"
      << nlohmann::json(thousand)
      << R"(, "c": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49]},
                             "restrictions": ["a < b"]})";
  r = run("space " + huge);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("points:      50000000\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("% of 100000 random points; estimated, as there are too many to count)"),
            std::string::npos)
      << r.out;
  r = run("space --json " + huge);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // a < b holds for 999 * 1000 / 2 of the 10^6 pairs.
  EXPECT_NEAR(nlohmann::json::parse(r.out)["valid_share_estimate"].get<double>(), 0.4995, 0.01)
      << r.out;
  r = run("space " + dir_.file("absent.json"));
  EXPECT_EQ(r.exit_code, 6) << r.err;
}

TEST_F(Cli, AConstraintThatDividesByZeroIsNamedWithItsFileValuesAndAGuard) {
  const auto space = dir_.file("divides.json");
  const auto write = [&](const std::string& a, const std::string& restriction) {
    std::ofstream(space) << R"({"tune_params": {"a": )" << a << R"(, "b": [1, 2, 4, 8]},
                               "restrictions": [")"
                         << restriction << R"("]})";
  };
  write("[0, 2, 4]", "b/a>=1");
  auto r = run("space " + space);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: " + space +
                       ": evaluating \"b/a>=1\": division by zero at a=0, b=1; guard the "
                       "divisor: \"a == 0 or b/a>=1\" keeps those "
                       "configurations, \"a != 0 and b/a>=1\" leaves them out"),
            std::string::npos)
      << r.err;
  // Met where the space is enumerated, past its defaults: the values and the guard still.
  write("[2, 0, 4]", "b/a>=1");
  r = run("space " + space);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("evaluating \"b/a>=1\": division by zero at a=0, b="), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("guard the divisor: \"a == 0 or b/a>=1\""), std::string::npos) << r.err;
  // Guarded as suggested, the space is counted.
  write("[0, 2, 4]", "a == 0 or b/a>=1");
  r = run("space " + space);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // a = 0 with any b, b >= 2 with a = 2, b >= 4 with a = 4.
  EXPECT_NE(r.out.find("valid:       9 (75%)"), std::string::npos) << r.out;
}

TEST_F(Cli, AResumedSweepMeasuresExpiredLeasesAndLeavesLiveOnesAlone) {
  auto r = sweep_s1("random", 3, 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {
    // A server's workers leased two more configurations of the study: one lease expired.
    db::Store store(db());
    const auto study = *store.find_study("s1");
    const auto space = SearchSpace::from_json(store.get_kernel(study.kernel_id).space);
    std::set<std::string> measured;
    for (const auto& t : store.trials(study.id)) measured.insert(t.config_key);
    std::vector<Configuration> fresh;
    for (const auto& c : space.valid_configurations()) {
      if (!measured.count(space.key(c)) && fresh.size() < 2) fresh.push_back(c);
    }
    ASSERT_EQ(fresh.size(), 2u);
    make_room(store, study.id, 2);
    store.add_pending_trial(study.id, space.config_to_json(fresh[0]), space.key(fresh[0]),
                            "vanished", 0.001);
    store.expire_leases(std::chrono::system_clock::now() + std::chrono::seconds(1));
    store.add_pending_trial(study.id, space.config_to_json(fresh[1]), space.key(fresh[1]), "worker",
                            3600);
  }
  r = sweep_s1("random", 6, 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The budget of six counts the live lease, which the sweep leaves alone: five results, three
  // from before and two new (the expired lease is not one of them).
  EXPECT_NE(r.out.find("5 stored (2 in this run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; 1 still leased to other clients"), std::string::npos) << r.out;
  std::size_t finished = 0;
  std::vector<std::string> pending_clients;
  for (const auto& t : trials("s1")) {
    if (t["status"] == "pending") pending_clients.push_back(t["client_id"]);
    if (!t["finished_at"].is_null()) ++finished;
  }
  EXPECT_EQ(finished, 5u);
  EXPECT_EQ(pending_clients, std::vector<std::string>{"worker"});
}

// A stopped study whose dead worker holds a lease: delete names the lease and the way out,
// and --force ends it with the study.
TEST_F(Cli, DeleteEndsLiveLeasesOnlyWithForce) {
  auto r = sweep_s1("random", 2, 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::size_t valid = 0;
  {
    db::Store store(db());
    valid = *SearchSpace::from_json(store.get_kernel(store.find_study("s1")->kernel_id).space)
                 .valid_count();
  }
  lease_unmeasured("s1", valid - 2, {{"dead", 600000}});
  std::int64_t leased = 0;
  for (const auto& t : trials("s1")) {
    if (t["status"] == "pending") leased = t["id"].get<std::int64_t>();
  }
  {
    db::Store store(db());
    store.set_study_status(store.find_study("s1")->id, db::StudyStatus::stopped);
  }
  r = run("delete --study s1 --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("has 1 live lease (client \"dead\": trial " + std::to_string(leased) +
                       "): delete it once they reported or ended, or end them as you delete it"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("tunebase delete --force"), std::string::npos) << r.err;
  r = run("delete --study s1 --force --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("and its 3 trials, 1 of them live leases, ended"), std::string::npos)
      << r.out;
  EXPECT_FALSE(db::Store(db()).find_study("s1").has_value());
}

TEST_F(Cli, AResumedSweepKeepsTheStudysBudgetAndLeavesItActiveForOtherClientsLeases) {
  const auto sweep = [&](const std::string& budget) {
    return run(
        "sweep --kernel spmv --problem laplacian2d --size 24 --strategy random --repeats 1 " +
        budget + " --study b5 --no-progress --db " + db());
  };
  auto r = sweep("--budget 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Without --budget the study's own budget holds (not the default of a new study)...
  r = sweep("");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("5 stored (0 in this run"), std::string::npos) << r.out;
  EXPECT_EQ(trials("b5").size(), 5u);
  // ...and a --budget given replaces it, saying so.
  r = sweep("--budget 7");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("now has a budget of 7 evaluations (was 5)"), std::string::npos) << r.err;
  EXPECT_EQ(trials("b5").size(), 7u);
  {
    db::Store store(db());
    const auto study = *store.find_study("b5");
    EXPECT_EQ(study.budget, 7);
    EXPECT_EQ(study.status, db::StudyStatus::completed);
    // A server's worker holds a configuration of the study.
    const auto space = SearchSpace::from_json(store.get_kernel(study.kernel_id).space);
    std::set<std::string> measured;
    for (const auto& t : store.trials(study.id)) measured.insert(t.config_key);
    for (const auto& c : space.valid_configurations()) {
      if (measured.count(space.key(c))) continue;
      make_room(store, study.id, 1);
      store.add_pending_trial(study.id, space.config_to_json(c), space.key(c), "worker", 3600);
      break;
    }
  }
  // The budget is spent with the worker's lease counted, but its result may still come: the
  // study stays active, so that the worker is not told to stop.
  r = sweep("--budget 9");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 stored (1 in this run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 still leased to other clients (the study stays active"),
            std::string::npos)
      << r.out;
  db::Store store(db());
  EXPECT_EQ(store.find_study("b5")->status, db::StudyStatus::active);
}

TEST_F(Cli, StopEndsAnActiveStudyAndASweepResumesIt) {
  auto r = sweep_s1("random", 4, 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A completed study has nothing to stop.
  r = run("stop --study s1 --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is completed (its budget is spent)"), std::string::npos) << r.err;
  r = run("stop --study s1 --db " + dir_.file("absent.db"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("absent.db"))) << "stop created a database";
  EXPECT_NE(r.err.find("does not exist, so it holds no study 's1' to stop"), std::string::npos)
      << r.err;
  r = run("stop --study nosuch --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no study named 'nosuch'"), std::string::npos) << r.err;
  // A worker's lease keeps it active; stop ends it, and says so once.
  lease_unmeasured("s1", 816 - 4, {{"worker", 3600}});
  {
    db::Store store(db());
    store.set_study_status(store.find_study("s1")->id, db::StudyStatus::active);
  }
  r = run("stop --study s1 --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("study s1 (id 1) stopped"), std::string::npos) << r.out;
  r = run("stop --study 1 --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("was already stopped"), std::string::npos) << r.out;
  EXPECT_EQ(db::Store(db()).find_study("s1")->status, db::StudyStatus::stopped);
  EXPECT_EQ(trials("s1").size(), 5u) << "stop lost or added a trial";
  // A sweep with budget left takes a stopped study up again.
  r = sweep_s1("random", 7, 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("was stopped; this sweep resumes it"), std::string::npos) << r.err;
  EXPECT_EQ(trials("s1").size(), 7u);
}

TEST_F(Cli, ASweepThatStartsANewStudyNamesTheActiveOneItCouldResume) {
  const auto sweep_with = [&](const std::string& cmd, const std::string& extra) {
    return "sweep --kernel command --space " + x4_space() + " --cmd '" + cmd +
           "' --strategy exhaustive --no-progress " + extra + " --db " + db();
  };
  const auto sweep = sweep_with("echo {x}", "--budget 2");
  auto r = run(sweep);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A completed study is nothing to go on with.
  EXPECT_EQ(r.err.find("note: study"), std::string::npos) << r.err;
  r = run(sweep);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("note: study"), std::string::npos) << r.err;
  // As an interrupted sweep leaves them: both active, the newest named.
  std::vector<db::StudyRecord> studies;
  {
    db::Store store(db());
    studies = store.list_studies();
    ASSERT_EQ(studies.size(), 2u);
    for (const auto& s : studies) store.set_study_status(s.id, db::StudyStatus::active);
  }
  r = run(sweep);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto& newest = studies[1];
  EXPECT_NE(r.err.find("note: study '" + newest.name + "' (id " + std::to_string(newest.id.value) +
                       ") of this kernel, machine and input is active with 2 trials; tunebase "
                       "sweep --study '" +
                       newest.name + "' resumes it"),
            std::string::npos)
      << r.err;
  // Which study a sweep without --study uses is unchanged: a new one.
  EXPECT_EQ(db::Store(db()).list_studies().size(), 3u);
  // Another input (a command's includes its command line) is another study's business; so is
  // a study given by --study, which is resumed.
  r = run(sweep_with("echo {x}; true", "--budget 2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("note: study"), std::string::npos) << r.err;
  r = run(sweep_with("echo {x}", "--budget 3 --study '" + newest.name + "'"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("of this kernel, machine and input is active"), std::string::npos) << r.err;
}

TEST_F(Cli, StopEndsASweepThatIsRunningTheStudy) {
  const auto space = dir_.file("slow.json");
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 99}]})";
  const auto out = dir_.file("slow.out");
  std::thread sweep([&] {
    const std::string cmd = std::string(TUNEBASE_CLI) + " sweep --kernel command --space " + space +
                            " --cmd 'sleep 0.2; echo {x}' --strategy random --budget 60 " +
                            "--study slow --no-progress --db " + db() + " >" + out + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(out);
  });
  // Once it has measured a few, stop it from another process.
  for (int i = 0; i < 200 && trials_so_far("slow") < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto r = run("stop --study slow --db " + db());
  sweep.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto text = slurp(out);
  EXPECT_NE(text.find("stopped:    the study was stopped"), std::string::npos) << text;
  EXPECT_LT(trials("slow").size(), 30u) << "the sweep went on after the stop";
  EXPECT_EQ(db::Store(db()).find_study("slow")->status, db::StudyStatus::stopped);
}

TEST_F(Cli, AResumedSweepTakesBackLeasesThatEnded) {
  const auto sweep = [&](int budget) { return sweep_x4("leases", "sleep 0.4; echo {x}", budget); };
  auto r = sweep(1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A sweep killed (kill -9) mid-evaluation left its lease, which has ended but was never
  // expired; a worker holds another one that ends while the resumed sweep runs.
  const auto leased_keys = lease_unmeasured("leases", 3, {{"cli", 0.001}, {"worker", 0.5}});
  ASSERT_EQ(leased_keys.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  r = sweep(4);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 stored (3 in this run"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("still leased"), std::string::npos) << r.out;
  db::Store store(db());
  const auto study = *store.find_study("leases");
  EXPECT_EQ(study.status, db::StudyStatus::completed);
  std::set<std::string> measured;
  for (const auto& t : store.trials(study.id)) {
    if (t.finished_at && t.result.ok()) measured.insert(t.config_key);
  }
  EXPECT_EQ(measured.size(), 4u);
  for (const auto& key : leased_keys) EXPECT_TRUE(measured.count(key)) << key << " never measured";
}

// The study's budget raised while its sweep runs (POST /v1/studies/{id}/resume with a budget):
// the sweep goes on to it, rather than end at its own and complete a study with room left.
TEST_F(Cli, ASweepGoesOnToABudgetRaisedWhileItRuns) {
  CliRun r;
  // With its progress bar, which counts to the raised budget (lines, stderr being no terminal).
  std::thread sweep([&] {
    r = run("sweep --kernel command --space " + x4_space() +
            " --cmd 'sleep 0.3; echo {x}' --strategy exhaustive --budget 2 --study raised --db " +
            db());
  });
  std::optional<db::StudyRecord> study;
  {
    db::Store store(db());
    for (int i = 0; i < 200 && !study; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      study = store.find_study("raised");
    }
    if (study) store.set_study_budget(study->id, 4);
  }
  sweep.join();
  ASSERT_TRUE(study.has_value()) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  db::Store store(db());
  EXPECT_EQ(store.trial_counts(study->id).ok, 4) << r.out;
  EXPECT_EQ(store.get_study(study->id).status, db::StudyStatus::completed);
  EXPECT_NE(r.err.find(" 4/4 "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(" 4/2 "), std::string::npos) << "the bar kept the first budget: " << r.err;
}

TEST_F(Cli, AResumedSweepTakesBackAtOnceTheLeaseOfASweepThatDied) {
  const auto sweep = [&](int budget) { return sweep_x4("died", "echo {x}", budget); };
  auto r = sweep(1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A process that has ended: the pid of a sweep killed with kill -9 mid-evaluation, whose
  // parent has not read its exit status yet (a zombie, which kill(pid, 0) still finds).
  const pid_t dead = fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  siginfo_t exited{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(dead), &exited, WEXITED | WNOWAIT), 0);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  char ns[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/pid", ns, sizeof ns - 1), 0);
  const auto sweep_of = [&](pid_t pid, const std::string& pid_namespace) {
    return "sweep@" + std::string(host) + ":" + std::to_string(pid) + " " + pid_namespace;
  };
  // The leases live for an hour: one of the dead sweep, one of a sweep that runs (this
  // test's process), and one of a sweep in another pid namespace (a container with this host
  // name), whose pid means nothing here: both keep their configurations.
  const auto keys = lease_unmeasured("died", 3,
                                     {{sweep_of(dead, ns), 3600.0},
                                      {sweep_of(getpid(), ns), 3600.0},
                                      {sweep_of(dead, "pid:[1]"), 3600.0}});
  ASSERT_EQ(keys.size(), 3u);
  const auto& dead_key = keys[0];
  const auto& live_key = keys[1];
  r = sweep(4);
  waitpid(dead, nullptr, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("took back 1 lease of a sweep of this host"), std::string::npos) << r.err;
  db::Store store(db());
  const auto study = *store.find_study("died");
  EXPECT_EQ(study.status, db::StudyStatus::active);  // the live lease may still report
  std::set<std::string> measured;
  bool dead_lease_says_why = false;
  bool live_lease_kept = false;
  for (const auto& t : store.trials(study.id)) {
    if (t.finished_at && t.result.ok()) measured.insert(t.config_key);
    if (t.client_id == sweep_of(dead, ns)) {
      dead_lease_says_why = t.result.message.find("process " + std::to_string(dead) +
                                                  " of this host) ended") != std::string::npos;
    }
    if (t.client_id == sweep_of(getpid(), ns)) {
      live_lease_kept = t.result.status == TrialStatus::pending;
    }
  }
  EXPECT_EQ(measured.size(), 2u);
  EXPECT_TRUE(measured.count(dead_key)) << "the dead sweep's configuration was not measured";
  EXPECT_FALSE(measured.count(live_key));
  EXPECT_TRUE(dead_lease_says_why);
  EXPECT_TRUE(live_lease_kept);
  const auto counts = store.trial_counts(study.id);
  EXPECT_EQ(counts.lease_ended, 1);
  EXPECT_EQ(counts.pending, 2);
  r = run("trials --study died --db " + db());
  EXPECT_NE(r.out.find("   ended             -  {\"x\":"), std::string::npos) << r.out;
  // A live lease says whose it is and until when.
  EXPECT_NE(r.out.find("  (leased to " + sweep_of(getpid(), ns) + " until 20"), std::string::npos)
      << r.out;
}

TEST_F(Cli, ACommandsUnitIsReadAsPeopleWriteIt) {
  const auto space = x_space(4);
  const std::string sweep = "sweep --kernel command --space " + space +
                            " --strategy exhaustive --budget 4 --no-progress --json --db " + db();
  // A rate is better higher: minimising it would report the slowest configuration.
  auto r = run(sweep + " --cmd 'echo $(( {x} * 10 ))' --unit GFLOP/s --study rate");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--unit GFLOP/s is a rate, where higher is better: add --maximize"),
            std::string::npos)
      << r.err;
  r = run(sweep + " --cmd 'echo $(( {x} * 10 ))' --unit GFLOP/s --maximize --study rate");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["best"]["config"]["x"], 4);
  // trials and best show a rate with its unit, as sweep does.
  r = run("trials --study rate --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("40 GFLOP/s"), std::string::npos) << r.out;
  r = run("best --kernel command --maximize --db " + db());
  EXPECT_NE(r.out.find("40 GFLOP/s"), std::string::npos) << r.out << r.err;
  // A time per item is no rate: minimised.
  r = run(sweep + " --cmd 'echo {x}' --unit ms/step --study per-step");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["best"]["config"]["x"], 1);
  // "msec" is a time in ms.
  r = run(sweep + " --cmd 'echo {x}' --unit msec --study msec");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["unit"], "ms");
  EXPECT_EQ(j["best"]["config"]["x"], 1);
  // Measured both ways here: best --json says which one it answers, as GET /v1/best does.
  r = run("best --kernel command --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto best = nlohmann::json::parse(r.out);
  EXPECT_EQ(best["unit"], "ms") << r.out;
  EXPECT_NE(best.value("note", "").find("this is the minimize one; --maximize gives the other"),
            std::string::npos)
      << r.out;
}

// Listings show a configuration's parameters as the space declares them, not sorted by name as
// a JSON object would have them.
TEST_F(Cli, ListingsShowParametersInTheirDeclaredOrder) {
  const auto space = dir_.file("zyx.json");
  std::ofstream(space) << R"({"parameters": [
      {"name": "z", "type": "ordinal", "values": [2, 1]},
      {"name": "b", "type": "ordinal", "values": [1]},
      {"name": "a", "type": "categorical", "values": ["p"]}]})";
  auto r = run("sweep --kernel command --space " + space +
               " --cmd 'echo {z}' --strategy exhaustive --budget 2 --no-progress --study zyx "
               "--db " +
               db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string best = R"({"z":1,"b":1,"a":"p"})";
  EXPECT_NE(r.out.find("best:       " + best), std::string::npos) << r.out;
  r = run("best --kernel command --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("config:    " + best), std::string::npos) << r.out;
  r = run("trials --study zyx --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(R"(  {"z":2,"b":1,"a":"p"})"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  " + best), std::string::npos) << r.out;
}

TEST_F(Cli, AResumedStudyKeepsItsDirectionAndUnit) {
  const auto space = x_space(9);
  const std::string sweep = "sweep --kernel command --space " + space +
                            " --cmd 'echo {x}' --no-progress --study rate --db " + db();
  auto r = run(sweep + " --maximize --unit GFLOP/s --budget 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Resumed without the flags it would minimise a rate and call the worst trial best.
  r = run(sweep + " --budget 5");
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_NE(r.err.find("study 'rate' cannot be resumed as given: it maximizes its objective: add "
                       "--maximize; its objective is in GFLOP/s: give --unit GFLOP/s"),
            std::string::npos)
      << r.err;
  r = run(sweep + " --maximize --unit MB/s --budget 5");
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_NE(r.err.find("its objective is in GFLOP/s: give --unit GFLOP/s"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("--maximize;"), std::string::npos) << r.err;
  r = run("trials --study rate --db " + db());
  EXPECT_NE(r.out.find("3 trials"), std::string::npos) << r.out;  // nothing added
  r = run(sweep + " --maximize --unit GFLOP/s --budget 5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto best = nlohmann::json::parse(r.out)["best"];
  EXPECT_EQ(nlohmann::json::parse(r.out)["unit"], "GFLOP/s");
  // Its objective is named by its unit, not "time".
  r = run("studies --json --db " + db());
  EXPECT_EQ(nlohmann::json::parse(r.out)["studies"].at(0)["objective"], "GFLOP/s") << r.out;
  // best without --maximize takes the studies' direction: the highest.
  r = run("best --kernel command --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["config"], best["config"]) << r.out;
  EXPECT_NE(r.err.find("note: the studies of command maximize their objective"), std::string::npos)
      << r.err;
}

TEST_F(Cli, AnotherMatrixUnderAMeasuredNameIsRefused) {
  // Two 1D Laplacians of different sizes, both named lap.mtx.
  std::filesystem::create_directories(dir_.file("a"));
  std::filesystem::create_directories(dir_.file("b"));
  const auto first = write_laplacian_1d(dir_.file("a/lap.mtx"), 20);
  const auto second = write_laplacian_1d(dir_.file("b/lap.mtx"), 30);
  auto r = run("sweep --kernel spmv --matrix " + first +
               " --budget 2 --repeats 1 --no-progress --study s --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Resumed, or in a study of its own: either would file its times under the first matrix.
  for (const std::string study : {" --study s", ""}) {
    r = run("sweep --kernel spmv --matrix " + second + " --budget 3 --repeats 1 --no-progress" +
            study + " --db " + db());
    EXPECT_EQ(r.exit_code, 5) << study;
    EXPECT_NE(r.err.find("matrix lap is not the matrix lap measured before in this database "
                         "(task 1: 20 x 20 with 58 nonzeros; this one: 30 x 30 with 88 "
                         "nonzeros): an input is known by its file's name, so rename the file"),
              std::string::npos)
        << r.err;
  }
  r = run("studies --db " + db());
  EXPECT_NE(r.out.find("2 trials"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("3 trials"), std::string::npos) << r.out;
  // The same content again is the same input.
  r = run("sweep --kernel spmv --matrix " + first +
          " --budget 3 --repeats 1 --no-progress --study s --db " + db());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // PETSc's inputs hold the matrix's features in their description: refused all the same, and
  // no task is stored for the second.
  const std::string petsc = " --kernel petsc --budget 1 --repeats 1 --no-progress --db " + db();
  r = run("sweep --matrix " + first + petsc);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("sweep --matrix " + second + petsc);
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_NE(r.err.find("matrix lap is not the matrix lap measured before in this database"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("this one: 30 x 30 with 88 nonzeros)"), std::string::npos) << r.err;
  EXPECT_EQ(db::Store(db()).list_tasks("petsc").size(), 1u);
}

TEST_F(Cli, ASweepWhoseEvaluationsAllFailSaysWhyAndFails) {
  // The program prints its time on stderr: no evaluation finds a number.
  const auto r = sweep_x4("broken", "echo time {x} ms >&2", 3);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("best:       none (no successful evaluation)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failure:    "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(the last of 3 in this run)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no evaluation of study 'broken' succeeded (3 failed; the last: "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(trials("broken").size(), 3u);  // stored all the same: a failed evaluation is data
}

TEST_F(Cli, AResumedSweepCountsItsOwnFailuresApartFromTheStudys) {
  // x = 0 and 1 fail, 2 and 3 run; the second run measures only these.
  const std::string cmd = "test {x} -ge 2 && echo {x}";
  auto r = sweep_x4("half", cmd, 2);
  EXPECT_NE(r.exit_code, 0);
  r = sweep_x4("half", cmd, 4, "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["evaluated"], 2);
  EXPECT_EQ(j["failed_in_run"], 0);
  EXPECT_EQ(j["failed"], 2);
  r = sweep_x4("half", cmd, 4);
  EXPECT_NE(r.out.find("4 stored (0 in this run, 0 failed in it; 2 failed in all)"),
            std::string::npos)
      << r.out;
  // A budget below what the study holds is refused, not stored.
  r = sweep_x4("half", cmd, 3);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--budget 3 is below the 4 trials study 'half' already counts (stored or "
                       "leased): give at least 4, or leave --budget out to keep its budget of 4"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, ASweepSaysWhyMeasurementsOfAnotherSpaceAreNoPriors) {
  auto r = sweep_x4("four", "echo {x}", 4);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("no priors"), std::string::npos) << r.err;
  const auto sweep_to = [&](int high, const std::string& cmd, const std::string& study) {
    const auto space = dir_.file("x" + std::to_string(high) + ".json");
    std::ofstream(space) << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": )"
                         << high << "}]}";
    return run("sweep --kernel command --space " + space + " --cmd '" + cmd +
               "' --budget 2 --no-progress --study " + study + " --db " + db());
  };
  // The same program (input) on this machine: never a prior, whatever its space.
  r = sweep_to(5, "echo {x}", "six");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("no priors"), std::string::npos) << r.err;
  // Another program: both were priors but for their spaces.
  r = sweep_to(4, "echo {x}; true", "other");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no priors: the 2 other studies of command searched another space"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, AResumedStudyKeepsItsSeedAndItsChoiceOfPriors) {
  // Another program on this machine: its measurements are priors of a study that transfers.
  auto r = sweep_x4("other", "echo {x}; true", 4);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sweep = [&](const std::string& study, const std::string& cmd, int budget,
                         const std::string& extra) {
    return run("sweep --kernel command --space " + dir_.file("space.json") + " --cmd '" + cmd +
               "' --budget " + std::to_string(budget) + " --study " + study + " --no-progress " +
               extra + " --db " + db());
  };
  r = sweep("own", "echo {x}", 2, "--no-transfer --seed 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("priors:"), std::string::npos) << r.out;
  r = sweep("own", "echo {x}", 3, "--seed 7");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("study 'own' keeps its seed 5; --seed applies to new studies"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("priors:"), std::string::npos) << r.out;
  r = sweep("learns", "echo {x}; echo", 2, "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("priors:"), std::string::npos) << r.out;
  r = sweep("learns", "echo {x}; echo", 3, "--no-transfer");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("study 'learns' keeps learning from other machines' and inputs' "
                       "measurements; --no-transfer applies to new studies"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("priors:"), std::string::npos) << r.out;
  // A study's id resumes it, as its name does, keeping its seed.
  r = sweep("1", "echo {x}; true", 4, "--seed 9");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("study 'other' keeps its seed 0"), std::string::npos) << r.err;
  db::Store store(db());
  EXPECT_EQ(store.find_study("own")->settings["seed"], 5);
  EXPECT_EQ(store.find_study("own")->settings["transfer"], false);
}

TEST_F(Cli, SweepResumesAStudyByItsIdAsOtherCommandsNameIt) {
  auto r = sweep_x4("first", "echo {x}", 2);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto id = [&] {
    db::Store store(db());
    return std::to_string(store.find_study("first")->id.value);
  }();
  // The same sweep with the id goes on with the study of that id, as trials --study ID reads it.
  r = sweep_x4(id, "echo {x}", 4);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("study:      first (id " + id), std::string::npos) << r.out;
  EXPECT_EQ(trials(id).size(), 4U);
  {
    db::Store store(db());
    EXPECT_EQ(store.list_studies().size(), 1U);
  }
  // By id, as by name, a study resumes only on its kernel, machine and input.
  r = sweep_x4(id, "echo {x}; true", 4);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("study 'first' (id " + id + ") tunes command on"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("input {\"command\""), std::string::npos) << r.err;
  // An id no study has starts nothing: digits are never a new study's name.
  r = sweep_x4("99", "echo {x}", 4);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no study has id 99 in " + db() +
                       " (tunebase studies lists them): sweep --study resumes a study by its id "
                       "or name, and a new study's name of digits only would read as a study id; "
                       "add a letter"),
            std::string::npos)
      << r.err;
  db::Store store(db());
  EXPECT_EQ(store.list_studies().size(), 1U);
  EXPECT_EQ(store.trials(store.find_study("first")->id).size(), 4U);
}

TEST_F(Cli, ANewStudyRefusesAnOptionItsStrategyDoesNotReadAndAStoredOneStillResumes) {
  const std::string sweep = "sweep --kernel command --space " + x4_space() +
                            " --cmd 'echo {x}' --no-progress --strategy random --db " + db();
  auto r = run(sweep + " --budget 2 --study bad --options '{\"kappa\": 2}'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("strategy random takes no option \"kappa\" (another strategy's); its "
                       "options: seed"),
            std::string::npos)
      << r.err;
  {
    db::Store store(db());
    EXPECT_FALSE(store.find_study("bad").has_value());
  }
  // A study stored with such an option (before it was refused) is resumed as it was.
  r = run(sweep + " --budget 2 --study old");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db().c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw,
                         "UPDATE studies SET settings = json_set(settings, '$.strategy_options', "
                         "json('{\"kappa\": 2}')) WHERE name = 'old'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  r = run(sweep + " --budget 3 --study old");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trials("old").size(), 3u);
}

TEST_F(Cli, ASweepTakesStrategyOptionsAndAResumedStudyKeepsItsOwn) {
  auto r = sweep_x4("opts", "echo {x}", 2);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Checked by the strategy before anything is stored.
  const std::string sweep = "sweep --kernel command --space " + dir_.file("space.json") +
                            " --cmd 'echo {x}' --no-progress --budget 3 --db " + db();
  r = run(sweep + " --study bad --options '{\"initial_desing\": 2}'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown strategy option \"initial_desing\""), std::string::npos) << r.err;
  r = run(sweep + " --study bad --options '[1]'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--options must be a JSON object of strategy options"), std::string::npos)
      << r.err;
  db::Store store(db());
  EXPECT_FALSE(store.find_study("bad").has_value());
  r = run(sweep + " --study new --options '{\"min_feasible\": 0.2}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(store.find_study("new")->settings["strategy_options"]["min_feasible"], 0.2);
  r = run(sweep + " --study opts --options '{\"min_feasible\": 0.2}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("keeps its strategy options {}; --options applies to new studies"),
            std::string::npos)
      << r.err;
  // Resumed without --options: nothing to say.
  r = run(sweep + " --study new");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("strategy options"), std::string::npos) << r.err;
}

TEST_F(Cli, EachProgramMayHaveItsOwnKernelName) {
  auto r = sweep_x4("fast", "echo {x}", 4);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Another program, under its own name: neither learns from nor answers for the other.
  const std::string other = "sweep --kernel command --space " + dir_.file("space.json") +
                            " --cmd 'echo $(( 10 - {x} ))' --strategy exhaustive --budget 4 "
                            "--no-progress --db " +
                            db();
  r = run(other + " --kernel-name countdown --study countdown");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("priors:"), std::string::npos) << r.out;
  r = run("best --kernel countdown --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"x\":3}"), std::string::npos) << r.out;
  r = run("best --kernel command --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"x\":0}"), std::string::npos) << r.out;
  r = run(other + " --kernel-name spmv --study clash");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kernel-name spmv is a built-in kernel's name"), std::string::npos)
      << r.err;
}

TEST_F(Cli, BestForAnInputThisMachineDidNotMeasureSaysSo) {
  // Two inputs of one program (its command lines): the first measured here, the second on
  // another machine only.
  auto r = sweep_x4("here", "echo {x}", 4);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = sweep_x4("there", "echo $(( {x} + 1 ))", 4, "--machine other-box");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("best --kernel command --task 2 --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("source:    predicted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nothing measured for this input yet"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input:     task 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(not measured here, where other inputs were)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("as much as GPUs differ"), std::string::npos) << r.out;
}

TEST_F(Cli, ADefaultThatBreaksAConstraintIsNamedAsTheReasonForNoBaseline) {
  const auto space = dir_.file("constrained.json");
  std::ofstream(space) << R"({"parameters": [{"name": "x", "type": "integer", "low": 0,
    "high": 3, "default": 0}], "constraints": ["x >= 1"]})";
  const auto r =
      run("sweep --kernel command --space " + space +
          " --cmd 'echo {x}' --strategy exhaustive --budget 3 --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: the default configuration {\"x\":0} is not measured, so there is "
                       "no baseline to compare with: "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("x >= 1"), std::string::npos) << r.err;
}

TEST_F(Cli, RepeatsThatVaryMuchAreShownAndPointedOut) {
  // Each run prints a larger number (2, 4, 6, ...): five repeats far apart.
  const auto counter = dir_.file("counter");
  const auto r = sweep_x4("loud",
                          "n=$(cat " + counter + " 2>/dev/null || echo 1); echo $((n * 2)); " +
                              "echo $((n + 1)) > " + counter,
                          1, "--repeats 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("spread:     "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("% (interquartile range of its 5 repeats over their median)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("note: the best configuration's repeats vary by"), std::string::npos)
      << r.err;
  // Steady repeats get the line but no note.
  const auto steady = sweep_x4("quiet", "echo 5", 1, "--repeats 5");
  ASSERT_EQ(steady.exit_code, 0) << steady.err;
  EXPECT_NE(steady.out.find("spread:     0.0% "), std::string::npos) << steady.out;
  EXPECT_EQ(steady.err.find("repeats vary"), std::string::npos) << steady.err;
}

// Logs and warnings go to stderr: stdout is the answer, and with --json a program parses it.
TEST_F(Cli, WarningsGoToStderrAndLeaveTheJsonAlone) {
  const auto space = x_space(10);
  const std::string sweep = "sweep --kernel command --space " + space +
                            " --cmd 'echo {x}' --no-progress --json --db " + db();
  auto r = run(sweep + " --machine A --study a --budget 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run(sweep + " --machine B --study b --budget 3");  // transfer from A: a model is saved
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Models saved by another build are ignored with a warning.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(db().c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "UPDATE fitted_models SET parameters = '{\"junk\": 1}'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  EXPECT_GT(sqlite3_changes(other), 0);
  sqlite3_close(other);
  r = run(sweep + " --machine B --study b --budget 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: ignoring the fitted models saved in"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["trials"], 5) << r.out;
}

TEST_F(Cli, PredictForecastsConfigurationsOfAStudy) {
  auto r = sweep_x4("forecast", "echo $(( ({x} - 2) * ({x} - 2) + 1 ))", 4);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("predict --study forecast --config '{\"x\": 2}' --config '{\"x\": 0}' --json --db " +
          db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["predictions"].size(), 2u);
  for (const auto& p : j["predictions"]) {
    EXPECT_LE(p["lower"].get<double>(), p["mean"].get<double>()) << p.dump();
    EXPECT_LE(p["mean"].get<double>(), p["upper"].get<double>()) << p.dump();
  }
  // The optimum (1 at x = 2) is forecast below the edge (5 at x = 0).
  EXPECT_LT(j["predictions"][0]["mean"].get<double>(), j["predictions"][1]["mean"].get<double>());
  // A finished study is modelled from its own results: other machines' would not help.
  r = sweep_x4("short", "echo {x}", 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("predict --study short --config '{\"x\": 2}' --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("too few for a model (it needs 3; a study that is no longer active is "
                       "modelled from its own results only)"),
            std::string::npos)
      << r.err;
  r = run("predict --study forecast --config '{\"x\": 9}' --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("value 9 of parameter 'x' is not allowed"), std::string::npos) << r.err;
}

TEST_F(Cli, PredictFillsTheParametersAConfigLeavesOutWithTheSpacesDefaults) {
  const auto space = dir_.file("xy.json");
  std::ofstream(space) << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 3},
      {"name": "y", "type": "ordinal", "values": [1, 2, 4], "default": 2}],
      "constraints": ["x != y"]})";
  auto r = run("sweep --kernel command --space " + space +
               " --cmd 'echo $(( {x} * {y} + 1 ))' --strategy exhaustive --budget 6 --study xy "
               "--no-progress --db " +
               db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Only the parameters that matter to the user: the others take the space's defaults, said.
  r = run("predict --study xy --config '{\"x\": 1}' --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["predictions"][0]["config"],
            (nlohmann::json{{"x", 1}, {"y", 2}}))
      << r.out;
  EXPECT_NE(r.err.find("leaves out parameters, given the space's defaults: y=2"), std::string::npos)
      << r.err;
  // A whole configuration is taken as given, without a note.
  r = run("predict --study xy --config '{\"x\": 1, \"y\": 4}' --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("leaves out"), std::string::npos) << r.err;
  // A name the space does not have is still an error naming those it has.
  r = run("predict --study xy --config '{\"z\": 1}' --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown parameter 'z'; parameters are: x, y"), std::string::npos) << r.err;
  // A default filled in that breaks a constraint is named as filled in.
  r = run("predict --study xy --config '{\"x\": 2}' --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("violates constraint \"x != y\" (--config {\"x\": 2} left out parameters, "
                       "given the space's defaults: y=2; give them in --config)"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, CommandEvaluatorTunesAnyProgram) {
  const auto space = dir_.file("space.json");
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 9}]})";
  // (x - 6)^2 + 1, computed by the shell: the best is x = 6.
  auto r = run("sweep --kernel command --space " + space +
               " --cmd 'echo result: $(( ({x} - 6) * ({x} - 6) + 1 ))' --strategy exhaustive "
               "--budget 12 --unit ms --no-progress --json --db " +
               db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["best"]["config"]["x"], 6);
  EXPECT_DOUBLE_EQ(j["best"]["objective"].get<double>(), 1.0);
  EXPECT_EQ(j["unit"], "ms");
  EXPECT_EQ(j["stopped"], "every valid configuration is measured");
  r = run("best --kernel command --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("objective: 1.000 ms\n"), std::string::npos) << r.out;

  // A value "" (no flag) is a configuration like any other.
  const auto flags = dir_.file("flags.json");
  std::ofstream(flags)
      << R"({"parameters": [{"name": "f", "type": "categorical", "values": ["", "-v"]}]})";
  r = run("sweep --kernel command --space " + flags +
          " --cmd 'echo {f} 3' --strategy exhaustive --budget 2 --study flags --no-progress --db " +
          db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trials("flags").size(), 2u);

  // A score to maximise is a plain number, not seconds.
  r = run("sweep --kernel command --space " + space +
          " --cmd 'echo $(( 50 - ({x} - 6) * ({x} - 6) ))' --maximize --strategy exhaustive "
          "--budget 10 --no-progress --study score --db " +
          db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("objective:  50\n"), std::string::npos) << r.out;
  r = run("best --kernel command --maximize --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("objective: 50\n"), std::string::npos) << r.out;

  // Trials that all failed are not "nothing measured".
  const auto failing = dir_.file("failing.db");
  r = run("sweep --kernel command --space " + space +
          " --cmd 'exit 3' --strategy exhaustive --budget 2 --no-progress --db " + failing);
  ASSERT_EQ(r.exit_code, 1) << r.err;  // stored, and the sweep says nothing worked
  r = run("best --kernel command --db " + failing);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no successful measurement (2 evaluations, all failed: tunebase trials "
                       "--study 1 shows why)"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, BadInputIsExplainedWithANonZeroExit) {
  // A database holding a study already: no bad input may change it or leave a study behind.
  ASSERT_EQ(sweep_x4("held", "echo $(( {x} + 1 ))", 3).exit_code, 0);
  const auto held_before = trials("held");
  ASSERT_EQ(held_before.size(), 3u);
  const auto studies_before = run("studies --db " + db()).out;

  auto r = run("sweep --kernel fft --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("known kernels"), std::string::npos) << r.err;
  // A flag the parser refuses has the same exit status (CLI11's own were 105 to 109).
  r = run("sweep --budget ten --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--budget"), std::string::npos) << r.err;
  EXPECT_EQ(run("sweep --help").exit_code, 0);
  // Not read as 2^64 - 1.
  r = run("sweep --kernel spmv --seed -1 --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--seed"), std::string::npos) << r.err;
  // A deadline past a day overflowed, and every request body timed out at once.
  r = run("serve --body-timeout-ms 10000000000000 --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--body-timeout-ms must be 1 to 86400000"), std::string::npos) << r.err;
  // A mistyped kernel is named as such, not as one that does not read --matrix.
  r = run("sweep --kernel petscc --matrix m.mtx --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown kernel 'petscc'"), std::string::npos) << r.err;

  const auto space = dir_.file("bad_space.json");
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "values": [1, 2]}], "constraints": ["x > y"]})";
  r = run("sweep --kernel command --space " + space + " --cmd 'echo {x}' --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown parameter 'y'"), std::string::npos) << r.err;
  // Kernel Tuner's "restrictions" in a tunebase space were dropped: x = 1 ran against them.
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "values": [1, 2]}], "restrictions": ["x > 1"]})";
  r = run("sweep --kernel command --space " + space + " --cmd 'echo {x}' --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown field \"restrictions\""), std::string::npos) << r.err;

  const auto matrix = dir_.file("not_a_matrix.mtx");
  std::ofstream(matrix) << "hello world\n1 2 3\n";
  r = run("sweep --kernel spmv --matrix " + matrix + " --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("MatrixMarket"), std::string::npos) << r.err;

  const auto truncated = dir_.file("truncated.mtx");
  std::ofstream(truncated)
      << "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1.0\n2 2 1.0\n";
  r = run("sweep --kernel spmv --matrix " + truncated + " --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.err.find(truncated + ":4: truncated: the size line declares 4 entries but the file ends "
                             "after 2"),
      std::string::npos)
      << r.err;

  r = run("sweep --kernel spmv --matrix " + dir_.file("missing.mtx") + " --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("missing.mtx"), std::string::npos) << r.err;

  EXPECT_EQ(trials("held"), held_before);
  EXPECT_EQ(run("studies --db " + db()).out, studies_before);
}

TEST_F(Cli, AMistypedCommandIsNamedWithTheCommandsThereAre) {
  // It was answered with "A subcommand is required", as if none had been given.
  auto r = run("show --study 1 --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'tunebase show'; the commands of tunebase are sweep, "
                       "space, best, trials"),
            std::string::npos)
      << r.err;
  r = run("token creat ci --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'tunebase token creat'; the commands of tunebase token "
                       "are create, list, revoke"),
            std::string::npos)
      << r.err;
  r = run("studies --db " + db());  // a real command still runs (to its own error here)
  EXPECT_EQ(r.err.find("unknown command"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

TEST_F(Cli, ListingsOfAnEmptyDatabaseSaySoOnStderr) {
  ASSERT_EQ(run("token create ci --db " + db()).exit_code, 0);  // creates the database
  for (const std::string what : {"studies", "machines"}) {
    const auto r = run(what + " --db " + db());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "");  // nothing for a script to read
    EXPECT_NE(r.err.find("no " + what + " in " + db() + " yet"), std::string::npos) << r.err;
  }
}

TEST_F(Cli, ANonDatabaseFileIsRefusedAndLeftAlone) {
  const auto path = dir_.file("notes.db");
  const std::string content = "these are my notes, not a database\n";
  std::ofstream(path) << content;
  auto r = run("sweep --kernel spmv --problem laplacian2d --size 8 --budget 2 --db " + path);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("not a SQLite database"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(path), content);
  r = run("best --kernel spmv --db " + dir_.file("absent.db"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("absent.db"))) << "a query created a database";
}

TEST_F(Cli, AResultWaitsForADatabaseAnotherWriterHoldsPastTheBusyTimeout) {
  const auto space = dir_.file("one.json");
  std::ofstream(space) << R"({"parameters": [{"name": "x", "values": [7]}]})";
  const auto out = dir_.file("held.out");
  std::thread sweep([&] {
    const std::string cmd = std::string(TUNEBASE_CLI) + " sweep --kernel command --space " + space +
                            " --cmd 'sleep 1; echo {x}' --budget 1 --study held --no-progress " +
                            "--db " + db() + " >" + out + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(out);
  });
  // While the configuration is measured, another writer takes the database for longer than
  // the 5 s a write waits.
  sqlite3* other = hold_database_once_leased("held");
  EXPECT_NE(other, nullptr) << "never held the database while the sweep measured";
  if (other) {
    std::this_thread::sleep_for(std::chrono::milliseconds(7000));
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(other);
  }
  sweep.join();
  ASSERT_NE(other, nullptr);
  const auto text = slurp(out);
  EXPECT_NE(text.find("trying again to store the result of trial 1"), std::string::npos) << text;
  const auto stored = trials("held");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0]["status"], "ok") << stored;
  EXPECT_EQ(stored[0]["value"], 7.0) << stored;
}

TEST_F(Cli, ASecondInterruptWhileAResultWaitsForTheDatabaseNamesIt) {
  const auto space = dir_.file("one.json");
  std::ofstream(space) << R"({"parameters": [{"name": "x", "values": [7]}]})";
  const auto err = dir_.file("held.err");
  const std::string cmd = std::string(TUNEBASE_CLI) + " sweep --kernel command --space " + space +
                          " --cmd 'sleep 1; echo {x}' --budget 1 --study held --no-progress --db " +
                          db() + " >/dev/null 2>" + err;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // While the configuration is measured, another writer takes the database.
  sqlite3* other = hold_database_once_leased("held");
  EXPECT_NE(other, nullptr) << "never held the database while the sweep measured";
  for (int i = 0; i < 600 && slurp(err).find("trying again to store") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  if (other) {
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(other);
  }
  ASSERT_NE(other, nullptr);
  const auto text = slurp(err);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status << text;
  // The measurement is not lost without a word: its configuration and value are printed.
  EXPECT_NE(text.find(R"(the result of trial 1 {"x":7} was not stored: objective 7)"),
            std::string::npos)
      << text;
}

TEST_F(Cli, InterruptKeepsEveryFinishedTrial) {
  const auto space = dir_.file("space.json");
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 99}]})";
  const std::string cmd = std::string(TUNEBASE_CLI) + " sweep --kernel command --space " + space +
                          " --cmd 'sleep 0.2; echo {x}' --strategy random --budget 100 "
                          "--study interrupted --no-progress --db " +
                          db() + " >" + dir_.file("o") + " 2>" + dir_.file("e");
  // The sweep's exit status after `sig` 1.5 s into it.
  const auto interrupted_after = [&](int sig) {
    const pid_t pid = fork();
    EXPECT_GE(pid, 0);
    if (pid == 0) {
      ::signal(SIGHUP, SIG_DFL);  // as in a terminal, whatever the test runner set
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status));
    return WEXITSTATUS(status);
  };
  EXPECT_EQ(interrupted_after(SIGINT), 130) << slurp(dir_.file("e"));
  auto stored = trials("interrupted");
  EXPECT_GE(stored.size(), 2u);
  EXPECT_LT(stored.size(), 100u);
  for (const auto& t : stored) EXPECT_EQ(t["status"], "ok") << t.dump();
  EXPECT_NE(slurp(dir_.file("o")).find("interrupted"), std::string::npos);
  // The summary says how to go on: a sweep run again without --study starts a new study.
  EXPECT_NE(slurp(dir_.file("o")).find("resume:     the same sweep with --study 'interrupted'"),
            std::string::npos)
      << slurp(dir_.file("o"));
  // Told at once that the evaluation under way is finished first.
  EXPECT_NE(slurp(dir_.file("e")).find("interrupted: stopping after the evaluation under way"),
            std::string::npos)
      << slurp(dir_.file("e"));
  // SIGTERM (a batch system's) ends it the same way, with the status a shell gives it.
  const auto before = stored.size();
  EXPECT_EQ(interrupted_after(SIGTERM), 143) << slurp(dir_.file("e"));
  stored = trials("interrupted");
  EXPECT_GT(stored.size(), before);
  for (const auto& t : stored) EXPECT_EQ(t["status"], "ok") << t.dump();
  // So does SIGHUP (a closed terminal, a dropped ssh connection), instead of ending tunebase
  // at once with the command left running and its trial leased.
  const auto before_hangup = stored.size();
  EXPECT_EQ(interrupted_after(SIGHUP), 129) << slurp(dir_.file("e"));
  stored = trials("interrupted");
  EXPECT_GT(stored.size(), before_hangup);
  for (const auto& t : stored) EXPECT_EQ(t["status"], "ok") << t.dump();
}

TEST_F(Cli, AnInterruptEndsWith130WhenTheSummarysPipeIsClosed) {
  // As `tunebase sweep ... | tee log` and Ctrl-C: the terminal's SIGINT ends tee too, and the
  // summary goes to a pipe nobody reads.
  const std::string space = x_space(99);
  const auto closed_stdout_sweep = [&](const std::string& args, int sig) {
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    const std::string cmd = std::string(TUNEBASE_CLI) + " sweep --kernel command --space " + space +
                            " " + args + " --no-progress --db " + db() + " 2>" + dir_.file("e");
    const pid_t pid = fork();
    EXPECT_GE(pid, 0);
    if (pid == 0) {
      ::signal(SIGPIPE, SIG_DFL);  // as a shell starts it, whatever the test runner set
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    close(out[0]);  // the reader is gone
    if (sig != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      kill(pid, sig);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status))
        << "ended by signal " << WTERMSIG(status) << ": " << slurp(dir_.file("e"));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(closed_stdout_sweep("--cmd 'sleep 0.2; echo {x}' --budget 100 --study piped", SIGINT),
            130)
      << slurp(dir_.file("e"));
  EXPECT_GE(trials("piped").size(), 2u);
  EXPECT_EQ(slurp(dir_.file("e")).find("error:"), std::string::npos) << slurp(dir_.file("e"));
  // Not interrupted, a summary that could not be written is an error a script sees, not a
  // tuned kernel with no word.
  EXPECT_EQ(closed_stdout_sweep("--cmd 'echo {x}' --budget 2 --study whole", 0), 6)
      << slurp(dir_.file("e"));
  EXPECT_NE(slurp(dir_.file("e")).find("error: tunebase sweep: stdout could not be written to"),
            std::string::npos)
      << slurp(dir_.file("e"));
  EXPECT_EQ(trials("whole").size(), 2u);
}

// Alive, and not a zombie waiting for a reaper.
bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

TEST_F(Cli, ASecondInterruptEndsAtOnceAndTakesTheCommandWithIt) {
  const auto space = dir_.file("space.json");
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 9}]})";
  const auto child_pid = dir_.file("child.pid");
  const std::string cmd = std::string(TUNEBASE_CLI) + " sweep --kernel command --space " + space +
                          " --cmd 'sleep 30 & echo $! > " + child_pid +
                          "; wait' --budget 3 --no-progress --db " + db() + " >" + dir_.file("o") +
                          " 2>" + dir_.file("e");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t sleeper = 0;
  for (int k = 0; k < 100 && sleeper == 0; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream(child_pid) >> sleeper;
  }
  ASSERT_GT(sleeper, 0) << slurp(dir_.file("e"));
  ASSERT_TRUE(process_running(sleeper));
  kill(pid, SIGINT);  // the first waits for the trial...
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(pid, SIGINT);  // ...the second does not, and must not leave the command behind
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  bool gone = false;
  for (int k = 0; k < 50 && !gone; ++k) {
    gone = !process_running(sleeper);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the command's process " << sleeper << " outlived tunebase";
  if (!gone) kill(sleeper, SIGKILL);
  // The trial under way is given back at once, not left leased for the lease's hour, and it is
  // no failure of its configuration.
  db::Store store(db(), {.read_only = true});
  const auto studies = store.list_studies();
  ASSERT_EQ(studies.size(), 1u);
  const auto stored = store.trials(studies[0].id);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_TRUE(stored[0].lease_expired()) << to_string(stored[0].result.status);
  EXPECT_NE(stored[0].result.message.find("released by client"), std::string::npos)
      << stored[0].result.message;
  EXPECT_NE(slurp(dir_.file("e")).find("interrupted again: the command under way is killed"),
            std::string::npos)
      << slurp(dir_.file("e"));
}

TEST_F(Cli, ACommandStoppedWithTunebaseIsGivenBackNotStoredAsAFailure) {
  // The command writes its process group (its shell's pid) and takes 3 s.
  const auto group_file = dir_.file("group");
  const std::string cmd = std::string(TUNEBASE_CLI) + " sweep --kernel command --space " +
                          x_space(9) + " --cmd 'echo $$ > " + group_file +
                          "; sleep 3; echo {x}' --budget 3 --study stopped --no-progress --db " +
                          db() + " >" + dir_.file("o") + " 2>" + dir_.file("e");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t group = 0;
  for (int k = 0; k < 100 && group == 0; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream(group_file) >> group;
  }
  ASSERT_GT(group, 0) << slurp(dir_.file("e"));
  // A stop that reaches the command's group too (systemd's KillMode=control-group, kill 0):
  // tunebase first, as they come.
  kill(pid, SIGTERM);
  for (int k = 0; k < 100 && slurp(dir_.file("e")).find("interrupted:") == std::string::npos; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-group, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143) << slurp(dir_.file("e"));
  // Not a failure of the default configuration, which would never be measured again: its lease
  // is released, and the next sweep measures it.
  {
    db::Store store(db(), {.read_only = true});
    const auto stored = store.trials(store.find_study("stopped")->id);
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_TRUE(stored[0].lease_expired())
        << to_string(stored[0].result.status) << " " << stored[0].result.message;
  }
  EXPECT_NE(slurp(dir_.file("e")).find("was stopped with tunebase (killed by signal 15)"),
            std::string::npos)
      << slurp(dir_.file("e"));
}

TEST_F(Cli, ACommandThatCannotRunStopsTheSweepAndStoresNothing) {
  const auto program = dir_.file("bench.sh");
  auto r = sweep_x4("missing", program + " {x}", 4);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("the command cannot be run"), std::string::npos) << r.err;
  // In the shell's words: "/bin/sh: 1: PROGRAM: not found" (dash), "No such file or directory"
  // (bash).
  EXPECT_NE(r.err.find("the shell saying: /bin/sh: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(program + ": "), std::string::npos) << r.err;
  {
    // No failure stored, and the study not completed: its configurations are measured once the
    // program is there.
    db::Store store(db(), {.read_only = true});
    const auto study = *store.find_study("missing");
    EXPECT_EQ(study.status, db::StudyStatus::active);
    for (const auto& t : store.trials(study.id)) {
      EXPECT_FALSE(t.finished_at.has_value()) << t.result.message;
    }
  }
  std::ofstream(program) << "#!/bin/sh\necho $1\n";
  r = sweep_x4("missing", program + " {x}", 4);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // found, but not executable
  EXPECT_NE(r.err.find(program + ": Permission denied"), std::string::npos) << r.err;
  std::filesystem::permissions(program, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  r = sweep_x4("missing", program + " {x}", 4, "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["evaluated"], 4);
  EXPECT_EQ(j["failed"], 0);
}

TEST_F(Cli, AWorkerThatCannotRunItsCommandOrMeasuresNothingExitsNonZero) {
  const auto url = start_server();
  const auto worker = [&](const std::string& study, const std::string& cmd) {
    return run("worker --kernel command --server " + url + " --token " + token_ + " --space " +
               x4_space() + " --cmd '" + cmd + "' --kernel-name " + study + " --create-study " +
               study + " -q");
  };
  // One misconfigured node must not fail the study for every worker.
  auto r = worker("missing", dir_.file("nosuch") + " {x}");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("the command cannot be run"), std::string::npos) << r.err;
  {
    db::Store store(db(), {.read_only = true});
    const auto study = *store.find_study("missing");
    EXPECT_EQ(study.status, db::StudyStatus::active);
    for (const auto& t : store.trials(study.id)) {
      EXPECT_FALSE(t.finished_at.has_value()) << t.result.message;
      EXPECT_TRUE(t.lease_expired()) << "a lease left for its hour";
    }
  }
  // A command that runs but never succeeds: stored (failures are data), and said with a
  // non-zero exit, as a sweep does.
  r = worker("failing", "false {x}");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("4 trials evaluated (4 failed)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("none of the 4 trials this worker evaluated succeeded (the last: "),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, AWorkerTakesAStudyByNameAndNamesTheCloseOnesOfAMisspeltName) {
  const auto url = start_server();
  const auto worker = [&](const std::string& study_options) {
    return run("worker --kernel command --server " + url + " --token " + token_ + " --space " +
               x4_space() + " --cmd 'echo {x}' --kernel-name x4 " + study_options +
               " --max-trials 1 -q");
  };
  auto r = worker("--create-study x4-study");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Workers started together with one --create-study: the later ones join the study made.
  r = worker("--create-study x4-study");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("joined study 1 (x4-study, which was made already)"), std::string::npos)
      << r.out;
  r = worker("--study x4-study");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("worker: 1 trials evaluated"), std::string::npos) << r.out;
  r = worker("--study 1");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = worker("--study X4_Study");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("the server has no study named 'X4_Study'; did you mean 'x4-study'?"),
            std::string::npos)
      << r.err;
  r = worker("--study gemm");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("no study named 'gemm' (its studies: 'x4-study';"), std::string::npos)
      << r.err;
}

TEST_F(Cli, AnAbsurdSpeedupIsPrintedInAFewDigits) {
  // The default configuration (x = 0) prints 1e308, the others 1.
  const auto r = sweep_x4("absurd", "if [ {x} = 0 ]; then echo 1e308; else echo 1; fi", 2);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nspeedup:    1e+308x over the default configuration\n"), std::string::npos)
      << r.out;
}

// A Kernel Tuner cache of a toy kernel on `device`: t(a, b) = scale * (1 + (a - 3)^2 + (b -
// best_b)^2) ms over a, b in 0..7.
std::string toy_cache(const std::string& device, double scale, int best_b) {
  nlohmann::json cache = {
      {"device_name", device},
      {"kernel_name", "toy"},
      {"tune_params_keys", {"a", "b"}},
      {"tune_params", {{"a", {0, 1, 2, 3, 4, 5, 6, 7}}, {"b", {0, 1, 2, 3, 4, 5, 6, 7}}}},
      {"cache", nlohmann::json::object()}};
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      const double t = scale * (1.0 + (a - 3) * (a - 3) + (b - best_b) * (b - best_b));
      cache["cache"][std::to_string(a) + "," + std::to_string(b)] = {
          {"a", a}, {"b", b}, {"time", t}};
    }
  }
  return cache.dump();
}

// Resuming a study on another input names both; only a command's input is its command line.
TEST_F(Cli, ResumingOnAnotherInputSaysWhichAndWhy) {
  auto sized = [&](int n) {
    auto cache = nlohmann::json::parse(toy_cache("GPU-A", 1.0, 5));
    cache["problem_size"] = {n};
    const auto file = dir_.file("toy" + std::to_string(n) + ".json");
    std::ofstream(file) << cache.dump();
    return run("sweep --kernel replay --replay " + file +
               " --budget 2 --no-progress --study sized --db " + db());
  };
  ASSERT_EQ(sized(64).exit_code, 0);
  auto r = sized(128);
  EXPECT_EQ(r.exit_code, 5);  // a conflict
  EXPECT_NE(r.err.find("input {\"problem_size\":[64]}, not {\"problem_size\":[128]}"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("command line"), std::string::npos) << r.err;

  ASSERT_EQ(sweep_x4("cmd", "echo {x}", 1).exit_code, 0);
  r = sweep_x4("cmd", "echo 2{x}", 1);
  EXPECT_EQ(r.exit_code, 5);  // a conflict
  EXPECT_NE(r.err.find("(a command's input includes its command line)"), std::string::npos)
      << r.err;
}

// A Kernel Tuner cache records no restrictions: a sweep of a space that restricts the same
// parameters and values learns from it, and proposes only what its restrictions allow.
TEST_F(Cli, ARestrictedSpaceLearnsFromAnImportedCacheOfItsParameters) {
  const auto gpu_a = dir_.file("toy-a.json");
  std::ofstream(gpu_a) << toy_cache("GPU-A", 1.0, 5);
  ASSERT_EQ(run("import " + gpu_a + " --db " + db()).exit_code, 0);
  const auto gpu_b = dir_.file("toy-b.json");
  std::ofstream(gpu_b) << toy_cache("GPU-B", 2.0, 4);
  auto cache = nlohmann::json::parse(toy_cache("GPU-B", 2.0, 4));
  nlohmann::json space = {{"tune_params", cache["tune_params"]},
                          {"restrictions", {"a + b >= 6", "b != 7"}}};
  const auto restricted = dir_.file("restricted.json");
  std::ofstream(restricted) << space.dump();
  auto r = run("sweep --kernel replay --replay " + gpu_b + " --space " + restricted +
               " --budget 5 --no-progress --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("no priors"), std::string::npos) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["strategy"], "bo-transfer") << r.out;
  const auto trials =
      nlohmann::json::parse(run("trials --study " + std::to_string(summary["study_id"].get<int>()) +
                                " --json --db " + db())
                                .out)["trials"];
  ASSERT_EQ(trials.size(), 5u);
  for (const auto& t : trials) {
    const int a = t["config"]["a"];
    const int b = t["config"]["b"];
    EXPECT_TRUE(a + b >= 6 && b != 7) << t.dump();
  }
  // Nor does an import of that space's parameters take it for another space.
  r = run("import " + gpu_b + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("other search space"), std::string::npos) << r.err;
  // Other values are another space, and the note says which.
  cache["tune_params"]["a"] = {0, 1, 2, 3, 4, 5, 6};
  const auto fewer = dir_.file("fewer.json");
  std::ofstream(fewer) << nlohmann::json{{"tune_params", cache["tune_params"]}}.dump();
  r = run("sweep --kernel replay --replay " + gpu_b + " --space " + fewer +
          " --budget 3 --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // (The restricted study was of this machine and input: never a prior.)
  EXPECT_NE(r.err.find("no priors: the 1 other study of toy searched another space (parameter a: "
                       "ordinal 0, 1, 2, 3, 4, 5, 6, 7 there, ordinal 0, 1, 2, 3, 4, 5, 6 here)"),
            std::string::npos)
      << r.err;
}

// A sweep exported as a Kernel Tuner cache (times in ms, failures as RuntimeFailedConfig) and
// imported into its own database is what the study holds already: nothing is stored twice.
TEST_F(Cli, ReimportingAnExportedSweepStoresNothingNew) {
  ASSERT_EQ(sweep_x4("mine", "test {x} -ne 2 && echo 1{x}7", 4, "--unit us").exit_code, 0);
  const auto file = dir_.file("mine.json");
  ASSERT_EQ(run("export --study mine --format kernel_tuner -o " + file + " --db " + db()).exit_code,
            0);
  const auto r = run("import " + file + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nothing new: study 1 holds all 4 measurements of this file"),
            std::string::npos)
      << r.out;
  db::Store store(db(), {.read_only = true});
  EXPECT_EQ(store.list_studies().size(), 1u);
  EXPECT_EQ(store.list_kernels().size(), 1u);
}

// An imported study has no strategy of its own: a sweep resuming it searches as a new study
// would, and --strategy is not "kept" from it; a resumed study's own strategy is the one
// checked against the space, not the --strategy that does not apply to it.
TEST_F(Cli, ASweepResumesAnImportedStudy) {
  auto cache = nlohmann::json::parse(toy_cache("GPU-A", 1.0, 5));
  cache["cache"].erase("7,7");  // one left to measure
  const auto file = dir_.file("toy.json");
  std::ofstream(file) << cache.dump();
  ASSERT_EQ(run("import " + file + " --db " + db()).exit_code, 0);
  const std::string study = "'import toy on GPU-A (task 1)'";
  auto r = run("sweep --kernel replay --replay " + file + " --study " + study +
               " --budget 64 --strategy random --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("was imported: its search goes on with random"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("keeps its strategy"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("(id 1, strategy random)"), std::string::npos) << r.out;
}

// How stored studies reached their best, against the best either found: the toy's optimum
// (1.0 at a=3, b=5) is among the 64 configurations, which exhaustive search measures all of.
TEST_F(Cli, ConvergenceComparesStoredStudies) {
  const auto file = dir_.file("toy.json");
  std::ofstream(file) << toy_cache("GPU-A", 1.0, 5);
  for (const std::string strategy : {"exhaustive", "random"}) {
    ASSERT_EQ(run("sweep --kernel replay --replay " + file + " --strategy " + strategy +
                  " --budget 64 --no-progress --study " + strategy + " --db " + db())
                  .exit_code,
              0);
  }
  const auto svg = dir_.file("convergence.svg");
  auto r = run("convergence --study exhaustive --study random --svg " + svg + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("reference: 1.000 ms, the best of exhaustive"), std::string::npos) << r.out;
  // Exhaustive search in declared order reaches a=3, b=5 at evaluation 3 * 8 + 5 + 1 = 30;
  // random search of all 64 finds it too, at some point.
  EXPECT_NE(r.out.find("exhaustive       64   0.029       30       30       30   0.100   0.500   "
                       "1.000       -\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nrandom           64   0.029"), std::string::npos) << r.out;
  std::ifstream in(svg);
  const std::string plot((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(plot.find("fraction of the reference (best so far)"), std::string::npos);
  EXPECT_NE(plot.find(">random</text>"), std::string::npos);

  r = run("convergence --study exhaustive --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["studies"][0]["reference"], 1.0);
  EXPECT_EQ(j["studies"][0]["evals_to"]["0.99"], 30.0);
  EXPECT_EQ(j["studies"][0]["fraction_at"]["100"], nullptr);  // fewer evaluations
  ASSERT_EQ(j["studies"][0]["fraction"].size(), 64u);
  EXPECT_EQ(j["studies"][0]["fraction"][29], 1.0);

  // Another machine's times do not compare with these: each study against its own best (the
  // GPU-B toy is twice as slow, its best 2.0 ms).
  const auto slower = dir_.file("toy-b.json");
  std::ofstream(slower) << toy_cache("GPU-B", 2.0, 5);
  ASSERT_EQ(
      run("sweep --kernel replay --replay " + slower +
          " --strategy exhaustive --budget 64 --no-progress --no-transfer --study b --db " + db())
          .exit_code,
      0);
  r = run("convergence --study exhaustive --study b --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("reference: each study's own best"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nb                64   0.029       30       30       30"),
            std::string::npos)
      << r.out;

  // Another kernel's study does not compare.
  ASSERT_EQ(sweep_x4("cmd", "echo {x}", 2).exit_code, 0);
  r = run("convergence --study exhaustive --study cmd --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("only studies of one kernel compare"), std::string::npos) << r.err;
}

// A study the server made with the default strategy, priors measured since: the trials
// listing (a reader) fits its model with them, and leaves the stored strategy to the server.
TEST_F(Cli, ADefaultStrategyFollowsPriorsWhereTheStudyIsSearchedNotRead) {
  const auto file = dir_.file("toy.json");
  std::ofstream(file) << toy_cache("GPU-A", 1.0, 5);
  ASSERT_EQ(run("sweep --kernel replay --replay " + file +
                " --budget 20 --no-progress --study prior --db " + db())
                .exit_code,
            0);
  {
    db::Store store(db());
    const auto prior = *store.find_study("prior");
    MachineInfo gpu_b;
    gpu_b.name = "GPU-B";
    refresh_fingerprint_hash(gpu_b);
    db::NewStudy later;
    later.name = "later";
    later.kernel = prior.kernel_id;
    later.machine = store.upsert_machine(gpu_b).id;
    later.task = prior.task_id;
    later.objective = prior.objective;
    later.strategy = "bo";  // no priors when it was made
    later.settings = {{"strategy_default", true}, {"transfer", true}, {"unit", "ms"}};
    store.create_study(later);
  }
  auto r = run("trials --study later --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("influence: "), std::string::npos) << r.out;
  EXPECT_EQ(db::Store(db()).find_study("later")->strategy, "bo");

  // A sweep that resumes it is a writer, and searches as the server would: with the priors.
  const auto gpu_b = dir_.file("toy-b.json");
  std::ofstream(gpu_b) << toy_cache("GPU-B", 2.0, 5);
  r = run("sweep --kernel replay --replay " + gpu_b +
          " --budget 3 --no-progress --study later --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: study 'later' now searches with bo-transfer (was bo): its strategy "
                       "follows its priors"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("strategy bo-transfer"), std::string::npos) << r.out;
  EXPECT_EQ(db::Store(db()).find_study("later")->strategy, "bo-transfer");
}

TEST_F(Cli, AReplayedFileWithoutTheDefaultSaysThereIsNoBaseline) {
  auto cache = nlohmann::json::parse(toy_cache("GPU-A", 1.0, 5));
  cache["cache"].erase("0,0");  // the first values, the default
  const auto file = dir_.file("nodefault.json");
  std::ofstream(file) << cache.dump();
  const auto r =
      run("sweep --kernel replay --replay " + file + " --budget 3 --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: the default configuration {\"a\":0,\"b\":0} is not among the "
                       "configurations the evaluator can measure"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("speedup:"), std::string::npos) << r.out;
  // Under a name of the user's (a T4 file names no kernel), as import --kernel files it.
  const auto named = run("sweep --kernel replay --replay " + file +
                         " --kernel-name toy_kernel --budget 2 --no-progress --db " + db());
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_NE(run("studies --db " + db()).out.find("[toy_kernel on GPU-A"), std::string::npos);
}

// The summary says what the default configuration, the baseline of the speedup, is: a Kernel
// Tuner cache declares no defaults, a space file may.
TEST_F(Cli, TheSummarySaysWhereTheDefaultComesFrom) {
  const auto file = dir_.file("toy.json");
  std::ofstream(file) << toy_cache("GPU-A", 1.0, 5);
  auto r = run("sweep --kernel replay --replay " + file +
               " --strategy random --budget 3 --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // t(0, 0) = 1 + 9 + 25 ms.
  EXPECT_NE(r.out.find("\ndefault:    35.000 ms (first value of each parameter: the space "
                       "declares no defaults)\n"),
            std::string::npos)
      << r.out;
  r = run("sweep --kernel replay --replay " + file +
          " --strategy random --budget 3 --study again --no-progress --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("default_from"), "first_values") << r.out;

  const auto space = dir_.file("declared.json");
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 3, "default": 2}]})";
  r = run("sweep --kernel command --space " + space +
          " --cmd 'echo $(( {x} + 1 ))' --budget 2 --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\ndefault:    3 (the space's declared defaults)\n"), std::string::npos)
      << r.out;
}

// A Kernel Tuner cache spans a space of which it measured only some configurations: a replay
// searches those, so tunebase space says how many there are beside the valid ones.
TEST_F(Cli, SpaceSaysHowManyConfigurationsACacheMeasured) {
  auto cache = nlohmann::json::parse(toy_cache("GPU-A", 1.0, 5));
  for (int b = 0; b < 8; ++b) cache["cache"].erase("7," + std::to_string(b));
  cache["cache"]["6,6"]["time"] = "RuntimeFailedConfig";
  const auto file = dir_.file("measured.json");
  std::ofstream(file) << cache.dump();
  auto r = run("space " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nvalid:       64 (100%)\nmeasured:    56 configurations (1 failed): a "
                       "replay searches only these\n"),
            std::string::npos)
      << r.out;
  r = run("space --json " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["measured"],
            nlohmann::json({{"configurations", 56}, {"failed", 1}}))
      << r.out;
  // A cache Kernel Tuner has only begun: the space stands, and the line says why none count.
  cache["cache"] = nlohmann::json::object();
  std::ofstream(file) << cache.dump();
  r = run("space " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nmeasured:    none that import or replay would take: "), std::string::npos)
      << r.out;
  // A space file measured nothing.
  cache.erase("cache");
  cache.erase("device_name");
  cache.erase("kernel_name");
  std::ofstream(file) << cache.dump();
  r = run("space --json " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out).contains("measured")) << r.out;
  r = run("space " + file);
  EXPECT_EQ(r.out.find("measured:"), std::string::npos) << r.out;
}

// An OpenCL kernel swept from the command line (PoCL on the CI machine's CPU): every trial
// measured on the device and stored.
TEST_F(Cli, AnOpenclKernelIsSweptAndItsTrialsStored) {
  const auto r =
      run("sweep --kernel opencl-gemm --size 64 --budget 5 --repeats 1 --study gemm --no-progress "
          "--db " +
          db());
  if (r.exit_code != 0 && r.err.find("0 device(s) found") != std::string::npos) {
    GTEST_SKIP() << "no OpenCL device found (install an ICD such as pocl-opencl-icd)";
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto stored = trials("gemm");
  ASSERT_EQ(stored.size(), 5u);
  std::set<std::string> configs;
  for (const auto& t : stored) {
    EXPECT_EQ(t.at("status"), "ok") << t.dump();
    EXPECT_GT(t.at("value").get<double>(), 0.0) << t.dump();
    configs.insert(t.at("config").dump());
  }
  EXPECT_EQ(configs.size(), 5u) << "a configuration was measured twice";
  const auto best = run("best --kernel opencl-gemm --json --db " + db());
  ASSERT_EQ(best.exit_code, 0) << best.err;
  EXPECT_EQ(nlohmann::json::parse(best.out).at("source"), "measured") << best.out;
}

// The user's own OpenCL kernel, tuned as Kernel Tuner's tune_kernel() would: each parameter a
// define, the grid from --problem-size and --grid-div-x, every configuration checked against
// the defaults' outputs. skip = 1 leaves odd elements alone: failed trials saying why, which a
// Kernel Tuner export calls RuntimeFailedConfig.
TEST_F(Cli, AnOwnOpenclKernelIsSweptVerifiedAndExported) {
  const auto source = dir_.file("scale.cl");
  std::ofstream(source) << R"(
__kernel void scale(__global float* y, __global const float* x, const float a, const int n) {
  const int base = get_group_id(0) * block_size_x * tile + get_local_id(0);
  for (int t = 0; t < tile; ++t) {
    const int i = base + t * block_size_x;
    if (i < n && (skip == 0 || i % 2 == 0)) y[i] = a * x[i];
  }
})";
  const auto space = dir_.file("space.json");
  std::ofstream(space) << R"({"tune_params": {"block_size_x": [16, 32], "tile": [1, 2],
                                "skip": [0, 1]}, "restrictions": ["block_size_x * tile <= 64"]})";
  const auto args = dir_.file("args.json");
  std::ofstream(args) << R"([{"type": "float", "size": 1000, "output": true},
    {"type": "float", "size": 1000, "fill": "random"}, {"type": "float", "value": 2.5},
    {"type": "int32", "value": 1000}])";
  const std::string own = "sweep --kernel opencl-source --source " + source +
                          " --kernel-name scale --space " + space +
                          " --problem-size 1000 --grid-div-x block_size_x,tile --repeats 1 "
                          "--no-progress --db " +
                          db();
  auto r = run(own + " --args " + args + " --strategy exhaustive --budget 8 --study own");
  if (r.exit_code != 0 && r.err.find("0 device(s) found") != std::string::npos) {
    GTEST_SKIP() << "no OpenCL device found (install an ICD such as pocl-opencl-icd)";
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto stored = trials("own");
  ASSERT_EQ(stored.size(), 8u);
  for (const auto& t : stored) {
    if (t.at("config").at("skip") == 0) {
      EXPECT_EQ(t.at("status"), "ok") << t.dump();
    } else {
      EXPECT_EQ(t.at("status"), "failed") << t.dump();
      EXPECT_NE(t.at("message").get<std::string>().find(
                    "wrong result: output argument 0 differs from the reference configuration's"),
                std::string::npos)
          << t.dump();
    }
  }
  const auto cache = dir_.file("own-cache.json");
  r = run("export --study own --format kernel_tuner -o " + cache + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto exported = nlohmann::json::parse(slurp(cache));
  EXPECT_EQ(exported.at("kernel_name"), "scale");
  EXPECT_EQ(exported.at("problem_size"), nlohmann::json::parse("[1000]"));  // the study's task
  EXPECT_EQ(exported.at("cache").at("16,1,1").at("time"), "RuntimeFailedConfig");
  EXPECT_TRUE(exported.at("cache").at("16,1,0").at("time").is_number());

  // An arguments file with an unknown type says which argument and what is allowed.
  std::ofstream(args) << R"([{"type": "half", "size": 1000, "output": true}])";
  r = run(own + " --args " + args + " --budget 1 --study bad");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(args + ": argument 0: unknown type \"half\"; allowed: float32, float"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, ACudaKernelWithoutAGpuSaysWhatRunsHereInstead) {
  const auto r = run("sweep --kernel cuda-gemm --size 64 --budget 1 --no-progress --db " + db());
  if (r.exit_code == 0) GTEST_SKIP() << "a CUDA device is here";
  if (r.err.find("tunebase was built without it") != std::string::npos) {
    GTEST_SKIP() << "built without CUDA";
  }
  EXPECT_NE(r.err.find("no CUDA device available"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("opencl-gemm, opencl-spmv and opencl-conv kernels run the same kinds of "
                       "kernel through OpenCL"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, OtherMachinesMeasurementsPredictAndGuideANewMachine) {
  const auto gpu_a = dir_.file("a.json");
  const auto gpu_b = dir_.file("b.json");
  std::ofstream(gpu_a) << toy_cache("GPU-A", 1.0, 5);
  std::ofstream(gpu_b) << toy_cache("GPU-B", 2.0, 4);
  auto r = run("import " + gpu_a + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // An imported machine is its GPU: the listing names it (it has no CPU model), saying what the
  // second name is, as studies labels its details.
  r = run("machines --db " + db());
  EXPECT_EQ(r.out, "   1  GPU-A  [device GPU-A]\n");

  // Nothing measured on GPU-B (not even known to the store): a prediction from GPU-A.
  r = run("best --kernel toy --machine GPU-B --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto predicted = nlohmann::json::parse(r.out);
  EXPECT_EQ(predicted["source"], "predicted");
  EXPECT_EQ(predicted["config"], (nlohmann::json{{"a", 3}, {"b", 5}})) << r.out;
  EXPECT_EQ(predicted["based_on"]["machines"], 1);
  EXPECT_EQ(predicted["based_on"]["inputs"], 1);
  // Said on stderr (the JSON stays clean): a misspelt name would get a prediction silently.
  EXPECT_NE(r.err.find("machine 'GPU-B' is not in " + db() +
                       ": predicting as for a new machine (it holds GPU-A)"),
            std::string::npos)
      << r.err;
  r = run("best --kernel toy --machine gpu-a --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("did you mean 'GPU-A'?"), std::string::npos) << r.err;
  r = run("best --kernel toy --machine GPU-B --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // GPU-A: no "other", which would be wrong for the target's own other inputs.
  EXPECT_NE(r.out.find("source:    predicted (bo-transfer on 64 measurements of 1 machine; "),
            std::string::npos)
      << r.out;

  // A machine where the configuration GPU-A likes failed: the prediction leaves it out.
  const auto gpu_c = dir_.file("c.json");
  auto failed_only = nlohmann::json::parse(toy_cache("GPU-C", 1.0, 5));
  failed_only["cache"] = {{"3,5", {{"a", 3}, {"b", 5}, {"time", "RuntimeFailedConfig"}}}};
  std::ofstream(gpu_c) << failed_only.dump();
  r = run("import " + gpu_c + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("best --kernel toy --machine GPU-C --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto around_failure = nlohmann::json::parse(r.out);
  EXPECT_EQ(around_failure["source"], "predicted");
  EXPECT_NE(around_failure["config"], (nlohmann::json{{"a", 3}, {"b", 5}})) << r.out;
  EXPECT_EQ(around_failure["based_on"]["failed_here"], 1) << r.out;

  // A sweep on GPU-B learns from GPU-A by default, and says so.
  r = run("sweep --kernel replay --replay " + gpu_b +
          " --machine GPU-B --budget 6 --no-progress --json --study t --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["strategy"], "bo-transfer");
  ASSERT_EQ(summary["priors"].size(), 1u) << r.out;
  EXPECT_EQ(summary["priors"][0]["source"], "GPU-A");
  EXPECT_EQ(summary["priors"][0]["measurements"], 64);
  // GPU-A's optimum is one step from GPU-B's: six evaluations find t <= 2 * (1 + 1).
  EXPECT_LE(summary["best"]["objective"].get<double>(), 4.0) << r.out;

  r = run("sweep --kernel replay --replay " + gpu_b +
          " --machine GPU-B --budget 3 --no-progress --json --no-transfer --study u --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["strategy"], "bo");
  EXPECT_FALSE(nlohmann::json::parse(r.out).contains("priors"));
  // A strategy that ignores priors does not list them.
  r = run("sweep --kernel replay --replay " + gpu_b +
          " --machine GPU-B --budget 2 --no-progress --json --strategy random --study w --db " +
          db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out).contains("priors")) << r.out;

  // Replayed results are the file's device's, not this machine's.
  r = run("sweep --kernel replay --replay " + gpu_a +
          " --budget 2 --no-progress --no-transfer --study v --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("studies --db " + db());
  EXPECT_NE(r.out.find("v  [toy on GPU-A,"), std::string::npos) << r.out;

  // Measured now: best answers from the measurements.
  r = run("best --kernel toy --machine GPU-B --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["source"], "measured");
}

TEST_F(Cli, TrialsSayWhichParametersMattered) {
  // The toy's time grows with (a - 3)^2 and (b - 5)^2 alike; the sweep's GP sees both.
  const auto gpu = dir_.file("toy.json");
  std::ofstream(gpu) << toy_cache("GPU-A", 1.0, 5);
  auto r = run("sweep --kernel replay --replay " + gpu +
               " --budget 20 --no-progress --study toy --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("trials --study toy --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto at = r.out.find("influence: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(line.find("a "), std::string::npos) << line;
  EXPECT_NE(line.find("b "), std::string::npos) << line;
  EXPECT_NE(line.find("(the study's GP: shares of 1 / lengthscale)"), std::string::npos) << line;

  // Three results for two parameters say nothing yet of which one matters, and the listing
  // says why rather than leaving the line out.
  r = run("sweep --kernel replay --replay " + gpu + " --budget 3 --no-progress --study tiny --db " +
          db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("trials --study tiny --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("influence: not yet: the GP's lengthscales say something once the study "
                       "has about two successful results per encoded input"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, BenchmarkReplaysAMeasuredSpaceAgainstRandom) {
  const auto target = dir_.file("toy.json");
  std::ofstream(target) << toy_cache("TestGPU", 1.0, 5);
  const auto out = dir_.file("report.json");
  const auto svg = dir_.file("report.svg");
  const auto trace = dir_.file("trace.jsonl");
  auto r = run("benchmark --target " + target + " --strategy ga --budget 20 --seeds 3 --json " +
               out + " --svg " + svg + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The trace: one line per strategy and seed, every evaluation in order.
  std::istringstream lines(slurp(trace));
  std::vector<nlohmann::json> runs;
  for (std::string line; std::getline(lines, line);) runs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs[0]["strategy"], "ga");
  EXPECT_EQ(runs[0]["seed"], 1);
  EXPECT_EQ(runs[5]["strategy"], "random");
  for (const auto& run_trace : runs) {
    ASSERT_EQ(run_trace["configs"].size(), 20u);
    ASSERT_EQ(run_trace["objectives"].size(), 20u);
    EXPECT_TRUE(run_trace["configs"][0].is_object());
  }
  const auto report = nlohmann::json::parse(slurp(out));
  ASSERT_EQ(report["strategies"].size(), 2u);
  EXPECT_EQ(report["strategies"][1]["strategy"], "random");
  EXPECT_TRUE(report["strategies"][0]["evals_to"].contains("0.95"));
  EXPECT_NE(slurp(svg).find("<svg"), std::string::npos);

  // A trace's configurations keep the file's parameter order, not the alphabet's.
  nlohmann::json zebra = {{"device_name", "TestGPU"},
                          {"kernel_name", "zebra"},
                          {"tune_params_keys", {"z", "a"}},
                          {"tune_params", {{"z", {0, 1, 2}}, {"a", {0, 1, 2}}}},
                          {"cache", nlohmann::json::object()}};
  for (int z = 0; z < 3; ++z) {
    for (int a = 0; a < 3; ++a) {
      zebra["cache"][std::to_string(z) + "," + std::to_string(a)] = {
          {"z", z}, {"a", a}, {"time", 1.0 + z + a}};
    }
  }
  const auto zebra_file = dir_.file("zebra.json");
  std::ofstream(zebra_file) << zebra.dump();
  r = run("benchmark --target " + zebra_file + " --budget 2 --seeds 1 --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto text = slurp(trace);
  EXPECT_NE(text.find(R"("configs":[{"z":)"), std::string::npos) << text;

  // The toy's best, (3, 5), is the 30th configuration in order: exhaustive search with 5
  // evaluations never reaches 0.90 of it, and the table does not show the budget as if it had.
  r = run("benchmark --target " + target + " --strategy exhaustive --budget 5 --seeds 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(">5 (100% never)"), std::string::npos) << r.out;
}

// Kernel Tuner's objective="GFLOP/s", objective_higher_is_better=True, in simulation mode. In
// this toy the highest GFLOP/s (a = 2) is not the fastest (a = 0): another problem size.
std::string rates_cache() {
  nlohmann::json cache = {{"device_name", "TestGPU"},
                          {"kernel_name", "rates"},
                          {"tune_params_keys", {"a"}},
                          {"tune_params", {{"a", {0, 1, 2, 3}}}},
                          {"cache", nlohmann::json::object()}};
  const double gflops[] = {10.0, 20.0, 40.0, 30.0};
  for (int a = 0; a < 4; ++a) {
    cache["cache"][std::to_string(a)] = {{"a", a}, {"time", 1.0 + a}, {"GFLOP/s", gflops[a]}};
  }
  cache["cache"]["3"]["time"] = "CompilationFailedConfig";
  return cache.dump();
}

TEST_F(Cli, ReplayAndBenchmarkTuneAnotherObjective) {
  const auto target = dir_.file("rates.json");
  std::ofstream(target) << rates_cache();
  auto r = run("sweep --kernel replay --replay " + target +
               " --objective GFLOP/s --strategy exhaustive --study g --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The objective once, not again as a throughput beside it.
  EXPECT_NE(r.out.find("\nobjective:  40 GFLOP/s\n"), std::string::npos) << r.out;
  r = run("best --kernel rates --machine TestGPU --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto best = nlohmann::json::parse(r.out);
  EXPECT_EQ(best["config"], (nlohmann::json{{"a", 2}})) << r.out;
  EXPECT_EQ(best["objective"], 40.0) << r.out;
  EXPECT_EQ(best["objective_name"], "GFLOP/s") << r.out;
  const auto stored = trials("g");
  ASSERT_EQ(stored.size(), 4u);
  std::size_t failed = 0;
  for (const auto& t : stored) failed += t["status"] == "failed" ? 1 : 0;
  EXPECT_EQ(failed, 1u);  // the failure string stays a failure

  // Fractions of a maximised optimum are value / optimum: 10/40 after the first of
  // exhaustive search's evaluations, 1 once it has measured a = 2.
  const auto out = dir_.file("report.json");
  r = run("benchmark --target " + target +
          " --objective GFLOP/s --strategy exhaustive --budget 4 --seeds 1 --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("optimum 40 GFLOP/s (maximised)"), std::string::npos) << r.out;
  const auto report = nlohmann::json::parse(slurp(out));
  const auto& exhaustive = report["strategies"][0];
  EXPECT_EQ(exhaustive["minimize"], false);
  EXPECT_DOUBLE_EQ(exhaustive["fraction_first"]["median"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(exhaustive["evals_to"]["0.99"]["median"].get<double>(), 3.0);
  // --minimize overrides a rate's direction: the lowest GFLOP/s, a = 0, is then the optimum.
  r = run("benchmark --target " + target +
          " --objective GFLOP/s --minimize --strategy exhaustive --budget 4 --seeds 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("optimum 10 GFLOP/s (minimised)"), std::string::npos) << r.out;

  // What is not a numeric field is named, with those that are.
  for (const std::string& command : {"benchmark --target " + target + " --objective GFLOPS",
                                     "sweep --kernel replay --replay " + target +
                                         " --objective GFLOPS --no-progress --db " + db()}) {
    r = run(command);
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_NE(r.err.find("objective 'GFLOPS' is not a numeric field of " + target +
                         "'s successful entries; their numeric fields: time, GFLOP/s"),
              std::string::npos)
        << r.err;
  }
  r = run("benchmark --target " + target + " --objective GFLOP/s --maximize --minimize");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--maximize and --minimize exclude each other"), std::string::npos) << r.err;
  r = run("benchmark --target " + target + " --objective GFLOP/s --prior " + target);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--prior files are read as times"), std::string::npos) << r.err;
  r = run("sweep --kernel spmv --objective GFLOP/s --budget 1 --no-progress --db " + db());
  EXPECT_NE(r.err.find("--objective is not used by --kernel spmv"), std::string::npos) << r.err;
}

// Kernel Tuner's observers: a program reports several metrics, one of which may be tuned; and
// its exit code may say that a configuration did not compile.
TEST_F(Cli, ACommandReportsMetricsAndItsFailureClass) {
  auto r = sweep_x4("obs",
                    "test {x} -ne 3 || exit 80; echo \"GFLOP/s: $(( {x} * 10 + 5 ))\"; "
                    "echo \"time: 0.4 ms\"",
                    4, "--objective GFLOP/s");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto stored = trials("obs");
  ASSERT_EQ(stored.size(), 4u);
  EXPECT_EQ(stored[2]["value"], 25.0);
  EXPECT_EQ(stored[2]["metrics"]["GFLOP/s"], 25.0);
  EXPECT_EQ(stored[2]["metrics"]["time"], 0.4);
  EXPECT_TRUE(stored[2]["metrics"].contains("wall_seconds"));
  EXPECT_EQ(stored[3]["status"], "failed");
  r = run("best --kernel command --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["objective"], 25.0) << r.out;  // maximised

  // A Kernel Tuner cache holds times: the failure class shows in one of a timed study.
  r = sweep_x4("timed", "test {x} -ne 3 || exit 80; echo {x}.5", 4);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cache = dir_.file("timed.json");
  r = run("export --study timed --format kernel_tuner -o " + cache + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto exported = nlohmann::json::parse(slurp(cache));
  EXPECT_EQ(exported["cache"]["3"]["time"], "CompilationFailedConfig") << exported.dump();
}

// A study of another objective is a cache of it, as Kernel Tuner tunes one, which tunebase
// reads back: into the same database, nothing new; into another, the same study.
TEST_F(Cli, AStudyOfAnotherObjectiveIsExportedAsKernelTunerTunesOne) {
  const auto target = dir_.file("rates.json");
  std::ofstream(target) << rates_cache();
  auto r = run("sweep --kernel replay --replay " + target +
               " --objective GFLOP/s --strategy exhaustive --study g --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cache = dir_.file("g.json");
  r = run("export --study g --format kernel_tuner -o " + cache + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: the cache's objective is each entry's \"GFLOP/s\" "
                       "(objective_higher_is_better: true, as Kernel Tuner's tune_kernel takes "
                       "them), not its \"time\", which holds the time in ms measured beside it\n"),
            std::string::npos)
      << r.err;
  const auto exported = nlohmann::json::parse(slurp(cache));
  EXPECT_EQ(exported["objective"], "GFLOP/s");
  EXPECT_EQ(exported["objective_higher_is_better"], true);
  EXPECT_EQ(exported["cache"]["2"]["GFLOP/s"], 40.0) << exported.dump();
  EXPECT_EQ(exported["cache"]["2"]["time"], 3.0) << exported.dump();
  EXPECT_EQ(exported["cache"]["3"]["time"], "CompilationFailedConfig") << exported.dump();
  r = run("import " + cache + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nothing new: study 1 holds all 4 measurements"), std::string::npos)
      << r.out;
  {
    db::Store store(db());
    EXPECT_EQ(store.list_studies().size(), 1u);
  }
  const auto other = dir_.file("other.db");
  r = run("import " + cache + " --db " + other);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("best --kernel rates --machine TestGPU --json --db " + other);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto best = nlohmann::json::parse(r.out);
  EXPECT_EQ(best["config"], (nlohmann::json{{"a", 2}})) << r.out;
  EXPECT_EQ(best["objective"], 40.0) << r.out;
  EXPECT_EQ(best["objective_name"], "GFLOP/s") << r.out;
  // Replayed, the export is tuned as its study was: the highest GFLOP/s.
  r = run("sweep --kernel replay --replay " + cache +
          " --strategy exhaustive --study again --no-progress --json --db " + other);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["best"]["objective"], 40.0) << r.out;
  // Prior files are read as times: one of GFLOP/s is refused.
  r = run("sweep --kernel replay --replay " + target + " --prior " + cache +
          " --budget 2 --study timed --no-progress --db " + other);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("prior file " + cache +
                       " holds each entry's \"GFLOP/s\" as its objective "
                       "(objective_higher_is_better), and prior files are read as times"),
            std::string::npos)
      << r.err;

  // A command's score, with no time measured: its entries hold the score alone.
  r = sweep_x4("score", "echo score: $(( {x} * 3 ))", 4, "--objective score --maximize");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto scores = dir_.file("score.json");
  r = run("export --study score --format kernel_tuner -o " + scores + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("not its \"time\", which the successful entries have none of: their "
                       "trials measured no time"),
            std::string::npos)
      << r.err;
  r = run("import " + scores + " --db " + other);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  db::Store store(other);
  const auto studies = store.list_studies("command");
  ASSERT_EQ(studies.size(), 1u);
  EXPECT_EQ(studies[0].objective, "score");
  EXPECT_EQ(studies[0].direction, db::Direction::maximize);
  std::vector<double> values;
  for (const auto& t : store.trials(studies[0].id)) values.push_back(t.result.objective);
  EXPECT_EQ(values, (std::vector<double>{0.0, 3.0, 6.0, 9.0}));
}

TEST_F(Cli, BenchmarkRefusesWhatWouldMisleadIt) {
  const auto target = dir_.file("toy.json");
  std::ofstream(target) << toy_cache("TestGPU", 1.0, 5);
  const std::string bench = "benchmark --target " + target + " --budget 5 --seeds 1";
  // The target's own measurements as a prior hand the search the answer.
  auto r = run(bench + " --prior " + target + " --strategy prior-best");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds the target's own measurements (64 of the 64"), std::string::npos)
      << r.err;
  // So does a replay sweep.
  r = run("sweep --kernel replay --replay " + target + " --prior " + target +
          " --budget 3 --no-progress --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds the replayed file's own measurements (64 of the 64"),
            std::string::npos)
      << r.err;
  const auto other = dir_.file("other.json");
  std::ofstream(other) << toy_cache("OtherGPU", 2.0, 4);
  r = run(bench + " --prior " + other + " --strategy prior-best");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("note: --strategy"), std::string::npos) << r.out;
  // A transfer strategy without priors is bo under another name; bo given priors ignores them.
  r = run(bench + " --strategy prior-best");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: --strategy prior-best learns from priors, and no --prior is given: "
                       "it runs as bo does"),
            std::string::npos)
      << r.out;
  r = run(bench + " --prior " + other + " --strategy bo");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: --strategy bo does not read the --prior files"), std::string::npos)
      << r.out;
  // A strategy twice, and a seed that every run would share.
  r = run(bench + " --strategy bo --strategy bo");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--strategy bo is given twice"), std::string::npos) << r.err;
  r = run(bench + R"( --options '{"seed": 3}')");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("\"seed\" is set per run"), std::string::npos) << r.err;
  // An output over an input (the prior's file, by another spelling), or two outputs on one
  // path: refused before the run, the files untouched.
  const auto before = slurp(other);
  r = run(bench + " --prior " + other + " --svg " + dir_.file(".") + "/other.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is the --prior file: writing it would replace the measurements"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(slurp(other), before);
  r = run(bench + " --json " + dir_.file("same.out") + " --trace " + dir_.file("same.out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--trace and --json both name"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("same.out")));

  // A space whose values the file does not hold.
  const auto disjoint = dir_.file("disjoint.json");
  std::ofstream(disjoint) << R"({"parameters": [{"name": "a", "values": [10, 11]},
                                                {"name": "b", "values": [0, 1]}]})";
  r = run(bench + " --space " + disjoint);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("none of the 4 configurations of " + disjoint), std::string::npos) << r.err;
  // A space around part of the file: fractions are of its own best, and what is missing fails.
  const auto part = dir_.file("part.json");
  std::ofstream(part) << R"({"parameters": [{"name": "a", "values": [0, 1, 9]},
                                            {"name": "b", "values": [0, 1]}]})";
  const auto report = dir_.file("part_report.json");
  r = run(bench + " --space " + part + " --strategy exhaustive --json " + report);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 of the 6 configurations of " + part + " are not in"), std::string::npos)
      << r.out;
  // The file's best is (3, 5) = 1; the space's, (1, 1) = 1 + (1-3)^2 + (1-5)^2 = 21, which
  // exhaustive search reaches.
  EXPECT_NE(r.out.find("is outside the space; fractions are of the space's best, 21"),
            std::string::npos)
      << r.out;
  const auto reached = nlohmann::json::parse(slurp(report))["strategies"][0]["evals_to"]["0.99"];
  EXPECT_EQ(reached["never"], 0.0) << reached;

  // A budget beyond the candidates: runs, and the report, stop when everything is measured.
  const auto trace = dir_.file("trace.jsonl");
  r = run("benchmark --target " + target + " --budget 1000 --seeds 1 --strategy exhaustive" +
          " --trace " + trace + " --json " + report);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(slurp(trace));
  std::string first;
  std::getline(lines, first);
  EXPECT_EQ(nlohmann::json::parse(first)["objectives"].size(), 64u);
  EXPECT_EQ(nlohmann::json::parse(slurp(report))["strategies"][0]["budget"], 64) << slurp(report);
}

TEST_F(Cli, BadArgumentsNeverAbortNorLeaveAStudyBehind) {
  const auto space = dir_.file("space.json");
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 9}]})";
  const std::string sweep =
      "sweep --kernel command --space " + space + " --cmd 'echo {x}' --no-progress --db " + db();
  // Refused before anything is stored: an unknown strategy, a zero budget, a study name that
  // would read as an id, priors restricted to a machine nobody registered.
  auto r = run(sweep + " --strategy simplex");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown strategy 'simplex'"), std::string::npos) << r.err;
  r = run(sweep + " --budget 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--budget: Value 0 not in range 1 to"), std::string::npos) << r.err;
  r = run(sweep + " --study 12345");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("would read as a study id"), std::string::npos) << r.err;
  r = run(sweep + " --prior-machine nowhere");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown prior machine \"nowhere\""), std::string::npos) << r.err;
  const auto reals = dir_.file("reals.json");
  std::ofstream(reals) << R"({"parameters": [{"name": "x", "type": "real", "low": 0, "high": 1}]})";
  r = run("sweep --kernel command --space " + reals +
          " --cmd 'echo {x}' --strategy exhaustive --no-progress --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exhaustive search needs an enumerable space"), std::string::npos) << r.err;
  r = run("studies --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");

  r = run("serve --port 70000 --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--port: Value 70000 not in range 0 to 65535"), std::string::npos) << r.err;

  // A worker joining a study cannot change its strategy or budget.
  r = run("worker --study 3 --strategy random --budget 50");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("requires --create-study"), std::string::npos) << r.err;

  // An id too large for any study is "not found", not an abort.
  r = run("trials --study 99999999999999999999999 --db " + db());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("no study has id 99999999999999999999999"), std::string::npos) << r.err;
  r = run("studies --db " + dir_.path().string());
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;

  // Benchmark errors, in the options or in a space the target does not hold, are messages.
  const auto target = dir_.file("toy.json");
  std::ofstream(target) << toy_cache("TestGPU", 1.0, 5);
  r = run("benchmark --target " + target + " --budget 5 --seeds 1 --options " +
          R"('{"initial_design": -1}')");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("initial_design must be a whole number"), std::string::npos) << r.err;
  r = run("benchmark --target " + target + " --budget 5 --seeds 1 --space " + space);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("parameter 'x' is not in"), std::string::npos) << r.err;
  r = run("benchmark --target " + target + " --budget 5 --seeds 1 --json " +
          dir_.file("absent/report.json"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("strategy"), std::string::npos) << "ran before checking its output";
}

TEST_F(Cli, ListingsShowTheMatrixOfATaskOfManyFeatures) {
  // A PETSc task holds the matrix features beside its name; sorted, they came first and the
  // listing cut the name off.
  auto r =
      run("sweep --kernel petsc --problem poisson2d --size 6 --budget 1 --repeats 1 "
          "--no-progress --db " +
          db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The default configuration, as the PETSc options a user would write.
  EXPECT_NE(r.out.find("options:    -ksp_type gmres -ksp_gmres_restart 30 -pc_type bjacobi"),
            std::string::npos)
      << r.out;
  r = run("studies --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The matrix by its name and the features that tell matrices apart at a glance, not a JSON
  // object cut off in the middle of its features; studies --json keeps the whole description.
  EXPECT_NE(r.out.find("task 1 poisson2d_n6 (rows 36, nnz 156), "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("csr_bytes"), std::string::npos) << r.out;
  r = run("studies --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("csr_bytes"), std::string::npos) << r.out;
  r = run("best --kernel petsc --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("options:   -ksp_type gmres"), std::string::npos) << r.out;
}

TEST_F(Cli, BestForAMatrixMeasuredNowhereIsPredictedFromTheMatricesMeasured) {
  // 1D Laplacians (symmetric: one space) of three sizes; two are measured.
  const auto laplacian = [&](int n) {
    return write_laplacian_1d(dir_.file("lap" + std::to_string(n) + ".mtx"), n);
  };
  for (int n : {20, 40}) {
    const auto r = run("sweep --kernel petsc --matrix " + laplacian(n) +
                       " --budget 4 --repeats 1 --no-progress --db " + db());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto r = run("best --kernel petsc --matrix " + laplacian(30) + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("source:    predicted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input:     matrix lap30 (measured nowhere"), std::string::npos) << r.out;
  // This machine measured other matrices: not "nothing measured here".
  EXPECT_NE(r.out.find("; nothing measured for this input yet)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("options:   -ksp_type"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a new input's objective may lie far outside it"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nruns:      probability "), std::string::npos) << r.out;
  // Between the sizes measured: nothing extrapolated to warn of.
  EXPECT_EQ(r.out.find("outside every measured input"), std::string::npos) << r.out;
  // Ten times the largest: the sizes it lies beyond are named.
  r = run("best --kernel petsc --matrix " + laplacian(300) + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note:      the input lies outside every measured input (cols 300, "
                       "measured inputs 20 .. 40"),
            std::string::npos)
      << r.out;
  // By its features (PETSc keeps them in the task's description): inputs of other sizes get
  // other forecasts (they all got one, bit for bit).
  std::set<double> forecasts;
  for (int n : {30, 300}) {
    r = run("best --kernel petsc --matrix " + laplacian(n) + " --json --db " + db());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    forecasts.insert(nlohmann::json::parse(r.out)["objective"].get<double>());
  }
  EXPECT_EQ(forecasts.size(), 2u);
  // The same content under a measured matrix's name is not that matrix.
  const auto renamed = dir_.file("renamed");
  std::filesystem::create_directories(renamed);
  std::filesystem::copy_file(laplacian(30), renamed + "/lap20.mtx");
  r = run("best --kernel petsc --matrix " + renamed + "/lap20.mtx --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("source:    predicted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input:     matrix lap20 (not the matrix measured under this name"),
            std::string::npos)
      << r.out;
  // A task of another kernel, and a kernel nobody stored, are named as such.
  r = run("best --kernel spmv --task 1 --db " + db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no kernel 'spmv' in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the kernels stored are petsc"), std::string::npos) << r.err;
  // A matrix measured here is answered by its own measurements, not the best of all inputs.
  r = run("best --kernel petsc --matrix " + laplacian(20) + " --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto measured = nlohmann::json::parse(r.out);
  EXPECT_EQ(measured["source"], "measured");
  EXPECT_EQ(measured["task_id"], 1);
  // A nonsymmetric matrix searches another PETSc space, where nothing was measured.
  const auto nonsymmetric = dir_.file("upper.mtx");
  std::ofstream(nonsymmetric) << "%%MatrixMarket matrix coordinate real general\n"
                              << "3 3 5\n1 1 4\n1 2 1\n2 2 4\n2 3 1\n3 3 4\n";
  r = run("best --kernel petsc --matrix " + nonsymmetric + " --db " + db());
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.err.find("no input of matrix upper's kind was measured for petsc: its search space "
                       "differs from the measured inputs' (petsc offers CG, MINRES and ICC only "
                       "for symmetric matrices)"),
            std::string::npos)
      << r.err;
  r = run("best --kernel command --matrix " + laplacian(20) + " --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--matrix is read for the matrix kernels"), std::string::npos) << r.err;
}

TEST_F(Cli, BestForAGeneratedProblemIsAnsweredAsForAMatrixFile) {
  const std::string petsc =
      " --kernel petsc --problem poisson2d --repeats 1 --budget 3 "
      "--no-progress --db " +
      db();
  for (int n : {6, 10}) {
    const auto r = run("sweep" + petsc + " --size " + std::to_string(n));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // Measured nowhere: predicted from the measured problems by its features.
  auto r = run("best --kernel petsc --problem poisson2d --size 8 --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("source:    predicted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input:     matrix poisson2d_n8 (measured nowhere"), std::string::npos)
      << r.out;
  // Measured: answered by its own measurements.
  r = run("best --kernel petsc --problem poisson2d --size 10 --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto measured = nlohmann::json::parse(r.out);
  EXPECT_EQ(measured["source"], "measured") << r.out;
  EXPECT_EQ(measured["task_id"], 2) << r.out;
  // As in sweep: a file or a generated problem, and only for the matrix kernels.
  r = run("best --kernel petsc --problem poisson2d --matrix x.mtx --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
  r = run("best --kernel command --problem poisson2d --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--problem and --size are read for the matrix kernels"), std::string::npos)
      << r.err;
  r = run("best --kernel petsc --problem poisson9d --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown --problem 'poisson9d'"), std::string::npos) << r.err;
}

TEST_F(Cli, PetscSolverSettingsAreOptionsThatTheStudyKeeps) {
  const std::string petsc =
      "sweep --kernel petsc --problem poisson2d --size 6 --repeats 1 "
      "--no-progress --study p --db " +
      db();
  auto r = run(petsc + " --rtol 1e-6 --max-it 500 --cpu-time --budget 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("measured:   clock cpu, max_it 500, residual_tolerance 0.0001, rtol 1e-06"),
            std::string::npos)
      << r.out;
  r = run("studies --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", measured with clock cpu, max_it 500, residual_tolerance 0.0001, "
                       "rtol 1e-06]"),
            std::string::npos)
      << r.out;
  r = run("studies --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto settings = nlohmann::json::parse(r.out)["studies"][0]["settings"]["measurement"];
  EXPECT_EQ(settings,
            (nlohmann::json{
                {"rtol", 1e-6}, {"max_it", 500}, {"residual_tolerance", 1e-4}, {"clock", "cpu"}}))
      << r.out;
  // The objective is the CPU time of the solves.
  const auto t = trials("p");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0]["value"].get<double>(), t[0]["metrics"]["cpu_seconds"].get<double>())
      << t[0].dump();
  // Resumed with the same settings it goes on; with others it is refused, saying both.
  r = run(petsc + " --rtol 1e-6 --max-it 500 --cpu-time --budget 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run(petsc + " --budget 3");
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("its trials were measured with clock cpu, max_it 500, residual_tolerance "
                       "0.0001, rtol 1e-06, this sweep measures with clock wall, max_it 10000, "
                       "residual_tolerance 1e-06, rtol 1e-08"),
            std::string::npos)
      << r.err;
  // A looser tolerance loosens the check of the true residual with it (100 times rtol): checked
  // against 1e-6, a solve to rtol 1e-3 that stopped where it was told (true residual 1.1e-3)
  // failed.
  r =
      run("sweep --kernel petsc --problem poisson2d --size 6 --repeats 1 --rtol 1e-3 --budget 1 "
          "--no-progress --study loose --db " +
          db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto loose = trials("loose");
  ASSERT_EQ(loose.size(), 1u);
  EXPECT_EQ(loose[0]["status"], "ok") << loose[0].dump();
  // Another input learns from neither (measured otherwise), and says why.
  r =
      run("sweep --kernel petsc --problem poisson2d --size 7 --repeats 1 --budget 1 --no-progress "
          "--db " +
          db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: no priors: the 2 other studies of petsc were measured with other "
                       "settings (the latest: clock wall, max_it 10000, residual_tolerance 0.1, "
                       "rtol 0.001) than this sweep (clock wall, max_it 10000, residual_tolerance "
                       "1e-06, rtol 1e-08), and measurements transfer only between studies "
                       "measured alike"),
            std::string::npos)
      << r.err;
  // Out of range, and for a kernel that does not read them.
  r = run("sweep --kernel petsc --problem poisson2d --size 6 --rtol 1 --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rtol 1.0 is out of range: the KSP relative tolerance must be above 0 and "
                       "below 1"),
            std::string::npos)
      << r.err;
  r = run("sweep --kernel petsc --problem poisson2d --size 6 --max-it 0 --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-it"), std::string::npos) << r.err;
  r = run("sweep --kernel spmv --problem laplacian2d --size 6 --rtol 1e-6 --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rtol is not used by --kernel spmv; it is read by petsc"),
            std::string::npos)
      << r.err;
  r = run("sweep --kernel spmv --problem laplacian2d --size 6 --cpu-time --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cpu-time is not used by --kernel spmv; it is read by petsc"),
            std::string::npos)
      << r.err;
  // sweep --help says what a PETSc trial measures.
  r = run("sweep --help");
  EXPECT_NE(r.out.find("KSP relative tolerance"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("untimed warm-up"), std::string::npos) << r.out;
}

TEST_F(Cli, AFileThatCannotBeReadHasTheIoExitCodeNotTheNotFoundOne) {
  // A folder given as the file to import: nothing is unknown, the file cannot be read.
  const auto folder = dir_.file("a-folder");
  std::filesystem::create_directory(folder);
  const auto r = run("import " + folder + " --db " + db());
  EXPECT_EQ(r.exit_code, 6) << r.err;
  EXPECT_NE(r.err.find("it is a directory"), std::string::npos) << r.err;
}

TEST_F(Cli, HelpSaysWhatTheTimeoutAndTheRegexApplyTo) {
  const auto r = run("sweep --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part :
       {"command stops each run at it (--repeats 3 may take 3 times as long)",
        "petsc one evaluation with all its solves (one that ends past it is a timeout too; "
        "the solver is killed 1 s past it)",
        "GPU kernels skip a configuration", "the last match of this regex"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " missing from:\n" << r.out;
  }
}

TEST_F(Cli, AnOptionGivenAnEmptyValueIsRefusedNotTakenForItsDefault) {
  auto r = run("best --kernel spmv --machine '' --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("option --machine was given an empty value"), std::string::npos) << r.err;
  r = run("studies --db=");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("option --db was given an empty value"), std::string::npos) << r.err;
}

TEST_F(Cli, OptionsAKernelDoesNotReadAreRefusedAndT4FilesNeedAKernelName) {
  const auto target = dir_.file("toy.json");
  std::ofstream(target) << toy_cache("TestGPU", 1.0, 5);
  const auto space = dir_.file("space.json");
  std::ofstream(space)
      << R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 3}]})";
  // A replay's space must be of the file's parameters (it restricts the file's configurations).
  auto r = run("sweep --kernel replay --replay " + target + " --space " + space + " --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("the space's parameter 'x' is not one of"), std::string::npos) << r.err;
  r = run("sweep --kernel command --space " + space + " --cmd 'echo {x}' --timeout 1e11 --db " +
          db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--timeout"), std::string::npos) << r.err;

  // Options the kernel would ignore, and values that are no sizes or counts.
  const std::string spmv = "sweep --kernel spmv --budget 1 --no-progress --db " + db();
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {" --maximize", "--maximize is not used by --kernel spmv"},
           {" --unit ms", "--unit is not used by --kernel spmv"},
           {" --timeout 5", "--timeout is not used by --kernel spmv"},
           {" --matrix " + dir_.file("m.mtx") + " --problem poisson3d",
            "--matrix and --problem exclude each other"},
           {" --matrix " + dir_.file("m.mtx") + " --size 50", "--size is not used"},
           {" --size 0", "--size: Value 0 not in range 1"},
           {" --repeats 0", "--repeats: Value 0 not in range 1"},
           {" --problem laplace3d", "known: laplacian3d, laplacian2d, poisson2d"},
           {" --prior-machine m1 --no-transfer", "with --no-transfer nothing is"}}) {
    r = run(spmv + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
  r = run("sweep --kernel replay --replay " + target + " --repeats 3 --db " + db());
  EXPECT_NE(r.err.find("--repeats is not used by --kernel replay"), std::string::npos) << r.err;
  // GEMM and convolution have no matrix; the GPU SpMV takes a matrix or a size, not both.
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"opencl-gemm --matrix " + dir_.file("m.mtx"),
            "--matrix is not used by --kernel "
            "opencl-gemm"},
           {"cuda-conv --size 64 --matrix " + dir_.file("m.mtx"),
            "--matrix is not used by --kernel cuda-conv"},
           {"opencl-spmv --size 5 --matrix " + dir_.file("m.mtx"),
            "--size is not used by --kernel opencl-spmv"}}) {
    r = run("sweep --kernel " + args + " --budget 1 --no-progress --db " + db());
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }

  // A zero objective is shown as a number, and no speedup is made of it.
  r = run("sweep --kernel command --space " + space +
          " --cmd 'echo 0' --budget 2 --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Without --unit the number the program prints is shown as it is.
  EXPECT_NE(r.out.find("objective:  0\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("speedup"), std::string::npos) << r.out;
  r = run("sweep --kernel command --space " + space +
          " --cmd 'echo 1e300' --unit s --budget 1 --study huge --no-progress --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("objective:  1e+300 s\n"), std::string::npos) << r.out;

  // T4 files name no kernel: the import says how to give one.
  const auto t4 = dir_.file("results_T4.json");
  std::ofstream(t4) << R"({"schema_version": "1.0.0", "results": [
      {"configuration": {"bs": 32}, "invalidity": "correct", "correctness": 1,
       "measurements": [{"name": "time", "value": 2.5, "unit": "ms"}]},
      {"configuration": {"bs": 64}, "invalidity": "compile", "correctness": 0}]})";
  r = run("import " + t4 + " --machine gpu --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kernel NAME"), std::string::npos) << r.err;
  r = run("import " + t4 + " --kernel reduce --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--machine NAME"), std::string::npos) << r.err;
  r = run("import " + t4 + " --machine gpu --kernel reduce --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("imported 2 trials (1 failed) of reduce on gpu"), std::string::npos)
      << r.out;
  // Once more: the same measurements are not stored twice. Without a name, nothing to do (an
  // import script may run again); under another name, a conflict.
  r = run("import " + t4 + " --machine gpu --kernel reduce --db " + db());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nothing new: study 3 holds all 2 measurements of this file (reduce on "
                       "gpu), with the same results"),
            std::string::npos)
      << r.out;
  r = run("import " + t4 + " --machine gpu --kernel reduce --study again --db " + db());
  EXPECT_EQ(r.exit_code, 5) << r.err;  // a conflict
  EXPECT_NE(r.err.find("these measurements were imported before"), std::string::npos) << r.err;
  // Another run of it (other times) is stored under a name of its own.
  std::ofstream(t4) << R"({"schema_version": "1.0.0", "results": [
      {"configuration": {"bs": 32}, "invalidity": "correct", "correctness": 1,
       "measurements": [{"name": "time", "value": 2.7, "unit": "ms"}]},
      {"configuration": {"bs": 64}, "invalidity": "compile", "correctness": 0}]})";
  r = run("import " + t4 + " --machine gpu --kernel reduce --db " + db());
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("tunebase import --study NAME"), std::string::npos) << r.err;
  r = run("import " + t4 + " --machine gpu --kernel reduce --study again --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(trials("again").size(), 0u);
  // A T4 file with neither name is told both at once.
  r = run("import " + t4 + " --db " + db());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give both"), std::string::npos) << r.err;

  // A Kernel Tuner cache left open by an interrupted run is read as Kernel Tuner reads it, and
  // the import says so.
  const auto open_cache = dir_.file("open_cache.json");
  std::ofstream(open_cache) << R"({
"device_name": "gpu2", "kernel_name": "reduce",
"tune_params_keys": ["bs"], "tune_params": {"bs": [32, 64, 128]},
"cache": {
"32": {"bs": 32, "time": 2.5, "GFLOP/s": NaN},
)";
  r = run("import " + open_cache + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: " + open_cache + ": the cache was not closed"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1 NaN or Infinity value(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("imported 1 trials (0 failed) of reduce on gpu2"), std::string::npos)
      << r.out;
  // The T4 file's "reduce" had another space (bs 32 and 64, the values seen in it).
  EXPECT_NE(r.err.find("note: kernel reduce was stored before with 1 other search space(s)"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tunebase

namespace tunebase {
namespace {

// Two imported caches of the toy kernel: GPU-A's best is b = 5, GPU-B's b = 2 (and 3x slower),
// where GPU-B fails a = 0 (compilation) and a = 7, b = 7 (a run) that GPU-A runs.
TEST_F(Cli, CompareTakesEachMachinesBestToTheOtherAndTrialsSayWhyTheyFailed) {
  const auto a_file = dir_.file("a.json");
  std::ofstream(a_file) << toy_cache("GPU-A", 1.0, 5);
  auto b_cache = nlohmann::json::parse(toy_cache("GPU-B", 3.0, 2));
  for (int b = 0; b < 8; ++b)
    b_cache["cache"]["0," + std::to_string(b)]["time"] = "CompilationFailedConfig";
  b_cache["cache"]["7,7"]["time"] = "RuntimeFailedConfig";
  const auto b_file = dir_.file("b.json");
  std::ofstream(b_file) << b_cache.dump();
  for (const auto& f : {a_file, b_file})
    ASSERT_EQ(run("import " + f + " --db " + db()).exit_code, 0);

  auto r = run("compare --kernel toy --machine GPU-A --machine GPU-B --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["machines"][1]["failed"], 9);
  const auto& pair = j["pairs"][0];
  EXPECT_EQ(pair["common"], 55);
  // Their best b differ (5 and 2): the rankings hardly agree.
  EXPECT_NEAR(pair["spearman"].get<double>(), 0.0, 0.1);
  // GPU-A's best (3, 5) on GPU-B: 3 * (1 + 9) ms against GPU-B's best 3 ms.
  EXPECT_EQ(pair["best_elsewhere"][0]["config_key"], "3,5");
  EXPECT_DOUBLE_EQ(pair["best_elsewhere"][0]["fraction_of_best"].get<double>(), 0.1);
  EXPECT_EQ(pair["runs_on_one_only"][0]["count"], 9);
  EXPECT_EQ(pair["runs_on_one_only_examples"][0]["message"], "CompilationFailedConfig");

  r = run("compare --kernel toy --machine GPU-A --machine GPU-B --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU-A's best on GPU-B: 30.000 ms, 0.100 of GPU-B's best (10.00x slower)"),
            std::string::npos)
      << r.out;
  // The configurations failing on one, by reason, with an example of each.
  EXPECT_NE(r.out.find("  best 10 in common: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    fails on GPU-B: 8  failed  CompilationFailedConfig  (e.g. "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    fails on GPU-B: 1  failed  RuntimeFailedConfig  (e.g. "),
            std::string::npos)
      << r.out;
  // A misspelt machine is named.
  r = run("compare --kernel toy --machine GPU-A --machine gpu_b --db " + db());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("did you mean \"GPU-B\"?"), std::string::npos) << r.err;
  // Two machines with too few configurations run on both are compared all the same.
  auto c_cache = nlohmann::json::parse(toy_cache("GPU-C", 2.0, 5));
  for (auto& [key, entry] : c_cache["cache"].items()) {
    if (key != "3,5" && key != "3,4") entry["time"] = "CompilationFailedConfig";
  }
  const auto c_file = dir_.file("c.json");
  std::ofstream(c_file) << c_cache.dump();
  ASSERT_EQ(run("import " + c_file + " --db " + db()).exit_code, 0);
  r = run("compare --kernel toy --machine GPU-A --machine GPU-C --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU-A vs GPU-C: 64 configurations measured on both, 2 ran on both\n"
                       "  rank correlation: none (2 configurations ran on both; a rank "
                       "correlation needs at least 3)"),
            std::string::npos)
      << r.out;
  r = run("compare --kernel toy --machine GPU-A --machine GPU-D --db " + db());
  EXPECT_EQ(r.exit_code, 3) << r.err;  // not found, naming those that measured it
  EXPECT_NE(r.err.find("unknown machine \"GPU-D\"; the machines that measured kernel toy are "
                       "GPU-A, GPU-B, GPU-C"),
            std::string::npos)
      << r.err;

  r = run("trials --study 2 --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("why 9 evaluations failed:\n       8  failed    CompilationFailedConfig\n"
                       "       1  failed    RuntimeFailedConfig\n"),
            std::string::npos)
      << r.out;
  r = run("trials --study 2 --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto reasons = nlohmann::json::parse(r.out)["failure_reasons"];
  EXPECT_EQ(reasons["total"], 9);
  EXPECT_EQ(reasons["reasons"][0]["reason"], "CompilationFailedConfig");
  EXPECT_EQ(reasons["reasons"][0]["count"], 8);
}

// A table of SpMV times per format as Ginkgo publishes them (sparse/spmv/<machine>.csv): two
// matrices, ell did not complete for the second (an empty cell).
std::string write_spmv_table(const std::string& path, const std::string& extra_rows = {}) {
  std::ofstream out(path);
  out << "group,name,id,kind,rows,cols,nonzeros,posdef,psym,nsym,row_min,row_max,csr,coo,ell\n"
      << "G,small,1,\"a problem, with a comma\",10,10,28,1,1,1,2,3,2e-06,3e-06,1e-06\n"
      << "G,wide,2,graph,100,100,900,0,0.5,0.25,1,40,5e-05,4e-05,\n"
      << extra_rows;
  return path;
}

TEST_F(Cli, ImportsAnSpmvFormatTableAsOneStudyPerMatrixWithItsFeatures) {
  const auto file = write_spmv_table(dir_.file("GPU-X.csv"));
  auto r = run("import " + file + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("imported 6 trials (1 failed) of spmv_format on GPU-X: 2 matrices"),
            std::string::npos)
      << r.out;

  db::Store store(db(), {.read_only = true});
  const auto kernel = store.find_kernel("spmv_format");
  ASSERT_TRUE(kernel);
  const auto space = SearchSpace::from_json(kernel->space);
  ASSERT_EQ(space.dimension(), 1u);
  EXPECT_EQ(space.parameters()[0].name, "format");
  EXPECT_EQ(space.config_to_json(space.default_configuration())["format"], "csr");
  const auto studies = store.list_studies("spmv_format");
  ASSERT_EQ(studies.size(), 2u);
  const auto wide = store.get_task(studies[1].task_id);
  EXPECT_EQ(wide.description, (nlohmann::json{{"matrix", "G/wide"}}));
  EXPECT_EQ(wide.features["nonzeros"], 900.0);
  EXPECT_EQ(wide.features["nsym"], 0.25);
  EXPECT_EQ(wide.features["row_max"], 40.0);
  EXPECT_FALSE(wide.features.contains("id"));
  EXPECT_FALSE(wide.features.contains("kind"));
  EXPECT_EQ(studies[1].settings["unit"], "s");
  EXPECT_EQ(store.get_machine(studies[1].machine_id).name, "GPU-X");

  std::map<std::string, Measurement> by_format;
  for (const auto& t : store.trials(studies[1].id)) {
    by_format[t.config["format"].get<std::string>()] = t.result;
  }
  ASSERT_EQ(by_format.size(), 3u);
  EXPECT_EQ(by_format["coo"].objective, 4e-05);
  EXPECT_EQ(by_format["ell"].status, TrialStatus::failed);
  EXPECT_NE(by_format["ell"].message.find("GPU-X.csv has no time for format ell"),
            std::string::npos)
      << by_format["ell"].message;

  // The measured best of the matrix is its fastest format.
  r = run("best --kernel spmv_format --machine GPU-X --task " + std::to_string(wide.id.value) +
          " --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto best = nlohmann::json::parse(r.out);
  EXPECT_EQ(best["config"]["format"], "coo");
  EXPECT_EQ(best["objective"], 4e-05);
  // The same input named as the studies show it, and one that is not stored.
  r = run(
      "best --kernel spmv_format --machine GPU-X --input '{\"matrix\": \"G/wide\"}' --json --db " +
      db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["task_id"], wide.id.value) << r.out;
  r = run("best --kernel spmv_format --machine GPU-X --input '{\"matrix\": \"G/narrow\"}' --db " +
          db());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(R"(no stored input of spmv_format is {"matrix":"G/narrow"}; its inputs: )"),
            std::string::npos)
      << r.err;
}

// The best of any input says how many configurations were measured there: a format measured
// on two matrices is one configuration (as GET /v1/best counts them).
TEST_F(Cli, BestOfAnyInputCountsAFormatMeasuredOnTwoMatricesOnce) {
  ASSERT_EQ(run("import " + write_spmv_table(dir_.file("GPU-X.csv")) + " --db " + db()).exit_code,
            0);
  const auto r = run("best --kernel spmv_format --machine GPU-X --json --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto best = nlohmann::json::parse(r.out);
  EXPECT_EQ(best["config"]["format"], "ell") << r.out;
  // csr and coo on both matrices, ell on the first: 3 formats of 5 successes.
  EXPECT_EQ(best["measured_configurations"], 3) << r.out;
}

TEST_F(Cli, AnSpmvTableImportedAgainAddsNothing) {
  const auto file = write_spmv_table(dir_.file("GPU-X.csv"));
  ASSERT_EQ(run("import " + file + " --db " + db()).exit_code, 0);
  const auto r = run("import " + file + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nothing new: the 2 matrices of"), std::string::npos) << r.out;
  db::Store store(db(), {.read_only = true});
  const auto studies = store.list_studies("spmv_format");
  ASSERT_EQ(studies.size(), 2u);
  EXPECT_EQ(store.trials(studies[0].id).size() + store.trials(studies[1].id).size(), 6u);
}

// K40m's file has cuSPARSE columns V100's has not: imported with the formats both have, the
// two machines share one space (one kernel version), so each is a prior of the other.
TEST_F(Cli, SpmvTablesImportedWithTheSameFormatsShareOneSpace) {
  const auto x = write_spmv_table(dir_.file("GPU-X.csv"));
  const auto y = dir_.file("GPU-Y.csv");
  std::ofstream(y) << "group,name,rows,csr,cusparse_csr,ell,coo\n"
                   << "G,small,10,4e-06,5e-06,2e-06,1e-06\n";
  ASSERT_EQ(run("import " + x + " --db " + db()).exit_code, 0);
  auto r = run("import " + y + " --formats csr,coo,ell --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  db::Store store(db(), {.read_only = true});
  std::set<std::string> versions;
  for (const auto& s : store.list_studies("spmv_format")) versions.insert(s.kernel_version);
  EXPECT_EQ(versions.size(), 1u);
  // What the file lacks is named with what it has.
  r = run("import " + y + " --formats csr,sellp --db " + dir_.file("other.db"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has no format column 'sellp'; its formats: csr, cusparse_csr, ell, coo"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, ABrokenSpmvTableIsRefusedWithItsLineAndNothingIsStored) {
  // An earlier import stays as it is.
  ASSERT_EQ(run("import " + write_spmv_table(dir_.file("GPU-X.csv")) + " --db " + db()).exit_code,
            0);
  const std::vector<std::pair<std::string, std::string>> broken = {
      {"group,kind,rows,csr\nG,graph,10,1e-06\n", ":1: header lacks the 'name' column"},
      {"group,name,rows,nonzeros\nG,a,10,20\n", ":1: no format (time) column"},
      {"group,name,rows,csr\nG,a,10,1e-06\nG,b,10\n", ":3: 3 cells, header has 4"},
      {"group,name,rows,csr\nG,a,10,1e-06\nG,b,ten,1e-06\n",
       ":3: column 'rows' holds 'ten', not a number"},
      {"group,name,rows,csr\nG,a,10,1e-06\nG,a,10,2e-06\n", ":3: matrix G/a is on line 2 already"},
  };
  for (std::size_t i = 0; i < broken.size(); ++i) {
    const auto file = dir_.file("GPU-Y" + std::to_string(i) + ".csv");
    std::ofstream(file) << broken[i].first;
    const auto r = run("import " + file + " --db " + db());
    EXPECT_NE(r.exit_code, 0) << file;
    EXPECT_NE(r.err.find(file + broken[i].second), std::string::npos) << r.err;
  }
  db::Store store(db(), {.read_only = true});
  EXPECT_EQ(store.list_studies().size(), 2u);
  EXPECT_EQ(store.list_machines().size(), 1u);
}

TEST_F(Cli, SpmvMatricesWithTheSameResultsAreStudiesOfTheirOwn) {
  // Every format failed on both: the same results, but of two inputs, not one imported twice.
  const auto file = write_spmv_table(dir_.file("GPU-X.csv"),
                                     "G,huge,3,graph,9,9,81,0,1,1,9,9,,,\n"
                                     "G,huger,4,graph,9,9,81,0,1,1,9,9,,,\n");
  const auto r = run("import " + file + " --db " + db());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("imported 12 trials (7 failed) of spmv_format on GPU-X: 4 matrices"),
            std::string::npos)
      << r.out;
  db::Store store(db(), {.read_only = true});
  EXPECT_EQ(store.list_studies("spmv_format").size(), 4u);
}

}  // namespace
}  // namespace tunebase
