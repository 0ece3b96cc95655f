// The model-free strategies (random, lhs, exhaustive, ga) and the table of every strategy.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "tuner/bo.h"
#include "tuner/strategy.h"

namespace tunebase {

namespace {

// Attempts at drawing an untaken configuration from a space with no candidate list.
constexpr std::size_t kMaxSampleAttempts = 10'000;
// Rejected draws one proposal may spend on a huge space with rare valid configurations
// (about a second of constraint checks).
constexpr std::size_t kMaxSampleDraws = 2'000'000;
// The GA keeps this many of the best observations as its population.
constexpr std::size_t kGaPopulation = 20;
// Below this many successes the GA has nothing to recombine and samples at random.
constexpr std::size_t kGaMinParents = 4;
constexpr std::size_t kGaRepairAttempts = 30;

double squared_distance(const double* a, const std::vector<double>& b) {
  double d = 0.0;
  for (std::size_t k = 0; k < b.size(); ++k) d += (a[k] - b[k]) * (a[k] - b[k]);
  return d;
}

class RandomSearch final : public SearchStrategy {
 public:
  std::string name() const override { return "random"; }
  std::vector<Configuration> propose(const TuningState& state, std::size_t n, Rng& rng) override {
    return random_untaken(state, n, rng);
  }
};

InvalidInput not_enumerable(const SearchSpace& space) {
  return InvalidInput(
      "exhaustive search needs an enumerable space (all parameters discrete, at most " +
      std::to_string(SearchSpace::kMaxEnumeratedValid) +
      " valid configurations, and a product "
      "of at most " +
      std::to_string(static_cast<long long>(SearchSpace::kMaxEnumerate)) +
      " points or one whose pruned walk stays within " +
      std::to_string(static_cast<long long>(SearchSpace::kMaxEnumerationVisits)) +
      " steps); this one " +
      (!space.all_discrete() ? std::string("has real parameters")
       : space.cartesian_size() <= SearchSpace::kMaxEnumerate
           ? "has more than " + std::to_string(SearchSpace::kMaxEnumeratedValid) +
                 " valid configurations"
           : "has a product of " +
                 std::to_string(static_cast<long long>(std::min(space.cartesian_size(), 9e18))) +
                 " points, too many to visit") +
      "; choose another strategy (bo, random, ga, lhs)");
}

class ExhaustiveSearch final : public SearchStrategy {
 public:
  std::string name() const override { return "exhaustive"; }
  std::vector<Configuration> propose(const TuningState& state, std::size_t n, Rng&) override {
    // Without explicit candidates (a space too large to score in full), its valid set.
    const auto* all = state.candidates;
    if (!all && state.space->enumerable()) all = &state.space->valid_configurations();
    if (!all) throw not_enumerable(*state.space);
    // From where the last proposal began: everything before it was taken then, and scanning
    // the whole list for every proposal took minutes over 11,000 candidates. One given back
    // since (a lease that ended) is found by a pass from the start when the rest is taken.
    // The cursor is the one state a strategy keeps between calls, and it only saves time: a
    // restored session (cursor 0) proposes the same set, a given-back configuration first
    // rather than last.
    if (all != list_ || all->size() != list_size_) {
      list_ = all;
      list_size_ = all->size();
      cursor_ = 0;
    }
    std::vector<Configuration> out;
    bool moved = false;
    for (std::size_t i = cursor_; i < all->size() && out.size() < n; ++i) {
      if (state.is_taken((*all)[i])) continue;
      if (!moved) cursor_ = i;
      moved = true;
      out.push_back((*all)[i]);
    }
    // Nothing ahead: going round, the first found there is where the next proposal begins
    // (from the end of the list, every later proposal scanned the whole list again).
    const std::size_t end = moved ? cursor_ : all->size();
    for (std::size_t i = 0; i < end && out.size() < n; ++i) {
      if (state.is_taken((*all)[i])) continue;
      if (!moved) cursor_ = i;
      moved = true;
      out.push_back((*all)[i]);
    }
    return out;
  }

