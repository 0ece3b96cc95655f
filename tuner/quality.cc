#include "tuner/quality.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace tunebase {
namespace {

// A fraction within this relative distance of a level counts as reaching it: t*/b_k is
// computed in floating point and 0.95 is not exactly representable.
constexpr double kLevelTolerance = 1e-12;
constexpr double kSuggestPercentile = 0.95;
constexpr double kFirstQuartile = 0.25;
constexpr double kMedian = 0.5;
constexpr double kThirdQuartile = 0.75;

nlohmann::json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}

/// Fraction after `k` evaluations (1-based), the last value for a run that ended sooner (its
/// space exhausted), 0 for none.
double fraction_after(const std::vector<double>& fractions, std::size_t k) {
  if (fractions.empty()) return 0.0;
  return fractions[std::min(k, fractions.size()) - 1];
}

// ---------------------------------------------------------------- SVG

// Matplotlib's "tab10" colours: distinguishable, and familiar to readers of tuning papers.
constexpr std::string_view kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr double kPlotWidth = 590.0;
constexpr double kHeight = 500.0;
constexpr double kLeft = 70.0;    // room for y tick labels and the axis label
constexpr double kRight = 200.0;  // room for the legend, at least
// Legend text: from the plot's edge to the text, and a generous width per character of the
// 12-pixel sans-serif (long study names are widened for, not cut off).
constexpr double kLegendIndent = 45.0;
constexpr double kLegendCharWidth = 7.5;
constexpr double kTop = 50.0;     // room for the title
constexpr double kBottom = 60.0;  // room for x tick labels and the axis label
constexpr double kBandOpacity = 0.18;
constexpr int kMaxTicks = 10;

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

std::string tick_label(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

/// A round tick step (1, 2 or 5 times a power of ten) giving at most kMaxTicks intervals.
double tick_step(double span) {
  const double raw = span / kMaxTicks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10.0 * magnitude;
}

}  // namespace

std::string level_key(double level) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.2f", level);
  return buf;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) throw InvalidInput("quantile of an empty list");
  if (!(q >= 0.0 && q <= 1.0)) {
    throw InvalidInput("quantile level " + std::to_string(q) + " is outside [0, 1]");
  }
  std::sort(values.begin(), values.end());
  // h = (n-1) q; interpolate between x[floor h] and x[floor h + 1]
  const double h = static_cast<double>(values.size() - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

Quartiles quartiles(const std::vector<double>& values) {
  if (values.empty()) return {};
  return {quantile(values, kMedian), quantile(values, kFirstQuartile),
          quantile(values, kThirdQuartile)};
}

std::vector<double> best_so_far(const std::vector<double>& objectives, bool minimize) {
  std::vector<double> best(objectives.size(), std::numeric_limits<double>::quiet_NaN());
  double b = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t k = 0; k < objectives.size(); ++k) {
    const double y = objectives[k];
    if (std::isfinite(y) && (std::isnan(b) || (minimize ? y < b : y > b))) b = y;
    best[k] = b;
  }
  return best;
}

std::vector<double> fraction_of_optimum(const std::vector<double>& objectives, double optimum,
                                        bool minimize) {
  if (!std::isfinite(optimum) || optimum <= 0.0) {
    throw InvalidInput(
        "the optimum must be a positive finite number to compute fractions of "
        "it, got " +
        std::to_string(optimum));
  }
  std::vector<double> fractions = best_so_far(objectives, minimize);
  for (double& f : fractions) {
    // fraction = t*/b_k (minimise) or b_k/t* (maximise); 0 before the first success
    if (std::isnan(f))
      f = 0.0;
    else
      f = minimize ? optimum / f : f / optimum;
  }
  return fractions;
}

std::optional<std::size_t> evaluations_to_reach(const std::vector<double>& fractions,
                                                double level) {
  for (std::size_t k = 0; k < fractions.size(); ++k) {
    if (fractions[k] >= level * (1.0 - kLevelTolerance)) return k + 1;
  }
  return std::nullopt;
}

