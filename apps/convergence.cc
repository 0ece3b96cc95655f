// tunebase convergence: how stored studies reached their best, evaluation by evaluation, and
// how they compare (two strategies, two machines, a run with and without transfer). The same
// metrics and plot as `tunebase benchmark`, for runs that really measured, against the best
// any of them found (the true optimum of a real space is not known).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "apps/output_file.h"
#include "apps/sweep.h"
#include "core/error.h"
#include "core/measurements.h"
#include "db/store.h"
#include "tuner/quality.h"

namespace tunebase::cli {

namespace {

struct Run {
  db::StudyRecord study;
  std::string unit;  ///< of `objectives`: the first study's unit of time when all are times
  RunTrace trace;    ///< every evaluation in the order its trial was made; NaN when it failed
};

// Evaluations of a study: trials with a result (a lease that ended without one, or one still
// held, is none), in id order.
RunTrace evaluations(const db::Store& store, const db::StudyRecord& study, double factor) {
  RunTrace trace;
  for (const auto& t : store.trials(study.id)) {
    if (!t.finished_at) continue;
    trace.objectives.push_back(t.result.ok() ? t.result.objective * factor
                                             : std::numeric_limits<double>::quiet_NaN());
  }
  return trace;
}

std::string level_cell(const QualityReport::Level& level) {
  if (level.never > 0) return "-";
  std::ostringstream cell;
  cell << level.evaluations.median;
  return cell.str();
}

}  // namespace

void add_convergence_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> studies;
    std::string db = kDefaultDb;
    std::string svg_out;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "convergence",
      "How stored studies reached their best: the best so far after each evaluation as a "
      "fraction of the best any of them found, evaluations to 0.90, 0.95 and 0.99 of it, and a "
      "plot (as tunebase benchmark reports a simulated search)");
  cmd->add_option("--study", args->studies, "Study name or id (repeat to compare studies)")
      ->required();
  cmd->add_option("--db", args->db, "SQLite database file")->capture_default_str();
  cmd->add_option("--svg", args->svg_out, "Write the plot here");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args] {
    db::Store store(args->db, {.read_only = true});
    std::vector<Run> runs;
    for (const auto& name : args->studies) {
      runs.push_back({resolve_study(store, name), {}, {}});
      runs.back().unit = db::objective_unit(runs.back().study);
    }
    // One scale for all: the same direction, and times in one unit (the first study's).
    const auto& first = runs.front();
    const bool minimize = first.study.direction == db::Direction::minimize;
    for (auto& r : runs) {
      if (r.study.kernel_name != first.study.kernel_name) {
        throw InvalidInput("study '" + r.study.name + "' tunes " + r.study.kernel_name + " and '" +
                           first.study.name + "' " + first.study.kernel_name +
                           ": only studies of one kernel compare");
      }
      if (r.study.direction != first.study.direction) {
        throw InvalidInput("study '" + r.study.name + "' " +
                           (minimize ? "maximizes" : "minimizes") + " its objective and '" +
                           first.study.name + "' does not: their values do not compare");
      }
      double factor = 1.0;
      if (r.unit != first.unit) {
        if (!is_time_unit(r.unit) || !is_time_unit(first.unit)) {
          throw InvalidInput("study '" + r.study.name + "' measures in \"" + r.unit + "\" and '" +
                             first.study.name + "' in \"" + first.unit +
                             "\": only times in different units compare");
        }
        factor = time_unit_factor(r.unit, first.unit);
        r.unit = first.unit;
      }
      r.trace = evaluations(store, r.study, factor);
    }
    // Fractions need positive values: a time is, a score may not be.
    for (const auto& r : runs) {
      for (double v : r.trace.objectives) {
        if (std::isfinite(v) && v <= 0) {
          throw InvalidInput("study '" + r.study.name + "' has a value of " +
                             format_objective(v, r.unit) +
                             ": fractions of a best value need positive values");
        }
      }
    }
    // One reference, the best any of them found, when they measured one machine and input
    // (strategies compared); else each its own best, as times on two machines or inputs do not
    // compare (how fast each found its best does).
    const bool one_problem = std::all_of(runs.begin(), runs.end(), [&](const Run& r) {
      return r.study.machine_id == first.study.machine_id && r.study.task_id == first.study.task_id;
    });
    const auto better = [&](double v, double than) {
      return std::isfinite(v) && (std::isnan(than) || (minimize ? v < than : v > than));
    };
    std::vector<double> references;
    for (const auto& r : runs) {
      if (r.trace.objectives.empty()) {
        throw InvalidInput("study '" + r.study.name + "' has no evaluation yet");
      }
      double best = std::numeric_limits<double>::quiet_NaN();
      for (double v : r.trace.objectives) {
        if (better(v, best)) best = v;
      }
      if (!one_problem && std::isnan(best)) {
        throw InvalidInput("study '" + r.study.name +
                           "' has no successful evaluation: nothing to converge to");
      }
      references.push_back(best);
    }
    std::size_t reference_of = 0;  // the study whose best is the common reference
    if (one_problem) {
      for (std::size_t i = 1; i < runs.size(); ++i) {
        if (better(references[i], references[reference_of])) reference_of = i;
      }
      if (std::isnan(references[reference_of])) {
        throw InvalidInput("no successful evaluation in the studies given: nothing to converge to");
      }
      std::fill(references.begin(), references.end(), references[reference_of]);
    }
    const auto svg_file =
        args->svg_out.empty() ? nullptr : std::make_unique<OutputFile>(args->svg_out);

    std::vector<QualityReport> reports;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      reports.push_back(
          quality_report(r.study.name, r.study.kernel_name + " on " + r.study.machine_name,
                         references[i], r.trace.objectives.size(), {r.trace}, minimize));
    }
    if (args->json) {
      // Names of its own, not the benchmark's: one run per study, against a reference.
      nlohmann::json studies = nlohmann::json::array();
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto& report = reports[i];
        nlohmann::json evals_to = nlohmann::json::object();
        for (const auto& level : report.evals_to) {
          evals_to[level_key(level.level)] =
              level.never > 0 ? nlohmann::json(nullptr) : nlohmann::json(level.evaluations.median);
        }
        nlohmann::json fraction_at = nlohmann::json::object();
        for (const auto& cp : report.fraction_at) {
          fraction_at[std::to_string(cp.evaluations)] = std::isnan(cp.fraction.median)
                                                            ? nlohmann::json(nullptr)
                                                            : nlohmann::json(cp.fraction.median);
        }
        nlohmann::json curve = nlohmann::json::array();
        for (const auto& q : report.curve) curve.push_back(q.median);
        studies.push_back({{"study", runs[i].study.name},
                           {"study_id", runs[i].study.id.value},
                           {"machine", runs[i].study.machine_name},
                           {"evaluations", runs[i].trace.objectives.size()},
                           {"reference", references[i]},
                           {"evals_to", std::move(evals_to)},
                           {"fraction_at", std::move(fraction_at)},
                           {"fraction", std::move(curve)}});
      }
      std::cout << nlohmann::json{{"unit", first.unit},
                                  {"reference", one_problem
                                                    ? "the best of " + runs[reference_of].study.name
                                                    : std::string("each study's own best")},
                                  {"studies", std::move(studies)}}
                       .dump(2)
                << "\n";
    } else {
      if (one_problem) {
        std::cout << "reference: " << format_objective(references.front(), first.unit)
                  << ", the best of " << runs[reference_of].study.name << "\n";
      } else {
        std::cout << "reference: each study's own best (they measured different machines or "
                     "inputs, whose values do not compare)\n";
      }
      int name_width = 6;
      for (const auto& r : runs) {
        name_width = std::max(name_width, static_cast<int>(r.study.name.size()) + 2);
      }
      std::cout << std::left << std::setw(name_width) << "study" << std::right << std::setw(7)
                << "evals" << std::setw(8) << "first" << std::setw(9) << "to 0.90" << std::setw(9)
                << "to 0.95" << std::setw(9) << "to 0.99" << std::setw(8) << "@10" << std::setw(8)
                << "@25" << std::setw(8) << "@50" << std::setw(8) << "@100"
                << "\n";
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto& r = reports[i];
        std::cout << std::left << std::setw(name_width) << runs[i].study.name << std::right
                  << std::setw(7) << runs[i].trace.objectives.size() << std::fixed
                  << std::setprecision(3) << std::setw(8) << r.curve.front().median;
        for (const auto& level : r.evals_to) std::cout << std::setw(9) << level_cell(level);
        for (const auto& cp : r.fraction_at) {
          std::ostringstream cell;
          if (std::isnan(cp.fraction.median)) {
            cell << "-";  // fewer evaluations than that
          } else {
            cell << std::fixed << std::setprecision(3) << cp.fraction.median;
          }
          std::cout << std::setw(8) << cell.str();
        }
        std::cout << std::defaultfloat << "\n";
      }
      std::cout << "(fraction of the reference reached by the best so far; '-': never, or "
                   "fewer evaluations)\n";
    }
    if (svg_file) {
      svg_file->stream() << quality_svg(reports, "best so far, as a fraction of the best found",
                                        "fraction of the reference (best so far)");
      svg_file->commit();
    }
  });
}

}  // namespace tunebase::cli
