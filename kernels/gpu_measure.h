// How the GPU evaluators measure a configuration, shared by the built-in kernels
// (gpu_evaluators.cc) and the user's own (source_kernel.cc): check, compile, time, and turn
// every failure of the configuration into a failed measurement with its message.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/space.h"
#include "core/trial.h"
#include "kernels/compute_backend.h"
#include "kernels/evaluator.h"
#include "kernels/gpu_evaluators.h"

namespace tunebase::gpu {

using Clock = std::chrono::steady_clock;

inline constexpr double kMillisecondsPerSecond = 1e3;
inline constexpr double kFlopsPerGigaflop = 1e9;

// A measurement that failed after `start`.
inline Measurement failure(TrialStatus status, const std::string& message,
                           Clock::time_point start) {
  return Measurement::failure(status, message, seconds_since(start));
}

// Warm-up (checked by `check`, which returns an error message or "") then `repeats` timed
// launches. Launch and back-end errors become failed measurements; the objective is the median
// launch time in milliseconds and `flops` per launch gives GFLOP/s (left out when 0: a kernel
// whose work is not known).
template <typename Launch, typename Check>
Measurement measure(Launch&& launch, Check&& check, const GpuEvaluatorOptions& options,
                    double flops, Clock::time_point start) {
  const int repeats = options.repeats;
  try {
    const double warm_up = launch();
    if (std::string wrong = check(); !wrong.empty()) {
      return failure(TrialStatus::failed, "wrong result: " + wrong, start);
    }
    if (options.time_limit_seconds > 0 && warm_up * repeats > options.time_limit_seconds) {
      Measurement m =
          failure(TrialStatus::timeout,
                  "one launch took " + std::to_string(warm_up) + " s: " + std::to_string(repeats) +
                      " repeats would exceed the limit of " +
                      std::to_string(options.time_limit_seconds) + " s",
                  start);
      m.raw = {warm_up * kMillisecondsPerSecond};
      return m;
    }
    std::vector<double> milliseconds;
    std::vector<double> wall_milliseconds;  // host view: enqueue, run and wait
    for (int r = 0; r < repeats; ++r) {
      const auto launched = Clock::now();
      milliseconds.push_back(launch() * kMillisecondsPerSecond);
      wall_milliseconds.push_back(seconds_since(launched) * kMillisecondsPerSecond);
    }
    const double objective = median(milliseconds);
    Measurement m = Measurement::success(objective, milliseconds, seconds_since(start));
    if (flops > 0) {
      m.metrics["GFLOP/s"] = flops / (objective / kMillisecondsPerSecond) / kFlopsPerGigaflop;
    }
    m.metrics["time_unit"] = "ms";
    m.metrics["wall_time_ms"] = median(wall_milliseconds);
    return m;
  } catch (const LaunchError& e) {
    return failure(TrialStatus::failed, std::string("launch failed: ") + e.what(), start);
  } catch (const BackendError& e) {
    return failure(TrialStatus::failed, e.what(), start);
  }
}

// Compiles, turning a compile error into a failed measurement with the build log.
inline std::shared_ptr<CompiledKernel> compile_or_fail(ComputeBackend& backend, const char* source,
                                                       const std::string& kernel_name,
                                                       const Defines& defines,
                                                       std::optional<Measurement>& failed,
                                                       Clock::time_point start) {
  try {
    return backend.compile(source, kernel_name, defines);
  } catch (const BackendError& e) {  // CompileError's message carries the build log
    failed = failure(TrialStatus::failed, std::string("compile failed: ") + e.what(), start);
  }
  return nullptr;
}

// A work-group larger than the compiled kernel allows fails before launching.
inline std::optional<Measurement> check_work_group(const CompiledKernel& kernel, std::int64_t size,
                                                   const DeviceInfo& device,
                                                   Clock::time_point start) {
  if (size <= kernel.max_work_group_size()) return std::nullopt;
  return failure(TrialStatus::failed,
                 "work-group of " + std::to_string(size) + " work-items exceeds the " +
                     std::to_string(kernel.max_work_group_size()) + " that kernel " +
                     kernel.name() + " allows on " + device.name,
                 start);
}

// The configuration's defines, then the options' extra ones on top.
inline Defines with_extra(Defines defines, const Defines& extra) {
  for (const auto& [name, value] : extra) defines[name] = value;
  return defines;
}

inline std::optional<Measurement> check_config(const SearchSpace& space,
                                               const Configuration& config,
                                               Clock::time_point start) {
  try {
    space.check(config);
  } catch (const InvalidInput& e) {
    return failure(TrialStatus::invalid, e.what(), start);
  }
  return std::nullopt;
}

}  // namespace tunebase::gpu
