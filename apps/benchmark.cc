// tunebase benchmark: tuning quality of strategies on a fully measured target (simulation
// mode, as Kernel Tuner's), over many seeds, as JSON and SVG.
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "apps/cli.h"
#include "apps/evaluators.h"
#include "apps/output_file.h"
#include "apps/sweep.h"
#include "core/error.h"
#include "core/measurements.h"
#include "kernels/replay.h"
#include "tuner/prior.h"
#include "tuner/quality.h"
#include "tuner/session.h"

namespace tunebase::cli {

namespace {

struct BenchmarkArgs {
  std::string target;
  std::vector<std::string> priors;
  std::vector<std::string> strategies;
  std::size_t budget = 100;
  std::size_t seeds = 20;
  std::string space_file;
  std::string json_out;
  std::string svg_out;
  std::string trace_out;
  unsigned jobs = 1;
  std::string options = "{}";
  std::string objective;
  bool maximize = false;
  bool minimize = false;
};

// Transfer strategies compared when priors are given and no --strategy is.
const std::vector<std::string> kTransferStrategies = {"bo-transfer", "rgpe", "stacked",
                                                      "prior-best", "bo"};
// Evaluations at which the ensemble weights are printed.
constexpr std::size_t kWeightCheckpoints[] = {1, 2, 5, 10, 20, 50, 100};

struct RunResult {
  RunTrace trace;
  /// The configurations evaluated, in order (JSON objects).
  /// Keys in the space's parameter order, as the file lists them (not alphabetical).
  std::vector<nlohmann::ordered_json> configs;
  /// The RGPE weights (source name -> weight) behind each proposal, when the strategy has them.
  std::vector<std::map<std::string, double>> weights;
};

void print_notes(const std::string& file, const std::vector<std::string>& notes) {
  for (const auto& note : notes) std::cout << "note: " << file << ": " << note << "\n";
}

// The best objective among the configurations of a --space (the reference of the fractions: what a
// perfect search of that space finds), after checking the space and the file overlap.
double optimum_in_space(const ReplayEvaluator& target, const SearchSpace& space,
                        const std::vector<Configuration>& candidates,
                        const std::string& space_file) {
  std::size_t present = 0;
  const double sign = target.minimize() ? 1.0 : -1.0;
  double best = sign * std::numeric_limits<double>::infinity();
  for (const auto& c : candidates) {
    // Throws for a parameter of the space that the target lacks (or the reverse).
    const auto own = target.configuration_of(space.config_to_json(c));
    if (!target.contains(own)) continue;
    ++present;
    if (const auto m = target.lookup(own); m.ok() && sign * m.objective < sign * best) {
      best = m.objective;
    }
  }
  const std::string sizes = std::to_string(candidates.size()) + " configurations of " + space_file;
  if (present == 0) {
    throw InvalidInput("none of the " + sizes + " is in " + target.origin() +
                       ": their values differ from the file's (e.g. " +
                       space.config_to_json(candidates.front()).dump() + ")");
  }
  if (!std::isfinite(best)) {
    throw InvalidInput("every one of the " + std::to_string(present) + " of the " + sizes +
                       " that " + target.origin() + " holds failed: the space has no optimum");
  }
  if (present < candidates.size()) {
    std::cout << "note: " << candidates.size() - present << " of the " << sizes << " are not in "
              << target.origin() << "; they count as failed evaluations\n";
  }
  if (best != target.optimum()) {
    std::cout << "note: the best " << target.objective_name() << " of " << target.origin() << " ("
              << target.optimum() << ") is outside the space; fractions are of the space's best, "
              << best << "\n";
  }
  return best;
}

// A prior holding the target's own measurements (the same file, or the same run in another
// format) would hand the search the answer.
// An output written over an input (--json on the --target file) would replace measurements
// with a report, and two outputs on one path would lose one: refused before the run. Devices
// and pipes (/dev/stdout) may take several outputs.
void refuse_overlapping_files(const std::vector<std::pair<std::string, std::string>>& inputs,
                              const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  const auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, path] = outputs[i];
    if (path.empty()) continue;
    std::error_code ec;
    if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) continue;
    for (const auto& [input_option, input] : inputs) {
      if (!input.empty() && same(path, input)) {
        throw InvalidInput(option + " " + path + " is the " + input_option +
                           " file: writing it would replace the measurements; give the output "
                           "another name");
      }
    }
    for (std::size_t k = 0; k < i; ++k) {
      if (!outputs[k].second.empty() && same(path, outputs[k].second)) {
        throw InvalidInput(option + " and " + outputs[k].first + " both name " + path +
                           "; give each output its own file");
      }
    }
  }
}

