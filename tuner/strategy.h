// Search strategies: given what a study has seen, propose configurations to measure next.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/space.h"
#include "core/trial.h"
#include "tuner/prior.h"

namespace tunebase {

/// What a strategy may look at: the space, the candidate set (when it is explicit), every
/// finished observation and the keys of everything taken (observed or pending).
struct TuningState {
  const SearchSpace* space = nullptr;
  /// The configurations that may be proposed: the enumerated valid set (at most 100,000
  /// configurations), or the entries of a measured file in simulation mode. Null when the
  /// space is larger or has reals: then strategies sample from the space.
  const std::vector<Configuration>* candidates = nullptr;
  /// Encoded candidates (SearchSpace::encode), row-major, candidates->size() x encoded dim.
  const std::vector<double>* encoded_candidates = nullptr;
  /// SearchSpace::key -> position in *candidates.
  const std::unordered_map<std::string, std::size_t>* candidate_index = nullptr;
  std::vector<Observation> observations;
  /// SearchSpace::key of every configuration observed or pending.
  std::unordered_set<std::string> taken;
  /// Configurations proposed and not yet observed.
  std::vector<Configuration> pending;
  bool minimize = true;
  /// Total evaluations the study may make (used by space-filling designs).
  std::size_t budget = 100;
  /// Measurements of the same kernel on other machines or inputs, for transfer strategies
  /// (`bo-transfer`, `rgpe`, `stacked`, `prior-best`); others ignore them. Null: none.
  const std::vector<Prior>* priors = nullptr;
  /// Task features of this study ({"n": 4096, ...}; numbers are used), matched with the
  /// priors' task_features so that measurements on other inputs inform this one.
  nlohmann::json task_features = nlohmann::json::object();

  bool has_priors() const { return priors != nullptr && !priors->empty(); }

  bool is_taken(const Configuration& c) const { return taken.count(space->key(c)) > 0; }
  /// Whether `c` may be proposed at all: in the candidate set when there is one, otherwise
  /// valid in the space.
  bool is_candidate(const Configuration& c) const;
  /// Observations that succeeded.
  std::size_t ok_count() const;
};

/// A strategy proposes up to `n` new configurations: valid, not taken, and distinct. It may
/// return fewer when the space is (nearly) exhausted. Strategies keep no hidden state between
/// calls that cannot be rebuilt from the TuningState, so that a session can be restored.
class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  virtual std::string name() const = 0;
  virtual std::vector<Configuration> propose(const TuningState& state, std::size_t n, Rng& rng) = 0;
  /// What the strategy can tell a user about its last proposal (model weights, acquisition
  /// values, predicted objective...). Empty by default.
  virtual nlohmann::json diagnostics() const { return nlohmann::json::object(); }
};

/// Options that strategies read by name (a JSON object). A key no strategy knows is refused by
/// make_strategy; a known key that one strategy does not use (a bo option given to random) is
/// ignored, so one set of options can serve the strategies of a benchmark.
using StrategyOptions = nlohmann::json;

/// Every key any strategy reads, for messages and checks.
const std::vector<std::string>& strategy_option_names();

/// Typed, range-checked reads of strategy options; absent or null keys give the fallback.
/// Throws InvalidInput naming the key, the value and the allowed range.
class OptionReader {
 public:
  OptionReader(const StrategyOptions& options, std::string owner);
  /// A whole number in [min, max].
  std::uint64_t count(const char* key, std::uint64_t fallback, std::uint64_t min,
                      std::uint64_t max) const;
  /// A finite number in [min, max].
  double number(const char* key, double fallback, double min, double max) const;
  /// Like number(), but an explicit null means "none" (std::nullopt), absence the fallback.
  std::optional<double> optional_number(const char* key, std::optional<double> fallback, double min,
                                        double max) const;
  /// A string (the caller checks which ones it allows).
  std::string text(const char* key, const std::string& fallback) const;

 private:
  const nlohmann::json* find(const char* key) const;
  const StrategyOptions& options_;
  std::string owner_;
};

/// Creates a strategy by name: random, lhs, exhaustive, ga, bo, and the transfer strategies
/// bo-transfer, rgpe, stacked, prior-best (which behave as bo when a study has no priors).
/// Throws InvalidInput listing the known names for an unknown one.
std::unique_ptr<SearchStrategy> make_strategy(const std::string& name,
                                              const StrategyOptions& options = {});
std::vector<std::string> strategy_names();
/// InvalidInput naming an option `strategy` does not read (a bo option given to random), with
/// the options it takes. Checked where a study is created, where such an option would be kept
/// and ignored without a word; make_strategy (a stored study's, a benchmark's options shared by
/// several strategies) still ignores it.
void require_own_options(const std::string& strategy, const StrategyOptions& options);
/// Whether `strategy` learns from priors (the transfer strategies); the others ignore them.
bool learns_from_priors(const std::string& strategy);
/// InvalidInput when `strategy` cannot search `space` at all: exhaustive search of a space that
/// cannot be enumerated (checked before a study is stored, not at its first proposal).
void require_searchable(const std::string& strategy, const SearchSpace& space);

/// Helpers shared by strategies.
/// Up to n untaken configurations drawn uniformly (from the candidates, or the space).
std::vector<Configuration> random_untaken(const TuningState& state, std::size_t n, Rng& rng,
                                          const std::unordered_set<std::string>& also_taken = {});
/// Points of a Latin hypercube design held at once. A larger design (a budget of up to 10^9)
/// is a sequence of independent designs of this many points.
inline constexpr std::size_t kMaxLatinHypercubePoints = 10'000;
/// Up to n untaken configurations from a Latin hypercube design of `design_size` points over
/// the parameters (fixed by `seed`), continuing where the state left off; each point is
/// snapped to the nearest free candidate. Falls back to random when the design runs out.
/// `also_taken`: keys to treat as taken besides the state's (a caller's earlier picks).
std::vector<Configuration> latin_hypercube_proposals(
    const TuningState& state, std::size_t n, std::uint64_t seed, std::size_t design_size, Rng& rng,
    const std::unordered_set<std::string>& also_taken = {});

}  // namespace tunebase
