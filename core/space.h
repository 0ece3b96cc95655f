// Search spaces: parameters, constraints, enumeration, sampling and encoding.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/expression.h"
#include "core/value.h"

namespace tunebase {

/// Every random choice in tunebase draws from one of these, seeded by the caller.
using Rng = std::mt19937_64;

enum class ParamKind {
  integer,      ///< integer range low..high with a step (expanded to its values)
  ordinal,      ///< ordered list of numbers, e.g. powers of two
  categorical,  ///< unordered list of values (usually strings); one-hot encoded
  real,         ///< continuous interval [low, high], optionally on a log scale
};

std::string_view to_string(ParamKind k);

/// index_of's lookup table for a parameter with many values (built by SearchSpace).
struct ValueIndex;

struct Parameter {
  std::string name;
  ParamKind kind = ParamKind::ordinal;
  /// Discrete kinds: every allowed value, in order. Empty for real parameters.
  std::vector<Value> values;
  /// Real parameters: the interval. Integer ranges keep their declared bounds here too.
  double low = 0.0;
  double high = 0.0;
  std::int64_t step = 1;
  /// Encode on a log scale (reals; ordinals whose values are all positive).
  bool log_scale = false;
  Value default_value;
  /// Whether the space gave default_value. When it did not, the first value is the default
  /// (the middle of a real interval): a Kernel Tuner cache declares none, so a replay's
  /// baseline is the first value of each parameter, which people should be told.
  bool default_declared = false;
  /// Whether the values are Python's False and True (a Kernel Tuner tune_params list of them),
  /// held as 0 and 1: a Kernel Tuner cache written from the space keys them "False" and "True",
  /// as Kernel Tuner's str() does. Part of the space (to_json's "boolean": true, fingerprint),
  /// not of its parameters' domains (parameters_fingerprint): measurements of 0 and 1 are the
  /// same whichever way they were written.
  bool python_bool = false;

  bool is_discrete() const { return kind != ParamKind::real; }
  /// Number of values of a discrete parameter.
  std::size_t size() const { return values.size(); }
  /// Position of `v` among the values (2 and 2.0 match), if present. Constant time in a
  /// SearchSpace (a table), linear otherwise.
  std::optional<std::size_t> index_of(const Value& v) const;
  /// Set by SearchSpace, whose parameters do not change.
  std::shared_ptr<const ValueIndex> lookup;
  /// Whether `v` is in the domain (a listed value, or a number inside a real interval).
  bool contains(const Value& v) const;
};

/// A constraint: an expression in Kernel Tuner's restriction syntax that must be true.
struct Constraint {
  std::string text;
  Expression expression;
  /// Indices of the parameters the expression names, ascending.
  std::vector<std::size_t> parameters;
};

/// A search space: named parameters plus constraints over them. Immutable once built.
///
/// The valid configurations of a discrete space are enumerated lazily (once, thread-safe, and
/// shared by copies) when that is feasible: at most kMaxEnumeratedValid of them, and the
/// Cartesian product is at most kMaxEnumerate, or it is at most kMaxPrunedProduct and the
/// depth-first enumeration, which prunes a subtree as soon as a constraint fails, visits at
/// most kMaxEnumerationVisits partial configurations (conditional spaces, where a method pins
/// the parameters only other methods read, have far fewer than their product). Other spaces
/// are sampled uniformly from the valid set by rejection, without enumerating.
class SearchSpace {
 public:
  static constexpr double kMaxEnumerate = 2.0e7;
  /// Valid configurations an enumeration keeps at most (about 250 bytes each); a space with
  /// more is sampled, which finds its configurations easily (kept, 2e7 of them took gigabytes:
  /// bad_alloc on ordinary machines). It is where valid configurations are rare that
  /// rejection sampling fails, and enumeration is needed.
  static constexpr std::size_t kMaxEnumeratedValid = 500'000;
  static constexpr double kMaxPrunedProduct = 1.0e10;
  /// Partial configurations the pruned enumeration of a product above kMaxEnumerate may visit
  /// (about a second at worst) before the space counts as too large.
  static constexpr double kMaxEnumerationVisits = 2.0e6;
  static constexpr std::size_t kMaxIntegerRange = 1'000'000;
  /// Values the discrete parameters of a space list at most, all together: each is kept in
  /// memory (about 40 bytes) by every copy of the space, which a study loaded by the service
  /// holds. Counted before any list is made: a request of 32 KB declared 500 ranges of a
  /// million values each (20 GB).
  static constexpr std::size_t kMaxSpaceValues = 1'000'000;

  SearchSpace();
  /// Validates names (unique, non-empty), domains (non-empty, defaults inside) and
  /// constraints (syntax, known names). Throws InvalidInput / ParseError.
  SearchSpace(std::vector<Parameter> parameters, const std::vector<std::string>& constraints);

  SearchSpace(const SearchSpace& other);
  SearchSpace& operator=(const SearchSpace& other);
  SearchSpace(SearchSpace&&) noexcept;
  SearchSpace& operator=(SearchSpace&&) noexcept;
  ~SearchSpace();

