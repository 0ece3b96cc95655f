// Readers for measurement files users already have: Kernel Tuner cache files and T4 results.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/space.h"
#include "core/trial.h"

namespace tunebase {

/// Every measurement of one kernel on one device, as read from a file.
struct MeasuredDataset {
  std::string device_name;
  std::string kernel_name;
  std::string format;  ///< "kernel_tuner" or "t4"
  nlohmann::json problem_size;
  /// The space spanned by the file: its tune_params with no constraints (the set of entries
  /// is the valid set, as in Kernel Tuner's simulation mode).
  SearchSpace space;
  /// One observation per entry, failures included (status failed, message the string time).
  std::vector<Observation> entries;
  /// What was read leniently, as Kernel Tuner reads its own caches (a cache left open by an
  /// interrupted run, Python's NaN and Infinity), one sentence each; empty for strict JSON.
  std::vector<std::string> notes;
  /// The field each entry's objective is read from: "time" (milliseconds, lower is better),
  /// or, in a cache that says which way is better (objective_higher_is_better, as tunebase
  /// writes a study of another objective: GFLOP/s, a score), its "objective".
  std::string objective = "time";
  bool maximize = false;

  /// The input it measured, as a task description: {"problem_size": ...}, or {} for a file
  /// without one (an import and a replay of one file are one task).
  nlohmann::json task() const {
    if (problem_size.is_null()) return nlohmann::json::object();
    return {{"problem_size", problem_size}};
  }
};

/// The most JSON text read from one measurement file (after gunzip): parsing needs about 8
/// times this in memory. The largest shared datasets hold under 20 MiB.
inline constexpr std::size_t kMaxMeasurementTextBytes = std::size_t{512} << 20;

/// Reads `.json` or `.json.gz` (gzip detected by its magic bytes, not its name), Kernel Tuner
/// cache or T4 format. Throws IoError / InvalidInput naming the file and what is wrong.
MeasuredDataset read_measurements(const std::string& path);
/// Same from the bytes of a file (plain or gzip), e.g. an HTTP upload; `origin` names it in
/// error messages. InvalidInput when the JSON text is over `max_text_bytes` (a gzip bomb).
MeasuredDataset parse_measurements(const std::string& bytes, const std::string& origin,
                                   std::size_t max_text_bytes = kMaxMeasurementTextBytes);

/// Reads a whole file, gunzipping when it starts with the gzip magic bytes; InvalidInput when
/// the text is over `max_text_bytes` (a measurement file's limit by default; a matrix the
/// user gives is read whatever its size).
std::string read_maybe_gzipped(const std::string& path,
                               std::size_t max_text_bytes = kMaxMeasurementTextBytes);
/// Milliseconds per time unit (s, ms, us, ns, or any spelling short_time_unit reads: spelt
/// out as T4 files do, seconds, ..., Kernel Tuner's misspelt "miliseconds", sec, µs);
/// results are converted to milliseconds like Kernel Tuner's caches. InvalidInput, starting
/// with `where`, for anything else.
double milliseconds_per(const std::string& unit, const std::string& where);
/// The same, none for a unit that is not one of time.
std::optional<double> milliseconds_in(std::string_view unit);
inline bool is_time_unit(std::string_view unit) { return milliseconds_in(unit).has_value(); }
/// Whether a unit or metric name is a rate, where higher is better: per second ("GFLOP/s",
/// "GB/s", "items/sec", "per second") or FLOPS, whatever the case. "ms/step" is a time per item.
bool is_rate_unit(std::string_view unit);
/// What a value in the unit of time `from` is multiplied by to be in `to` (an exact power of
/// ten); 1 when either is not a unit of time: such values are not converted.
double time_unit_factor(std::string_view from, std::string_view to);
/// The short name (s, ms, us, ns) of a unit of time, however written ("sec", "MS", "µs",
/// "microseconds"); empty for another unit.
std::string short_time_unit(std::string_view unit);

/// The name a study gives its objective when none is given, from the unit it is measured in:
/// "time" for a time (or a plain number made smaller), else the unit ("GFLOP/s"), or "value"
/// for a plain number made larger. tunebase sweep and POST /v1/studies name it so, and
/// GET /v1/best?objective= filters by it.
std::string default_objective_name(std::string_view unit, bool minimize);

/// Gunzips bytes that start with the gzip magic; returns other bytes unchanged.
std::string gunzip_if_needed(const std::string& bytes, const std::string& origin,
                             std::size_t max_text_bytes = kMaxMeasurementTextBytes);

}  // namespace tunebase
