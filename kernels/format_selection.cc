#include "kernels/format_selection.h"

#include <dlib/random_forest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/space.h"

namespace tunebase {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// Feature value for "not known" (a property missing from every file, a matrix another
/// machine never ran); far outside the range of every real feature, so a tree can split it off.
constexpr double kMissingFeature = -99.0;
/// log(t_format / t_fastest) recorded for a format another machine failed to run on a matrix:
/// as if it were 1000x slower than that machine's fastest.
const double kFailedFormatLogRatio = std::log(1000.0);
constexpr double kP95 = 0.95;
/// Cost of picking a format that failed on the matrix, in units of its CSR time.
constexpr double kUnavailablePickCost = 2.0;

/// Numeric properties used as features, in this order.
const std::vector<std::string>& numeric_properties() {
  static const std::vector<std::string> names = {"rows",
                                                 "cols",
                                                 "nonzeros",
                                                 "posdef",
                                                 "psym",
                                                 "nsym",
                                                 "row_min",
                                                 "row_q1",
                                                 "row_median",
                                                 "row_q3",
                                                 "row_max",
                                                 "row_mean",
                                                 "row_variance",
                                                 "row_skewness",
                                                 "row_kurtosis",
                                                 "row_hyperskewness",
                                                 "row_hyperflatness"};
  return names;
}

/// Columns that describe the matrix (the numeric properties and four text ones); every other
/// column is a format's SpMV time.
const std::set<std::string>& property_columns() {
  static const std::set<std::string> columns = [] {
    std::set<std::string> c = {"group", "name", "id", "kind"};
    c.insert(numeric_properties().begin(), numeric_properties().end());
    return c;
  }();
  return columns;
}

/// Splits one CSV line, honouring double quotes (cells such as "problem, kind").
std::vector<std::string> split_csv_line(const std::string& line, const std::string& where) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(std::move(cell));
      cell.clear();
    } else if (c != '\r') {
      cell += c;
    }
  }
  if (quoted) throw InvalidInput(where + ": unterminated quoted cell");
  cells.push_back(std::move(cell));
  return cells;
}

double parse_number(const std::string& text, const std::string& where, const std::string& column) {
  if (text.empty()) return kNaN;
  std::size_t used = 0;
  double value = kNaN;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size()) {
    throw InvalidInput(where + ": column '" + column + "' holds '" + text +
                       "', not a number (or empty)");
  }
  return value;
}

double log10_plus_one(double x) { return std::log10(1.0 + std::max(0.0, x)); }
double signed_log10(double x) { return std::copysign(std::log10(1.0 + std::abs(x)), x); }

/// Fraction of `matrices` on which column `format` of machine `machine` was measured.
double coverage(const SpmvDataset& d, std::size_t machine, std::size_t format,
                const std::vector<std::size_t>& matrices) {
  if (matrices.empty()) return 0.0;
  std::size_t filled = 0;
  for (std::size_t m : matrices) filled += !std::isnan(d.times[machine][m][format]);
  return static_cast<double>(filled) / static_cast<double>(matrices.size());
}

/// Matrices the machine measured at all (any format).
std::vector<std::size_t> measured_matrices(const SpmvDataset& d, std::size_t machine) {
  std::vector<std::size_t> out;
  for (std::size_t m = 0; m < d.matrices.size(); ++m) {
    const auto& row = d.times[machine][m];
    if (std::any_of(row.begin(), row.end(), [](double t) { return !std::isnan(t); })) {
      out.push_back(m);
    }
  }
  return out;
}

std::size_t csr_column(const SpmvDataset& d, std::size_t machine) {
  const auto& f = d.formats[machine];
  const auto it = std::find(f.begin(), f.end(), "csr");
  if (it == f.end()) {
    throw InvalidInput("SpMV dataset: machine '" + d.machines[machine] + "' has no csr column");
  }
  return static_cast<std::size_t>(it - f.begin());
}

