#include "api/priors.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "api/records_json.h"
#include "core/error.h"
#include "db/json_text.h"
#include "surrogates/transfer.h"
#include "tuner/session.h"

namespace tunebase::api {

namespace {

// Predicting the best configuration scores at most this many candidates (the enumerated valid
// set when it is smaller, else a uniform sample of kSampledPredictionCandidates).
constexpr std::size_t kMaxPredictionCandidates = 200000;
// A machine that measured a kernel on at least this many other inputs is predicted from those
// alone: how this very hardware ranks configurations carries to a new input better than other
// machines do (a CPU and a GPU disagree on SpMV formats), and with other machines' sources
// beside it, a zero-shot model weighs every source alike, whichever machine asks.
constexpr std::size_t kMinOwnInputs = 3;
constexpr std::size_t kSampledPredictionCandidates = 20000;
// A predicted best must be more likely to run than to fail.
constexpr double kMinFeasibility = 0.5;

// Fits done in this process when the fitted models were last saved.
std::atomic<std::size_t> g_saved_at_fit_count{0};

// The numeric features of `target` that lie well outside the range of every prior's input
// ("diagonal_zero_or_missing 733, measured inputs 0 .. 0"), in the features' order: what
// the prediction extrapolates along, where a configuration that ran on every measured input
// may fail (SOR on a matrix with zeros on its diagonal). Well outside: beyond half the
// measured span on the scale the model reads the feature on (logarithmic for positive values
// spanning a factor over kLogFeatureRatio), or any other value of one the same everywhere.
std::vector<std::string> features_outside_priors(const std::vector<Prior>& priors,
                                                 const nlohmann::json& target) {
  std::vector<std::string> out;
  if (!target.is_object()) return out;
  for (const auto& [name, value] : target.items()) {
    if (!value.is_number()) continue;
    const double x = value.get<double>();
    double low = std::numeric_limits<double>::infinity();
    double high = -low;
    for (const auto& p : priors) {
      const auto it =
          p.task_features.is_object() ? p.task_features.find(name) : p.task_features.end();
      if (it == p.task_features.end() || !it->is_number()) continue;
      low = std::min(low, it->get<double>());
      high = std::max(high, it->get<double>());
    }
    if (low > high || (x >= low && x <= high)) continue;
    const bool log = low > 0.0 && x > 0.0 && high / low > kLogFeatureRatio;
    const auto scaled = [&](double v) { return log ? std::log(v) : v; };
    const double margin = 0.5 * (scaled(high) - scaled(low));
    // A feature positive on every measured input (rows, nonzeros) and not on this one lies
    // outside them however wide their span.
    const bool sign_differs = low > 0.0 && x <= 0.0;
    if (!sign_differs && scaled(x) >= scaled(low) - margin && scaled(x) <= scaled(high) + margin) {
      continue;
    }
    const auto text = [](double v) {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%.4g", v);
      return std::string(buffer);
    };
    out.push_back(name + " " + text(x) + ", measured inputs " + text(low) + " .. " + text(high));
  }
  return out;
}

}  // namespace

nlohmann::json task_features_of(const db::TaskRecord& task) {
  return task.features.is_object() && !task.features.empty()
             ? task.features
             : numeric_task_features(task.description);
}

namespace {

// The priors `query` selects (priors_from_store) with the task each measured.
std::vector<std::pair<std::int64_t, Prior>> tasks_and_priors(const db::Store& store,
                                                             const SearchSpace& space,
                                                             const db::PriorQuery& query) {
  // The kernel's inputs in one query, not one per input: a kernel measured on thousands of
  // matrices has thousands.
  std::unordered_map<std::int64_t, nlohmann::json> task_features;
  for (const auto& task : store.list_tasks(query.kernel_name)) {
    task_features.emplace(task.id.value, task_features_of(task));
  }
  // (machine name, task id) -> prior, ordered so that the result does not depend on ids.
  std::map<std::pair<std::string, std::int64_t>, Prior> grouped;
  for (auto& t : store.prior_trials(query)) {
    if (t.status == TrialStatus::pending) continue;
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
    auto& prior = grouped[{t.machine_name, t.task.value}];
    if (prior.source.empty()) {
      prior.source = t.machine_name;
      prior.task_features = features->second;
      prior.minimize = t.direction == db::Direction::minimize;
    }
    Measurement m = t.status == TrialStatus::ok
                        ? Measurement::success(t.objective)
                        : Measurement::failure(t.status, "measured on " + t.machine_name);
    prior.observations.push_back({std::move(config), std::move(m)});
  }
  std::vector<std::pair<std::int64_t, Prior>> out;
  for (auto& [key, prior] : grouped) {
    if (prior.ok_count() == 0) continue;
    // In key order, as priors read from files are: the subsample a prior's model is fitted on
    // does not depend on the order its trials were stored in.
    sort_by_key(space, prior.observations,
                [](const Observation& o) -> const Configuration& { return o.config; });
    out.emplace_back(key.second, std::move(prior));
  }
  return out;
}

}  // namespace

std::vector<Prior> priors_from_store(const db::Store& store, const SearchSpace& space,
                                     const db::PriorQuery& query) {
  std::vector<Prior> out;
  for (auto& [task, prior] : tasks_and_priors(store, space, query)) out.push_back(std::move(prior));
  return out;
}

PriorCache::Version PriorCache::version_of(const db::Store& store) {
  return {store.data_version(), store.changes_made()};
}

template <typename T, typename Read>
std::shared_ptr<const T> PriorCache::get(
    std::unordered_map<std::string, std::shared_ptr<const T>>& entries, std::size_t max_entries,
    Version version, const std::string& key, Read read) {
  {
    std::shared_lock lock(mutex_);
    if (version == version_) {
      if (const auto it = entries.find(key); it != entries.end()) return it->second;
    }
  }
  // Read without the lock (seconds for a large kernel): two askers may both read it.
  auto value = std::make_shared<const T>(read());
  std::unique_lock lock(mutex_);
  ++reads_;
  // Versions only grow: one read before a write that another asker has seen is not kept.
  if (version < version_) return value;
  if (version != version_) {
    studies_.clear();
    counts_.clear();
    priors_.clear();
    version_ = version;
  }
  if (entries.size() >= max_entries) entries.clear();
  entries[key] = value;
  return value;
}

std::shared_ptr<const std::vector<db::StudyRecord>> PriorCache::studies(const db::Store& store,
                                                                        Version version,
                                                                        const std::string& kernel) {
  return get(studies_, kMaxKernels, version, kernel, [&] { return store.list_studies(kernel); });
}

std::shared_ptr<const std::map<db::StudyId, db::TrialCounts>> PriorCache::study_trial_counts(
    const db::Store& store, Version version, const std::string& kernel, db::Direction direction) {
  return get(
      counts_, kMaxKernels, version, kernel + '\n' + std::string(db::to_string(direction)),
      [&] { return store.study_trial_counts({.kernel_name = kernel, .direction = direction}); });
}

std::vector<Prior> PriorCache::priors(const db::Store& store, Version version,
                                      const SearchSpace& space, const db::PriorQuery& query) {
  if (query.limit > 0 || query.ok_only || query.exclude_study) {
    return priors_from_store(store, space, query);
  }
  // Every (machine, input) of the version; the query's filters on them are applied below.
  db::PriorQuery all = query;
  all.machines.clear();
  all.exclude_machine.reset();
  all.exclude_target.reset();
  all.task.reset();
  const std::string key = space.fingerprint() + '\n' + all.kernel_name + '\n' + all.version + '\n' +
                          all.objective + '\n' + all.unit + '\n' +
                          (all.direction ? std::string(db::to_string(*all.direction)) : "") + '\n' +
                          (all.measurement ? db::json_text(*all.measurement) : "any");
  const auto sources = get(priors_, kMaxPriorSets, version, key, [&] {
    Sources read;
    for (auto& [task, prior] : tasks_and_priors(store, space, all)) {
      read.push_back({task, std::move(prior)});
    }
    return read;
  });
  const auto name_of = [&](std::optional<db::MachineId> id) {
    return id ? store.get_machine(*id).name : std::string();
  };
  const std::string excluded_machine = name_of(query.exclude_machine);
  const std::string target_machine =
      name_of(query.exclude_target ? std::optional(query.exclude_target->first) : std::nullopt);
  std::vector<Prior> out;
  for (const auto& [task, prior] : *sources) {
    const bool excluded =
        (!query.machines.empty() && std::find(query.machines.begin(), query.machines.end(),
                                              prior.source) == query.machines.end()) ||
        (query.exclude_machine && prior.source == excluded_machine) ||
        (query.exclude_target && prior.source == target_machine &&
         task == query.exclude_target->second.value) ||
        (query.task && task != query.task->value);
    if (!excluded) out.push_back(prior);
  }
  return out;
}

std::size_t PriorCache::reads() const {
  std::shared_lock lock(mutex_);
  return reads_;
}

std::optional<db::PriorQuery> target_prior_query(const db::KernelRecord& kernel,
                                                 db::MachineId machine, db::TaskId task,
                                                 const std::string& objective,
                                                 db::Direction direction,
                                                 const nlohmann::json& settings) {
  const bool is_object = settings.is_object();
  if (is_object && settings.contains("transfer") && settings["transfer"].is_boolean() &&
      !settings["transfer"].get<bool>()) {
    return std::nullopt;
  }
  db::PriorQuery query;
  query.kernel_name = kernel.name;
  query.version = kernel.version;
  query.exclude_target = std::make_pair(machine, task);
  query.objective = objective;
  query.direction = direction;
  if (is_object && settings.contains("unit") && settings["unit"].is_string()) {
    query.unit = settings["unit"].get<std::string>();
  }
  // Times measured otherwise (a PETSc solve to another tolerance, by another clock) rank
  // configurations otherwise: learned from only alike (db::measurement_of).
  query.measurement = db::measurement_of(settings);
  if (is_object && settings.contains("prior_machines") && settings["prior_machines"].is_array()) {
    for (const auto& m : settings["prior_machines"]) {
      if (m.is_string()) query.machines.push_back(m.get<std::string>());
    }
    if (query.machines.empty()) return std::nullopt;
  }
  return query;
}

void require_prior_machines(const db::Store& store, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (store.find_machine(name)) continue;
    std::string known;
    for (const auto& m : store.list_machines()) known += (known.empty() ? "" : ", ") + m.name;
    throw InvalidInput("unknown prior machine \"" + name +
                       "\"; known machines: " + (known.empty() ? std::string("none yet") : known));
  }
}

