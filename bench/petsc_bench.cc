// bench_petsc: PETSc's default solver (GMRES(30) + block Jacobi/ILU(0)) against the
// configuration the tuner finds, on the square non-pattern matrices of ../shared/data/matrices
// and on generated problems of >= 1M unknowns; then transfer across matrices.
//
//   bench_petsc [--matrices DIR] [--problem poisson3d:100]... [--budget B] [--budget-large B]
//               [--transfer-budget K] [--strategy bo] [--seed S] [--repeats R] [--cpu-time]
//               [--only NAME]... [--out results.json] [--reuse-tuning results.json]
//
// Per system: the default is measured, then a tuning Session (strategy --strategy, the
// default first as its first observation) evaluates B configurations through
// PetscSolverEvaluator, exactly as `tunebase sweep --kernel petsc` does. Reports the default's
// outcome, the tuned configuration and its speed-up; then the geometric-mean speed-up over
// systems where the default converges and the systems where the default fails but the tuned
// one converges.
//
// Transfer: for each system, a bo-transfer Session whose priors are the tuning trials of every
// OTHER system of the same space (symmetric systems have CG/MINRES/ICC too), with the matrix
// features as task features, proposes K configurations (default 5) that are then measured:
// the speed-up reached within K evaluations with the other matrices' trials, next to the
// tuned one and to the first K evaluations of the run without priors.
//
// --reuse-tuning takes the default and tuning trials from an earlier --out file instead of
// measuring them again (the transfer phase is measured anew): for work on transfer methods.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/pde_problems.h"
#include "kernels/petsc_solver.h"
#include "kernels/sparse_matrix.h"
#include "tuner/prior.h"
#include "tuner/session.h"

#ifndef TUNEBASE_DEFAULT_SHARED_DATA
#define TUNEBASE_DEFAULT_SHARED_DATA "../shared/data"
#endif

namespace {

using namespace tunebase;

/// Time limit of a sampled configuration: a multiple of the default's time (a configuration
/// that much slower is of no interest), within bounds.
constexpr double kLimitOverDefault = 5.0;
/// Systems with at least this many rows are tuned with --budget-large evaluations.
constexpr std::int64_t kLargeRows = 100'000;
constexpr double kMinTrialLimitSeconds = 2.0;
constexpr double kMaxTrialLimitSeconds = 120.0;
/// Limit for the default itself. When it fails, the sample's limit is the same multiple of
/// what the failed default cost (iterating to the cap, or failing at once in setup).
constexpr double kDefaultLimitSeconds = 300.0;

struct System {
  std::string name;
  CsrMatrix matrix;
};

struct Outcome {
  bool ok = false;
  double seconds = std::numeric_limits<double>::infinity();
  std::string status;
  std::string reason;
  std::int64_t iterations = -1;
};

Outcome outcome_of(const Measurement& m) {
  Outcome o;
  o.ok = m.ok();
  o.seconds = m.ok() ? m.objective : std::numeric_limits<double>::infinity();
  o.status = std::string(to_string(m.status));
  o.reason = m.metrics.value("reason", std::string());
  if (m.metrics.contains("iterations") && m.metrics["iterations"].is_number()) {
    o.iterations = m.metrics["iterations"].get<std::int64_t>();
  }
  return o;
}

std::string config_text(const SearchSpace& space, const Configuration& c) {
  std::string text;
  for (const auto& [name, value] : petsc_options(space, c)) text += name + " " + value + " ";
  if (!text.empty()) text.pop_back();
  return text;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0.0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

/// One tuned system: its measurements, for the table and as priors of the others.
struct Tuned {
  Outcome default_outcome;
  Outcome best;
  std::string best_config = "(default)";
  /// min over the first k evaluations after the default (k = transfer budget), no priors.
  double first_k_seconds = std::numeric_limits<double>::infinity();
  std::vector<Observation> observations;  // the default included
  nlohmann::json features;
  std::string space_version;
  double trial_limit = 0.0;
};

std::string seconds_text(const Outcome& o) { return o.ok ? std::to_string(o.seconds) : "-"; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"PETSc default vs the tuner's configuration, and transfer across matrices"};
  std::string matrices_dir = std::string(TUNEBASE_DEFAULT_SHARED_DATA) + "/matrices";
  std::vector<std::string> problems = {"poisson3d:100", "convdiff2d:1000"};
  std::size_t budget = 30;
  std::size_t budget_large = 15;
  std::size_t transfer_budget = 5;
  std::string strategy = "bo";
  std::uint64_t seed = 1;
  int repeats = 3;
  std::vector<std::string> only;
  std::string out_path;
  bool cpu_clock = false;
  app.add_flag("--cpu-time", cpu_clock,
               "objective = CPU time of the solver process instead of wall time (steadier on a "
               "busy shared machine)");
  app.add_option("--matrices", matrices_dir,
                 "folder of Matrix Market files (square, non-pattern used)");
  app.add_option("--problem", problems,
                 "generated systems NAME:SIZE (size = grid points per side)");
  app.add_option("--budget", budget, "evaluations of the tuner per system (the default included)");
  app.add_option("--budget-large", budget_large, "the same for systems of >= 100,000 rows");
  app.add_option("--transfer-budget", transfer_budget,
                 "evaluations with the other systems' trials as priors");
  app.add_option("--strategy", strategy, "tuning strategy (without priors)");
  app.add_option("--seed", seed, "seed of the tuner");
  app.add_option("--repeats", repeats, "timed solves per configuration (median)");
  app.add_option("--only", only, "run only these systems (matrix file stems or problem names)");
  app.add_option("--out", out_path, "write every trial as JSON here");
  std::vector<std::string> feature_names;
  app.add_option("--task-feature", feature_names,
                 "matrix features the transfer model sees (repeatable; default: all numeric ones)");
  std::string reuse_path;
  app.add_option("--reuse-tuning", reuse_path,
                 "take the default and tuning trials from this earlier --out file")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);

