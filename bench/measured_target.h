// A fully measured space (Kernel Tuner cache or T4 file) as the report programs read it: every
// configuration the file holds, and which of them ran with their times.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/replay.h"

namespace tunebase::bench {

struct MeasuredTarget {
  ReplayEvaluator replay;
  /// Indices into replay.configurations() of the successful, positive measurements.
  std::vector<std::size_t> ok;
  /// Their times, in the order of `ok`.
  std::vector<double> time;
};

/// Reads `path`; throws InvalidInput when no configuration of it ran.
inline MeasuredTarget read_measured_target(const std::string& path) {
  MeasuredTarget t{ReplayEvaluator::from_file(path), {}, {}};
  const auto& configs = t.replay.configurations();
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const Measurement m = t.replay.lookup(configs[i]);
    if (!m.ok() || !(m.objective > 0)) continue;
    t.ok.push_back(i);
    t.time.push_back(m.objective);
  }
  if (t.ok.empty()) throw InvalidInput(path + ": no successful measurement");
  return t;
}

}  // namespace tunebase::bench
