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
    double reference = std::numeric_limits<double>::quiet_NaN();
    std::string reference_study;
    for (const auto& r : runs) {
      for (double v : r.trace.objectives) {
        if (std::isfinite(v) &&
            (std::isnan(reference) || (minimize ? v < reference : v > reference))) {
          reference = v;
          reference_study = r.study.name;
        }
      }
    }
    if (std::isnan(reference) || reference <= 0) {
      throw InvalidInput(
          std::isnan(reference)
              ? "no successful evaluation in the studies given: nothing to converge to"
              : "the best value is not positive: fractions of it mean nothing");
    }
    const auto svg_file =
        args->svg_out.empty() ? nullptr : std::make_unique<OutputFile>(args->svg_out);

    std::vector<QualityReport> reports;
    for (const auto& r : runs) {
      if (r.trace.objectives.empty()) {
        throw InvalidInput("study '" + r.study.name + "' has no evaluation yet");
      }
      reports.push_back(quality_report(r.study.name,
                                       r.study.kernel_name + " on " + r.study.machine_name,
                                       reference, r.trace.objectives.size(), {r.trace}, minimize));
    }
    if (args->json) {
      nlohmann::json j{
          {"reference", {{"value", reference}, {"unit", first.unit}, {"study", reference_study}}},
          {"studies", nlohmann::json::array()}};
      for (std::size_t i = 0; i < runs.size(); ++i) {
        auto r = reports[i].to_json();
        r.erase("suggest_ms");  // not timed: the proposals were made when the study ran
        r.erase("seeds");
        r["study_id"] = runs[i].study.id.value;
        r["evaluations"] = runs[i].trace.objectives.size();
        nlohmann::json curve = nlohmann::json::array();
        for (const auto& q : reports[i].curve) curve.push_back(q.median);
        r["fraction"] = std::move(curve);
        j["studies"].push_back(std::move(r));
      }
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "reference: " << format_objective(reference, first.unit) << ", the best of "
                << reference_study << "\n";
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
