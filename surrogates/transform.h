// Objective transform: optional log, then standardisation, so the GP sees values near N(0,1).
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <vector>

namespace tunebase::surrogates {

/// z = (t(v) - centre) / scale with t = log for positive objectives (times), else identity.
/// Fitted once on the observed values; forward/inverse keep that fit, so new observations can
/// be added to a GP without moving the old targets (refit the transform when refitting the GP).
class ObjectiveTransform {
 public:
  /// Identity transform.
  ObjectiveTransform() = default;

  /// Fits centre and scale on `values`. With `log_transform`, every value must be positive
  /// (InvalidInput names the first that is not). Values must be finite. An empty sample gives
  /// centre 0; fewer than two distinct values give scale 1.
  static ObjectiveTransform fit(std::span<const double> values, bool log_transform);

  double forward(double value) const;
  std::vector<double> forward(std::span<const double> values) const;
  /// Back to the objective's units (the median of the predictive, under a log transform).
  double inverse(double z) const;
  /// A standard deviation in transformed units, in units of t(objective) (log units for log).
  double scale() const { return scale_; }
  double centre() const { return centre_; }
  bool log_transform() const { return log_; }

  nlohmann::json to_json() const;
  static ObjectiveTransform from_json(const nlohmann::json& j);

 private:
  double standardise(double u) const;

  bool log_ = false;
  double centre_ = 0.0;
  double scale_ = 1.0;
};

}  // namespace tunebase::surrogates