 private:
  const std::vector<Configuration>* list_ = nullptr;
  std::size_t list_size_ = 0;
  std::size_t cursor_ = 0;
};

// Latin hypercube over the parameters, each design point snapped to the nearest untaken
// candidate. The design depends only on the seed and the budget, so a restored session
// continues the same design.
class LatinHypercube final : public SearchStrategy {
 public:
  explicit LatinHypercube(std::uint64_t seed) : seed_(seed) {}
  std::string name() const override { return "lhs"; }
  std::vector<Configuration> propose(const TuningState& state, std::size_t n, Rng& rng) override {
    return latin_hypercube_proposals(state, n, seed_, std::max<std::size_t>(state.budget, n), rng);
  }

 private:
  std::uint64_t seed_;
};

class GeneticSearch final : public SearchStrategy {
 public:
  std::string name() const override { return "ga"; }
  std::vector<Configuration> propose(const TuningState& state, std::size_t n, Rng& rng) override {
    std::vector<const Observation*> population;
    for (const auto& o : state.observations) {
      if (o.result.ok()) population.push_back(&o);
    }
    if (population.size() < kGaMinParents) return random_untaken(state, n, rng);
    const double sign = state.minimize ? 1.0 : -1.0;
    std::sort(population.begin(), population.end(), [&](const auto* a, const auto* b) {
      return sign * a->result.objective < sign * b->result.objective;
    });
    // Strong elitism: the best quarter of what was seen, between kGaMinParents and
    // kGaPopulation members.
    population.resize(std::clamp(population.size() / 4, kGaMinParents, kGaPopulation));

    const auto& space = *state.space;
    std::unordered_set<std::string> chosen;
    std::vector<Configuration> out;
    std::uniform_int_distribution<std::size_t> pick(0, population.size() - 1);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    // Binary tournament: the better of two random members (the population is sorted).
    auto tournament = [&] { return population[std::min(pick(rng), pick(rng))]; };
    const double mutation_rate = 1.0 / static_cast<double>(space.dimension());
    while (out.size() < n) {
      bool placed = false;
      for (std::size_t attempt = 0; attempt < kGaRepairAttempts && !placed; ++attempt) {
        const auto& a = tournament()->config;
        const auto& b = tournament()->config;
        Configuration child(a.size());
        for (std::size_t i = 0; i < a.size(); ++i) child[i] = unit(rng) < 0.5 ? a[i] : b[i];
        // Mutate each parameter with probability 1/d; always at least one when the child is
        // already taken (crossover of near-identical parents).
        std::vector<bool> mutate(child.size());
        for (std::size_t i = 0; i < child.size(); ++i) mutate[i] = unit(rng) < mutation_rate;
        if (state.taken.count(space.key(child))) {
          mutate[std::uniform_int_distribution<std::size_t>(0, child.size() - 1)(rng)] = true;
        }
        for (std::size_t i = 0; i < child.size(); ++i) {
          if (!mutate[i]) continue;
          auto neighbours = space.neighbours(child, rng);
          std::vector<Configuration> along;
          for (auto& nb : neighbours) {
            if (!same_value(nb[i], child[i])) along.push_back(std::move(nb));
          }
          if (!along.empty()) {
            child = along[std::uniform_int_distribution<std::size_t>(0, along.size() - 1)(rng)];
          }
        }
        const auto key = space.key(child);
        if (state.is_candidate(child) && !state.taken.count(key) && !chosen.count(key)) {
          chosen.insert(key);
          out.push_back(std::move(child));
          placed = true;
        }
      }
      if (!placed) {
        auto fallback = random_untaken(state, 1, rng, chosen);
        if (fallback.empty()) break;
        chosen.insert(space.key(fallback.front()));
        out.push_back(std::move(fallback.front()));
      }
    }
    return out;
  }
};

// Every strategy takes a seed (make_strategy checks it, whoever reads it).
constexpr const char* kSeedKey = "seed";

// The keys the Bayesian optimisation strategies read besides the seed (tuner/bo.cc).
constexpr const char* kBayesianOptimizationKeys[] = {"initial_design",
                                                     "refit_every",
                                                     "refit_below",
                                                     "candidate_samples",
                                                     "max_model_points",
                                                     "acquisition",
                                                     "kappa",
                                                     "min_feasible",
                                                     "covariance",
                                                     "output",
                                                     "lengthscale_location",
                                                     "short_start",
                                                     "rgpe_samples",
                                                     "prior_points",
                                                     "prior_best_fraction",
                                                     "prior_best",
                                                     "consensus_first",
                                                     "local_every",
                                                     "local_radius"};

// Builds a strategy from its checked options and seed.
using StrategyFactory = std::unique_ptr<SearchStrategy> (*)(const std::string& name,
                                                            const StrategyOptions& options,
                                                            std::uint64_t seed);

template <class Strategy>
std::unique_ptr<SearchStrategy> make_model_free(const std::string&, const StrategyOptions&,
                                                std::uint64_t) {
  return std::make_unique<Strategy>();
}

std::unique_ptr<SearchStrategy> make_latin_hypercube(const std::string&, const StrategyOptions&,
                                                     std::uint64_t seed) {
  return std::make_unique<LatinHypercube>(seed);
}

template <TransferMode mode>
std::unique_ptr<SearchStrategy> make_bo(const std::string& name, const StrategyOptions& options,
                                        std::uint64_t) {
  return make_bayesian_optimization(options, mode, name);
}

// One strategy as make_strategy builds it and everything else lists it: strategy_names() (the
// API's enum, the CLI's help and checks, the tests' list), the option keys make_strategy
// accepts, learns_from_priors(), require_searchable().
struct StrategyEntry {
  const char* name = nullptr;
  StrategyFactory make = nullptr;
  // The options it reads besides the seed.
  std::span<const char* const> option_keys = {};
  // Reads priors (the transfer strategies); the others ignore them.
  bool learns_from_priors = false;
  // Walks the whole space in order: a space that cannot be enumerated is refused up front.
  bool enumerates = false;
  // Kernel Tuner's name of the same search, pointed to when given (nullptr: none).
  const char* kernel_tuner_name = nullptr;
};

// Adding a strategy is adding its entry (and its class). The order is the order of listings.
constexpr StrategyEntry kStrategies[] = {
    {.name = "random", .make = make_model_free<RandomSearch>, .kernel_tuner_name = "random_sample"},
    {.name = "lhs", .make = make_latin_hypercube},
    {.name = "exhaustive",
     .make = make_model_free<ExhaustiveSearch>,
     .enumerates = true,
     .kernel_tuner_name = "brute_force"},
    {.name = "ga",
     .make = make_model_free<GeneticSearch>,
     .kernel_tuner_name = "genetic_algorithm"},
    {.name = "bo",
     .make = make_bo<TransferMode::none>,
     .option_keys = kBayesianOptimizationKeys,
     .kernel_tuner_name = "bayes_opt"},
    // Transfer strategies; without priors in the state they are plain bo.
    {.name = "bo-transfer",
     .make = make_bo<TransferMode::rgpe>,
     .option_keys = kBayesianOptimizationKeys,
     .learns_from_priors = true},
    {.name = "rgpe",
     .make = make_bo<TransferMode::rgpe>,
     .option_keys = kBayesianOptimizationKeys,
     .learns_from_priors = true},
    {.name = "stacked",
     .make = make_bo<TransferMode::stacked>,
     .option_keys = kBayesianOptimizationKeys,
     .learns_from_priors = true},
    {.name = "prior-best",
     .make = make_bo<TransferMode::none>,
     .option_keys = kBayesianOptimizationKeys,
     .learns_from_priors = true},
};

const StrategyEntry* find_strategy(std::string_view name) {
  for (const auto& entry : kStrategies) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}

}  // namespace

std::size_t TuningState::ok_count() const {
  return static_cast<std::size_t>(
      std::count_if(observations.begin(), observations.end(),
                    [](const Observation& o) { return o.result.ok(); }));
}

bool TuningState::is_candidate(const Configuration& c) const {
  if (candidate_index) return candidate_index->count(space->key(c)) > 0;
  return space->is_valid(c);
}

std::vector<Configuration> random_untaken(const TuningState& state, std::size_t n, Rng& rng,
                                          const std::unordered_set<std::string>& also_taken) {
  const auto& space = *state.space;
  std::vector<Configuration> out;
  std::unordered_set<std::string> chosen;
  auto free = [&](const std::string& key) {
    return !state.taken.count(key) && !also_taken.count(key) && !chosen.count(key);
  };
  if (state.candidates && !space.samples_uniformly()) {
    // Each free candidate as often as the space's sampling weighs it (log-uniform along an
    // integer range declared on a log scale).
    const auto& cands = *state.candidates;
    std::vector<double> weight(cands.size());
    double total = 0.0;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      weight[i] = free(space.key(cands[i])) ? space.sampling_weight(cands[i]) : 0.0;
      total += weight[i];
    }
    while (out.size() < n && total > 0.0) {
      double at = std::uniform_real_distribution<double>(0.0, total)(rng);
      std::size_t i = 0;
      while (i + 1 < cands.size() && (weight[i] == 0.0 || at >= weight[i])) at -= weight[i++];
      while (i > 0 && weight[i] == 0.0) --i;  // rounding ran past the last free one
      total -= weight[i];
      weight[i] = 0.0;
      out.push_back(cands[i]);
    }
    return out;
  }
  if (state.candidates) {
    const auto& cands = *state.candidates;
    const std::size_t used = state.taken.size() + also_taken.size();
    // Rejection while most candidates are free; an explicit list of the free ones otherwise.
    if (used * 2 < cands.size()) {
      std::uniform_int_distribution<std::size_t> pick(0, cands.size() - 1);
      for (std::size_t attempt = 0; out.size() < n && attempt < 64 * (n + 1); ++attempt) {
        const auto& c = cands[pick(rng)];
        auto key = space.key(c);
        if (free(key)) {
          chosen.insert(std::move(key));
          out.push_back(c);
        }
      }
      if (out.size() == n) return out;
    }
    std::vector<std::size_t> remaining;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (free(space.key(cands[i]))) remaining.push_back(i);
    }
    std::shuffle(remaining.begin(), remaining.end(), rng);
    for (std::size_t i = 0; i < remaining.size() && out.size() < n; ++i) {
      out.push_back(cands[remaining[i]]);
    }
    return out;
  }
  // A space whose constraints allow little may give fewer (none, this time) rather than fail.
  std::size_t draws = kMaxSampleDraws;
  for (std::size_t attempt = 0; out.size() < n && attempt < kMaxSampleAttempts; ++attempt) {
    auto sampled = space.try_sample(rng, draws);
    if (!sampled) break;
    auto c = std::move(*sampled);
    auto key = space.key(c);
    if (free(key)) {
      chosen.insert(std::move(key));
      out.push_back(std::move(c));
    }
  }
  // Valid configurations so rare that the draws found none: the defaults or the first values,
  // when they are valid (what made the space acceptable at all).
  for (auto& c : space.valid_defaults()) {
    if (out.size() >= n) break;
    if (auto key = space.key(c); free(key)) {
      chosen.insert(std::move(key));
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<Configuration> latin_hypercube_proposals(
    const TuningState& state, std::size_t n, std::uint64_t seed, std::size_t design_size, Rng& rng,
    const std::unordered_set<std::string>& also_taken) {
  const auto& space = *state.space;
  const std::size_t d = space.dimension();
  design_size = std::max<std::size_t>(design_size, 1);
  // The design: one random permutation of strata per parameter, jittered inside each stratum.
  // A larger design is a sequence of blocks of kMaxLatinHypercubePoints points, each a design
  // of its own, made when a proposal reaches it: a design over a budget of 10^9 (which a sweep
  // accepts) held 10^9 doubles per parameter, built again for every proposal. The first block
  // is the design of a budget of that size.
  const std::size_t block_size = std::min(design_size, kMaxLatinHypercubePoints);
  std::vector<std::vector<double>> unit(d, std::vector<double>(block_size));
  std::optional<std::size_t> block;  // the one `unit` holds
  auto make_block = [&](std::size_t b) {
    Rng design_rng(seed ^ 0x9e3779b97f4a7c15ULL ^ (b * 0xbf58476d1ce4e5b9ULL));
    std::uniform_real_distribution<double> jitter(0.0, 1.0);
    std::vector<std::size_t> strata(block_size);
    for (std::size_t i = 0; i < d; ++i) {
      std::iota(strata.begin(), strata.end(), 0);
      std::shuffle(strata.begin(), strata.end(), design_rng);
      for (std::size_t k = 0; k < block_size; ++k) {
        unit[i][k] =
            (static_cast<double>(strata[k]) + jitter(design_rng)) / static_cast<double>(block_size);
      }
    }
    block = b;
  };
  auto design_point = [&](std::size_t k) {
    // A design within one block goes round it again when the proposals outrun it.
    const std::size_t b = design_size > block_size ? k / block_size : 0;
    if (block != b) make_block(b);
    Configuration c(d);
    for (std::size_t i = 0; i < d; ++i) {
      const auto& p = space.parameter(i);
      const double u = unit[i][k % block_size];
      c[i] = p.kind == ParamKind::real ? Value(unit_to_real(p, u)) : discrete_at(p, u);
    }
    return c;
  };

  std::vector<Configuration> out;
  std::unordered_set<std::string> chosen = also_taken;  // not proposed again
  // Which candidates are taken or chosen, found once per call: keying every candidate for
  // every design point made a batch of 1,000 from 21,504 candidates take 1.2 s. A list that
  // names a configuration twice (its keys outnumber the index) counts each copy as its first.
  const bool snapping = state.candidates && state.encoded_candidates;
  std::vector<char> blocked;
  std::vector<std::size_t> first_listed;  // empty: every candidate has a key of its own
  if (snapping) {
    const auto& cands = *state.candidates;
    const auto* index = state.candidate_index;
    std::unordered_map<std::string, std::size_t> own_index;
    if (!index || index->size() != cands.size()) {
      first_listed.resize(cands.size());
      for (std::size_t i = 0; i < cands.size(); ++i) {
        first_listed[i] = own_index.emplace(space.key(cands[i]), i).first->second;
      }
      index = &own_index;
    }
    blocked.assign(cands.size(), 0);
    for (const auto* keys : {&state.taken, &also_taken}) {
      for (const auto& key : *keys) {
        if (const auto it = index->find(key); it != index->end()) blocked[it->second] = 1;
      }
    }
  }
  auto position = [&](std::size_t i) { return first_listed.empty() ? i : first_listed[i]; };
  const std::size_t cursor = state.taken.size();
  for (std::size_t k = cursor; out.size() < n && k < cursor + n + block_size; ++k) {
    Configuration target = design_point(k);
    if (snapping) {
      const auto x = space.encode(target);
      const std::size_t dim = x.size();
      const auto& cands = *state.candidates;
      // Categorical choices first, in the order the space declares them: keep the free
      // candidates with the design's value of each categorical parameter when there are any.
      // In a conditional space (a method and the parameters only it reads) the method is
      // chosen as the design says; by distance alone a design point would snap to the method
      // with the most free parameters, since the others pin theirs to a default.
      std::vector<std::size_t> pool;
      for (std::size_t i = 0; i < cands.size(); ++i) {
        if (!blocked[position(i)]) pool.push_back(i);
      }
      if (pool.empty()) break;  // exhausted
      for (std::size_t p = 0; p < d; ++p) {
        if (space.parameter(p).kind != ParamKind::categorical) continue;
        std::vector<std::size_t> matching;
        for (std::size_t i : pool) {
          if (same_value(cands[i][p], target[p])) matching.push_back(i);
        }
        if (!matching.empty()) pool.swap(matching);
      }
      // Then the nearest of those in the encoded (unit cube) geometry.
      double best = std::numeric_limits<double>::infinity();
      std::size_t best_i = cands.size();
      for (std::size_t i : pool) {
        const double dist = squared_distance(state.encoded_candidates->data() + i * dim, x);
        if (dist < best) {
          best = dist;
          best_i = i;
        }
      }
      if (best_i == cands.size()) break;  // exhausted
      blocked[position(best_i)] = 1;
      chosen.insert(space.key(cands[best_i]));
      out.push_back(cands[best_i]);
      continue;
    }
    const auto key = space.key(target);
    if (space.is_valid(target) && !state.taken.count(key) && !chosen.count(key)) {
      chosen.insert(key);
      out.push_back(std::move(target));
    }
  }
  if (out.size() < n) {
    auto more = random_untaken(state, n - out.size(), rng, chosen);
    for (auto& c : more) out.push_back(std::move(c));
  }
  return out;
}

bool learns_from_priors(const std::string& strategy) {
  const auto* entry = find_strategy(strategy);
  return entry && entry->learns_from_priors;
}

void require_searchable(const std::string& strategy, const SearchSpace& space) {
  const auto* entry = find_strategy(strategy);
  if (entry && entry->enumerates && !space.enumerable()) throw not_enumerable(space);
}

void require_own_options(const std::string& strategy, const StrategyOptions& options) {
  const auto* entry = find_strategy(strategy);
  if (!entry || !options.is_object()) return;  // make_strategy says what is wrong
  std::vector<std::string> own = {kSeedKey};
  own.insert(own.end(), entry->option_keys.begin(), entry->option_keys.end());
  for (const auto& [key, value] : options.items()) {
    if (std::find(own.begin(), own.end(), key) != own.end()) continue;
    std::string taken;
    for (const auto& k : own) taken += (taken.empty() ? "" : ", ") + k;
    throw InvalidInput("strategy " + strategy + " takes no option \"" + key +
                       "\" (another strategy's); its options: " + taken);
  }
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> names;
  for (const auto& entry : kStrategies) names.emplace_back(entry.name);
  return names;
}

const std::vector<std::string>& strategy_option_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out = {kSeedKey};
    for (const auto& entry : kStrategies) {
      for (const char* key : entry.option_keys) {
        if (std::find(out.begin(), out.end(), key) == out.end()) out.emplace_back(key);
      }
    }
    return out;
  }();
  return names;
}

