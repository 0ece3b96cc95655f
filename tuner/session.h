// Session: the ask/tell object that drives every tuning path (CLI sweep, HTTP, benchmark).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/space.h"
#include "core/trial.h"
#include "tuner/bo.h"
#include "tuner/prior.h"
#include "tuner/strategy.h"

namespace tunebase {

struct SessionOptions {
  std::string strategy = "bo";
  nlohmann::json strategy_options = nlohmann::json::object();
  std::uint64_t seed = 0;
  std::size_t budget = 100;
  bool minimize = true;
  /// Restrict proposals to these configurations (simulation mode on a measured file). When
  /// empty, the candidates are the enumerated valid set if the space is enumerable.
  std::vector<Configuration> candidates;
  /// Measurements of the same kernel elsewhere (other machines, other inputs), used by the
  /// transfer strategies; a strategy of "auto" becomes default_strategy(!priors.empty()).
  std::vector<Prior> priors;
  /// Task features of this study, matched with those of the priors.
  nlohmann::json task_features = nlohmann::json::object();
};

/// Ask/tell tuning of one study. propose() returns configurations that are valid, never
/// observed or pending before, and distinct; observe() records a result. A session can be
/// rebuilt from stored trials with restore(), after which it proposes as if it had never
/// stopped (proposals depend only on the seed and the recorded history).
///
/// Not thread-safe: one owner drives it (the HTTP layer serialises calls per study).
class Session {
 public:
  Session(SearchSpace space, SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const SearchSpace& space() const { return space_; }
  const SessionOptions& options() const { return options_; }

  /// Up to n new configurations, recorded as pending. Fewer (maybe none) when the candidate
  /// set is exhausted.
  std::vector<Configuration> propose(std::size_t n = 1);
  /// Records the result of a configuration (pending or not: external measurements count).
  /// Throws InvalidInput when the configuration is not valid in the space, Conflict when it
  /// was already observed.
  void observe(const Configuration& config, const Measurement& result);
  /// Forgets a pending configuration (its worker vanished) so that it may be proposed again.
  void release(const Configuration& config);
  /// Records a configuration leased elsewhere (another process sharing the study) as pending,
  /// so that it is not proposed; nothing when it is observed or pending already.
  void hold(const Configuration& config);
  /// Rebuilds the state from stored trials (finished ones and pending ones).
  void restore(const std::vector<Observation>& finished, const std::vector<Configuration>& pending);

  const std::vector<Observation>& observations() const { return state_.observations; }
  std::size_t pending_count() const { return state_.pending.size(); }
  std::optional<Observation> best() const;
  /// No candidate is left untaken (only meaningful when candidates are explicit).
  bool exhausted() const;
  /// Number of candidates (explicit or enumerated); nullopt when sampled.
  std::optional<std::size_t> candidate_count() const;
  /// Diagnostics of the strategy's last proposal.
  nlohmann::json diagnostics() const { return strategy_->diagnostics(); }
  /// Wall time of the last propose() call, milliseconds.
  double last_propose_ms() const { return last_propose_ms_; }
  /// The strategy's forecasts for `configs` (empty when it carries no model or has too little
  /// data). With priors and a transfer strategy this works before any observation: the
  /// forecasts are then marked from_priors (zero-shot).
  std::vector<Forecast> forecast(const std::vector<Configuration>& configs);
  /// The model's relevance of each parameter (ModelBasedStrategy::relevance); empty when the
  /// strategy carries no model or has too little data.
  std::vector<ParameterRelevance> relevance();
  /// The strategy's model (null for strategies without one) and the state it is fitted to.
  ModelBasedStrategy* model() { return dynamic_cast<ModelBasedStrategy*>(strategy_.get()); }
  const TuningState& state() const { return state_; }
  const std::vector<Prior>& priors() const { return priors_; }

 private:
  /// Adds `config` (whose key is `key`) to the taken set; false when it was there.
  bool take(const Configuration& config, std::string key);

  SearchSpace space_;
  SessionOptions options_;
  std::unique_ptr<SearchStrategy> strategy_;
  std::vector<Configuration> candidates_;
  std::vector<double> encoded_candidates_;
  std::unordered_map<std::string, std::size_t> candidate_index_;
  std::vector<Prior> priors_;
  TuningState state_;
  /// Keys in state_.taken that are candidates: it also holds valid configurations observed
  /// that are not (in simulation mode), which leave the candidates as they were.
  std::size_t taken_candidates_ = 0;
  double last_propose_ms_ = 0.0;
};

}  // namespace tunebase
