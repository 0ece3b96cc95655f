#include "tuner/prior.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>
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
  // The model of a prior (its subsample) does not depend on the order of the file's entries.
  sort_by_key(space, prior.observations,
              [](const Observation& o) -> const Configuration& { return o.config; });
  return prior;
}

Prior load_prior(const std::string& path, const SearchSpace& space,
                 std::vector<std::string>* notes) {
  const MeasuredDataset dataset = read_measurements(path);
  if (dataset.objective != "time") {
    throw InvalidInput("prior file " + path + " holds each entry's \"" + dataset.objective +
                       "\" as its objective (objective_higher_is_better), and prior files are "
                       "read as times: give a cache of times, or import it (tunebase import) "
                       "for studies of " +
                       dataset.objective + " to learn from");
  }
  if (notes) notes->insert(notes->end(), dataset.notes.begin(), dataset.notes.end());
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

Consensus consensus_best(const std::vector<Prior>& priors, const SearchSpace& space,
                         std::size_t count,
                         const std::function<bool(const Configuration&)>& allowed) {
  struct Tally {
    const Configuration* config = nullptr;  // from a success
    double sum = 0.0;
    std::size_t runs = 0;    // priors that ran it: the mean's denominator
    std::size_t ran_by = 0;  // distinct sources with a success that ran it
    std::size_t last_source = std::numeric_limits<std::size_t>::max();
  };
  // Two studies of one machine and input are two priors of one source: a source is counted
  // once, so that the sources that ran a configuration are never more than the sources. The
  // priors of one source are taken in a row for that.
  std::unordered_map<std::string, std::size_t> source_index;
  std::vector<std::size_t> order(priors.size());
  for (std::size_t i = 0; i < priors.size(); ++i) {
    order[i] = source_index.emplace(priors[i].source, source_index.size()).first->second;
  }
  std::vector<std::size_t> by_source(priors.size());
  std::iota(by_source.begin(), by_source.end(), std::size_t{0});
  std::stable_sort(by_source.begin(), by_source.end(),
                   [&](std::size_t a, std::size_t b) { return order[a] < order[b]; });
  // Each prior's allowed successes (best first, as signed objectives) and failures.
  struct Runs {
    std::vector<std::pair<double, const Observation*>> ok;
    std::vector<const Observation*> failed;
  };
  std::vector<Runs> runs(priors.size());
  std::unordered_set<std::size_t> sources_with_success;
  for (std::size_t i = 0; i < priors.size(); ++i) {
    const auto& p = priors[i];
    for (const auto& o : p.observations) {
      if (allowed && !allowed(o.config)) continue;
      if (o.result.ok()) {
        runs[i].ok.emplace_back(p.minimize ? o.result.objective : -o.result.objective, &o);
      } else {
        runs[i].failed.push_back(&o);
      }
    }
    if (!runs[i].ok.empty()) sources_with_success.insert(order[i]);
    std::stable_sort(runs[i].ok.begin(), runs[i].ok.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  std::unordered_map<std::string, Tally> tallies;
  Consensus out;
  for (const auto index : by_source) {
    const auto source = order[index];
    // Only a source with a success counts among the sources: one that only failed here ran
    // nothing to choose from. Its failures still count as the worst quantile.
    const bool counted = sources_with_success.count(source) > 0;
    const auto count_run = [&](Tally& t) {
      ++t.runs;
      if (counted && t.last_source != source) {
        t.last_source = source;
        ++t.ran_by;
      }
    };
    for (const auto* o : runs[index].failed) {
      auto& t = tallies[space.key(o->config)];
      t.sum += 1.0;
      count_run(t);
    }
    const auto& ok = runs[index].ok;
    for (std::size_t i = 0; i < ok.size(); ++i) {
      auto& t = tallies[space.key(ok[i].second->config)];
      t.sum += ok.size() > 1 ? static_cast<double>(i) / static_cast<double>(ok.size() - 1) : 0.0;
      count_run(t);
      if (!t.config) t.config = &ok[i].second->config;
    }
  }
  out.priors = sources_with_success.size();
  const std::size_t quorum = (out.priors + 1) / 2;
  struct Ranked {
    bool quorate;
    double mean;
    std::size_t ran_by;
    const std::string* key;
    const Configuration* config;
  };
  std::vector<Ranked> ranked;
  for (const auto& [key, t] : tallies) {
    if (!t.config) continue;  // it only failed
    ranked.push_back(
        {t.ran_by >= quorum, t.sum / static_cast<double>(t.runs), t.ran_by, &key, t.config});
  }
  const auto better = [](const Ranked& a, const Ranked& b) {
    if (a.quorate != b.quorate) return a.quorate;
    if (a.mean != b.mean) return a.mean < b.mean;
    if (a.ran_by != b.ran_by) return a.ran_by > b.ran_by;
    return *a.key < *b.key;
  };
  const std::size_t n = std::min(count, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(n), ranked.end(),
                    better);
  for (std::size_t i = 0; i < n; ++i) {
    out.best.push_back({*ranked[i].config, ranked[i].mean, ranked[i].ran_by});
  }
  return out;
}

bool priors_share_the_input(const std::vector<Prior>& priors,
                            const nlohmann::json& study_features) {
  std::unordered_map<std::string, double> seen;
  bool same = true;
  const auto check = [&](const nlohmann::json& features) {
    if (!features.is_object()) return;
    for (const auto& [name, v] : features.items()) {
      if (!v.is_number()) continue;
      const auto [it, fresh] = seen.emplace(name, v.get<double>());
      if (!fresh && it->second != v.get<double>()) same = false;
    }
  };
  for (const auto& p : priors) check(p.task_features);
  check(study_features);
  return same;
}

std::vector<Prior> priors_of_the_input(const std::vector<Prior>& priors,
                                       const nlohmann::json& study_features) {
  const bool described = study_features.is_object() &&
                         std::any_of(study_features.begin(), study_features.end(),
                                     [](const nlohmann::json& v) { return v.is_number(); });
  if (!described) {
    return priors_share_the_input(priors, study_features) ? priors : std::vector<Prior>{};
  }
  // Features that share no name with a prior's cannot tell its input from any other: only a
  // number both give, and equal, says it is this input ({"foo":1} is no stored input's).
  const auto shares_a_number = [&](const Prior& p) {
    if (!p.task_features.is_object()) return false;
    for (const auto& [name, v] : study_features.items()) {
      const auto it = p.task_features.find(name);
      if (v.is_number() && it != p.task_features.end() && it->is_number()) return true;
    }
    return false;
  };
  std::vector<Prior> out;
  for (const auto& p : priors) {
    if (shares_a_number(p) && priors_share_the_input({p}, study_features)) out.push_back(p);
  }
  return out;
}

std::vector<double> TaskFeatureScaling::scale(const nlohmann::json& features) const {
  std::vector<double> out(names.size(), kMissingFeature);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!features.is_object() || !features.contains(names[i]) || !features[names[i]].is_number()) {
      continue;
    }
    double v = features[names[i]].get<double>();
    if (log[i]) v = std::log(v);
    out[i] = high[i] > low[i] ? (v - low[i]) / (high[i] - low[i]) : kMissingFeature;
  }
  return out;
}

TaskFeatureScaling task_feature_scaling(const std::vector<Prior>& priors,
                                        const nlohmann::json& study_features) {
  std::map<std::string, std::vector<double>> values;
  auto collect = [&](const nlohmann::json& f) {
    if (!f.is_object()) return;
    for (const auto& [name, v] : f.items()) {
      if (v.is_number() && std::isfinite(v.get<double>())) values[name].push_back(v.get<double>());
    }
  };
  for (const auto& p : priors) collect(p.task_features);
  collect(study_features);
  TaskFeatureScaling s;
  for (auto& [name, v] : values) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    if (*lo == *hi) continue;  // the same everywhere: tells the model nothing
    const bool log = *lo > 0.0 && *hi / *lo > kLogFeatureRatio;
    s.names.push_back(name);
    s.log.push_back(log);
    s.low.push_back(log ? std::log(*lo) : *lo);
    s.high.push_back(log ? std::log(*hi) : *hi);
  }
  return s;
}

