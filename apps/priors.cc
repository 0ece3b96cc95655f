#include "apps/priors.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.h"

namespace tunebase::cli {

std::vector<Prior> priors_from_store(const db::Store& store, const SearchSpace& space,
                                     const std::string& kernel_name, const std::string& version,
                                     const PriorSelection& selection) {
  const auto trials = store.trials_for_kernel(kernel_name, version, selection.exclude_machine,
                                              selection.exclude_study);
  std::unordered_map<std::int64_t, std::string> machine_names;
  std::unordered_map<std::int64_t, nlohmann::json> task_features;
  // (machine name, task id) -> prior, ordered so that the result does not depend on ids.
  std::map<std::pair<std::string, std::int64_t>, Prior> grouped;
  for (const auto& t : trials) {
    if (t.status == TrialStatus::pending) continue;
    if (t.direction != selection.direction) continue;
    if (!selection.objective.empty() && t.objective_name != selection.objective) continue;
    auto name = machine_names.find(t.machine.value);
    if (name == machine_names.end()) {
      name = machine_names.emplace(t.machine.value, store.get_machine(t.machine).name).first;
    }
    if (!selection.machines.empty() &&
        std::find(selection.machines.begin(), selection.machines.end(), name->second) ==
            selection.machines.end()) {
      continue;
    }
    auto features = task_features.find(t.task.value);
    if (features == task_features.end()) {
      const auto task = store.get_task(t.task);
      nlohmann::json f = task.features.is_object() && !task.features.empty()
                             ? task.features
                             : numeric_task_features(task.description);
      features = task_features.emplace(t.task.value, std::move(f)).first;
    }
    Configuration config;
    try {
      config = space.config_from_json(t.config);
    } catch (const InvalidInput&) {
      continue;  // not valid in this version's space
    }
    auto& prior = grouped[{name->second, t.task.value}];
    if (prior.source.empty()) {
      prior.source = name->second;
      prior.task_features = features->second;
      prior.minimize = selection.direction == db::Direction::minimize;
    }
    Measurement m = t.status == TrialStatus::ok
                        ? Measurement::success(t.objective)
                        : Measurement::failure(t.status, "measured on " + name->second);
    prior.observations.push_back({std::move(config), std::move(m)});
  }
  std::vector<Prior> out;
  for (auto& [key, prior] : grouped) {
    if (selection.max_per_source > 0 && prior.observations.size() > selection.max_per_source) {
      prior.observations.erase(
          prior.observations.begin(),
          prior.observations.end() - static_cast<long>(selection.max_per_source));
    }
    if (prior.ok_count() == 0) continue;
    out.push_back(std::move(prior));
  }
  return out;
}

}  // namespace tunebase::cli