/// What choosing a format costs on the target, for scoring and training alike.
struct TargetCosts {
  std::size_t target = 0;
  std::size_t csr = 0;
  std::vector<std::size_t> candidates;  ///< target format columns considered

  /// t(format) if measured; else the format failed there, and choosing it costs the failed
  /// attempt (taken as one CSR SpMV) plus the CSR fallback.
  double effective(const SpmvDataset& d, std::size_t m, std::size_t candidate) const {
    const double t = d.times[target][m][candidates[candidate]];
    return std::isnan(t) ? kUnavailablePickCost * d.times[target][m][csr] : t;
  }
  bool available(const SpmvDataset& d, std::size_t m, std::size_t candidate) const {
    return !std::isnan(d.times[target][m][candidates[candidate]]);
  }
  double best(const SpmvDataset& d, std::size_t m) const {
    double b = std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      if (available(d, m, c)) b = std::min(b, d.times[target][m][candidates[c]]);
    }
    return b;
  }
};

TargetCosts target_costs(const SpmvDataset& d, std::size_t target, double min_coverage,
                         const std::vector<std::size_t>& matrices) {
  TargetCosts costs;
  costs.target = target;
  costs.csr = csr_column(d, target);
  for (std::size_t f = 0; f < d.formats[target].size(); ++f) {
    if (f == costs.csr || coverage(d, target, f, matrices) >= min_coverage) {
      costs.candidates.push_back(f);
    }
  }
  return costs;
}

/// Matrices the target can be scored on: CSR measured there.
std::vector<std::size_t> scorable_matrices(const SpmvDataset& d, std::size_t target) {
  const std::size_t csr = csr_column(d, target);
  std::vector<std::size_t> out;
  for (std::size_t m = 0; m < d.matrices.size(); ++m) {
    const double t = d.times[target][m][csr];
    if (!std::isnan(t) && t > 0.0) out.push_back(m);
  }
  return out;
}

using Sample = dlib::matrix<double, 0, 1>;
using Forest = dlib::random_forest_regression_function<dlib::dense_feature_extractor>;

}  // namespace

std::size_t SpmvDataset::machine_index(const std::string& name) const {
  const auto it = std::find(machines.begin(), machines.end(), name);
  if (it == machines.end()) {
    std::string known;
    for (const auto& m : machines) known += (known.empty() ? "" : ", ") + m;
    throw NotFound("SpMV dataset has no machine '" + name + "'; it has: " + known);
  }
  return static_cast<std::size_t>(it - machines.begin());
}

SpmvTable read_spmv_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("SpMV dataset: cannot open '" + path + "'");
  SpmvTable table;
  table.path = path;
  table.machine = std::filesystem::path(path).stem().string();
  table.property_names = numeric_properties();
  std::string line;
  if (!std::getline(in, line)) throw InvalidInput(path + ": empty file");
  const auto header = split_csv_line(line, path + ":1");
  std::map<std::string, std::size_t> column;
  for (std::size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
  for (const char* required : {"group", "name"}) {
    if (!column.count(required)) {
      throw InvalidInput(path + ":1: header lacks the '" + required + "' column");
    }
  }
  std::vector<std::size_t> format_columns;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (!property_columns().count(header[i])) {
      format_columns.push_back(i);
      table.formats.push_back(header[i]);
    }
  }
  if (format_columns.empty()) {
    throw InvalidInput(path + ":1: no format (time) column after the properties");
  }

  std::size_t line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty() || line == "\r") continue;
    const std::string where = path + ":" + std::to_string(line_number);
    auto cells = split_csv_line(line, where);
    if (cells.size() != header.size()) {
      throw InvalidInput(where + ": " + std::to_string(cells.size()) + " cells, header has " +
                         std::to_string(header.size()));
    }
    SpmvTable::Row row;
    row.line = line_number;
    row.matrix = cells[column["group"]] + "/" + cells[column["name"]];
    row.properties.assign(table.property_names.size(), kNaN);
    for (std::size_t k = 0; k < table.property_names.size(); ++k) {
      const auto c = column.find(table.property_names[k]);
      if (c != column.end()) {
        row.properties[k] = parse_number(cells[c->second], where, table.property_names[k]);
      }
    }
    for (std::size_t c : format_columns) row.times.push_back(std::move(cells[c]));
    table.rows.push_back(std::move(row));
  }
  return table;
}

