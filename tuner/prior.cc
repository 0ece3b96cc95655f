#include "tuner/prior.h"

#include <algorithm>
#include <filesystem>
#include <unordered_set>

#include "core/error.h"

namespace tunebase {

namespace {

void collect_numbers(const nlohmann::json& j, const std::string& prefix, nlohmann::json& out) {
  if (j.is_number()) {
    out[prefix.empty() ? "value" : prefix] = j.get<double>();
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      collect_numbers(value, prefix.empty() ? key : prefix + "_" + key, out);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      collect_numbers(j[i], (prefix.empty() ? "" : prefix + "_") + std::to_string(i), out);
    }
  }
}

}  // namespace

std::size_t Prior::ok_count() const {
  return static_cast<std::size_t>(
      std::count_if(observations.begin(), observations.end(),
                    [](const Observation& o) { return o.result.ok(); }));
}

nlohmann::json numeric_task_features(const nlohmann::json& description) {
  nlohmann::json out = nlohmann::json::object();
  collect_numbers(description, "", out);
  return out;
}

Prior prior_from_dataset(const MeasuredDataset& dataset, const SearchSpace& space,
                         std::string source) {
  Prior prior;
  prior.source = source.empty() ? dataset.device_name : std::move(source);
  if (!dataset.problem_size.is_null()) {
    prior.task_features = numeric_task_features({{"problem_size", dataset.problem_size}});
  }
  prior.observations.reserve(dataset.entries.size());
  for (const auto& entry : dataset.entries) {
    try {
      prior.observations.push_back(
          {space.config_from_json(dataset.space.config_to_json(entry.config)), entry.result});
    } catch (const InvalidInput&) {
      // Outside the study's space (another version of the kernel, or a restricted space).
    }
  }
  return prior;
}

Prior load_prior(const std::string& path, const SearchSpace& space) {
  const MeasuredDataset dataset = read_measurements(path);
  std::string source = dataset.device_name;
  if (source.empty()) source = std::filesystem::path(path).filename().string();
  Prior prior = prior_from_dataset(dataset, space, source);
  if (prior.observations.empty()) {
    throw InvalidInput("prior file " + path + ": none of its " +
                       std::to_string(dataset.entries.size()) +
                       " configurations is valid in the search space");
  }
  return prior;
}

std::vector<Configuration> best_prior_configurations(const std::vector<Prior>& priors,
                                                     const SearchSpace& space, std::size_t count) {
  std::vector<std::vector<const Observation*>> ranked;
  for (const auto& prior : priors) {
    std::vector<const Observation*> ok;
    for (const auto& o : prior.observations) {
      if (o.result.ok()) ok.push_back(&o);
    }
    const double sign = prior.minimize ? 1.0 : -1.0;
    std::stable_sort(ok.begin(), ok.end(), [&](const Observation* a, const Observation* b) {
      return sign * a->result.objective < sign * b->result.objective;
    });
    ranked.push_back(std::move(ok));
  }
  std::vector<Configuration> out;
  std::unordered_set<std::string> seen;
  for (std::size_t rank = 0; out.size() < count; ++rank) {
    bool any = false;
    for (const auto& list : ranked) {
      if (rank >= list.size()) continue;
      any = true;
      if (out.size() < count && seen.insert(space.key(list[rank]->config)).second) {
        out.push_back(list[rank]->config);
      }
    }
    if (!any) break;
  }
  return out;
}

std::string default_strategy(bool has_priors) { return has_priors ? "bo-transfer" : "bo"; }

}  // namespace tunebase
