#include "core/comparison.h"

#include <algorithm>
#include <boost/math/statistics/bivariate_statistics.hpp>
#include <map>
#include <numeric>
#include <set>

#include "core/error.h"

namespace tunebase {

namespace {

using Results = std::map<std::string, ConfigResult>;

bool better(double x, double y, bool minimize) { return minimize ? x < y : x > y; }

// One result per configuration: a configuration that ran once runs (its best value counts);
// one that never ran keeps its latest failure.
Results by_configuration(const MachineTrials& machine, bool minimize) {
  Results out;
  for (const auto& t : machine.trials) {
    auto [it, inserted] = out.try_emplace(t.config_key);
    auto& r = it->second;
    const bool ran = t.status == TrialStatus::ok;
    if (inserted || (ran && (r.status != TrialStatus::ok || better(t.value, r.value, minimize))) ||
        (!ran && r.status != TrialStatus::ok && t.trial_id > r.trial_id)) {
      r = {t.config_key, t.config, t.status, ran ? t.value : 0.0, t.trial_id};
    }
  }
  return out;
}

MachineSummary summary(const std::string& name, const Results& results, bool minimize) {
  MachineSummary s;
  s.machine = name;
  s.configurations = results.size();
  for (const auto& [key, r] : results) {
    if (r.status != TrialStatus::ok) {
      ++s.failed;
      continue;
    }
    ++s.ok;
    if (!s.best || better(r.value, s.best->value, minimize)) s.best = r;
  }
  return s;
}

BestElsewhere best_elsewhere(const MachineSummary& from, const MachineSummary& to,
                             const Results& to_results, bool minimize) {
  BestElsewhere b;
  b.from = from.machine;
  b.to = to.machine;
  if (!from.best) return b;
  b.config_key = from.best->config_key;
  const auto there = to_results.find(b.config_key);
  if (there == to_results.end()) return b;
  b.status = there->second.status;
  if (there->second.status != TrialStatus::ok) return b;
  b.value = there->second.value;
  // fraction of best = best_to / value (minimising), value / best_to (maximising)
  b.fraction_of_best = minimize ? to.best->value / *b.value : *b.value / to.best->value;
  return b;
}

// The keys of the k best of `common` by `values`, ties broken by key so that the choice is
// the same every time.
std::set<std::string> top_keys(const std::vector<const std::string*>& keys,
                               const std::vector<double>& values, std::size_t k, bool minimize) {
  std::vector<std::size_t> order(keys.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](std::size_t i, std::size_t j) {
                      if (values[i] != values[j]) return better(values[i], values[j], minimize);
                      return *keys[i] < *keys[j];
                    });
  std::set<std::string> out;
  for (std::size_t i = 0; i < k; ++i) out.insert(*keys[order[i]]);
  return out;
}

PairComparison compare_pair(const MachineSummary& sa, const Results& a, const MachineSummary& sb,
                            const Results& b, bool minimize) {
  PairComparison p;
  p.a = sa.machine;
  p.b = sb.machine;
  std::vector<const std::string*> keys;
  std::vector<double> va;
  std::vector<double> vb;
  std::vector<FailsOnOne> a_to_b;
  std::vector<FailsOnOne> b_to_a;
  for (const auto& [key, ra] : a) {
    const auto it = b.find(key);
    if (it == b.end()) continue;
    const auto& rb = it->second;
    ++p.measured_on_both;
    const bool ok_a = ra.status == TrialStatus::ok;
    const bool ok_b = rb.status == TrialStatus::ok;
    if (ok_a && ok_b) {
      keys.push_back(&key);
      va.push_back(ra.value);
      vb.push_back(rb.value);
    } else if (ok_a) {
      ++p.runs_on_a_fails_on_b;
      a_to_b.push_back({key, rb.config, sa.machine, sb.machine, rb.status, rb.trial_id});
    } else if (ok_b) {
      ++p.runs_on_b_fails_on_a;
      b_to_a.push_back({key, ra.config, sb.machine, sa.machine, ra.status, ra.trial_id});
    }
  }
  p.common = keys.size();
  if (p.common >= kMinCommonForCorrelation) p.spearman = spearman_correlation(va, vb);
  p.top_k = std::min(kTopK, p.common);
  if (p.top_k > 0) {
    const auto top_a = top_keys(keys, va, p.top_k, minimize);
    const auto top_b = top_keys(keys, vb, p.top_k, minimize);
    p.top_k_overlap = static_cast<std::size_t>(
        std::count_if(top_a.begin(), top_a.end(), [&](const auto& k) { return top_b.count(k); }));
  }
  p.a_best_on_b = best_elsewhere(sa, sb, b, minimize);
  p.b_best_on_a = best_elsewhere(sb, sa, a, minimize);
  p.fails_on_one = std::move(a_to_b);
  p.fails_on_one.insert(p.fails_on_one.end(), b_to_a.begin(), b_to_a.end());
  return p;
}

}  // namespace

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t i, std::size_t j) { return values[i] < values[j]; });
  std::vector<double> ranks(values.size());
  for (std::size_t start = 0; start < order.size();) {
    std::size_t end = start + 1;
    while (end < order.size() && values[order[end]] == values[order[start]]) ++end;
    // Tied values at sorted positions start..end-1 share ranks start+1..end: their mean.
    const double rank = 0.5 * static_cast<double>(start + 1 + end);
    for (std::size_t i = start; i < end; ++i) ranks[order[i]] = rank;
    start = end;
  }
  return ranks;
}

std::optional<double> spearman_correlation(const std::vector<double>& x,
                                           const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) return std::nullopt;
  const auto rx = average_ranks(x);
  const auto ry = average_ranks(y);
  const auto constant = [](const std::vector<double>& r) {
    return std::all_of(r.begin(), r.end(), [&](double v) { return v == r.front(); });
  };
  if (constant(rx) || constant(ry)) return std::nullopt;
  // rho = cov(rank x, rank y) / (sd(rank x) sd(rank y))
  return boost::math::statistics::correlation_coefficient(rx, ry);
}

MachineComparison compare_machines(const std::vector<MachineTrials>& machines, bool minimize) {
  if (machines.size() < 2) {
    throw InvalidInput("a comparison needs at least two machines, got " +
                       std::to_string(machines.size()));
  }
  std::set<std::string> names;
  for (const auto& m : machines) {
    if (!names.insert(m.machine).second) {
      throw InvalidInput("machine \"" + m.machine +
                         "\" is named twice; name each machine to compare once");
    }
  }
  MachineComparison out;
  out.minimize = minimize;
  std::vector<Results> results;
  for (const auto& m : machines) {
    results.push_back(by_configuration(m, minimize));
    out.machines.push_back(summary(m.machine, results.back(), minimize));
  }
  for (std::size_t i = 0; i < machines.size(); ++i) {
    for (std::size_t j = i + 1; j < machines.size(); ++j) {
      out.pairs.push_back(
          compare_pair(out.machines[i], results[i], out.machines[j], results[j], minimize));
    }
  }
  return out;
}

}  // namespace tunebase