void keep_spmv_formats(SpmvTable& table, const std::vector<std::string>& formats) {
  std::vector<std::size_t> columns;
  for (const auto& f : formats) {
    const auto it = std::find(table.formats.begin(), table.formats.end(), f);
    if (it == table.formats.end()) {
      std::string have;
      for (const auto& g : table.formats) have += (have.empty() ? "" : ", ") + g;
      throw InvalidInput(table.path + " has no format column '" + f + "'; its formats: " + have);
    }
    const auto column = static_cast<std::size_t>(it - table.formats.begin());
    if (std::find(columns.begin(), columns.end(), column) != columns.end()) {
      throw InvalidInput("format '" + f + "' is given twice; give each format once");
    }
    columns.push_back(column);
  }
  const auto pick = [&](const std::vector<std::string>& all) {
    std::vector<std::string> kept;
    for (std::size_t c : columns) kept.push_back(all[c]);
    return kept;
  };
  for (auto& row : table.rows) row.times = pick(row.times);
  table.formats = pick(table.formats);
}

std::vector<SpmvMatrixMeasurements> spmv_measurements(const SpmvTable& table) {
  std::vector<Value> values(table.formats.begin(), table.formats.end());
  std::optional<Value> default_format;
  if (std::find(table.formats.begin(), table.formats.end(), "csr") != table.formats.end()) {
    default_format = Value(std::string("csr"));
  }
  const SearchSpace space({categorical("format", values, default_format)}, {});
  const std::string file = std::filesystem::path(table.path).filename().string();
  std::vector<SpmvMatrixMeasurements> out;
  out.reserve(table.rows.size());
  std::map<std::string, std::size_t> line_of;  // matrix -> its first line
  for (const auto& row : table.rows) {
    if (const auto [it, first] = line_of.emplace(row.matrix, row.line); !first) {
      throw InvalidInput(table.path + ":" + std::to_string(row.line) + ": matrix " + row.matrix +
                         " is on line " + std::to_string(it->second) +
                         " already; a file holds one row per matrix");
    }
    SpmvMatrixMeasurements m;
    m.task = {{"matrix", row.matrix}};
    m.task_features = nlohmann::json::object();
    for (std::size_t k = 0; k < table.property_names.size(); ++k) {
      if (std::isfinite(row.properties[k])) {
        m.task_features[table.property_names[k]] = row.properties[k];
      }
    }
    m.dataset.device_name = table.machine;
    m.dataset.kernel_name = kSpmvFormatKernel;
    m.dataset.format = "ginkgo_spmv";
    m.dataset.space = space;
    for (std::size_t f = 0; f < table.formats.size(); ++f) {
      Observation o;
      o.config = {Value(table.formats[f])};
      const std::string& cell = row.times[f];
      char* end = nullptr;
      const double t = cell.empty() ? kNaN : std::strtod(cell.c_str(), &end);
      if (!cell.empty() && end == cell.c_str() + cell.size() && std::isfinite(t) && t > 0.0) {
        o.result = Measurement::success(t);
      } else {
        o.result = Measurement::failure(
            TrialStatus::failed,
            file + " has no time for format " + table.formats[f] + " (line " +
                std::to_string(row.line) + ": " +
                (cell.empty() ? std::string("empty, the format did not complete there")
                              : "'" + cell + "' is not a positive number of seconds") +
                ")");
      }
      m.dataset.entries.push_back(std::move(o));
    }
    out.push_back(std::move(m));
  }
  return out;
}