OptionReader::OptionReader(const StrategyOptions& options, std::string owner)
    : options_(options), owner_(std::move(owner)) {}

const nlohmann::json* OptionReader::find(const char* key) const {
  if (!options_.is_object()) return nullptr;
  auto it = options_.find(key);
  return it == options_.end() || it->is_null() ? nullptr : &*it;
}

std::uint64_t OptionReader::count(const char* key, std::uint64_t fallback, std::uint64_t min,
                                  std::uint64_t max) const {
  const auto* v = find(key);
  if (!v) return fallback;
  const bool whole =
      v->is_number_unsigned() || (v->is_number_integer() && v->get<std::int64_t>() >= 0);
  if (!whole || v->get<std::uint64_t>() < min || v->get<std::uint64_t>() > max) {
    throw InvalidInput(owner_ + " option " + key + " must be a whole number in [" +
                       std::to_string(min) + ", " + std::to_string(max) + "], got " + v->dump());
  }
  return v->get<std::uint64_t>();
}

double OptionReader::number(const char* key, double fallback, double min, double max) const {
  return optional_number(key, fallback, min, max).value_or(fallback);
}

std::optional<double> OptionReader::optional_number(const char* key, std::optional<double> fallback,
                                                    double min, double max) const {
  if (!options_.is_object() || !options_.contains(key)) return fallback;
  const auto& v = options_[key];
  if (v.is_null()) return std::nullopt;
  if (!v.is_number() || !(v.get<double>() >= min && v.get<double>() <= max)) {
    std::ostringstream range;
    range << "[" << min << ", " << max << "]";
    throw InvalidInput(owner_ + " option " + key + " must be a number in " + range.str() +
                       ", got " + v.dump());
  }
  return v.get<double>();
}