  /// Our own JSON space format (docs/space-format.md).
  static SearchSpace from_json(const nlohmann::json& j);
  /// A T1 input file (`ConfigurationSpace.TuningParameters` and `.Conditions`).
  static SearchSpace from_t1(const nlohmann::json& j);
  /// Kernel Tuner's `tune_params` (name -> list of values, in order) plus restrictions.
  static SearchSpace from_kernel_tuner(const nlohmann::json& tune_params,
                                       const std::vector<std::string>& restrictions,
                                       const std::vector<std::string>& order = {});
  /// A space in any of the formats above, detected from its keys ("ConfigurationSpace": T1,
  /// "tune_params": Kernel Tuner, else ours). Ordered, so that Kernel Tuner's parameters keep
  /// the order of tune_params.
  static SearchSpace from_document(const nlohmann::ordered_json& j);
  /// Reads a file in any of the formats above, detected from its content.
  static SearchSpace load(const std::string& path);

  /// What reading the file changed without refusing it, for people to read: a T1 Default that
  /// is not among its Values, replaced by the first value. Not part of the space (to_json,
  /// fingerprint).
  const std::vector<std::string>& notes() const { return notes_; }

  /// Our JSON format; `from_json(to_json())` gives an equal space.
  nlohmann::json to_json() const;
  /// Stable hash of the canonical JSON: a changed space is a new kernel version.
  std::string fingerprint() const;
  /// Stable hash of the parameters and their values alone, without the constraints and the
  /// defaults: spaces that restrict the same parameters differently measure one function, so
  /// their measurements transfer between them.
  std::string parameters_fingerprint() const;
  /// parameters_fingerprint() of a space given as to_json() (a stored kernel version's).
  static std::string parameters_fingerprint(const nlohmann::json& space_json);
  /// How the parameters and values of `other` differ from this space's, for people to read
  /// ("parameter tile: 1, 2 there, 1, 2, 4 here"; the first few differences); empty when they
  /// are the same (constraints and defaults aside).
  std::string parameters_difference(const SearchSpace& other) const;

  const std::vector<Parameter>& parameters() const { return *parameters_; }
  const std::vector<Constraint>& constraints() const { return constraints_; }
  std::size_t dimension() const { return parameters_->size(); }
  const Parameter& parameter(std::size_t i) const { return parameters_->at(i); }
  std::optional<std::size_t> index_of(std::string_view name) const;
  bool all_discrete() const;

  /// Product of the domain sizes (infinity when a parameter is real).
  double cartesian_size() const;
  /// Whether valid_configurations() is available (see the class comment). The first call
  /// runs the enumeration (seconds at worst: a product of kMaxEnumerate with few valid).
  bool enumerable() const;
  /// Every valid configuration, in lexicographic order of value positions. Throws
  /// InvalidInput when the space is not enumerable.
  const std::vector<Configuration>& valid_configurations() const;
  /// Number of valid configurations if enumerable.
  std::optional<std::size_t> valid_count() const;

  /// Domain and constraint check; false on any violation.
  bool is_valid(const Configuration& c) const;
  /// Like is_valid but throws InvalidInput naming the parameter or constraint violated.
  void check(const Configuration& c) const;
  /// Whether the constraints hold (domains assumed fine).
  bool satisfies_constraints(const Configuration& c) const;

  /// The share of `draws` uniform points of the product (not of the valid set) that satisfy
  /// the constraints: an estimate of how much of a space too large to count is valid.
  double valid_share(std::size_t draws, Rng& rng) const;
  /// Whether sample() draws every valid configuration alike: no integer range is declared on
  /// a log scale (log_uniform).
  bool samples_uniformly() const { return samples_uniformly_; }
  /// How much more often than average sample() draws `c` among the valid configurations: the
  /// product of value_weight over the parameters (1 when samples_uniformly).
  double sampling_weight(const Configuration& c) const;

  /// Uniform draw from the valid configurations (an integer range declared on a log scale
  /// drawn log-uniformly: log_uniform). A huge space in which kMaxRejections draws
  /// find none gives its defaults or its first values when they are valid, and throws
  /// InvalidInput when they are not either (or the space has no valid configuration).
  Configuration sample(Rng& rng) const;
  /// Like sample, but a huge space whose constraints allow little gives up when `draws`
  /// (counted down) run out, with nullopt: for searches that would rather propose fewer
  /// configurations than spend seconds finding one.
  std::optional<Configuration> try_sample(Rng& rng, std::size_t& draws) const;
  /// The declared defaults; may violate constraints (see valid_defaults).
  Configuration default_configuration() const;
  /// Of a discrete space, the defaults and the first values, those of them that satisfy the
  /// constraints (one when they are the same configuration).
  std::vector<Configuration> valid_defaults() const;