SpmvDataset read_spmv_dataset(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw IoError("SpMV dataset: '" + dir + "' is not a readable folder");
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".csv") files.push_back(entry.path());
  }
  if (ec) throw IoError("SpMV dataset: cannot list '" + dir + "': " + ec.message());
  if (files.empty()) throw InvalidInput("SpMV dataset: no .csv file in '" + dir + "'");
  std::sort(files.begin(), files.end());

  SpmvDataset d;
  d.property_names = numeric_properties();
  std::map<std::string, std::size_t> matrix_index;
  // times per machine keyed by matrix, filled first, laid out densely at the end.
  std::vector<std::map<std::size_t, std::vector<double>>> per_machine;

  for (const auto& path : files) {
    const auto table = read_spmv_table(path.string());
    d.machines.push_back(table.machine);
    d.formats.push_back(table.formats);
    per_machine.emplace_back();
    for (const auto& row : table.rows) {
      auto [it, inserted] = matrix_index.emplace(row.matrix, d.matrices.size());
      if (inserted) {
        d.matrices.push_back(row.matrix);
        d.properties.emplace_back(d.property_names.size(), kNaN);
      }
      const std::size_t m = it->second;
      // Properties describe the matrix: keep the first value any file gives.
      for (std::size_t k = 0; k < d.property_names.size(); ++k) {
        if (std::isnan(d.properties[m][k])) d.properties[m][k] = row.properties[k];
      }
      const std::string where = table.path + ":" + std::to_string(row.line);
      std::vector<double> times(table.formats.size(), kNaN);
      for (std::size_t f = 0; f < table.formats.size(); ++f) {
        const double t = parse_number(row.times[f], where, table.formats[f]);
        times[f] = (t > 0.0) ? t : kNaN;
      }
      per_machine.back()[m] = std::move(times);
    }
  }

  d.times.resize(d.machines.size());
  for (std::size_t machine = 0; machine < d.machines.size(); ++machine) {
    d.times[machine].assign(d.matrices.size(),
                            std::vector<double>(d.formats[machine].size(), kNaN));
    for (auto& [m, times] : per_machine[machine]) d.times[machine][m] = std::move(times);
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// FormatSelector
// ---------------------------------------------------------------------------------------------

struct FormatSelector::Model {
  TargetCosts costs;
  std::vector<std::string> candidate_names;
  bool use_other_machines = false;
  /// Other machines and the format columns of each used as features.
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> others;
  std::vector<Forest> forests;  ///< one per candidate
};

FormatSelector::FormatSelector(const SpmvDataset& data, std::size_t target,
                               const std::vector<std::size_t>& training_matrices,
                               bool use_other_machines, const FormatSelectionOptions& options)
    : model_(std::make_unique<Model>()) {
  if (target >= data.machines.size()) {
    throw InvalidInput("format selection: target machine index out of range");
  }
  std::vector<std::size_t> train;
  const std::size_t csr = csr_column(data, target);
  for (std::size_t m : training_matrices) {
    if (!std::isnan(data.times[target][m][csr])) train.push_back(m);
  }
  if (train.size() < 2) {
    throw InvalidInput("format selection: fewer than 2 training matrices measured on '" +
                       data.machines[target] + "'");
  }
  Model& model = *model_;
  model.costs = target_costs(data, target, options.min_format_coverage, train);
  for (std::size_t c : model.costs.candidates) {
    model.candidate_names.push_back(data.formats[target][c]);
  }
  model.use_other_machines = use_other_machines;
  if (use_other_machines) {
    for (std::size_t other = 0; other < data.machines.size(); ++other) {
      if (other == target) continue;
      const auto measured = measured_matrices(data, other);
      std::vector<std::size_t> columns;
      for (std::size_t f = 0; f < data.formats[other].size(); ++f) {
        if (coverage(data, other, f, measured) >= options.min_format_coverage) {
          columns.push_back(f);
        }
      }
      model.others.emplace_back(other, std::move(columns));
    }
  }

  std::vector<Sample> x;
  x.reserve(train.size());
  for (std::size_t m : train) {
    const auto f = features(data, m);
    Sample s(static_cast<long>(f.size()));
    for (std::size_t k = 0; k < f.size(); ++k) s(static_cast<long>(k)) = f[k];
    x.push_back(std::move(s));
  }
  dlib::random_forest_regression_trainer<dlib::dense_feature_extractor> trainer;
  trainer.set_num_trees(options.trees);
  trainer.set_min_samples_per_leaf(options.min_samples_per_leaf);
  for (std::size_t c = 0; c < model.costs.candidates.size(); ++c) {
    // Regression target: log(t_c / t_fastest) >= 0, the log-slowdown of choosing c.
    std::vector<double> y;
    y.reserve(train.size());
    for (std::size_t m : train) {
      y.push_back(std::log(model.costs.effective(data, m, c) / model.costs.best(data, m)));
    }
    trainer.set_seed(std::to_string(options.seed) + "/" + model.candidate_names[c]);
    model.forests.push_back(trainer.train(x, y));
  }
}

FormatSelector::~FormatSelector() = default;
FormatSelector::FormatSelector(FormatSelector&&) noexcept = default;
FormatSelector& FormatSelector::operator=(FormatSelector&&) noexcept = default;

const std::vector<std::string>& FormatSelector::candidates() const {
  return model_->candidate_names;
}

std::vector<double> FormatSelector::features(const SpmvDataset& data, std::size_t m) const {
  const auto& p = data.properties.at(m);
  auto prop = [&](const char* name) {
    const auto& names = data.property_names;
    const auto k =
        static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
    return k < p.size() ? p[k] : kNaN;
  };
  auto known = [](double v) { return std::isnan(v) ? kMissingFeature : v; };

  std::vector<double> f;
  for (const char* n : {"rows", "cols", "nonzeros"}) {
    const double v = prop(n);
    f.push_back(known(v > 0.0 ? std::log10(v) : kNaN));
  }
  for (const char* n : {"posdef", "psym", "nsym"}) f.push_back(known(prop(n)));
  for (const char* n :
       {"row_min", "row_q1", "row_median", "row_q3", "row_max", "row_mean", "row_variance"}) {
    const double v = prop(n);
    f.push_back(known(std::isnan(v) ? kNaN : log10_plus_one(v)));
  }
  for (const char* n : {"row_skewness", "row_kurtosis", "row_hyperskewness", "row_hyperflatness"}) {
    const double v = prop(n);
    f.push_back(known(std::isnan(v) ? kNaN : signed_log10(v)));
  }
  // Row imbalance (ELL padding) drives the ELL / hybrid / CSR trade-offs.
  const double row_max = prop("row_max");
  const double row_mean = prop("row_mean");
  f.push_back(known(row_max > 0.0 && row_mean > 0.0 ? std::log10(row_max / row_mean) : kNaN));

  for (const auto& [other, columns] : model_->others) {
    const auto& row = data.times[other][m];
    double fastest = std::numeric_limits<double>::infinity();
    for (double t : row) {
      if (!std::isnan(t)) fastest = std::min(fastest, t);
    }
    const bool ran = std::isfinite(fastest);
    for (std::size_t c : columns) {
      if (!ran) {
        f.push_back(kMissingFeature);
      } else if (std::isnan(row[c])) {
        f.push_back(kFailedFormatLogRatio);
      } else {
        // log(t_format / t_fastest) on the other machine
        f.push_back(std::log(row[c] / fastest));
      }
    }
    const double nnz = prop("nonzeros");
    f.push_back(ran && nnz > 0.0 ? std::log10(fastest / nnz) : kMissingFeature);
  }
  return f;
}

std::size_t FormatSelector::predict(const SpmvDataset& data, std::size_t m) const {
  const auto f = features(data, m);
  Sample s(static_cast<long>(f.size()));
  for (std::size_t k = 0; k < f.size(); ++k) s(static_cast<long>(k)) = f[k];
  std::size_t best = 0;
  double best_value = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < model_->forests.size(); ++c) {
    const double v = model_->forests[c](s);
    if (v < best_value) {
      best_value = v;
      best = c;
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Cross-validated evaluation
// ---------------------------------------------------------------------------------------------

namespace {

SelectionScore score(const std::string& method, const SpmvDataset& d, const TargetCosts& costs,
                     const std::vector<std::size_t>& matrices,
                     const std::vector<std::size_t>& picks) {
  SelectionScore s;
  s.method = method;
  s.matrices = matrices.size();
  std::vector<double> slowdowns;
  double log_sum = 0.0;
  std::size_t correct = 0;
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    const std::size_t m = matrices[i];
    const double best = costs.best(d, m);
    const double chosen = costs.effective(d, m, picks[i]);
    const bool available = costs.available(d, m, picks[i]);
    if (!available) ++s.unavailable_picks;
    // slowdown = t(pick) / t(fastest) >= 1
    const double slowdown = chosen / best;
    correct += available && slowdown <= 1.0;
    slowdowns.push_back(slowdown);
    log_sum += std::log(slowdown);
  }
  if (matrices.empty()) return s;
  const double n = static_cast<double>(matrices.size());
  s.accuracy = static_cast<double>(correct) / n;
  s.mean_slowdown = std::accumulate(slowdowns.begin(), slowdowns.end(), 0.0) / n;
  s.geomean_slowdown = std::exp(log_sum / n);
  std::sort(slowdowns.begin(), slowdowns.end());
  const auto p95 = static_cast<std::size_t>(std::ceil(kP95 * n)) - 1;
  s.p95_slowdown = slowdowns[std::min(p95, slowdowns.size() - 1)];
  return s;
}

/// Mean log-slowdown of always choosing candidate c over `matrices`.
double mean_log_slowdown(const SpmvDataset& d, const TargetCosts& costs,
                         const std::vector<std::size_t>& matrices, std::size_t c) {
  double sum = 0.0;
  for (std::size_t m : matrices) sum += std::log(costs.effective(d, m, c) / costs.best(d, m));
  return sum / static_cast<double>(std::max<std::size_t>(1, matrices.size()));
}

/// The candidate that another machine ran fastest (among formats both have by name), or
/// CSR when it never ran the matrix.
std::size_t other_machine_pick(const SpmvDataset& d, const TargetCosts& costs, std::size_t other,
                               std::size_t m, std::size_t csr_candidate) {
  std::size_t pick = csr_candidate;
  double fastest = std::numeric_limits<double>::infinity();
  const auto& other_formats = d.formats[other];
  for (std::size_t c = 0; c < costs.candidates.size(); ++c) {
    const std::string& name = d.formats[costs.target][costs.candidates[c]];
    const auto it = std::find(other_formats.begin(), other_formats.end(), name);
    if (it == other_formats.end()) continue;
    const double t = d.times[other][m][static_cast<std::size_t>(it - other_formats.begin())];
    if (!std::isnan(t) && t < fastest) {
      fastest = t;
      pick = c;
    }
  }
  return pick;
}

}  // namespace

FormatSelectionReport evaluate_format_selection(const SpmvDataset& data, std::size_t target,
                                                const FormatSelectionOptions& options) {
  if (target >= data.machines.size()) {
    throw InvalidInput("format selection: target machine index out of range");
  }
  if (options.folds < 2) throw InvalidInput("format selection: need at least 2 folds");
  std::vector<std::size_t> matrices = scorable_matrices(data, target);
  if (matrices.size() < static_cast<std::size_t>(options.folds)) {
    throw InvalidInput("format selection: machine '" + data.machines[target] + "' has " +
                       std::to_string(matrices.size()) + " matrices with a CSR time, fewer " +
                       "than the " + std::to_string(options.folds) + " folds");
  }
  // Candidates are fixed once from all scorable matrices so that every fold scores the same
  // choice set; the forests re-derive theirs from their training folds (same result unless a
  // format's coverage sits right at the threshold).
  const TargetCosts costs = target_costs(data, target, options.min_format_coverage, matrices);
  const std::size_t csr_candidate = static_cast<std::size_t>(
      std::find(costs.candidates.begin(), costs.candidates.end(), costs.csr) -
      costs.candidates.begin());

  std::mt19937_64 rng(options.seed);
  std::shuffle(matrices.begin(), matrices.end(), rng);
  const std::vector<std::string> methods = {"always-csr", "best-single-format", "nearest-machine",
                                            "forest-properties", "forest-transfer"};
  std::map<std::string, std::vector<std::size_t>> picks;
  std::vector<std::size_t> order;  // matrices in the order their picks were made

  const auto folds = static_cast<std::size_t>(options.folds);
  for (std::size_t fold = 0; fold < folds; ++fold) {
    std::vector<std::size_t> train;
    std::vector<std::size_t> test;
    for (std::size_t i = 0; i < matrices.size(); ++i) {
      (i % folds == fold ? test : train).push_back(matrices[i]);
    }
    // best-single-format: lowest mean log-slowdown on the training folds.
    std::size_t single = csr_candidate;
    double single_cost = std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < costs.candidates.size(); ++c) {
      const double v = mean_log_slowdown(data, costs, train, c);
      if (v < single_cost) {
        single_cost = v;
        single = c;
      }
    }
    // nearest-machine: the other machine whose fastest format served the target best.
    std::size_t nearest = target;
    double nearest_cost = std::numeric_limits<double>::infinity();
    for (std::size_t other = 0; other < data.machines.size(); ++other) {
      if (other == target) continue;
      double sum = 0.0;
      for (std::size_t m : train) {
        const std::size_t c = other_machine_pick(data, costs, other, m, csr_candidate);
        sum += std::log(costs.effective(data, m, c) / costs.best(data, m));
      }
      if (sum < nearest_cost) {
        nearest_cost = sum;
        nearest = other;
      }
    }
    const FormatSelector by_properties(data, target, train, false, options);
    const FormatSelector by_transfer(data, target, train, true, options);
    // Map a selector's candidate index to the evaluation's (same names, same order, unless
    // a coverage edge case dropped one).
    auto to_costs_index = [&](const FormatSelector& s, std::size_t c) {
      const std::string& name = s.candidates()[c];
      for (std::size_t k = 0; k < costs.candidates.size(); ++k) {
        if (data.formats[target][costs.candidates[k]] == name) return k;
      }
      return csr_candidate;
    };
    for (std::size_t m : test) {
      order.push_back(m);
      picks["always-csr"].push_back(csr_candidate);
      picks["best-single-format"].push_back(single);
      picks["nearest-machine"].push_back(
          nearest == target ? csr_candidate
                            : other_machine_pick(data, costs, nearest, m, csr_candidate));
      picks["forest-properties"].push_back(
          to_costs_index(by_properties, by_properties.predict(data, m)));
      picks["forest-transfer"].push_back(to_costs_index(by_transfer, by_transfer.predict(data, m)));
    }
  }

  FormatSelectionReport report;
  report.target = data.machines[target];
  report.matrices = order.size();
  for (std::size_t c : costs.candidates) {
    report.candidate_formats.push_back(data.formats[target][c]);
  }
  for (const auto& method : methods) {
    report.scores.push_back(score(method, data, costs, order, picks[method]));
  }
  return report;
}

}  // namespace tunebase