  try {
    // Systems: real matrices (square, with values), then generated ones.
    std::vector<System> systems;
    std::vector<std::filesystem::path> files;
    if (!matrices_dir.empty() && std::filesystem::is_directory(matrices_dir)) {
      for (const auto& e : std::filesystem::directory_iterator(matrices_dir)) {
        if (e.path().extension() == ".mtx") files.push_back(e.path());
      }
    }
    std::sort(files.begin(), files.end());
    auto wanted = [&](const std::string& name) {
      return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    };
    for (const auto& f : files) {
      const std::string name = f.stem().string();
      if (!wanted(name)) continue;
      MatrixMarketInfo info;
      CsrMatrix a = read_matrix_market(f.string(), &info);
      if (info.field == "pattern" || a.rows != a.cols) {
        std::printf("skip %s (%s, %lld x %lld)\n", name.c_str(), info.field.c_str(),
                    static_cast<long long>(a.rows), static_cast<long long>(a.cols));
        continue;
      }
      a.name = name;
      systems.push_back({name, std::move(a)});
    }
    for (const auto& spec : problems) {
      if (spec.empty()) continue;  // --problem "" runs the real matrices only
      const auto colon = spec.find(':');
      if (colon == std::string::npos) {
        throw InvalidInput("--problem '" + spec + "': expected NAME:SIZE, e.g. poisson3d:100");
      }
      const std::string name = spec.substr(0, colon);
      if (!wanted(name) && !wanted(spec)) continue;
      systems.push_back({spec, generate_problem(name, std::stoll(spec.substr(colon + 1)))});
    }
    std::printf(
        "PETSc bench: %zu systems; tuner = %s, %zu evaluations per system (%zu on "
        "systems of >= %lld rows), seed %llu, %d repeats, objective = %s time of setup "
        "+ solve; transfer: bo-transfer with the other systems' trials, %zu "
        "evaluations\n\n",
        systems.size(), strategy.c_str(), budget, budget_large, static_cast<long long>(kLargeRows),
        static_cast<unsigned long long>(seed), repeats, cpu_clock ? "CPU" : "wall",
        transfer_budget);

    nlohmann::json all = nlohmann::json::array();
    auto record = [&](const std::string& system, const std::string& phase, const SearchSpace& space,
                      const Configuration& c, const Measurement& m) {
      const Outcome o = outcome_of(m);
      all.push_back({{"system", system},
                     {"phase", phase},
                     {"config", config_text(space, c)},
                     {"config_json", space.config_to_json(c)},
                     {"status", o.status},
                     {"seconds", o.ok ? nlohmann::json(o.seconds) : nlohmann::json()},
                     {"metrics", m.metrics},
                     {"message", m.message}});
      return o;
    };
    PetscSolverOptions base;
    base.repeats = repeats;
    base.clock = cpu_clock ? SolveClock::cpu : SolveClock::wall;
    base.time_limit_seconds = kDefaultLimitSeconds;

    // Earlier trials to reuse: system -> its default and tuning records, in order.
    std::map<std::string, std::vector<nlohmann::json>> reused;
    if (!reuse_path.empty()) {
      std::ifstream in(reuse_path);
      if (!in) throw IoError("--reuse-tuning: cannot read " + reuse_path);
      const auto earlier = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!earlier.is_array()) {
        throw InvalidInput("--reuse-tuning " + reuse_path + ": not a JSON array of trials");
      }
      for (const auto& r : earlier) {
        if (!r.contains("config_json")) {
          throw InvalidInput("--reuse-tuning " + reuse_path +
                             ": trials without \"config_json\" (written by an older bench_petsc)");
        }
        const auto phase = r.value("phase", std::string());
        if (phase == "default" || phase == "tune")
          reused[r["system"].get<std::string>()].push_back(r);
      }
    }
    // A stored trial as a measurement (what the tuner and the table need of it).
    auto measurement_of = [](const nlohmann::json& r) {
      Measurement m =
          r["status"] == "ok"
              ? Measurement::success(r["seconds"].get<double>())
              : Measurement::failure(trial_status_from_string(r["status"].get<std::string>()),
                                     r.value("message", std::string()));
      m.metrics = r.value("metrics", nlohmann::json::object());
      return m;
    };