QualityReport quality_report(std::string strategy, std::string target, double optimum,
                             std::size_t budget, const std::vector<RunTrace>& runs, bool minimize) {
  if (runs.empty()) throw InvalidInput("quality metrics need at least one run (seed)");
  if (budget == 0) throw InvalidInput("quality metrics need a budget of at least 1 evaluation");

  QualityReport report;
  report.strategy = std::move(strategy);
  report.target = std::move(target);
  report.budget = budget;
  report.seeds = runs.size();
  report.optimum = optimum;
  report.minimize = minimize;

  std::vector<std::vector<double>> fractions;
  fractions.reserve(runs.size());
  std::vector<double> suggest_ms;
  for (const auto& run : runs) {
    const std::size_t n = std::min(run.objectives.size(), budget);
    const std::vector<double> head(run.objectives.begin(), run.objectives.begin() + n);
    fractions.push_back(fraction_of_optimum(head, optimum, minimize));
    suggest_ms.insert(suggest_ms.end(), run.suggest_ms.begin(), run.suggest_ms.end());
  }

  for (double level : kQualityLevels) {
    std::vector<double> evaluations;
    std::size_t never = 0;
    for (const auto& f : fractions) {
      const auto k = evaluations_to_reach(f, level);
      if (!k) ++never;
      evaluations.push_back(static_cast<double>(k.value_or(budget)));
    }
    report.evals_to.push_back({level, quartiles(evaluations),
                               static_cast<double>(never) / static_cast<double>(fractions.size())});
  }

  const auto fractions_after = [&](std::size_t k) {
    std::vector<double> at;
    at.reserve(fractions.size());
    for (const auto& f : fractions) at.push_back(fraction_after(f, k));
    return at;
  };
  // A checkpoint past the budget was not reached: undefined (null), not the last value again.
  for (std::size_t checkpoint : kQualityCheckpoints) {
    report.fraction_at.push_back(
        {checkpoint, checkpoint <= budget ? quartiles(fractions_after(checkpoint)) : Quartiles{}});
  }
  report.curve.reserve(budget);
  for (std::size_t k = 1; k <= budget; ++k) report.curve.push_back(quartiles(fractions_after(k)));

  if (!suggest_ms.empty()) {
    report.suggest_ms_median = quantile(suggest_ms, kMedian);
    report.suggest_ms_p95 = quantile(suggest_ms, kSuggestPercentile);
  }
  return report;
}

nlohmann::json QualityReport::to_json() const {
  nlohmann::json j;
  j["strategy"] = strategy;
  j["target"] = target;
  j["budget"] = budget;
  j["seeds"] = seeds;
  j["optimum"] = number_or_null(optimum);
  j["minimize"] = minimize;
  nlohmann::json levels = nlohmann::json::object();
  for (const auto& l : evals_to) {
    levels[level_key(l.level)] = {{"median", number_or_null(l.evaluations.median)},
                                  {"q1", number_or_null(l.evaluations.q1)},
                                  {"q3", number_or_null(l.evaluations.q3)},
                                  {"never", l.never}};
  }
  j["evals_to"] = std::move(levels);
  nlohmann::json at = nlohmann::json::object();
  for (const auto& c : fraction_at) {
    at[std::to_string(c.evaluations)] = {{"median", number_or_null(c.fraction.median)},
                                         {"q1", number_or_null(c.fraction.q1)},
                                         {"q3", number_or_null(c.fraction.q3)}};
  }
  j["fraction_at"] = std::move(at);
  j["suggest_ms"] = {{"median", number_or_null(suggest_ms_median)},
                     {"p95", number_or_null(suggest_ms_p95)}};
  return j;
}

