// SpMV storage-format selection across machines: predict the fastest format of a matrix on
// one machine from its structural features and its measured SpMV times on other machines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/measurements.h"

namespace tunebase {

/// SpMV timings of many matrices in several formats on several machines, as published by
/// Ginkgo (`sparse/spmv/<machine>.csv`: matrix properties, then one time column per format).
struct SpmvDataset {
  std::vector<std::string> machines;              ///< file stems, e.g. "V100_SXM2"
  std::vector<std::vector<std::string>> formats;  ///< per machine, its format columns
  std::vector<std::string> matrices;              ///< "group/name", union over machines
  /// times[machine][matrix][format]: seconds of one SpMV; NaN when not measured there.
  std::vector<std::vector<std::vector<double>>> times;
  std::vector<std::string> property_names;  ///< numeric matrix-property columns used
  /// properties[matrix][k]: property k of the matrix (joined across files); NaN if unknown.
  std::vector<std::vector<double>> properties;

  std::size_t machine_index(const std::string& name) const;  ///< throws NotFound
};

/// One machine's file of an SpmvDataset (`sparse/spmv/<machine>.csv`), rows as read.
struct SpmvTable {
  std::string path;
  std::string machine;               ///< the file stem, e.g. "V100_SXM2"
  std::vector<std::string> formats;  ///< its format (time) columns, in file order
  /// The numeric matrix-property columns (rows, cols, nonzeros, ..., row_hyperflatness).
  std::vector<std::string> property_names;
  struct Row {
    std::size_t line = 0;  ///< 1-based line in the file
    std::string matrix;    ///< "group/name"
    /// properties[k]: property_names[k], NaN when the cell is empty or the file lacks it.
    std::vector<double> properties;
    /// times[f]: the cell of formats[f] as written (seconds of one SpMV; empty when the
    /// format did not complete), for the caller to read as its use needs.
    std::vector<std::string> times;
  };
  std::vector<Row> rows;
};

/// Reads one machine's CSV. Throws IoError when it cannot be read, InvalidInput naming the
/// file and line for a malformed one (no group/name columns, no format column, a row with the
/// wrong number of cells, a property that is not a number).
SpmvTable read_spmv_table(const std::string& path);

/// Keeps only the format columns `formats`, in that order: machines whose files have other
/// columns (K40m's and P100's cuSPARSE variants) are then one space, whose measurements
/// transfer. InvalidInput naming the file's formats when one is not among them, or for a
/// format given twice.
void keep_spmv_formats(SpmvTable& table, const std::vector<std::string>& formats);

/// The kernel an imported SpMV-format table is filed under: choosing the storage format of one
/// matrix's SpMV.
inline constexpr const char* kSpmvFormatKernel = "spmv_format";

/// One matrix of an SpmvTable as measurements of that choice.
struct SpmvMatrixMeasurements {
  nlohmann::json task;           ///< {"matrix": "group/name"}
  nlohmann::json task_features;  ///< the known numeric properties, {"rows": ..., ...}
  /// Device the table's machine; one categorical parameter `format` (the table's format
  /// columns, default csr) and one entry per format: its time in seconds, or failed with a
  /// message that the file has no time for it (empty: the format did not complete there).
  MeasuredDataset dataset;
};

/// Every row of `table` as SpmvMatrixMeasurements, in file order. InvalidInput naming the
/// file and line when a matrix has two rows.
std::vector<SpmvMatrixMeasurements> spmv_measurements(const SpmvTable& table);

/// Reads every `*.csv` of `dir` (one machine each, in name order). Throws IoError for a
/// missing or unreadable folder, InvalidInput naming the file and line for a malformed CSV
/// (no group/name columns, a row with the wrong number of cells, a time that is not a number).
SpmvDataset read_spmv_dataset(const std::string& dir);

struct FormatSelectionOptions {
  /// Cross-validation folds over matrices: each matrix is predicted by a model that never
  /// saw it.
  int folds = 5;
  /// Random-forest size and leaf size (dlib's random_forest_regression_trainer).
  std::size_t trees = 100;
  std::size_t min_samples_per_leaf = 5;
  /// A format of the target machine is a candidate only if measured on at least this
  /// fraction of its matrices (drops e.g. P100's cusparse_csrex, run on 14 of 2742).
  double min_format_coverage = 0.5;
  std::uint64_t seed = 1;
};

/// How well one selection method did on the held-out matrices of one target machine.
/// A pick that was not measured for a matrix (the format failed there, e.g. ELL out of
/// memory) costs twice the CSR time (the failed attempt, taken as one CSR SpMV, then the CSR
/// fallback), is never counted as accurate, and is counted in unavailable_picks.
struct SelectionScore {
  std::string method;
  std::size_t matrices = 0;
  double accuracy = 0.0;          ///< fraction of matrices where the pick is the fastest
  double mean_slowdown = 0.0;     ///< mean of t(pick) / t(fastest)
  double geomean_slowdown = 0.0;  ///< geometric mean of the same ratios
  double p95_slowdown = 0.0;      ///< 95th percentile of the same ratios
  std::size_t unavailable_picks = 0;
};

struct FormatSelectionReport {
  std::string target;
  std::vector<std::string> candidate_formats;
  std::size_t matrices = 0;
  /// always-csr, best-single-format (chosen on the training folds), nearest-machine (the
  /// fastest format on the other machine whose choices agreed most with the target's in
  /// training), forest-properties (features only), forest-transfer (features + other machines).
  std::vector<SelectionScore> scores;
};

/// Cross-validated evaluation of the selection methods for machine `target` of `data`.
/// Deterministic for a given options.seed. Throws InvalidInput when the target has fewer
/// matrices than folds or no CSR column.
FormatSelectionReport evaluate_format_selection(const SpmvDataset& data, std::size_t target,
                                                const FormatSelectionOptions& options = {});

/// A trained selector for one target machine: one random-forest regression per candidate
/// format predicting log(t_format / t_fastest), the pick being the smallest prediction, so
/// that a near-tie costs little and a disastrous format is avoided even when it is rarely
/// the fastest.
class FormatSelector {
 public:
  /// Trains on the listed matrices (indices into data.matrices) that the target measured.
  /// `use_other_machines` adds the other machines' timings as features.
  FormatSelector(const SpmvDataset& data, std::size_t target,
                 const std::vector<std::size_t>& training_matrices, bool use_other_machines,
                 const FormatSelectionOptions& options = {});
  ~FormatSelector();
  FormatSelector(FormatSelector&&) noexcept;
  FormatSelector& operator=(FormatSelector&&) noexcept;

  /// Candidate formats of the target, in its column order.
  const std::vector<std::string>& candidates() const;
  /// Index into candidates() of the predicted fastest format of matrix `m` of `data`.
  std::size_t predict(const SpmvDataset& data, std::size_t m) const;
  /// The feature vector the forests see for matrix `m` (matrix properties, then per other
  /// machine log-ratios of each format to that machine's fastest, and its log time per nnz).
  std::vector<double> features(const SpmvDataset& data, std::size_t m) const;

 private:
  struct Model;
  std::unique_ptr<Model> model_;
};

}  // namespace tunebase