RunResult run_one(const ReplayEvaluator& target, const SearchSpace& space,
                  const std::vector<Configuration>& candidates, const std::vector<Prior>& priors,
                  const std::string& strategy, const nlohmann::json& strategy_options,
                  std::size_t budget, std::uint64_t seed, bool space_differs) {
  SessionOptions options;
  options.strategy = strategy;
  options.strategy_options = strategy_options;
  options.seed = seed;
  options.budget = budget;
  options.candidates = candidates;
  options.priors = priors;
  options.minimize = target.minimize();
  Session session(space, options);
  RunResult result;
  RunTrace& trace = result.trace;
  while (trace.objectives.size() < budget) {
    auto batch = session.propose(1);
    if (batch.empty()) break;  // every candidate measured: no proposal to time
    trace.suggest_ms.push_back(session.last_propose_ms());
    if (const auto d = session.diagnostics(); d.contains("rgpe_weights")) {
      std::map<std::string, double> w;
      for (const auto& [name, value] : d["rgpe_weights"].items()) w[name] = value.get<double>();
      result.weights.push_back(std::move(w));
    }
    const auto& config = batch.front();
    const Measurement m =
        space_differs ? target.lookup_json(space.config_to_json(config)) : target.lookup(config);
    session.observe(config, m);
    trace.objectives.push_back(m.ok() ? m.objective : std::nan(""));
    result.configs.push_back(space.config_to_ordered_json(config));
  }
  return result;
}

// Median over seeds of each source's weight after k = 1..budget proposals:
// {"evaluations": [1, 2, ...], "median": {"<source>": [...], "target": [...]}}; null when no
// run recorded weights.
nlohmann::json weights_over_time(const std::vector<RunResult>& runs, std::size_t budget) {
  std::map<std::string, std::vector<std::vector<double>>> by_source;  // name -> k -> seeds
  bool any = false;
  for (const auto& run : runs) {
    for (std::size_t k = 0; k < run.weights.size() && k < budget; ++k) {
      for (const auto& [name, w] : run.weights[k]) {
        auto& curve = by_source[name];
        if (curve.size() < budget) curve.resize(budget);
        curve[k].push_back(w);
        any = true;
      }
    }
  }
  if (!any) return nullptr;
  nlohmann::json out{{"evaluations", nlohmann::json::array()},
                     {"median", nlohmann::json::object()}};
  for (std::size_t k = 1; k <= budget; ++k) out["evaluations"].push_back(k);
  for (const auto& [name, curve] : by_source) {
    nlohmann::json medians = nlohmann::json::array();
    for (const auto& at_k : curve) {
      if (at_k.empty()) {
        medians.push_back(nullptr);
      } else {
        medians.push_back(median(at_k));
      }
    }
    out["median"][name] = medians;
  }
  return out;
}

void print_weights(const std::string& strategy, const nlohmann::json& weights) {
  if (weights.is_null()) return;
  std::cout << "  " << strategy << " ensemble weights (median over seeds) after k proposals:\n";
  std::cout << "  " << std::left << std::setw(24) << "source" << std::right;
  for (std::size_t k : kWeightCheckpoints) std::cout << std::setw(7) << ("k=" + std::to_string(k));
  std::cout << "\n";
  for (const auto& [name, curve] : weights["median"].items()) {
    std::cout << "  " << std::left << std::setw(24) << name << std::right;
    for (std::size_t k : kWeightCheckpoints) {
      std::ostringstream cell;
      if (k <= curve.size() && !curve[k - 1].is_null()) {
        cell << std::fixed << std::setprecision(2) << curve[k - 1].get<double>();
      } else {
        cell << "-";
      }
      std::cout << std::setw(7) << cell.str();
    }
    std::cout << "\n";
  }
}

