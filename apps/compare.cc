// tunebase compare: machine against machine, as GET /v1/compare. What the machines measured
// of a kernel on one input, how their rankings agree, and how each machine's best does on the
// others (the question transfer learning asks).
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "api/comparison_json.h"
#include "apps/cli.h"
#include "apps/sweep.h"
#include "db/machine_comparison.h"

namespace tunebase::cli {

namespace {

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string best_elsewhere_text(const BestElsewhere& b, const std::string& unit, bool minimize) {
  std::string text = b.from + "'s best on " + b.to + ": ";
  if (b.config_key.empty()) return text + b.from + " has no successful configuration";
  if (!b.status) return text + "not measured on " + b.to;
  if (!b.fraction_of_best) return text + std::string(to_string(*b.status)) + " on " + b.to;
  text += format_objective(*b.value, unit) + ", " + fixed(*b.fraction_of_best, 3) + " of " + b.to +
          "'s best";
  if (*b.fraction_of_best < 1.0) {
    text +=
        " (" + fixed(1.0 / *b.fraction_of_best, 2) + "x " + (minimize ? "slower" : "worse") + ")";
  }
  return text;
}

void print_comparison(const db::StoredComparison& c, const nlohmann::json& space) {
  const auto& cmp = c.comparison;
  std::cout << "kernel:  " << c.kernel << ", task " << c.task.id.value << " "
            << c.task.description.dump() << "\nvalues:  " << c.objective << " ("
            << db::to_string(c.direction) << ")" << (c.unit.empty() ? "" : " in " + c.unit)
            << "\n\n";
  std::size_t width = 7;
  for (const auto& m : cmp.machines) width = std::max(width, m.machine.size());
  std::cout << std::left << std::setw(static_cast<int>(width)) << "machine" << std::right
            << "  configs      ran   failed  best\n";
  for (const auto& m : cmp.machines) {
    std::cout << std::left << std::setw(static_cast<int>(width)) << m.machine << std::right
              << std::setw(9) << m.configurations << std::setw(9) << m.ok << std::setw(9)
              << m.failed << "  "
              << (m.best ? format_objective(m.best->value, c.unit) + "  " +
                               config_text(m.best->config, space)
                         : std::string("-"))
              << "\n";
  }
  for (std::size_t i = 0; i < cmp.pairs.size(); ++i) {
    const auto& p = cmp.pairs[i];
    std::cout << "\n"
              << p.a << " vs " << p.b << ": " << p.measured_on_both << " configuration"
              << (p.measured_on_both == 1 ? "" : "s") << " measured on both, " << p.common
              << " ran on both\n";
    if (p.spearman) {
      std::cout << "  rank correlation (Spearman): " << fixed(*p.spearman, 3) << "\n";
    } else {
      std::cout << "  rank correlation: none (" << api::no_correlation_reason(p) << ")\n";
    }
    if (p.top_k > 0) {
      // Of each machine's top_k best configurations that ran on both, how many are the other's.
      std::cout << "  best " << p.top_k << " in common: " << p.top_k_overlap << " of " << p.top_k
                << "\n";
    }
    const bool minimize = cmp.minimize;
    std::cout << "  " << best_elsewhere_text(p.a_best_on_b, c.unit, minimize) << "\n"
              << "  " << best_elsewhere_text(p.b_best_on_a, c.unit, minimize) << "\n"
              << "  runs on " << p.a << ", fails on " << p.b << ": " << p.runs_on_a_fails_on_b
              << "; runs on " << p.b << ", fails on " << p.a << ": " << p.runs_on_b_fails_on_a
              << "\n";
    for (const auto& [runs_on, fails_on, all] : {std::tuple{p.a, p.b, p.runs_on_a_fails_on_b},
                                                 std::tuple{p.b, p.a, p.runs_on_b_fails_on_a}}) {
      std::size_t listed = 0;
      for (const auto& e : c.failures[i]) {
        if (e.failure.fails_on != fails_on) continue;
        listed += e.count;
        std::cout << "    fails on " << fails_on << ": " << e.count << "  "
                  << to_string(e.failure.status) << "  " << shortened(e.reason, kMaxReasonBytes)
                  << "  (e.g. " << config_text(e.failure.config, space) << ")\n";
      }
      if (all > listed) {
        std::cout << "    and " << all - listed << " more, for other reasons\n";
      }
    }
  }
}

}  // namespace

void add_compare_command(CLI::App& app) {
  struct Args {
    db::ComparisonQuery query;
    std::int64_t task = 0;
    std::string db = kDefaultDb;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "compare",
      "Machine against machine (as GET /v1/compare): what two or more machines measured of a "
      "kernel on one input, the rank correlation of their values, each machine's best and how "
      "it does on the others, configurations that run on one and fail on another");
  cmd->add_option("--kernel", args->query.kernel, "Kernel name")->required();
  cmd->add_option("--machine", args->query.machines, "Machine name (repeat: two or more)")
      ->required();
  cmd->add_option("--task", args->task,
                  "Task (input) id; default: the one input every machine measured")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--objective", args->query.objective,
                  "Objective name; default: the one the machines' studies measure");
  cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print JSON, as GET /v1/compare");
  cmd->callback([args] {
    db::Store store(args->db, {.read_only = true});
    if (args->task > 0) args->query.task = db::TaskId{args->task};
    const auto comparison = db::compare_stored_machines(store, args->query);
    if (args->json) {
      std::cout << api::comparison_json(comparison).dump(2) << "\n";
      return;
    }
    print_comparison(comparison, comparison.space);
  });
}

}  // namespace tunebase::cli