  /// Configuration <-> JSON object {"name": value, ...}. from_json checks names, domains and
  /// constraints and throws InvalidInput naming the offending field; missing parameters take
  /// their default when `fill_defaults`.
  nlohmann::json config_to_json(const Configuration& c) const;
  Configuration config_from_json(const nlohmann::json& j, bool fill_defaults = false) const;
  /// As config_to_json, with the parameters in declared order (a JSON object sorts them).
  nlohmann::ordered_json config_to_ordered_json(const Configuration& c) const;
  /// config_to_ordered_json as compact text, for people to read:
  /// {"block_size_x": 32, "block_size_y": 4, ...}, a Parameter::python_bool as false or true.
  std::string config_text(const Configuration& c) const;
  /// Kernel Tuner cache key: the values joined by commas, in parameter order. Commas and
  /// backslashes inside string values are escaped with a backslash (Kernel Tuner's own keys
  /// are not), so that distinct configurations never share a key; never empty (a single
  /// value "" is `\e`).
  std::string key(const Configuration& c) const;

  /// Features in [0,1] for surrogates: discrete numeric parameters by position (or log value
  /// when log_scale), reals on their declared scale, categoricals one-hot.
  std::size_t encoded_dimension() const;
  std::vector<double> encode(const Configuration& c) const;
  /// Valid configurations that differ from `c` in one parameter by one step (discrete) or
  /// by a perturbation (real).
  std::vector<Configuration> neighbours(const Configuration& c, Rng& rng) const;

 private:
  // Shared by copies, as the enumeration is: a session's copy of a space of a million values
  // cost as much memory again (40 MB).
  std::shared_ptr<const std::vector<Parameter>> parameters_;
  std::vector<Constraint> constraints_;
  std::vector<std::string> notes_;
  bool samples_uniformly_ = true;
  void enumerate_once() const;
  /// Index into valid_configurations() drawn with sampling_weight (uniformly when
  /// samples_uniformly, with the draws of a uniform index).
  std::size_t draw_valid_index(Rng& rng) const;
  static Value default_of(const Parameter& p);

  struct Cache;
  // Shared by copies: the space is immutable, so its enumeration is the same.
  std::shared_ptr<Cache> cache_;
};

/// Helpers to build parameters.
Parameter integer_range(std::string name, std::int64_t low, std::int64_t high,
                        std::int64_t step = 1, std::optional<std::int64_t> default_value = {});
Parameter ordinal(std::string name, std::vector<Value> values,
                  std::optional<Value> default_value = {}, bool log_scale = false);
Parameter categorical(std::string name, std::vector<Value> values,
                      std::optional<Value> default_value = {});
Parameter real_interval(std::string name, double low, double high, bool log_scale = false,
                        std::optional<double> default_value = {});

/// The value of real parameter `p` at `u` in [0, 1] along its declared scale (log when
/// log_scale): 0 and 1 give low and high exactly, and rounding never leaves the interval.
double unit_to_real(const Parameter& p, double u);

/// Whether `p` is an integer range declared on a log scale, of two values or more: it is drawn
/// log-uniformly, as Optuna's suggest_int(log=True) and Vizier's LOG scale draw, where a
/// uniform choice among 1..1024 gives a value below 32 only 3% of the time. (An ordinal list
/// on a log scale is drawn by its listed values, each alike: its values are what was chosen.)
bool log_uniform(const Parameter& p);
/// The value of discrete parameter `p` at `u` in [0, 1): for a log_uniform range the value
/// nearest to exp(u along log low .. log high), else the value at position floor(u * size).
Value discrete_at(const Parameter& p, double u);
/// How much more often than average discrete_at of a uniform u gives value `index` of `p`:
/// 1 unless log_uniform (there the share of the log axis that rounds to it, times size()).
double value_weight(const Parameter& p, std::size_t index);
/// A value as the space was written: Python's False and True (JSON false and true) for a
/// Parameter::python_bool, held as 0 and 1; else to_json(v).
nlohmann::json value_as_written(const Value& v, bool python_bool);

/// A stored configuration as compact JSON with the parameters of `space` (a space as to_json
/// writes it) first, in declared order, then any others, sorted: what people read in listings
/// ("boolean" parameters as false or true).
std::string config_text(const nlohmann::json& config, const nlohmann::json& space);

/// Sorts `items` by the key of their configuration (`config_of(item)`), so that what is read
/// from files or the store (candidates of a replay, observations of a prior) does not depend
/// on the order it was listed or stored in: a model fitted on a subsample of them, or a search
/// over them, gives the same results for a Kernel Tuner cache and its T4 twin.
template <class T, class ConfigOf>
void sort_by_key(const SearchSpace& space, std::vector<T>& items, ConfigOf config_of) {
  std::vector<std::pair<std::string, std::size_t>> order;
  order.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i)
    order.emplace_back(space.key(config_of(items[i])), i);
  std::sort(order.begin(), order.end());
  std::vector<T> sorted;
  sorted.reserve(items.size());
  for (const auto& [key, i] : order) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
}

}  // namespace tunebase
