// bench_petsc: PETSc's default solver (GMRES(30) + block Jacobi/ILU(0)) against the best
// configuration of a fixed random sample of the PETSc search space, on the square non-pattern
// matrices of ../shared/data/matrices and on generated problems of >= 1M unknowns.
//
// SEARCH USED HERE: a seeded random sample stratified by preconditioner (the same sample for
// every system; CG/MINRES/ICC configurations are added for symmetric systems), not the tuner.
// The tuner's strategies replace this loop once they drive PetscSolverEvaluator.
//
//   bench_petsc [--matrices DIR] [--problem poisson3d:100]... [--per-pc K] [--seed S]
//               [--repeats R] [--only NAME]... [--out results.json]
//
// Reports per system the default's outcome and time, the best sampled configuration and its
// speed-up; then the geometric-mean speed-up over systems where the default converges, the
// systems where the default fails and a sampled configuration converges, and a leave-one-out
// "portfolio" figure: the speed-up reached by the 5 configurations that did best on the
// other systems, next to the full sample's.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cmath>
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

#ifndef TUNEBASE_DEFAULT_SHARED_DATA
#define TUNEBASE_DEFAULT_SHARED_DATA "../shared/data"
#endif

namespace {

using namespace tunebase;

/// Time limit of a sampled configuration: a multiple of the default's time (a configuration
/// that much slower is of no interest), within bounds.
constexpr double kLimitOverDefault = 5.0;
/// Systems with at least this many rows get the first --per-pc-large configurations of each
/// preconditioner's share of the sample (a subset of what the small systems get).
constexpr std::int64_t kLargeRows = 100'000;
constexpr double kMinTrialLimitSeconds = 2.0;
constexpr double kMaxTrialLimitSeconds = 120.0;
/// Limit for the default itself. When it fails, the sample's limit is the same multiple of
/// what the failed default cost (iterating to the cap, or failing at once in setup).
constexpr double kDefaultLimitSeconds = 300.0;
/// Ranking configurations on other systems: a failure counts as this many times the best.
constexpr double kFailureRatio = 10.0;
constexpr std::size_t kPortfolioSize = 5;

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

using Sample = std::map<std::string, std::vector<Configuration>>;

/// Per preconditioner, `per_pc` configurations drawn uniformly from the valid configurations
/// with that preconditioner; `only_symmetric` keeps those that need a symmetric matrix (CG,
/// MINRES or ICC), otherwise those that do not.
Sample stratified_sample(const SearchSpace& space, std::size_t per_pc, bool only_symmetric,
                         Rng& rng) {
  const std::size_t ksp = *space.index_of("ksp_type");
  const std::size_t pc = *space.index_of("pc_type");
  auto needs_symmetry = [&](const Configuration& c) {
    const std::string k = to_string(c[ksp]);
    return k == "cg" || k == "minres" || to_string(c[pc]) == "icc";
  };
  std::map<std::string, std::vector<Configuration>> by_pc;
  for (const auto& c : space.valid_configurations()) {
    if (needs_symmetry(c) == only_symmetric) by_pc[to_string(c[pc])].push_back(c);
  }
  for (auto& [name, configs] : by_pc) {
    std::shuffle(configs.begin(), configs.end(), rng);
    configs.resize(std::min(per_pc, configs.size()));
  }
  return by_pc;
}

/// The first `per_pc` configurations of each preconditioner's share.
std::vector<Configuration> take(const Sample& sample, std::size_t per_pc) {
  std::vector<Configuration> out;
  for (const auto& [name, configs] : sample) {
    for (std::size_t i = 0; i < std::min(per_pc, configs.size()); ++i) out.push_back(configs[i]);
  }
  return out;
}

std::size_t size_of(const Sample& sample) { return take(sample, SIZE_MAX).size(); }

double geomean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0.0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"PETSc default vs best sampled configuration (random sample, not the tuner)"};
  std::string matrices_dir = std::string(TUNEBASE_DEFAULT_SHARED_DATA) + "/matrices";
  std::vector<std::string> problems = {"poisson3d:100", "convdiff2d:1000"};
  std::size_t per_pc = 6;
  std::size_t per_pc_large = 2;
  std::uint64_t seed = 1;
  int repeats = 3;
  std::vector<std::string> only;
  std::string out_path;
  bool cpu_clock = false;
  app.add_flag("--cpu-time", cpu_clock,
               "objective = CPU time of the solver process instead of wall time (steadier on a "
               "busy shared machine)");
  app.add_option("--matrices", matrices_dir, "folder of Matrix Market files (square, non-pattern used)");
  app.add_option("--problem", problems, "generated systems NAME:SIZE (size = grid points per side)");
  app.add_option("--per-pc", per_pc, "sampled configurations per preconditioner");
  app.add_option("--per-pc-large", per_pc_large,
                 "the same for systems of >= 100,000 rows (a prefix of the small systems' share)");
  app.add_option("--seed", seed, "seed of the sample");
  app.add_option("--repeats", repeats, "timed solves per configuration (median)");
  app.add_option("--only", only, "run only these systems (matrix file stems or problem names)");
  app.add_option("--out", out_path, "write every trial as JSON here");
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

    // One sample for every system (configurations of the general space are valid in the
    // symmetric one: same parameters, larger domains).
    Rng rng(seed);
    const SearchSpace general = petsc_search_space(false);
    const SearchSpace symmetric_space = petsc_search_space(true);
    const Sample shared = stratified_sample(general, per_pc, false, rng);
    const Sample symmetric_only = stratified_sample(symmetric_space, per_pc, true, rng);
    std::printf("PETSc bench: %zu systems; SEARCH = random sample stratified by preconditioner "
                "(%zu configurations, +%zu CG/MINRES/ICC for symmetric systems; %zu per "
                "preconditioner instead of %zu on systems of >= %lld rows), seed %llu, "
                "%d repeats, objective = %s time of setup + solve\n\n",
                systems.size(), size_of(shared), size_of(symmetric_only), per_pc_large, per_pc,
                static_cast<long long>(kLargeRows), static_cast<unsigned long long>(seed),
                repeats, cpu_clock ? "CPU" : "wall");

    nlohmann::json all = nlohmann::json::array();
    // seconds[system][config key] for the leave-one-out portfolio (inf = failed).
    std::vector<std::map<std::string, double>> seconds(systems.size());
    std::vector<Outcome> defaults(systems.size());
    std::vector<Outcome> bests(systems.size());
    std::vector<bool> is_symmetric(systems.size());

    std::printf("| system | rows | nnz | sym | default | its | default s | best sampled | its | best s | speed-up | ok/tried |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t s = 0; s < systems.size(); ++s) {
      PetscSolverOptions base;
      base.repeats = repeats;
      base.clock = cpu_clock ? SolveClock::cpu : SolveClock::wall;
      base.time_limit_seconds = kDefaultLimitSeconds;
      Outcome def;
      double default_cost = 0.0;
      nlohmann::json task;
      {
        PetscSolverEvaluator e(systems[s].matrix, base);
        task = e.task();
        const Measurement m = e.evaluate(e.petsc_default());
        def = outcome_of(m);
        default_cost = m.cost_seconds;
        seconds[s][e.space().key(e.petsc_default())] = def.seconds;
        all.push_back({{"system", systems[s].name},
                       {"config", config_text(e.space(), e.petsc_default())},
                       {"default", true},
                       {"status", def.status},
                       {"seconds", def.ok ? nlohmann::json(def.seconds) : nlohmann::json()},
                       {"metrics", m.metrics},
                       {"message", m.message}});
      }
      is_symmetric[s] = features_say_symmetric(task);
      PetscSolverOptions trial = base;
      trial.time_limit_seconds =
          std::clamp(kLimitOverDefault * (def.ok ? def.seconds : default_cost),
                     kMinTrialLimitSeconds, kMaxTrialLimitSeconds);
      PetscSolverEvaluator e(systems[s].matrix, trial);
      const std::size_t quota = systems[s].matrix.rows >= kLargeRows ? per_pc_large : per_pc;
      std::vector<Configuration> configs = take(shared, quota);
      if (is_symmetric[s]) {
        const auto extra = take(symmetric_only, quota);
        configs.insert(configs.end(), extra.begin(), extra.end());
      }
      Outcome best = def;
      std::string best_config = "(default)";
      std::size_t ok_count = 0;
      std::size_t tried = 0;
      for (const auto& c : configs) {
        const std::string key = e.space().key(c);
        if (seconds[s].count(key)) continue;  // the default, already measured
        const Measurement m = e.evaluate(c);
        const Outcome o = outcome_of(m);
        ++tried;
        ok_count += o.ok;
        seconds[s][key] = o.seconds;
        all.push_back({{"system", systems[s].name},
                       {"config", config_text(e.space(), c)},
                       {"default", false},
                       {"status", o.status},
                       {"seconds", o.ok ? nlohmann::json(o.seconds) : nlohmann::json()},
                       {"metrics", m.metrics},
                       {"message", m.message}});
        if (o.ok && o.seconds < best.seconds) {
          best = o;
          best_config = config_text(e.space(), c);
        }
      }
      defaults[s] = def;
      bests[s] = best;
      const double speedup = def.ok && best.ok ? def.seconds / best.seconds : 0.0;
      std::printf("| %s | %lld | %lld | %s | %s | %lld | %s | `%s` | %lld | %s | %s | %zu/%zu |\n",
                  systems[s].name.c_str(), static_cast<long long>(systems[s].matrix.rows),
                  static_cast<long long>(systems[s].matrix.nnz()), is_symmetric[s] ? "yes" : "no",
                  def.ok ? "ok" : def.reason.c_str(), static_cast<long long>(def.iterations),
                  def.ok ? std::to_string(def.seconds).c_str() : "-", best_config.c_str(),
                  static_cast<long long>(best.iterations),
                  best.ok ? std::to_string(best.seconds).c_str() : "-",
                  speedup > 0 ? std::to_string(speedup).c_str() : "-", ok_count,
                  tried);
      std::fflush(stdout);
    }

    // Summary.
    std::vector<double> speedups;
    std::vector<double> portfolio_speedups;
    std::size_t default_fails = 0;
    std::size_t rescued = 0;
    std::size_t portfolio_rescued = 0;
    std::size_t both_fail = 0;
    for (std::size_t s = 0; s < systems.size(); ++s) {
      // Leave-one-out portfolio: rank configurations by their geometric-mean ratio to the best
      // on the other systems of the same symmetry class (failures count kFailureRatio).
      std::map<std::string, std::vector<double>> ratios;
      for (std::size_t o = 0; o < systems.size(); ++o) {
        if (o == s || !bests[o].ok) continue;
        for (const auto& [key, t] : seconds[o]) {
          ratios[key].push_back(std::isfinite(t) ? std::min(t / bests[o].seconds, kFailureRatio)
                                                 : kFailureRatio);
        }
      }
      std::vector<std::pair<double, std::string>> ranked;
      for (const auto& [key, r] : ratios) {
        // Only configurations that apply to this system (CG/MINRES/ICC need symmetry); those
        // are ranked over the systems they were run on.
        if (seconds[s].count(key)) ranked.emplace_back(geomean(r), key);
      }
      std::sort(ranked.begin(), ranked.end());
      double portfolio_best = std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i < std::min(kPortfolioSize, ranked.size()); ++i) {
        portfolio_best = std::min(portfolio_best, seconds[s][ranked[i].second]);
      }
      if (defaults[s].ok) {
        speedups.push_back(defaults[s].seconds / bests[s].seconds);
        if (std::isfinite(portfolio_best)) {
          portfolio_speedups.push_back(defaults[s].seconds / portfolio_best);
        } else {
          portfolio_speedups.push_back(1.0);  // falls back to the default
        }
      } else {
        ++default_fails;
        rescued += bests[s].ok;
        portfolio_rescued += std::isfinite(portfolio_best);
        both_fail += !bests[s].ok;
      }
    }
    const double g = geomean(speedups);
    const double gp = geomean(portfolio_speedups);
    std::printf("\nsystems: %zu; default converges on %zu\n", systems.size(),
                systems.size() - default_fails);
    std::printf("geometric-mean speed-up of the best sampled configuration over the default "
                "(systems where the default converges): %.2fx\n", g);
    std::printf("default fails but a sampled configuration converges: %zu of %zu default "
                "failures (%zu fail with every sampled configuration)\n",
                rescued, default_fails, both_fail);
    std::printf("leave-one-out portfolio (5 configurations best on the other systems): "
                "geometric-mean speed-up %.2fx = %.0f%% of the full sample's log speed-up; "
                "converges on %zu of the %zu default failures\n",
                gp, g > 1.0 ? 100.0 * std::log(gp) / std::log(g) : 100.0, portfolio_rescued,
                default_fails);

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