    // --- tuning, system by system
    std::vector<Tuned> tuned(systems.size());
    std::printf(
        "| system | rows | nnz | sym | default | its | default s | tuned configuration | its | "
        "tuned s | speed-up | ok/tried |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t s = 0; s < systems.size(); ++s) {
      Tuned& t = tuned[s];
      double default_cost = 0.0;
      const auto earlier = reused.find(systems[s].name);
      {
        PetscSolverEvaluator e(systems[s].matrix, base);
        t.features = numeric_task_features(e.task());
        if (!feature_names.empty()) {
          nlohmann::json kept = nlohmann::json::object();
          for (const auto& name : feature_names) {
            if (t.features.contains(name)) kept[name] = t.features[name];
          }
          t.features = kept;
        }
        t.space_version = e.space().fingerprint();
        const Measurement m = earlier != reused.end() ? measurement_of(earlier->second.front())
                                                      : e.evaluate(e.petsc_default());
        t.default_outcome = record(systems[s].name, "default", e.space(), e.petsc_default(), m);
        default_cost = m.cost_seconds;
        t.observations.push_back({e.petsc_default(), m});
      }
      PetscSolverOptions trial = base;
      t.trial_limit = std::clamp(
          kLimitOverDefault * (t.default_outcome.ok ? t.default_outcome.seconds : default_cost),
          kMinTrialLimitSeconds, kMaxTrialLimitSeconds);
      trial.time_limit_seconds = t.trial_limit;
      PetscSolverEvaluator e(systems[s].matrix, trial);
      const std::size_t evaluations = systems[s].matrix.rows >= kLargeRows ? budget_large : budget;
      SessionOptions options;
      options.strategy = strategy;
      options.seed = seed;
      options.budget = evaluations;
      Session session(e.space(), options);
      session.restore(t.observations, {});
      t.best = t.default_outcome;
      std::size_t ok_count = 0;
      std::size_t tried = 0;
      std::size_t next_reused = 1;
      while (session.observations().size() < evaluations) {
        std::vector<Configuration> batch;
        Measurement m;
        if (earlier != reused.end()) {
          if (next_reused >= earlier->second.size()) break;
          const auto& r = earlier->second[next_reused++];
          batch.push_back(e.space().config_from_json(r["config_json"]));
          m = measurement_of(r);
        } else {
          batch = session.propose(1);
          if (batch.empty()) break;
          m = e.evaluate(batch.front());
        }
        session.observe(batch.front(), m);
        t.observations.push_back({batch.front(), m});
        const Outcome o = record(systems[s].name, "tune", e.space(), batch.front(), m);
        ++tried;
        ok_count += o.ok;
        if (o.ok && tried <= transfer_budget)
          t.first_k_seconds = std::min(t.first_k_seconds, o.seconds);
        if (o.ok && o.seconds < t.best.seconds) {
          t.best = o;
          t.best_config = config_text(e.space(), batch.front());
        }
      }
      const double speedup =
          t.default_outcome.ok && t.best.ok ? t.default_outcome.seconds / t.best.seconds : 0.0;
      std::printf("| %s | %lld | %lld | %s | %s | %lld | %s | `%s` | %lld | %s | %s | %zu/%zu |\n",
                  systems[s].name.c_str(), static_cast<long long>(systems[s].matrix.rows),
                  static_cast<long long>(systems[s].matrix.nnz()),
                  features_say_symmetric(t.features) ? "yes" : "no",
                  t.default_outcome.ok ? "ok" : t.default_outcome.reason.c_str(),
                  static_cast<long long>(t.default_outcome.iterations),
                  seconds_text(t.default_outcome).c_str(), t.best_config.c_str(),
                  static_cast<long long>(t.best.iterations), seconds_text(t.best).c_str(),
                  speedup > 0 ? std::to_string(speedup).c_str() : "-", ok_count, tried);
      std::fflush(stdout);
    }

