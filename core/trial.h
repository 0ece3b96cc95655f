// What one evaluation of a configuration produced.
#pragma once

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace tunebase {

enum class TrialStatus { pending, ok, failed, timeout, invalid };

std::string_view to_string(TrialStatus s);
/// Parses `pending ok failed timeout invalid`; throws InvalidInput naming the allowed values.
TrialStatus trial_status_from_string(std::string_view s);

/// The most bytes a result's message may hold: every listing and export of its study carries
/// it. The API refuses a longer one; storable() cuts one down (a command's whole output, say).
inline constexpr std::size_t kMaxMessageBytes = 64 * 1024;

/// The first `n` bytes of `s`, or fewer: never the start of a UTF-8 character without its end.
std::string_view utf8_prefix(std::string_view s, std::size_t n);
/// The most bytes a result's metrics may take as JSON, for the same reason.
inline constexpr std::size_t kMaxMetricsBytes = 64 * 1024;
/// The most raw measurements a result may hold (about 100 KB as JSON), for the same reason.
inline constexpr std::size_t kMaxRawValues = 4096;

/// Result of evaluating one configuration. A failed evaluation is data: its status and
/// message are kept and stored like any other result.
struct Measurement {
  TrialStatus status = TrialStatus::ok;
  /// The objective (median of `raw` for timed kernels); NaN unless status is ok.
  double objective = std::numeric_limits<double>::quiet_NaN();
  /// Every repeated raw measurement, in the order taken.
  std::vector<double> raw;
  /// Wall time the evaluation cost, seconds (compile + warm-up + repeats).
  double cost_seconds = 0.0;
  /// Why it failed, or anything worth knowing about a success.
  std::string message;
  /// Extra values reported by the evaluator (GFLOP/s, GB/s, iterations...).
  nlohmann::json metrics = nlohmann::json::object();

  bool ok() const { return status == TrialStatus::ok && std::isfinite(objective); }

  static Measurement success(double objective, std::vector<double> raw = {},
                             double cost_seconds = 0.0);
  static Measurement failure(TrialStatus status, std::string message, double cost_seconds = 0.0);
};

/// An evaluator's result as it can be stored and sent: an ok status without a finite
/// objective becomes a failure that says so, a cost that is not a finite number >= 0
/// becomes 0, raw values that are not finite are left out, bytes of the message that are not
/// UTF-8 become U+FFFD (as JSON writes them), a message over kMaxMessageBytes keeps
/// its start and its end (where a failing program says why) with a note of what was cut between,
/// metrics over kMaxMetricsBytes are left out, with a note in the message, and more than
/// kMaxRawValues raw values are thinned to that many, evenly spaced in the order taken, with a
/// note (what the store and the API refuse or cannot write, which would lose the evaluation).
/// The objective stays as the evaluator gave it.
Measurement storable(Measurement m);

/// A configuration together with its result.
struct Observation {
  Configuration config;
  Measurement result;
};

/// The fields of a result, as the API names them (status, value, raw, cost_seconds, message,
/// metrics), in which `sent` differs from `stored`: none when `sent` is the very result
/// `stored` holds, what a client sends again when it retries after a lost answer. Numbers
/// compare exactly (JSON carries a double exactly), metrics as JSON objects (whatever the
/// order of their keys; 2 and 2.0 are one number).
std::vector<std::string> differing_fields(const Measurement& stored, const Measurement& sent);

/// Whether `b` measured what `a` holds: status, value, raw measurements and a failure's
/// message, as a Kernel Tuner cache keeps them (not cost, metrics or an ok result's message;
/// a retry is told by differing_fields).
bool same_result(const Measurement& a, const Measurement& b);

/// Median of a non-empty list (average of the two middle values for an even count).
double median(std::vector<double> values);

}  // namespace tunebase