bool has_priors(const db::Store& store, std::optional<db::PriorQuery> query) {
  if (!query) return false;
  query->ok_only = true;
  query->limit = 1;
  return !store.prior_trials(*query).empty();
}

std::optional<db::PriorQuery> study_prior_query(const db::StudyRecord& study) {
  db::KernelRecord kernel;
  kernel.name = study.kernel_name;
  kernel.version = study.kernel_version;
  return target_prior_query(kernel, study.machine_id, study.task_id, study.objective,
                            study.direction, study.settings);
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

nlohmann::json predicted_best_json(const std::string& kernel, const std::string& machine,
                                   const PredictedBest& p) {
  nlohmann::json based_on{{"trials", p.trials},
                          {"machines", p.machines},
                          {"inputs", p.inputs},
                          {"failed_here", p.failed_here},
                          {"kernel_version", p.kernel_version},
                          {"model", p.model},
                          {"weights", p.weights},
                          {"chosen_from", p.from_measurements ? "measurements" : "model"},
                          {"this_machine_only", p.this_machine_only}};
  if (p.from_measurements) {
    based_on["sources"] = p.sources;
    based_on["sources_that_ran_it"] = p.sources_that_ran_it;
    based_on["mean_quantile"] = p.mean_quantile;
  }
  if (!p.features_outside.empty()) based_on["features_outside_measured"] = p.features_outside;
  return {{"source", "predicted"},
          {"kernel", kernel},
          {"machine", machine},
          {"config", p.config},
          {"objective", p.forecast.mean},
          {"unit", p.unit.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.unit)},
          {"lower", p.forecast.lower},
          {"upper", p.forecast.upper},
          {"probability_feasible", p.forecast.probability_feasible},
          {"based_on", std::move(based_on)}};
}