void print_report(const QualityReport& r) {
  std::cout << std::left << std::setw(12) << r.strategy << std::right;
  {
    std::ostringstream first;
    first << std::fixed << std::setprecision(3) << (r.curve.empty() ? NAN : r.curve.front().median);
    std::cout << std::setw(8) << first.str();
  }
  for (const auto& level : r.evals_to) {
    std::ostringstream cell;
    // Most seeds never reached it: their count (the budget, as the metric counts them) is
    // no number of evaluations that reached it.
    if (level.never > 0.5) cell << ">";
    cell << level.evaluations.median;
    if (level.never > 0) cell << " (" << std::lround(100 * level.never) << "% never)";
    std::cout << std::setw(18) << cell.str();
  }
  for (const auto& cp : r.fraction_at) {
    std::ostringstream cell;
    if (std::isnan(cp.fraction.median)) {
      cell << "-";  // past the budget
    } else {
      cell << std::fixed << std::setprecision(3) << cp.fraction.median;
    }
    std::cout << std::setw(8) << cell.str();
  }
  std::ostringstream ms;
  ms << std::fixed << std::setprecision(1) << r.suggest_ms_median << "/" << r.suggest_ms_p95;
  std::cout << std::setw(14) << ms.str() << "\n";
}

}  // namespace