std::string OptionReader::text(const char* key, const std::string& fallback) const {
  const auto* v = find(key);
  if (!v) return fallback;
  if (!v->is_string()) {
    throw InvalidInput(owner_ + " option " + key + " must be a string, got " + v->dump());
  }
  return v->get<std::string>();
}

std::unique_ptr<SearchStrategy> make_strategy(const std::string& name,
                                              const StrategyOptions& options) {
  if (!options.is_null() && !options.is_object()) {
    throw InvalidInput("strategy options must be a JSON object, got " + options.dump());
  }
  const auto& known_keys = strategy_option_names();
  for (const auto& [key, value] : options.items()) {
    if (std::find(known_keys.begin(), known_keys.end(), key) == known_keys.end()) {
      std::string known;
      for (const auto& k : known_keys) known += (known.empty() ? "" : ", ") + k;
      throw InvalidInput("unknown strategy option \"" + key + "\"; known options: " + known);
    }
  }
  const std::uint64_t seed =
      OptionReader(options, name).count(kSeedKey, 0, 0, std::numeric_limits<std::uint64_t>::max());
  if (const auto* entry = find_strategy(name)) return entry->make(name, options, seed);
  std::string known;
  for (const auto& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
  std::string hint;
  for (const auto& entry : kStrategies) {
    if (entry.kernel_tuner_name && name == entry.kernel_tuner_name) {
      hint = " (Kernel Tuner's " + name + " is " + entry.name + " here)";
    }
  }
  throw InvalidInput("unknown strategy '" + name + "'" + hint + "; known strategies: " + known);
}

}  // namespace tunebase