std::string features_outside_note(const PredictedBest& p) {
  if (p.features_outside.empty()) return {};
  constexpr std::size_t kNamed = 3;
  std::string named;
  for (std::size_t i = 0; i < std::min(kNamed, p.features_outside.size()); ++i) {
    named += (i ? "; " : "") + p.features_outside[i];
  }
  if (p.features_outside.size() > kNamed) {
    named += "; and " + std::to_string(p.features_outside.size() - kNamed) + " more";
  }
  return "the input lies outside every measured input (" + named +
         "): what ran on those may run slowly or fail on it, whatever the interval and "
         "probability_feasible say; measure it before relying on it";
}

namespace {

// predict_best; `pool_inputs` false: an input without features that other machines measured
// is predicted from their measurements of it only (`*restricted` says whether it was).
std::optional<PredictedBest> predict_best_from(
    const db::Store& store, const std::string& kernel_name, std::optional<db::MachineId> machine,
    std::optional<db::TaskId> task, db::Direction direction, const std::string& objective,
    const nlohmann::json& input_features, const std::string& input_version, bool pool_inputs,
    bool* restricted, PriorCache* cache) {
  // Read before anything is read at it.
  const auto data_version = cache ? PriorCache::version_of(store) : PriorCache::Version{};
  // An input is measured under the kernel version its studies used (a kernel's space may
  // depend on its input: PETSc offers cg and icc only for symmetric matrices); without one,
  // the latest version.
  std::string version = input_version;
  const auto studies_read =
      cache ? cache->studies(store, data_version, kernel_name)
            : std::make_shared<const std::vector<db::StudyRecord>>(store.list_studies(kernel_name));
  const auto& studies = *studies_read;
  if (task) {
    std::int64_t latest = 0;
    for (const auto& study : studies) {
      if (study.task_id == *task && study.id.value > latest) {
        latest = study.id.value;
        version = study.kernel_version;
      }
    }
  }
  const auto kernel = store.find_kernel(kernel_name, version);
  if (!kernel) return std::nullopt;
  const auto space = SearchSpace::from_json(kernel->space);
  // Successful trials of each study of this version and direction, counted once.
  std::unordered_map<std::int64_t, std::int64_t> successes;
  const auto counts_read =
      cache ? cache->study_trial_counts(store, data_version, kernel_name, direction)
            : std::make_shared<const std::map<db::StudyId, db::TrialCounts>>(
                  store.study_trial_counts({.kernel_name = kernel_name, .direction = direction}));
  const auto& counts = *counts_read;
  for (const auto& study : studies) {
    const auto c = counts.find(study.id);
    if (study.kernel_version == kernel->version && c != counts.end()) {
      successes[study.id.value] = c->second.ok;
    }
  }
  const auto successes_of = [&](const db::StudyRecord& study) -> std::int64_t {
    const auto it = successes.find(study.id.value);
    return it == successes.end() ? 0 : it->second;
  };
  // The name most successful trials give, of those `name_of` names (empty: not counted).
  const auto most_measured = [&](const auto& name_of) {
    std::map<std::string, std::int64_t> measured;
    for (const auto& study : studies) {
      if (const std::string name = name_of(study); !name.empty()) {
        measured[name] += successes_of(study);
      }
    }
    const auto most =
        std::max_element(measured.begin(), measured.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    return most == measured.end() ? std::string() : most->first;
  };
  // One objective is predicted: the one asked for, else the one most successful trials of the
  // version in this direction measure (a study of energy beside one of time would otherwise
  // be one source with it).
  const std::string predicted_objective =
      !objective.empty() ? objective : most_measured([&](const db::StudyRecord& study) {
        return successes_of(study) > 0 ? study.objective : std::string();
      });
  db::PriorQuery query;
  query.kernel_name = kernel_name;
  query.version = kernel->version;
  query.objective = predicted_objective;
  query.direction = direction;
  nlohmann::json target_features =
      input_features.is_object() ? input_features : nlohmann::json::object();
  if (task) target_features = task_features_of(store.get_task(*task));
  // What the target measured is no prior of itself; an input measured nowhere leaves every
  // measurement, this machine's of other inputs too, to predict from.
  const bool new_input = !task && !input_version.empty();
  // Studies that measured what is predicted.
  const auto same_question = [&](const db::StudyRecord& study) {
    return study.objective == predicted_objective && successes_of(study) > 0;
  };
  // Sources that measure time in different units are read in the one most of the kernel
  // version's successful trials are in (by short name: "s" and "seconds" are one).
  query.unit = most_measured([&](const db::StudyRecord& study) {
    return same_question(study) ? short_time_unit(db::objective_unit(study)) : std::string();
  });
  // Times measured otherwise (a PETSc solve to another tolerance) rank configurations
  // otherwise: predicted from the studies measured as the newest one was, as the measured best
  // answers (db::measurement_of).
  const db::StudyRecord* newest = nullptr;
  for (const auto& study : studies) {
    if (same_question(study) && (!newest || study.id.value > newest->id.value)) newest = &study;
  }
  if (newest) query.measurement = db::measurement_of(newest->settings);
  if (machine && task) {
    query.exclude_target = std::make_pair(*machine, *task);
  } else if (machine && !new_input) {
    query.exclude_machine = *machine;
  }
  if (!pool_inputs && task && target_features.empty()) {
    // An input without features cannot be told from the others by the model: when other
    // machines measured it, their measurements of it are what predicts it.
    auto same_input = query;
    same_input.task = *task;
    if (has_priors(store, same_input)) {
      query.task = *task;
      *restricted = true;
    }
  }
  auto priors = cache ? cache->priors(store, data_version, space, query)
                      : priors_from_store(store, space, query);
  if (priors.empty()) return std::nullopt;
  bool this_machine_only = false;
  if (machine && (task || new_input)) {
    const std::string own = store.get_machine(*machine).name;
    const auto own_inputs =
        static_cast<std::size_t>(std::count_if(priors.begin(), priors.end(), [&](const Prior& p) {
          return p.source == own && p.ok_count() > 0;
        }));
    if (own_inputs >= kMinOwnInputs) {
      std::erase_if(priors, [&](const Prior& p) { return p.source != own; });
      this_machine_only = true;
    }
  }
  // A model of every input a machine measured costs a fit of seconds per machine, and carries
  // a new input's neighbours no better than a model of those neighbours alone.
  const auto outside = features_outside_priors(priors, target_features);
  priors = nearest_inputs(std::move(priors), target_features, kMaxPredictionInputsPerSource);

  PredictedBest out;
  std::unordered_set<std::string> machines;
  for (const auto& p : priors) {
    out.trials += p.observations.size();
    machines.insert(p.source);
  }
  out.machines = machines.size();
  out.inputs = priors.size();
  out.kernel_version = kernel->version;
  out.this_machine_only = this_machine_only;
  // The unit the sources' values are in, when their studies agree on one.
  std::unordered_set<std::string> units;
  for (const auto& study : studies) {
    if (same_question(study) && machines.count(study.machine_name)) {
      const auto unit = db::objective_unit(study);
      if (is_time_unit(query.unit) && !is_time_unit(unit)) continue;  // not among the priors
      units.insert(is_time_unit(unit) && is_time_unit(query.unit) ? query.unit : unit);
    }
  }
  if (units.size() == 1) out.unit = *units.begin();

  // What already failed on the target (this machine, and this task when given) is not
  // predicted to be its best, whatever the other machines say.
  std::unordered_set<std::string> failed_here;
  if (machine && !new_input) {
    db::PriorQuery own;
    own.kernel_name = kernel_name;
    own.version = kernel->version;
    own.machines = {store.get_machine(*machine).name};
    for (const auto& t : store.prior_trials(own)) {
      if (t.status != TrialStatus::ok && (!task || t.task == *task)) {
        failed_here.insert(t.config_key);
      }
    }
    out.failed_here = failed_here.size();
  }
  const auto allowed = [&](const Configuration& c) {
    return space.is_valid(c) && failed_here.count(space.key(c)) == 0;
  };

  // The sources' own measurements choose (consensus_best): a build system is answered with a
  // configuration that built and ran well elsewhere. The model's mean is not used to choose: its
  // sources are subsampled, and the lowest of thousands of interpolations is an optimistic artefact
  // (on convolution_hub it was a block width of 176 between the priors' best 128 and 256,
  // measured 3.7x slower than either). The model then forecasts the chosen configuration on this
  // machine. With no measured configuration, the model ranks every valid one (or a sample of a
  // space too large to enumerate).
  // Priors of this input: their consensus. Priors of other inputs: the model, whose inputs
  // include the task features, ranks what they ran successfully.
  // The sources that measured this very input speak for it, whatever other inputs say.
  const auto this_input = priors_of_the_input(priors, target_features);
  if (this_input.empty()) out.features_outside = outside;
  const Consensus consensus =
      this_input.empty() ? Consensus{} : consensus_best(this_input, space, 1, allowed);
  const bool chosen = !consensus.best.empty();
  const bool minimize = direction == db::Direction::minimize;
  std::vector<Configuration> candidates;
  if (chosen) {
    const auto& top = consensus.best.front();
    candidates.push_back(top.config);
    out.from_measurements = true;
    out.sources = consensus.priors;
    out.sources_that_ran_it = top.ran_by;
    out.mean_quantile = top.mean_quantile;
  } else {
    std::unordered_set<std::string> seen;
    for (const auto& p : priors) {
      for (const auto& o : p.observations) {
        if (o.result.ok() && allowed(o.config) && seen.insert(space.key(o.config)).second) {
          candidates.push_back(o.config);
        }
      }
    }
  }
  if (candidates.empty()) {
    if (space.enumerable() && space.valid_count().value_or(0) <= kMaxPredictionCandidates) {
      candidates = space.valid_configurations();
    } else {
      Rng rng(static_cast<std::uint64_t>(kernel->id.value));
      for (std::size_t i = 0; i < kSampledPredictionCandidates; ++i) {
        candidates.push_back(space.sample(rng));
      }
    }
  }
  std::erase_if(candidates, [&](const Configuration& c) { return !allowed(c); });
  SessionOptions options;
  options.strategy = default_strategy(true);
  options.seed = static_cast<std::uint64_t>(kernel->id.value);
  options.minimize = minimize;
  options.priors = std::move(priors);
  options.task_features = target_features;
  Session session(space, options);
  const auto forecasts = session.forecast(candidates);
  if (forecasts.empty()) return std::nullopt;
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < forecasts.size(); ++i) {
    if (!chosen && forecasts[i].probability_feasible < kMinFeasibility) continue;
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

}  // namespace

std::optional<PredictedBest> predict_best(const db::Store& store, const std::string& kernel_name,
                                          std::optional<db::MachineId> machine,
                                          std::optional<db::TaskId> task, db::Direction direction,
                                          const std::string& objective,
                                          const nlohmann::json& input_features,
                                          const std::string& input_version, PriorCache* cache) {
  bool restricted = false;
  auto predicted = predict_best_from(store, kernel_name, machine, task, direction, objective,
                                     input_features, input_version, false, &restricted, cache);
  // Too few measurements of the input elsewhere to predict from: every input's, as for one
  // measured nowhere else.
  if (!predicted && restricted) {
    predicted = predict_best_from(store, kernel_name, machine, task, direction, objective,
                                  input_features, input_version, true, &restricted, cache);
  }
  return predicted;
}

}  // namespace tunebase::api