std::vector<Prior> nearest_inputs(std::vector<Prior> priors, const nlohmann::json& study_features,
                                  std::size_t per_source) {
  std::map<std::string, std::vector<std::size_t>> by_source;
  for (std::size_t i = 0; i < priors.size(); ++i) by_source[priors[i].source].push_back(i);
  if (std::all_of(by_source.begin(), by_source.end(),
                  [&](const auto& s) { return s.second.size() <= per_source; })) {
    return priors;
  }
  const auto scaling = task_feature_scaling(priors, study_features);
  const auto target = scaling.scale(study_features);
  std::vector<double> distance(priors.size(), 0.0);
  for (std::size_t i = 0; i < priors.size(); ++i) {
    const auto x = scaling.scale(priors[i].task_features);
    for (std::size_t f = 0; f < x.size(); ++f)
      distance[i] += (x[f] - target[f]) * (x[f] - target[f]);
  }
  std::vector<bool> keep(priors.size(), false);
  for (auto& [source, members] : by_source) {
    const std::size_t kept = std::min(per_source, members.size());
    std::partial_sort(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(kept),
                      members.end(), [&](std::size_t a, std::size_t b) {
                        return std::tie(distance[a], a) < std::tie(distance[b], b);
                      });
    for (std::size_t k = 0; k < kept; ++k) keep[members[k]] = true;
  }
  std::vector<Prior> out;
  for (std::size_t i = 0; i < priors.size(); ++i) {
    if (keep[i]) out.push_back(std::move(priors[i]));
  }
  return out;
}

std::string default_strategy(bool has_priors) { return has_priors ? "bo-transfer" : "bo"; }

}  // namespace tunebase
