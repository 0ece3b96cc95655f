#include "kernels/replay.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace tunebase {
namespace {

/// "gpu/gemm/A100_T4.json.gz" -> "A100_T4".
std::string file_stem(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* suffix : {".gz", ".json"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      name.erase(name.size() - s.size());
    }
  }
  return name;
}

/// "a, b, c": the names of a space's parameters.
std::string parameter_names(const SearchSpace& space) {
  std::string names;
  for (const auto& p : space.parameters()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

/// "time, GFLOP/s, compile_time": the fields the successful entries hold as numbers, in the
/// order first met (time first).
std::string numeric_fields(const MeasuredDataset& dataset) {
  std::vector<std::string> names{"time"};
  for (const auto& entry : dataset.entries) {
    if (!entry.result.ok()) continue;
    for (const auto& [name, value] : entry.result.metrics.items()) {
      if (value.is_number() && std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(name);
      }
    }
  }
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

/// Makes field `name` of each successful entry its objective (Kernel Tuner's `objective`):
/// the time and the repeated times become metrics, as they measure something else, and an
/// entry without a finite number there fails, saying so.
void replay_objective(MeasuredDataset& dataset, const std::string& name,
                      const std::string& origin) {
  if (name == dataset.objective) return;
  const bool held = std::any_of(dataset.entries.begin(), dataset.entries.end(), [&](auto& e) {
    const auto it = e.result.metrics.find(name);
    return e.result.ok() && it != e.result.metrics.end() && it->is_number();
  });
  if (!held) {
    throw InvalidInput("objective '" + name + "' is not a numeric field of " + origin +
                       "'s successful entries; their numeric fields: " + numeric_fields(dataset));
  }
  for (auto& entry : dataset.entries) {
    Measurement& m = entry.result;
    if (!m.ok()) continue;
    const auto it = m.metrics.find(name);
    if (it == m.metrics.end() || !it->is_number() || !std::isfinite(it->get<double>())) {
      m = Measurement::failure(TrialStatus::failed,
                               "this entry of " + origin + " has no number in '" + name + "'",
                               m.cost_seconds);
      continue;
    }
    const double value = it->get<double>();
    m.metrics[dataset.objective] = m.objective;
    if (!m.raw.empty()) m.metrics["times"] = std::exchange(m.raw, {});
    m.objective = value;
  }
}

}  // namespace

ReplayEvaluator::ReplayEvaluator(MeasuredDataset dataset, std::string origin,
                                 std::string kernel_name, const ReplayObjective& objective)
    : dataset_(std::move(dataset)),
      origin_(std::move(origin)),
      kernel_name_(std::move(kernel_name)),
      // A cache of another objective (tunebase's export of a study of GFLOP/s) is replayed as
      // that objective unless told otherwise, as its study was tuned.
      objective_(objective.name.empty() || (objective.name == "time" && !objective.minimize)
                     ? dataset_.objective
                     : objective.name),
      minimize_(objective.minimize.value_or(
          objective_ == dataset_.objective ? !dataset_.maximize : !is_rate_unit(objective_))) {
  if (kernel_name_.empty()) kernel_name_ = dataset_.kernel_name;
  if (kernel_name_.empty()) kernel_name_ = "replay:" + file_stem(origin_);
  replay_objective(dataset_, objective_, origin_);

  index_.reserve(dataset_.entries.size());
  configurations_.reserve(dataset_.entries.size());
  for (std::size_t i = 0; i < dataset_.entries.size(); ++i) {
    const Observation& entry = dataset_.entries[i];
    auto key = canonical_key(entry.config);
    if (!key) {
      throw InvalidInput(origin_ + ": entry " + dataset_.space.key(entry.config) +
                         " has a value outside the file's parameter values");
    }
    // The first entry wins for a configuration listed twice (possible in T4 results).
    if (!index_.emplace(std::move(*key), i).second) continue;
    configurations_.push_back(entry.config);
    const auto better = [&](double a, double b) { return minimize_ ? a < b : a > b; };
    if (entry.result.ok() &&
        (!best_ || better(entry.result.objective, dataset_.entries[*best_].result.objective))) {
      best_ = i;
    }
  }
  // A search over them (the benchmark's candidates) does not depend on the file's order.
  sort_by_key(dataset_.space, configurations_,
              [](const Configuration& c) -> const Configuration& { return c; });
}

ReplayEvaluator ReplayEvaluator::from_file(const std::string& path, std::string kernel_name,
                                           const ReplayObjective& objective) {
  return ReplayEvaluator(read_measurements(path), path, std::move(kernel_name), objective);
}

nlohmann::json ReplayEvaluator::task() const { return dataset_.task(); }

std::optional<std::string> ReplayEvaluator::canonical_key(const Configuration& config) const {
  const SearchSpace& space = dataset_.space;
  if (config.size() != space.dimension()) return std::nullopt;
  Configuration canonical;
  canonical.reserve(config.size());
  for (std::size_t i = 0; i < config.size(); ++i) {
    const Parameter& p = space.parameter(i);
    const auto position = p.index_of(config[i]);
    if (!position) return std::nullopt;
    canonical.push_back(p.values[*position]);
  }
  return space.key(canonical);
}

Measurement ReplayEvaluator::lookup(const Configuration& config) const {
  if (auto key = canonical_key(config)) {
    if (auto it = index_.find(*key); it != index_.end()) return dataset_.entries[it->second].result;
  }
  return Measurement::failure(TrialStatus::failed, "configuration not in " + origin_);
}

Configuration ReplayEvaluator::configuration_of(const nlohmann::json& named) const {
  if (!named.is_object()) {
    throw InvalidInput("a configuration must be an object {\"name\": value}, got " +
                       std::string(named.type_name()));
  }
  const SearchSpace& space = dataset_.space;
  for (const auto& [name, value] : named.items()) {
    if (!space.index_of(name)) {
      throw InvalidInput("parameter '" + name + "' is not in " + origin_);
    }
  }
  Configuration config;
  config.reserve(space.dimension());
  for (const auto& p : space.parameters()) {
    auto it = named.find(p.name);
    if (it == named.end()) {
      throw InvalidInput("parameter '" + p.name + "' of " + origin_ + " is missing");
    }
    config.push_back(value_from_json(*it));
  }
  return config;
}

bool ReplayEvaluator::contains(const Configuration& config) const {
  auto key = canonical_key(config);
  return key && index_.count(*key) > 0;
}

double ReplayEvaluator::optimum() const { return best().result.objective; }

const Observation& ReplayEvaluator::best() const {
  if (!best_) {
    throw InvalidInput(origin_ + " has no successful measurement, so its optimum is unknown");
  }
  return dataset_.entries[*best_];
}

std::size_t ReplayEvaluator::failed_count() const {
  std::size_t failed = 0;
  for (const auto& [key, i] : index_) failed += dataset_.entries[i].result.ok() ? 0 : 1;
  return failed;
}

ReplayInSpace::ReplayInSpace(ReplayEvaluator replay, SearchSpace space)
    : replay_(std::move(replay)), space_(std::move(space)) {
  const auto& file_space = replay_.space();
  for (const auto& p : space_.parameters()) {
    if (!file_space.index_of(p.name)) {
      throw InvalidInput("the space's parameter '" + p.name + "' is not one of " +
                         replay_.origin() + "'s (" + parameter_names(file_space) + ")");
    }
  }
  for (const auto& p : file_space.parameters()) {
    if (!space_.index_of(p.name)) {
      throw InvalidInput(replay_.origin() + "'s parameter '" + p.name +
                         "' is not one of the space's (" + parameter_names(space_) + ")");
    }
  }
  for (const auto& c : replay_.configurations()) {
    const auto named = file_space.config_to_json(c);
    Configuration own(space_.dimension());
    bool held = true;
    for (std::size_t i = 0; i < space_.dimension() && held; ++i) {
      const auto& p = space_.parameter(i);
      const auto position = p.index_of(value_from_json(named.at(p.name)));
      held = position.has_value();
      if (held) own[i] = p.values[*position];
    }
    if (held && space_.satisfies_constraints(own)) candidates_.push_back(std::move(own));
  }
  if (candidates_.empty()) {
    throw InvalidInput("none of the " + std::to_string(replay_.size()) + " configurations of " +
                       replay_.origin() +
                       " is valid in the space given (its values or constraints leave all out)");
  }
}

}  // namespace tunebase
