// Evaluator: measures one configuration of a tunable kernel.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/space.h"
#include "core/trial.h"

namespace tunebase {

/// Seconds of steady time since `start`: what an evaluation reports as its cost.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Runs one configuration and reports what happened. Failures of the configuration (compile
/// error, wrong result, timeout, divergence, a device out of memory) are returned as a
/// Measurement with their status and message. evaluate() throws EvaluatorUnavailable when no
/// configuration can be evaluated now (a solver process or command that cannot start, a lost
/// device context): nothing is stored for it and the sweep or worker stops. It may throw
/// BackendError for a back-end failure while evaluating, which callers store as a failed trial,
/// and EvaluationInterrupted when tunebase is being stopped and the evaluation was cut short by
/// it (nothing is stored, the lease goes back, the caller stops as interrupted); any other
/// exception ends the sweep or worker without storing the configuration.
class Evaluator {
 public:
  virtual ~Evaluator() = default;

  /// Kernel name as stored (e.g. "spmv", "command", "replay:Xgemm").
  virtual std::string kernel_name() const = 0;
  /// The space this kernel is tuned over.
  virtual const SearchSpace& space() const = 0;
  /// The input of this tuning problem (matrix features, problem size): the study's task.
  virtual nlohmann::json task() const { return nlohmann::json::object(); }
  /// Measures `config` (which the caller guarantees is valid in space()).
  virtual Measurement evaluate(const Configuration& config) = 0;
  /// The configurations this evaluator can answer, when it knows them in advance (a replayed
  /// file: Kernel Tuner's simulation mode); null when any valid configuration can be run.
  virtual const std::vector<Configuration>* candidates() const { return nullptr; }
  /// Unit of the objective: "s" for times measured here, "ms" for GPU kernel times (Kernel
  /// Tuner's convention, so that our GPU kernels and imported datasets compare directly).
  virtual std::string objective_unit() const { return "s"; }
  /// Whether lower objective values are better (time) or higher (GFLOP/s).
  virtual bool minimize() const { return true; }
  /// How the objective is measured where it depends on more than the configuration and the
  /// task (a PETSc solve's tolerances and clock); a study keeps it, and a sweep that measures
  /// otherwise cannot add to it. Empty for most evaluators.
  virtual nlohmann::json measurement_settings() const { return nlohmann::json::object(); }
  /// measurement_settings() with every option at its default: what a study that keeps no
  /// settings (made before studies kept them) was measured with.
  virtual nlohmann::json default_measurement_settings() const { return nlohmann::json::object(); }
  /// Where the results come from when it is not this machine (a replayed file: its device,
  /// "" when the file names none); nullopt for evaluators that measure here.
  virtual std::optional<std::string> measured_on() const { return std::nullopt; }
};

}  // namespace tunebase