std::string quality_svg(const std::vector<QualityReport>& reports, const std::string& title,
                        const std::string& y_label) {
  std::size_t max_budget = 1;
  double y_max = 1.0;
  for (const auto& r : reports) {
    max_budget = std::max(max_budget, r.curve.size());
    for (const auto& q : r.curve) {
      if (std::isfinite(q.q3)) y_max = std::max(y_max, q.q3);
    }
  }
  const double x_max = static_cast<double>(max_budget);
  std::size_t longest_label = 0;
  for (const auto& r : reports) longest_label = std::max(longest_label, r.strategy.size());
  const double plot_w = kPlotWidth;
  const double width =
      kLeft + plot_w +
      std::max(kRight, kLegendIndent + kLegendCharWidth * static_cast<double>(longest_label));
  const double plot_h = kHeight - kTop - kBottom;
  const double y_step = tick_step(y_max);
  y_max = std::ceil(y_max / y_step - kLevelTolerance) * y_step;
  // screen x = left + k / x_max * width; screen y = top + (1 - f / y_max) * height
  const auto sx = [&](double k) { return kLeft + k / x_max * plot_w; };
  const auto sy = [&](double f) { return kTop + (1.0 - f / y_max) * plot_h; };

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt(width) + "\" height=\"" +
       fmt(kHeight) + "\" viewBox=\"0 0 " + fmt(width) + " " + fmt(kHeight) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + fmt(width) + "\" height=\"" + fmt(kHeight) +
       "\" fill=\"white\"/>\n";
  s += "<text x=\"" + fmt(kLeft + plot_w / 2) + "\" y=\"" + fmt(kTop / 2 + 6) +
       "\" text-anchor=\"middle\" font-size=\"16\">" + xml_escape(title) + "</text>\n";

  // Grid, ticks and tick labels.
  s += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  const double x_step = std::max(1.0, tick_step(x_max));  // evaluations are whole
  // Tick positions as multiples of the step, counted in integers so no tick is lost to
  // accumulated rounding.
  const auto ticks = [](double max, double step) {
    std::vector<double> at;
    const auto n = static_cast<int>(std::floor(max / step + kLevelTolerance));
    for (int i = 0; i <= n; ++i) at.push_back(step * i);
    return at;
  };
  const std::vector<double> x_ticks = ticks(x_max, x_step);
  const std::vector<double> y_ticks = ticks(y_max, y_step);
  for (double x : x_ticks) {
    s += "<line x1=\"" + fmt(sx(x)) + "\" y1=\"" + fmt(kTop) + "\" x2=\"" + fmt(sx(x)) +
         "\" y2=\"" + fmt(kTop + plot_h) + "\"/>\n";
  }
  for (double y : y_ticks) {
    s += "<line x1=\"" + fmt(kLeft) + "\" y1=\"" + fmt(sy(y)) + "\" x2=\"" + fmt(kLeft + plot_w) +
         "\" y2=\"" + fmt(sy(y)) + "\"/>\n";
  }
  s += "</g>\n<g fill=\"black\">\n";
  for (double x : x_ticks) {
    s += "<line x1=\"" + fmt(sx(x)) + "\" y1=\"" + fmt(kTop + plot_h) + "\" x2=\"" + fmt(sx(x)) +
         "\" y2=\"" + fmt(kTop + plot_h + 5) + "\" stroke=\"black\"/>\n";
    s += "<text x=\"" + fmt(sx(x)) + "\" y=\"" + fmt(kTop + plot_h + 18) +
         "\" text-anchor=\"middle\">" + tick_label(x) + "</text>\n";
  }
  for (double y : y_ticks) {
    s += "<line x1=\"" + fmt(kLeft - 5) + "\" y1=\"" + fmt(sy(y)) + "\" x2=\"" + fmt(kLeft) +
         "\" y2=\"" + fmt(sy(y)) + "\" stroke=\"black\"/>\n";
    s += "<text x=\"" + fmt(kLeft - 8) + "\" y=\"" + fmt(sy(y) + 4) + "\" text-anchor=\"end\">" +
         tick_label(y) + "</text>\n";
  }
  s += "</g>\n";
  // Axes and their labels.
  s += "<rect x=\"" + fmt(kLeft) + "\" y=\"" + fmt(kTop) + "\" width=\"" + fmt(plot_w) +
       "\" height=\"" + fmt(plot_h) + "\" fill=\"none\" stroke=\"black\"/>\n";
  s += "<text x=\"" + fmt(kLeft + plot_w / 2) + "\" y=\"" + fmt(kHeight - 15) +
       "\" text-anchor=\"middle\">evaluations</text>\n";
  s += "<text x=\"18\" y=\"" + fmt(kTop + plot_h / 2) + "\" text-anchor=\"middle\" " +
       "transform=\"rotate(-90 18 " + fmt(kTop + plot_h / 2) + ")\">" + xml_escape(y_label) +
       "</text>\n";

  // One band and one median line per strategy.
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const auto& r = reports[i];
    const std::string colour(kPalette[i % std::size(kPalette)]);
    std::string band;
    for (std::size_t k = 0; k < r.curve.size(); ++k) {
      band += fmt(sx(static_cast<double>(k + 1))) + "," + fmt(sy(r.curve[k].q1)) + " ";
    }
    for (std::size_t k = r.curve.size(); k-- > 0;) {
      band += fmt(sx(static_cast<double>(k + 1))) + "," + fmt(sy(r.curve[k].q3)) + " ";
    }
    s += "<polygon points=\"" + band + "\" fill=\"" + colour + "\" fill-opacity=\"" +
         fmt(kBandOpacity) + "\" stroke=\"none\"/>\n";
    std::string line;
    for (std::size_t k = 0; k < r.curve.size(); ++k) {
      line += (k == 0 ? "M" : " L") + fmt(sx(static_cast<double>(k + 1))) + " " +
              fmt(sy(r.curve[k].median));
    }
    s += "<path d=\"" + line + "\" fill=\"none\" stroke=\"" + colour +
         "\" stroke-width=\"2\"><title>" + xml_escape(r.strategy) + "</title></path>\n";
    // One evaluation has no line to draw: its median is a dot.
    if (r.curve.size() == 1) {
      s += "<circle cx=\"" + fmt(sx(1.0)) + "\" cy=\"" + fmt(sy(r.curve[0].median)) +
           "\" r=\"4\" fill=\"" + colour + "\"/>\n";
    }
  }

  // Legend.
  constexpr double kLegendRow = 20.0;
  const double lx = kLeft + plot_w + 15;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const std::string colour(kPalette[i % std::size(kPalette)]);
    const double ly = kTop + 10 + kLegendRow * static_cast<double>(i);
    s += "<rect x=\"" + fmt(lx) + "\" y=\"" + fmt(ly - 6) +
         "\" width=\"24\" height=\"12\" fill=\"" + colour + "\" fill-opacity=\"" +
         fmt(kBandOpacity) + "\"/>\n";
    s += "<line x1=\"" + fmt(lx) + "\" y1=\"" + fmt(ly) + "\" x2=\"" + fmt(lx + 24) + "\" y2=\"" +
         fmt(ly) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"/>\n";
    s += "<text x=\"" + fmt(lx + 30) + "\" y=\"" + fmt(ly + 4) + "\">" +
         xml_escape(reports[i].strategy) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace tunebase