    // --- transfer: K evaluations per system with the other systems' trials as priors
    std::printf(
        "\n| system | prior systems | tuned s | first %zu without priors | %zu with priors | "
        "configuration |\n",
        transfer_budget, transfer_budget);
    std::printf("|---|---|---|---|---|---|\n");
    std::vector<double> transfer_seconds(systems.size(), std::numeric_limits<double>::infinity());
    for (std::size_t s = 0; s < systems.size(); ++s) {
      std::vector<Prior> priors;
      for (std::size_t o = 0; o < systems.size(); ++o) {
        if (o == s || tuned[o].space_version != tuned[s].space_version) continue;
        Prior p;
        p.source = "this machine";  // one model over the other matrices, features as inputs
        p.task_features = tuned[o].features;
        p.observations = tuned[o].observations;
        priors.push_back(std::move(p));
      }
      const std::size_t prior_systems = priors.size();
      PetscSolverOptions trial = base;
      trial.time_limit_seconds = tuned[s].trial_limit;
      PetscSolverEvaluator e(systems[s].matrix, trial);
      SessionOptions options;
      options.strategy = "bo-transfer";
      options.seed = seed;
      options.budget = transfer_budget;
      options.priors = std::move(priors);
      options.task_features = tuned[s].features;
      Session session(e.space(), options);
      std::string best_config = "-";
      for (std::size_t k = 0; k < transfer_budget; ++k) {
        const auto batch = session.propose(1);
        if (batch.empty()) break;
        const Measurement m = e.evaluate(batch.front());
        session.observe(batch.front(), m);
        const Outcome o = record(systems[s].name, "transfer", e.space(), batch.front(), m);
        if (o.ok && o.seconds < transfer_seconds[s]) {
          transfer_seconds[s] = o.seconds;
          best_config = config_text(e.space(), batch.front());
        }
      }
      auto text = [](double v) { return std::isfinite(v) ? std::to_string(v) : std::string("-"); };
      std::printf("| %s | %zu | %s | %s | %s | `%s` |\n", systems[s].name.c_str(), prior_systems,
                  seconds_text(tuned[s].best).c_str(), text(tuned[s].first_k_seconds).c_str(),
                  text(transfer_seconds[s]).c_str(), best_config.c_str());
      std::fflush(stdout);
    }

    // --- summary
    std::vector<double> speedups, transfer_speedups, first_k_speedups;
    std::size_t default_fails = 0, rescued = 0, transfer_rescued = 0, first_k_rescued = 0;
    for (std::size_t s = 0; s < systems.size(); ++s) {
      const Tuned& t = tuned[s];
      if (t.default_outcome.ok) {
        const double d = t.default_outcome.seconds;
        speedups.push_back(d / t.best.seconds);
        // Within K evaluations the default stays the fallback: never below 1.
        transfer_speedups.push_back(std::max(1.0, d / transfer_seconds[s]));
        first_k_speedups.push_back(std::max(1.0, d / t.first_k_seconds));
      } else {
        ++default_fails;
        rescued += t.best.ok;
        transfer_rescued += std::isfinite(transfer_seconds[s]);
        first_k_rescued += std::isfinite(t.first_k_seconds);
      }
    }
    const double g = geomean(speedups);
    const double gt = geomean(transfer_speedups);
    const double gk = geomean(first_k_speedups);
    auto share = [&](double x) { return g > 1.0 ? 100.0 * std::log(x) / std::log(g) : 100.0; };
    std::printf("\nsystems: %zu; default converges on %zu\n", systems.size(),
                systems.size() - default_fails);
    std::printf(
        "geometric-mean speed-up of the tuned configuration over the default (systems "
        "where the default converges): %.2fx\n",
        g);
    std::printf(
        "default fails but the tuned configuration converges: %zu of %zu default "
        "failures\n",
        rescued, default_fails);
    std::printf(
        "within %zu evaluations WITH the other systems' trials (bo-transfer): "
        "geometric-mean speed-up %.2fx = %.0f%% of the tuned log speed-up; converges on "
        "%zu of the %zu default failures\n",
        transfer_budget, gt, share(gt), transfer_rescued, default_fails);
    std::printf(
        "within %zu evaluations WITHOUT priors (the tuner's first %zu): %.2fx = %.0f%%; "
        "converges on %zu of the %zu default failures\n",
        transfer_budget, transfer_budget, gk, share(gk), first_k_rescued, default_fails);

    if (!out_path.empty()) {
      std::ofstream out(out_path);
      out << all.dump(1) << "\n";
      std::printf("trials written to %s\n", out_path.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_petsc: %s\n", e.what());
    return 1;
  }
  return 0;
}
