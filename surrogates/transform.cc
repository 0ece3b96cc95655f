#include "surrogates/transform.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace tunebase::surrogates {
namespace {

// Below this spread the sample is treated as constant (scale 1) rather than blown up.
constexpr double kMinScale = 1e-12;

double checked_value(double v, bool log_transform, std::size_t index) {
  if (!std::isfinite(v)) {
    throw InvalidInput("objective value " + std::to_string(index) + " is not finite");
  }
  if (log_transform && !(v > 0.0)) {
    throw InvalidInput("objective value " + std::to_string(index) + " is " + std::to_string(v) +
                       "; a log transform needs positive values (use log_transform=false)");
  }
  return log_transform ? std::log(v) : v;
}

}  // namespace

ObjectiveTransform ObjectiveTransform::fit(std::span<const double> values, bool log_transform) {
  ObjectiveTransform t;
  t.log_ = log_transform;
  if (values.empty()) return t;
  std::vector<double> u(values.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    u[i] = checked_value(values[i], log_transform, i);
    sum += u[i];
  }
  const auto n = static_cast<double>(u.size());
  t.centre_ = sum / n;
  if (!std::isfinite(t.centre_)) {
    // Values near the largest double: their sum overflows, their n-th parts do not.
    t.centre_ = 0.0;
    for (double v : u) t.centre_ += v / n;
  }
  double ss = 0.0;
  for (double v : u) ss += (v - t.centre_) * (v - t.centre_);
  // sample standard deviation (n - 1), as scikit-learn and BoTorch standardise
  double sd = u.size() > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
  if (!std::isfinite(sd)) {
    // Squares of deviations beyond 1e154 overflow: scale them by the largest half-deviation
    // first (halves, so that a deviation of twice the largest double is not infinite either).
    double largest = 0.0;
    for (double v : u) largest = std::max(largest, std::abs(0.5 * v - 0.5 * t.centre_));
    double scaled = 0.0;
    for (double v : u) {
      const double d = (0.5 * v - 0.5 * t.centre_) / largest;
      scaled += d * d;
    }
    sd = std::min(2.0 * largest * std::sqrt(scaled / (n - 1)), std::numeric_limits<double>::max());
  }
  t.scale_ = sd > kMinScale ? sd : 1.0;
  return t;
}

// (u - centre) / scale in halves: exact for ordinary values, finite for deviations beyond the
// largest double.
double ObjectiveTransform::standardise(double u) const {
  return (0.5 * u - 0.5 * centre_) / (0.5 * scale_);
}

double ObjectiveTransform::forward(double value) const {
  return standardise(checked_value(value, log_, 0));
}

std::vector<double> ObjectiveTransform::forward(std::span<const double> values) const {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    out[i] = standardise(checked_value(values[i], log_, i));
  }
  return out;
}

double ObjectiveTransform::inverse(double z) const {
  constexpr double kLargest = std::numeric_limits<double>::max();
  const double u = std::clamp(centre_ + scale_ * z, -kLargest, kLargest);
  return log_ ? std::exp(u) : u;
}

nlohmann::json ObjectiveTransform::to_json() const {
  return {{"log", log_}, {"centre", centre_}, {"scale", scale_}};
}

ObjectiveTransform ObjectiveTransform::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("log") || !j.contains("centre") || !j.contains("scale") ||
      !j["log"].is_boolean() || !j["centre"].is_number() || !j["scale"].is_number()) {
    throw InvalidInput(
        "objective transform: expected {\"log\": bool, \"centre\": number, \"scale\": number}");
  }
  ObjectiveTransform t;
  t.log_ = j["log"].get<bool>();
  t.centre_ = j["centre"].get<double>();
  t.scale_ = j["scale"].get<double>();
  if (!(t.scale_ > 0.0) || !std::isfinite(t.scale_) || !std::isfinite(t.centre_)) {
    throw InvalidInput("objective transform: scale must be positive and centre finite");
  }
  return t;
}

}  // namespace tunebase::surrogates