void add_benchmark_command(CLI::App& app) {
  auto args = std::make_shared<BenchmarkArgs>();
  auto* cmd = app.add_subcommand(
      "benchmark", "Tuning quality of strategies on a fully measured target (simulation mode)");
  cmd->add_option("--target", args->target, "Kernel Tuner cache or T4 file (the target)")
      ->required();
  cmd->add_option("--prior", args->priors,
                  "Measurements of another machine or input (repeatable): priors of the transfer "
                  "strategies; without --strategy, compares bo-transfer, rgpe, stacked, "
                  "prior-best, bo and random");
  cmd->add_option("--strategy,-s", args->strategies,
                  "Strategy to compare (repeatable); random search is always included");
  cmd->add_option("--budget,-b", args->budget, "Evaluations per run")
      ->check(CLI::Range(std::size_t{1}, kMaxBudget))
      ->capture_default_str();
  cmd->add_option("--seeds", args->seeds, "Runs per strategy")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100'000}))
      ->capture_default_str();
  cmd->add_option("--space", args->space_file,
                  "Search the valid space of this T1/space file instead of the file's entries");
  cmd->add_option("--json", args->json_out, "Write the metrics as JSON here");
  cmd->add_option("--svg", args->svg_out, "Write the plot here");
  cmd->add_option("--trace", args->trace_out,
                  "Write every run's evaluations here, one JSON line per strategy and seed: "
                  "{strategy, seed, configs, objectives} (null for a failed evaluation)");
  cmd->add_option("--jobs,-j", args->jobs, "Seeds run in parallel (1 for clean timings)")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  cmd->add_option("--options", args->options,
                  "Strategy options as JSON, e.g. '{\"initial_design\": 10}'");
  cmd->add_option("--objective", args->objective,
                  "Numeric field of the target's entries to tune, e.g. GFLOP/s (default time); "
                  "one ending in /s is maximised, and fractions of optimum are then value/optimum");
  cmd->add_flag("--maximize", args->maximize, "Higher --objective is better");
  cmd->add_flag("--minimize", args->minimize, "Lower --objective is better, even for a rate");
  cmd->callback([args] {
    install_interrupt_handler();
    std::vector<std::pair<std::string, std::string>> inputs = {{"--target", args->target},
                                                               {"--space", args->space_file}};
    for (const auto& file : args->priors) inputs.emplace_back("--prior", file);
    refuse_overlapping_files(
        inputs,
        {{"--json", args->json_out}, {"--svg", args->svg_out}, {"--trace", args->trace_out}});
    const auto target = ReplayEvaluator::from_file(
        args->target, {}, replay_objective(args->objective, args->maximize, args->minimize));
    // Prior files are read as times: they would teach a search of another objective the wrong
    // thing.
    if (target.objective_name() != "time" && !args->priors.empty()) {
      throw InvalidInput("--prior files are read as times (lower is better), and --objective " +
                         target.objective_name() +
                         " is another measure: leave out --prior or --objective");
    }
    print_notes(args->target, target.dataset().notes);
    const bool space_differs = !args->space_file.empty();
    const SearchSpace space = space_differs ? SearchSpace::load(args->space_file) : target.space();
    const std::vector<Configuration> candidates =
        space_differs ? space.valid_configurations() : target.configurations();
    if (candidates.empty()) throw InvalidInput("the search space has no valid configuration");
    const double optimum = space_differs
                               ? optimum_in_space(target, space, candidates, args->space_file)
                               : target.optimum();  // throws with no success
    const nlohmann::json strategy_options = parse_strategy_options(args->options, "--options");
    if (strategy_options.contains("seed")) {
      throw InvalidInput("--options: \"seed\" is set per run (runs 1 to " +
                         std::to_string(args->seeds) + "); leave it out");
    }
    std::vector<Prior> priors;
    for (const auto& file : args->priors) {
      std::vector<std::string> notes;
      priors.push_back(load_prior(file, space, &notes));
      refuse_prior_of_the_target(target, space, space_differs, priors.back(), file, "the target");
      print_notes(file, notes);
      std::cout << "prior " << file << ": " << priors.back().source << ", "
                << priors.back().ok_count() << " successful measurements\n";
    }
    std::vector<std::string> strategies = args->strategies;
    for (std::size_t i = 0; i < strategies.size(); ++i) {
      if (std::find(strategies.begin(), strategies.begin() + static_cast<std::ptrdiff_t>(i),
                    strategies[i]) != strategies.begin() + static_cast<std::ptrdiff_t>(i)) {
        throw InvalidInput("--strategy " + strategies[i] + " is given twice");
      }
    }
    if (strategies.empty()) {
      if (priors.empty()) {
        strategies.push_back("bo");
      } else {
        strategies = kTransferStrategies;
      }
    }
    if (std::find(strategies.begin(), strategies.end(), "random") == strategies.end()) {
      strategies.push_back("random");
    }
    for (const auto& s : strategies) (void)make_strategy(s, strategy_options);  // fail fast
    // A table that compares a transfer strategy without priors (or a plain one given priors)
    // compares what it does not name.
    for (const auto& s : args->strategies) {
      if (priors.empty() && learns_from_priors(s)) {
        std::cout << "note: --strategy " << s
                  << " learns from priors, and no --prior is given: it runs as bo does\n";
      } else if (!priors.empty() && !learns_from_priors(s)) {
        std::cout << "note: --strategy " << s << " does not read the --prior files\n";
      }
    }

    // Every output is opened before the run, so an unwritable path costs nothing; each replaces
    // its file only when the benchmark completes.
    const auto open_output = [](const std::string& path) {
      return path.empty() ? nullptr : std::make_unique<OutputFile>(path);
    };
    const auto trace_file = open_output(args->trace_out);
    const auto json_file = open_output(args->json_out);
    const auto svg_file = open_output(args->svg_out);
    std::cout << "target " << args->target << ": " << candidates.size() << " candidates, optimum "
              << optimum
              << (target.objective_name() == "time"
                      ? std::string()
                      : " " + target.objective_name() +
                            (target.minimize() ? " (minimised)" : " (maximised)"))
              << ", budget " << args->budget << ", " << args->seeds
              << (args->seeds == 1 ? " seed\n" : " seeds\n");
    // A run ends when it has measured every candidate: the report stops there too.
    const std::size_t budget = std::min(args->budget, candidates.size());
    if (budget < args->budget) {
      std::cout << "note: the budget is more than the " << candidates.size()
                << " candidates; runs end when they have measured them all, and so does the "
                   "report\n";
    }
    std::cout << std::left << std::setw(12) << "strategy" << std::right << std::setw(8) << "f@1"
              << std::setw(18) << "evals to 0.90" << std::setw(18) << "0.95" << std::setw(18)
              << "0.99" << std::setw(8) << "f@10" << std::setw(8) << "f@25" << std::setw(8)
              << "f@50" << std::setw(8) << "f@100" << std::setw(14) << "ms med/p95"
              << "\n";
    std::vector<QualityReport> reports;
    std::vector<nlohmann::json> weights;
    for (const auto& strategy : strategies) {
      std::vector<RunResult> results(args->seeds);
      std::size_t next = 0;
      std::mutex mutex;
      std::exception_ptr failure;  // the first seed's error ends the run and is reported
      auto worker = [&] {
        for (;;) {
          std::size_t seed;
          {
            std::lock_guard lock(mutex);
            if (next >= args->seeds || g_interrupted || failure) return;
            seed = next++;
          }
          try {
            results[seed] = run_one(target, space, candidates, priors, strategy, strategy_options,
                                    budget, seed + 1, space_differs);
          } catch (...) {
            std::lock_guard lock(mutex);
            if (!failure) failure = std::current_exception();
          }
        }
      };
      std::vector<std::thread> threads;
      for (unsigned j = 0; j < std::max(1u, args->jobs); ++j) threads.emplace_back(worker);
      for (auto& t : threads) t.join();
      if (failure) std::rethrow_exception(failure);
      if (g_interrupted) {
        // Simulation stores nothing: what ran is dropped, and no output is written (the
        // program exits with 128 + the signal).
        std::cerr << "interrupted: benchmark stopped during --strategy " << strategy
                  << "; no output written\n";
        return;
      }
      if (trace_file) {
        for (std::size_t seed = 0; seed < results.size(); ++seed) {
          nlohmann::ordered_json objectives = nlohmann::ordered_json::array();
          for (double v : results[seed].trace.objectives) {
            objectives.push_back(std::isfinite(v) ? nlohmann::ordered_json(v)
                                                  : nlohmann::ordered_json(nullptr));
          }
          trace_file->stream() << nlohmann::ordered_json{{"strategy", strategy},
                                                         {"seed", seed + 1},
                                                         {"configs", results[seed].configs},
                                                         {"objectives", std::move(objectives)}}
                                      .dump()
                               << "\n";
        }
      }
      std::vector<RunTrace> runs;
      for (auto& r : results) runs.push_back(std::move(r.trace));
      weights.push_back(weights_over_time(results, budget));
      reports.push_back(
          quality_report(strategy, args->target, optimum, budget, runs, target.minimize()));
      print_report(reports.back());
      print_weights(strategy, weights.back());
    }
    if (trace_file) trace_file->commit();
    if (json_file) {
      nlohmann::json j{{"target", args->target},
                       {"priors", args->priors},
                       {"strategies", nlohmann::json::array()}};
      for (std::size_t i = 0; i < reports.size(); ++i) {
        nlohmann::json r = reports[i].to_json();
        if (!reports[i].curve.empty()) {
          const auto& first = reports[i].curve.front();
          r["fraction_first"] = {{"median", first.median}, {"q1", first.q1}, {"q3", first.q3}};
        }
        if (!weights[i].is_null()) r["rgpe_weights"] = weights[i];
        j["strategies"].push_back(std::move(r));
      }
      json_file->stream() << j.dump(2) << "\n";
      json_file->commit();
    }
    if (svg_file) {
      svg_file->stream() << quality_svg(reports, "fraction of optimum on " + args->target);
      svg_file->commit();
    }
  });
}

}  // namespace tunebase::cli
