// tunebase benchmark: tuning quality of strategies on a fully measured target (simulation
// mode, as Kernel Tuner's), over many seeds, as JSON and SVG.
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <thread>

#include "apps/cli.h"
#include "core/error.h"
#include "core/measurements.h"
#include "kernels/replay.h"
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
  unsigned jobs = 1;
  std::string options = "{}";
};

RunTrace run_one(const ReplayEvaluator& target, const SearchSpace& space,
                 const std::vector<Configuration>& candidates, const std::string& strategy,
                 const nlohmann::json& strategy_options, std::size_t budget, std::uint64_t seed,
                 bool space_differs) {
  SessionOptions options;
  options.strategy = strategy;
  options.strategy_options = strategy_options;
  options.seed = seed;
  options.budget = budget;
  options.candidates = candidates;
  Session session(space, options);
  RunTrace trace;
  while (trace.objectives.size() < budget) {
    auto batch = session.propose(1);
    trace.suggest_ms.push_back(session.last_propose_ms());
    if (batch.empty()) break;
    const auto& config = batch.front();
    const Measurement m = space_differs ? target.lookup_json(space.config_to_json(config))
                                        : target.lookup(config);
    session.observe(config, m);
    trace.objectives.push_back(m.ok() ? m.objective : std::nan(""));
  }
  return trace;
}

void print_report(const QualityReport& r) {
  std::cout << std::left << std::setw(12) << r.strategy << std::right;
  for (const auto& level : r.evals_to) {
    std::ostringstream cell;
    cell << level.evaluations.median;
    if (level.never > 0) cell << " (" << std::lround(100 * level.never) << "% never)";
    std::cout << std::setw(18) << cell.str();
  }
  for (const auto& cp : r.fraction_at) {
    std::ostringstream cell;
    cell << std::fixed << std::setprecision(3) << cp.fraction.median;
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
  cmd->add_option("--prior", args->priors, "Measurements of other machines (transfer)");
  cmd->add_option("--strategy,-s", args->strategies,
                  "Strategy to compare (repeatable); random search is always included");
  cmd->add_option("--budget,-b", args->budget, "Evaluations per run")->capture_default_str();
  cmd->add_option("--seeds", args->seeds, "Runs per strategy")->capture_default_str();
  cmd->add_option("--space", args->space_file,
                  "Search the valid space of this T1/space file instead of the file's entries");
  cmd->add_option("--json", args->json_out, "Write the metrics as JSON here");
  cmd->add_option("--svg", args->svg_out, "Write the plot here");
  cmd->add_option("--jobs,-j", args->jobs, "Seeds run in parallel (1 for clean timings)")
      ->capture_default_str();
  cmd->add_option("--options", args->options, "Strategy options as JSON, e.g. '{\"initial_design\": 10}'");
  cmd->callback([args] {
    install_interrupt_handler();
    const auto target = ReplayEvaluator::from_file(args->target);
    const bool space_differs = !args->space_file.empty();
    const SearchSpace space = space_differs ? SearchSpace::load(args->space_file) : target.space();
    const std::vector<Configuration> candidates =
        space_differs ? space.valid_configurations() : target.configurations();
    const nlohmann::json strategy_options = nlohmann::json::parse(args->options, nullptr, false);
    if (strategy_options.is_discarded() || !strategy_options.is_object()) {
      throw InvalidInput("--options must be a JSON object, got " + args->options);
    }
    std::vector<std::string> strategies = args->strategies;
    if (strategies.empty()) strategies.push_back("bo");
    if (std::find(strategies.begin(), strategies.end(), "random") == strategies.end()) {
      strategies.push_back("random");
    }
    for (const auto& s : strategies) (void)make_strategy(s, strategy_options);  // fail fast
    if (args->seeds == 0 || args->budget == 0) throw InvalidInput("--seeds and --budget must be positive");

    std::cout << "target " << args->target << ": " << candidates.size() << " candidates, optimum "
              << target.optimum() << ", budget " << args->budget << ", " << args->seeds
              << " seeds\n";
    std::cout << std::left << std::setw(12) << "strategy" << std::right << std::setw(18)
              << "evals to 0.90" << std::setw(18) << "0.95" << std::setw(18) << "0.99"
              << std::setw(8) << "f@10" << std::setw(8) << "f@25" << std::setw(8) << "f@50"
              << std::setw(8) << "f@100" << std::setw(14) << "ms med/p95" << "\n";
    std::vector<QualityReport> reports;
    for (const auto& strategy : strategies) {
      std::vector<RunTrace> runs(args->seeds);
      std::size_t next = 0;
      std::mutex mutex;
      auto worker = [&] {
        for (;;) {
          std::size_t seed;
          {
            std::lock_guard lock(mutex);
            if (next >= args->seeds || g_interrupted) return;
            seed = next++;
          }
          runs[seed] = run_one(target, space, candidates, strategy, strategy_options,
                               args->budget, seed + 1, space_differs);
        }
      };
      std::vector<std::thread> threads;
      for (unsigned j = 0; j < std::max(1u, args->jobs); ++j) threads.emplace_back(worker);
      for (auto& t : threads) t.join();
      if (g_interrupted) throw Error("interrupted");
      reports.push_back(quality_report(strategy, args->target, target.optimum(), args->budget,
                                       runs, true));
      print_report(reports.back());
    }
    if (!args->json_out.empty()) {
      nlohmann::json j{{"target", args->target}, {"strategies", nlohmann::json::array()}};
      for (const auto& r : reports) j["strategies"].push_back(r.to_json());
      std::ofstream out(args->json_out);
      if (!(out << j.dump(2) << "\n")) throw IoError("cannot write " + args->json_out);
    }
    if (!args->svg_out.empty()) {
      std::ofstream out(args->svg_out);
      const std::string title = "fraction of optimum on " + args->target;
      if (!(out << quality_svg(reports, title))) throw IoError("cannot write " + args->svg_out);
    }
  });
}

}  // namespace tunebase::cli
