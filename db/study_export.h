// A study and its trials as a JSON document or a CSV table, made a page of trials at a time so
// that a study of any size is never held in memory whole: the server streams it to clients
// (however slowly they read), the CLI to a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "db/store.h"

namespace tunebase::db {

/// The trials of a study in `range`, a page at a time, up to the newest trial when the walk
/// began: what streamed replies read, so that trials added meanwhile are left out.
class TrialPages {
 public:
  static constexpr std::size_t kDefaultPageTrials = 500;

  /// NotFound when the study does not exist.
  TrialPages(const Store& store, StudyId study, TrialRange range = {},
             std::size_t page_trials = kDefaultPageTrials);
  /// The next page, in id order; empty once every trial was given.
  std::vector<TrialRecord> next();
  /// The newest trial the walk includes.
  std::int64_t last_id() const { return range_.up_to; }

 private:
  const Store& store_;
  StudyId study_;
  TrialRange range_;
};

enum class ExportFormat { json, csv, kernel_tuner };

/// The format named `name` ("json", "csv", "kernel_tuner"); InvalidInput naming the allowed.
ExportFormat export_format_from_string(std::string_view name);

/// JSON: {"format": "tunebase-study", "format_version": 1, "kernel", "machine", "study",
/// "task", "trials": [...]}, one trial per line. CSV: a header `trial_id`, one column per
/// parameter, `status,objective,cost_seconds,client_id,created_at,finished_at,message`, then
/// one row per trial (RFC 4180 quoting). Text cells that start with = + - @, a tab or a
/// carriage return get a leading ' so spreadsheets show them and run nothing. Kernel Tuner:
/// a cache file as Kernel Tuner writes it ({"device_name": machine, "kernel_name",
/// "problem_size", "tune_params_keys", "tune_params", "objective": "time", "cache": {"v1,v2":
/// {params..., "time": ms or "RuntimeFailedConfig"..., "times": [ms...], metrics...}}}), which
/// Kernel Tuner and `tunebase import` read: trials with no result (pending, a lease that ended)
/// are left out; the others are one a configuration, as the store keeps them. A parameter of
/// Python booleans (Parameter::python_bool) is keyed True/False and written true/false. A study
/// of another objective than time (GFLOP/s, a score) has "objective": its name and
/// "objective_higher_is_better", as Kernel Tuner tunes one, and each successful entry holds the
/// objective under that name, with "time" the trial's time metric (ms) where it has one.
class StudyExport {
 public:
  static constexpr std::size_t kDefaultPageTrials = TrialPages::kDefaultPageTrials;

  /// Reads the study (NotFound when there is none). The export holds the trials the study had
  /// at this moment, in id order, each as it is when its page is read. Kernel Tuner: refused
  /// (InvalidInput, saying why) for a study whose objective named "time" is no time (it is
  /// maximized, or in a unit that is not s, ms, us or ns), whose space has a real interval or a
  /// parameter named time, times or as its objective, or whose configurations share a key
  /// (string values holding commas; the study's trials are read once for that, where a string
  /// value holds one).
  StudyExport(const Store& store, StudyId study, ExportFormat format,
              std::size_t page_trials = kDefaultPageTrials);

  /// Appends the next piece of the text to `out`; false when everything was given (then
  /// `out` is unchanged). Each call reads at most one page of trials.
  bool next(std::string& out);
  /// Kernel Tuner, once every piece was given: for people to read, which field of the entries
  /// holds a study's objective when it is no time, and what "time" holds; empty otherwise.
  std::string note() const;

 private:
  void begin(std::string& out);
  void end(std::string& out) const;
  void append_trial(const TrialRecord& t, std::string& out);

  const Store& store_;
  StudyId study_;
  ExportFormat format_;
  TrialPages pages_;
  bool begun_ = false;
  bool ended_ = false;
  bool any_trial_ = false;
  std::vector<std::string> names_;  ///< CSV parameter columns; Kernel Tuner: tune_params_keys
  std::vector<bool> python_bools_;  ///< Kernel Tuner: whether names_[i] holds False and True
  std::string unit_;                ///< CSV: the objective's unit, on every row
  double to_milliseconds_ = 1.0;    ///< Kernel Tuner: milliseconds per unit of the objective
  std::string objective_;           ///< Kernel Tuner: the entries' field of the objective
  std::size_t timed_ = 0;    ///< Kernel Tuner, another objective: successful entries with a time
  std::size_t untimed_ = 0;  ///< and those without
  nlohmann::ordered_json kt_header_;  ///< Kernel Tuner: everything but the cache, in order
};

/// The whole export as one string (small studies, tests).
std::string export_study(const Store& store, StudyId study, ExportFormat format);

/// The export's JSON document as a value.
nlohmann::json study_to_json(const Store& store, StudyId study);

}  // namespace tunebase::db
