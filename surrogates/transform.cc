#include "surrogates/transform.h"

#include <cmath>
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
  t.centre_ = sum / static_cast<double>(u.size());
  double ss = 0.0;
  for (double v : u) ss += (v - t.centre_) * (v - t.centre_);
  // sample standard deviation (n - 1), as scikit-learn and BoTorch standardise
  const double sd = u.size() > 1 ? std::sqrt(ss / static_cast<double>(u.size() - 1)) : 0.0;
  t.scale_ = sd > kMinScale ? sd : 1.0;
  return t;
}

double ObjectiveTransform::forward(double value) const {
  return (checked_value(value, log_, 0) - centre_) / scale_;
}

std::vector<double> ObjectiveTransform::forward(std::span<const double> values) const {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    out[i] = (checked_value(values[i], log_, i) - centre_) / scale_;
  }
  return out;
}

double ObjectiveTransform::inverse(double z) const {
  const double u = centre_ + scale_ * z;
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
