#include "api/priors.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "surrogates/transfer.h"
#include "tuner/session.h"

namespace tunebase::api {

namespace {

// Predicting the best configuration scores at most this many candidates (the enumerated valid
// set when it is smaller, else a uniform sample of kSampledPredictionCandidates).
constexpr std::size_t kMaxPredictionCandidates = 200000;
constexpr std::size_t kSampledPredictionCandidates = 20000;
// A predicted best must be more likely to run than to fail.
constexpr double kMinFeasibility = 0.5;

// Fits done in this process when the fitted models were last saved.
std::atomic<std::size_t> g_saved_at_fit_count{0};

}  // namespace

nlohmann::json task_features_of(const db::TaskRecord& task) {
  return task.features.is_object() && !task.features.empty()
             ? task.features
             : numeric_task_features(task.description);
}

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
    if (selection.exclude_target && t.machine == selection.exclude_target->first &&
        t.task == selection.exclude_target->second) {
      continue;
    }
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
      features =
          task_features.emplace(t.task.value, task_features_of(store.get_task(t.task))).first;
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

std::vector<Prior> study_priors(const db::Store& store, const db::StudyRecord& study,
                                const SearchSpace& space) {
  const auto& settings = study.settings;
  if (settings.is_object() && settings.contains("transfer") && settings["transfer"].is_boolean() &&
      !settings["transfer"].get<bool>()) {
    return {};
  }
  PriorSelection selection;
  selection.exclude_target = std::make_pair(study.machine_id, study.task_id);
  selection.exclude_study = study.id;
  selection.objective = study.objective;
  selection.direction = study.direction;
  if (settings.is_object() && settings.contains("prior_machines") &&
      settings["prior_machines"].is_array()) {
    for (const auto& m : settings["prior_machines"]) {
      if (m.is_string()) selection.machines.push_back(m.get<std::string>());
    }
    if (selection.machines.empty()) return {};
  }
  return priors_from_store(store, space, study.kernel_name, study.kernel_version, selection);
}

std::size_t load_fitted_models(const db::Store& store) {
  const auto saved = store.fitted_models();
  try {
    surrogates::SourceModelCache::process_cache().load(saved);
  } catch (const InvalidInput& e) {
    // A model saved by another build is a cache entry, not data: fit again rather than fail.
    spdlog::warn("ignoring the fitted models saved in {}: {}", store.path(), e.what());
    return 0;
  }
  return saved.size();
}

void save_fitted_models(db::Store& store) {
  auto& cache = surrogates::SourceModelCache::process_cache();
  const std::size_t fits = cache.fit_count();
  if (store.read_only() || fits == g_saved_at_fit_count.load()) return;
  store.save_fitted_models(cache.to_json());
  g_saved_at_fit_count.store(fits);
}

std::optional<PredictedBest> predict_best(const db::Store& store, const std::string& kernel_name,
                                          std::optional<db::MachineId> machine,
                                          std::optional<db::TaskId> task, db::Direction direction,
                                          const std::string& objective) {
  const auto kernel = store.find_kernel(kernel_name);
  if (!kernel) return std::nullopt;
  const auto space = SearchSpace::from_json(kernel->space);
  PriorSelection selection;
  selection.objective = objective;
  selection.direction = direction;
  nlohmann::json target_features = nlohmann::json::object();
  if (machine && task) {
    selection.exclude_target = std::make_pair(*machine, *task);
    target_features = task_features_of(store.get_task(*task));
  } else if (machine) {
    selection.exclude_machine = *machine;
  }
  auto priors = priors_from_store(store, space, kernel_name, kernel->version, selection);
  if (priors.empty()) return std::nullopt;

  PredictedBest out;
  std::unordered_set<std::string> machines;
  for (const auto& p : priors) {
    out.trials += p.observations.size();
    machines.insert(p.source);
  }
  out.machines = machines.size();
  out.kernel_version = kernel->version;

  // Candidates: every valid configuration when the space can be enumerated, else a sample.
  std::vector<Configuration> candidates;
  if (space.enumerable() && space.valid_count().value_or(0) <= kMaxPredictionCandidates) {
    candidates = space.valid_configurations();
  } else {
    Rng rng(static_cast<std::uint64_t>(kernel->id.value));
    for (std::size_t i = 0; i < kSampledPredictionCandidates; ++i) {
      candidates.push_back(space.sample(rng));
    }
  }
  SessionOptions options;
  options.strategy = default_strategy(true);
  options.seed = static_cast<std::uint64_t>(kernel->id.value);
  options.minimize = direction == db::Direction::minimize;
  options.priors = std::move(priors);
  options.task_features = target_features;
  Session session(space, options);
  const auto forecasts = session.forecast(candidates);
  if (forecasts.empty()) return std::nullopt;
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < forecasts.size(); ++i) {
    if (forecasts[i].probability_feasible < kMinFeasibility) continue;
    const bool better = !best || (options.minimize ? forecasts[i].mean < forecasts[*best].mean
                                                   : forecasts[i].mean > forecasts[*best].mean);
    if (better) best = i;
  }
  if (!best) return std::nullopt;
  out.config = space.config_to_json(candidates[*best]);
  out.forecast = forecasts[*best];
  out.model = options.strategy;
  const auto diagnostics = session.diagnostics();
  if (diagnostics.contains("rgpe_weights")) out.weights = diagnostics["rgpe_weights"];
  return out;
}

}  // namespace tunebase::api
