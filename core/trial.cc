#include "core/trial.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace tunebase {

bool same_result(const Measurement& a, const Measurement& b) {
  const auto same_number = [](double x, double y) {
    return x == y || (std::isnan(x) && std::isnan(y));
  };
  if (a.status != b.status || !same_number(a.objective, b.objective) ||
      a.raw.size() != b.raw.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.raw.size(); ++i) {
    if (!same_number(a.raw[i], b.raw[i])) return false;
  }
  return a.ok() || a.message == b.message;
}

Measurement storable(Measurement m) {
  if (m.status == TrialStatus::ok && !std::isfinite(m.objective)) {
    std::ostringstream value;
    value << m.objective;
    m.status = TrialStatus::failed;
    m.message = "the evaluation gave no finite objective (" + value.str() + ")" +
                (m.message.empty() ? "" : ": " + m.message);
    m.objective = std::numeric_limits<double>::quiet_NaN();
  }
  if (!std::isfinite(m.cost_seconds) || m.cost_seconds < 0) m.cost_seconds = 0.0;
  std::erase_if(m.raw, [](double r) { return !std::isfinite(r); });
  return m;
}

std::string_view to_string(TrialStatus s) {
  switch (s) {
    case TrialStatus::pending:
      return "pending";
    case TrialStatus::ok:
      return "ok";
    case TrialStatus::failed:
      return "failed";
    case TrialStatus::timeout:
      return "timeout";
    case TrialStatus::invalid:
      return "invalid";
  }
  return "unknown";
}

TrialStatus trial_status_from_string(std::string_view s) {
  for (auto status : {TrialStatus::pending, TrialStatus::ok, TrialStatus::failed,
                      TrialStatus::timeout, TrialStatus::invalid}) {
    if (s == to_string(status)) return status;
  }
  throw InvalidInput("unknown trial status \"" + std::string(s) +
                     "\"; allowed: pending, ok, failed, timeout, invalid");
}

Measurement Measurement::success(double objective, std::vector<double> raw, double cost_seconds) {
  Measurement m;
  m.status = TrialStatus::ok;
  m.objective = objective;
  m.raw = std::move(raw);
  m.cost_seconds = cost_seconds;
  return m;
}

Measurement Measurement::failure(TrialStatus status, std::string message, double cost_seconds) {
  Measurement m;
  m.status = status;
  m.message = std::move(message);
  m.cost_seconds = cost_seconds;
  return m;
}

double median(std::vector<double> values) {
  if (values.empty()) throw InvalidInput("median of an empty list");
  const auto mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  // Halves first: the sum of two values near the largest double is infinite.
  return 0.5 * lower + 0.5 * upper;
}

}  // namespace tunebase
