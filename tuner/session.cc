#include "tuner/session.h"

#include <algorithm>

#include "core/error.h"

namespace tunebase {

namespace {

// Tries of a proposal that found nothing in a space that is not exhausted.
constexpr std::uint64_t kProposeAttempts = 3;

// Enumerated spaces with more valid configurations are searched as sampled spaces are (random
// candidates per proposal, then local steps): scoring every one costs the candidate posterior
// observations x candidates doubles (1.6 GB at 200 observations of 1,000,000 candidates), and
// it held copies, encodings and keys of every configuration besides.
constexpr std::size_t kMaxScoredCandidates = 100'000;

}  // namespace

Session::Session(SearchSpace space, SessionOptions options)
    : space_(std::move(space)), options_(std::move(options)) {
  priors_ = std::move(options_.priors);
  options_.priors.clear();
  if (options_.strategy == "auto") options_.strategy = default_strategy(!priors_.empty());
  auto strategy_options = options_.strategy_options;
  if (!strategy_options.is_object()) strategy_options = nlohmann::json::object();
  if (!strategy_options.contains("seed")) strategy_options["seed"] = options_.seed;
  strategy_ = make_strategy(options_.strategy, strategy_options);

  if (!options_.candidates.empty()) {
    candidates_ = std::move(options_.candidates);
    options_.candidates.clear();
  } else if (space_.enumerable()) {
    const std::size_t count = space_.valid_configurations().size();
    if (count == 0) throw InvalidInput("no configuration satisfies the constraints");
    if (count <= kMaxScoredCandidates) candidates_ = space_.valid_configurations();
  }
  if (!candidates_.empty()) {
    const std::size_t dim = space_.encoded_dimension();
    encoded_candidates_.reserve(candidates_.size() * dim);
    candidate_index_.reserve(candidates_.size());
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
      const auto x = space_.encode(candidates_[i]);
      encoded_candidates_.insert(encoded_candidates_.end(), x.begin(), x.end());
      candidate_index_.emplace(space_.key(candidates_[i]), i);
    }
    state_.candidates = &candidates_;
    state_.encoded_candidates = &encoded_candidates_;
    state_.candidate_index = &candidate_index_;
  }
  state_.space = &space_;
  if (!priors_.empty()) state_.priors = &priors_;
  state_.task_features = options_.task_features;
  state_.minimize = options_.minimize;
  state_.budget = options_.budget;
}

Session::~Session() = default;

std::vector<Configuration> Session::propose(std::size_t n) {
  const auto start = std::chrono::steady_clock::now();
  // The generator depends on the seed and the history length only, so a restored session
  // draws what an uninterrupted one would have drawn.
  // A strategy that found nothing in a space that is not exhausted (random draws in a huge
  // space where valid configurations are rare) tries again with other draws, a few times.
  std::vector<Configuration> out;
  for (std::uint64_t attempt = 0; out.empty() && attempt < kProposeAttempts; ++attempt) {
    if (attempt > 0 && exhausted()) break;
    Rng rng(options_.seed * 0x9e3779b97f4a7c15ULL + state_.taken.size() +
            attempt * 0xbf58476d1ce4e5b9ULL);
    auto proposals = strategy_->propose(state_, n, rng);
    for (auto& c : proposals) {
      if (out.size() == n) break;
      auto key = space_.key(c);
      // Guard the promises every strategy makes: valid, a candidate, never repeated.
      if (!space_.is_valid(c) || !state_.is_candidate(c) || !take(c, std::move(key))) continue;
      state_.pending.push_back(c);
      out.push_back(std::move(c));
    }
  }
  last_propose_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

void Session::observe(const Configuration& config, const Measurement& result) {
  space_.check(config);
  const auto key = space_.key(config);
  auto pending = std::find_if(state_.pending.begin(), state_.pending.end(),
                              [&](const Configuration& p) { return space_.key(p) == key; });
  if (pending != state_.pending.end()) {
    state_.pending.erase(pending);
  } else if (state_.taken.count(key)) {
    throw Conflict("configuration " + space_.config_to_json(config).dump() +
                   " was already observed in this study");
  } else {
    take(config, key);
  }
  state_.observations.push_back({config, result});
}

bool Session::take(const Configuration& config, std::string key) {
  if (!state_.taken.insert(std::move(key)).second) return false;
  if (state_.is_candidate(config)) ++taken_candidates_;
  return true;
}

void Session::release(const Configuration& config) {
  const auto key = space_.key(config);
  auto pending = std::find_if(state_.pending.begin(), state_.pending.end(),
                              [&](const Configuration& p) { return space_.key(p) == key; });
  if (pending == state_.pending.end()) return;
  state_.pending.erase(pending);
  state_.taken.erase(key);
  if (state_.is_candidate(config)) --taken_candidates_;
}

void Session::hold(const Configuration& config) {
  if (take(config, space_.key(config))) state_.pending.push_back(config);
}

void Session::restore(const std::vector<Observation>& finished,
                      const std::vector<Configuration>& pending) {
  state_.observations.clear();
  state_.pending.clear();
  state_.taken.clear();
  taken_candidates_ = 0;
  for (const auto& o : finished) {
    take(o.config, space_.key(o.config));
    state_.observations.push_back(o);
  }
  for (const auto& c : pending) {
    if (take(c, space_.key(c))) state_.pending.push_back(c);
  }
}

std::optional<Observation> Session::best() const {
  std::optional<Observation> best;
  for (const auto& o : state_.observations) {
    if (!o.result.ok()) continue;
    const bool better = !best || (options_.minimize ? o.result.objective < best->result.objective
                                                    : o.result.objective > best->result.objective);
    if (better) best = o;
  }
  return best;
}

std::vector<Forecast> Session::forecast(const std::vector<Configuration>& configs) {
  auto* strategy = model();
  return strategy ? strategy->forecast(state_, configs) : std::vector<Forecast>{};
}

std::vector<ParameterRelevance> Session::relevance() {
  auto* strategy = model();
  return strategy ? strategy->relevance(state_) : std::vector<ParameterRelevance>{};
}

bool Session::exhausted() const {
  const auto count = candidate_count();
  return count && taken_candidates_ >= *count;
}

std::optional<std::size_t> Session::candidate_count() const {
  if (!candidates_.empty()) return candidates_.size();
  return space_.valid_count();
}

}  // namespace tunebase
