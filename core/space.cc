#include "core/space.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/json.h"
#include "core/measurements.h"

namespace tunebase {

bool log_uniform(const Parameter& p) {
  return p.kind == ParamKind::integer && p.log_scale && p.values.size() > 1;
}

Value discrete_at(const Parameter& p, double u) {
  const std::size_t n = p.values.size();
  if (!log_uniform(p)) {
    return p
        .values[std::min<std::size_t>(static_cast<std::size_t>(u * static_cast<double>(n)), n - 1)];
  }
  // Values low, low + step, ...: the one nearest to the point at u on the log axis.
  const double low = as_double(p.values.front());
  const double high = as_double(p.values.back());
  const double x = std::exp(std::log(low) + std::clamp(u, 0.0, 1.0) * std::log(high / low));
  const double at = std::round((x - low) / static_cast<double>(p.step));
  return p.values[static_cast<std::size_t>(std::clamp(at, 0.0, static_cast<double>(n - 1)))];
}

nlohmann::json value_as_written(const Value& v, bool python_bool) {
  if (python_bool && is_number(v)) return as_double(v) != 0.0;
  return to_json(v);
}

double value_weight(const Parameter& p, std::size_t index) {
  if (!log_uniform(p)) return 1.0;
  // The stretch of low .. high that rounds to the value (half a step either side), as a share
  // of the whole on the log axis.
  const double low = as_double(p.values.front());
  const double high = as_double(p.values.back());
  const double v = as_double(p.values.at(index));
  const double half = 0.5 * static_cast<double>(p.step);
  const double share =
      std::log(std::min(high, v + half) / std::max(low, v - half)) / std::log(high / low);
  return share * static_cast<double>(p.values.size());
}

namespace {

constexpr std::size_t kMaxRejections = 2'000'000;
// Parameters with at least this many values get a lookup table (fewer: a scan is as quick).
constexpr std::size_t kIndexedValues = 16;
// Relative step of a real parameter's neighbour, as a share of its (scaled) interval.
constexpr double kRealNeighbourStep = 0.1;

std::string join_names(const std::vector<Parameter>& params) {
  std::string out;
  for (const auto& p : params) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

// A value in a message, as the space was written (value_as_written).
std::string value_text(const Parameter& p, const Value& v) {
  return p.python_bool ? value_as_written(v, true).dump() : to_string(v);
}

std::string describe_domain(const Parameter& p) {
  if (p.kind == ParamKind::real) {
    std::ostringstream os;
    os << "a number in [" << p.low << ", " << p.high << "]";
    return os.str();
  }
  std::string out = "one of [";
  const std::size_t shown = std::min<std::size_t>(p.values.size(), 20);
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + value_text(p, p.values[i]);
  if (shown < p.values.size()) out += ", ... (" + std::to_string(p.values.size()) + " values)";
  return out + "]";
}

// FNV-1a, 64 bit: a stable content hash (not for security).
std::string fnv1a_hex(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool all_numeric_positive(const std::vector<Value>& values) {
  return std::all_of(values.begin(), values.end(),
                     [](const Value& v) { return is_number(v) && as_double(v) > 0; });
}

// Position of a discrete value on [0,1] (log of the value when log_scale).
double scaled_position(const Parameter& p, std::size_t index) {
  const std::size_t n = p.values.size();
  if (n <= 1) return 0.0;
  if (p.log_scale) {
    const double lo = std::log(as_double(p.values.front()));
    const double hi = std::log(as_double(p.values.back()));
    if (hi == lo) return 0.0;
    return (std::log(as_double(p.values[index])) - lo) / (hi - lo);
  }
  return static_cast<double>(index) / static_cast<double>(n - 1);
}

double real_to_unit(const Parameter& p, double x) {
  if (p.high == p.low) return 0.0;
  if (p.log_scale) return (std::log(x) - std::log(p.low)) / (std::log(p.high) - std::log(p.low));
  return (x - p.low) / (p.high - p.low);
}

Value draw(const Parameter& p, Rng& rng) {
  if (p.kind == ParamKind::real) {
    return unit_to_real(p, std::uniform_real_distribution<double>(0.0, 1.0)(rng));
  }
  if (log_uniform(p)) return discrete_at(p, std::uniform_real_distribution<double>(0.0, 1.0)(rng));
  return p.values[std::uniform_int_distribution<std::size_t>(0, p.values.size() - 1)(rng)];
}

// Parses a T1 "Values" string such as "[16, 32]" or "['a', 'b']" (a Python list literal).
nlohmann::json python_list(const nlohmann::json& v, const std::string& where) {
  if (v.is_array()) return v;
  if (!v.is_string()) throw InvalidInput(where + ": Values must be a list or a list literal");
  std::string s = v.get<std::string>();
  std::replace(s.begin(), s.end(), '\'', '"');
  // Python literals that JSON spells differently.
  for (auto [from, to] : {std::pair<std::string, std::string>{"True", "true"},
                          {"False", "false"},
                          {"None", "null"}}) {
    for (std::size_t pos; (pos = s.find(from)) != std::string::npos;)
      s.replace(pos, from.size(), to);
  }
  // A tuple, (1, 2), and a comma before the closing bracket, [1, 2,], are Python lists too.
  const auto first = s.find_first_not_of(" \t\r\n");
  const auto last = s.find_last_not_of(" \t\r\n");
  // (1) is the number 1 in Python; a tuple has a comma.
  if (first != std::string::npos && s[first] == '(' && s[last] == ')' &&
      s.find(',') != std::string::npos) {
    s[first] = '[';
    s[last] = ']';
  }
  if (last != std::string::npos && s[last] == ']') {
    const auto before = s.find_last_not_of(" \t\r\n", last - 1);
    if (before != std::string::npos && before > first && s[before] == ',') s.erase(before, 1);
  }
  const auto unreadable = [&] {
    return InvalidInput(where + ": cannot read Values \"" + v.get<std::string>() +
                        "\" as a list such as [1, 2, 4]");
  };
  nlohmann::json j;
  try {
    j = parse_json_text(s, "Values");
  } catch (const ParseError&) {
    throw unreadable();
  } catch (const InvalidInput& e) {
    throw InvalidInput(where + ": " + e.what());
  }
  if (!j.is_array()) throw unreadable();
  for (auto& e : j) {
    if (e.is_boolean()) e = e.get<bool>() ? 1 : 0;
  }
  return j;
}

std::vector<Value> values_from_json(const nlohmann::json& list, const std::string& where) {
  if (!list.is_array() || list.empty()) {
    throw InvalidInput(where + ": values must be a non-empty list");
  }
  std::vector<Value> values;
  for (const auto& e : list) {
    try {
      values.push_back(value_from_json(e));
    } catch (const InvalidInput& err) {
      throw InvalidInput(where + ": " + err.what());
    }
  }
  return values;
}

// Refuses a space whose parameters list more than SearchSpace::kMaxSpaceValues values in all,
// naming the largest. `sizes`: each parameter's name and number of values.
void check_total_values(std::vector<std::pair<std::string, double>> sizes) {
  double total = 0.0;
  for (const auto& [name, n] : sizes) total += n;
  if (total <= static_cast<double>(SearchSpace::kMaxSpaceValues)) return;
  std::stable_sort(sizes.begin(), sizes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string largest;
  for (std::size_t i = 0; i < sizes.size() && i < 3; ++i) {
    largest += (i ? ", " : "") + sizes[i].first + " " +
               std::to_string(static_cast<long long>(sizes[i].second));
  }
  throw InvalidInput("the parameters list " + std::to_string(static_cast<long long>(total)) +
                     " values in all (" + largest + (sizes.size() > 3 ? ", ..." : "") +
                     "); a space may list at most " + std::to_string(SearchSpace::kMaxSpaceValues) +
                     ": use larger steps, or real parameters for wide ranges");
}

// The number of values parameter `pj` of our JSON format declares, read before any list is
// made; 0 where the declaration is wrong (reading it says how).
double declared_values(const nlohmann::json& pj) {
  if (!pj.is_object()) return 0.0;
  if (const auto values = pj.find("values"); values != pj.end()) {
    return values->is_array() ? static_cast<double>(values->size()) : 0.0;
  }
  const auto number = [&](const char* key, double otherwise) {
    const auto it = pj.find(key);
    if (it == pj.end()) return otherwise;
    return it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
  };
  const double low = number("low", std::numeric_limits<double>::quiet_NaN());
  const double high = number("high", std::numeric_limits<double>::quiet_NaN());
  const double step = number("step", 1.0);
  const auto type = pj.value("type", nlohmann::json()).is_string() ? pj["type"].get<std::string>()
                                                                   : std::string();
  if (type != "integer" && type != "int") return 0.0;  // a real parameter lists no values
  // Bounds that are not whole numbers within +-2^53 are refused when the parameter is read.
  constexpr double kMaxWhole = 9007199254740992.0;
  const auto whole = [&](double v) { return std::floor(v) == v && std::abs(v) <= kMaxWhole; };
  if (!whole(low) || !whole(high) || !whole(step) || high < low || step < 1.0) return 0.0;
  return std::floor((high - low) / step) + 1.0;
}

Parameter list_parameter(std::string name, std::vector<Value> values, std::optional<Value> def) {
  const bool numeric = std::all_of(values.begin(), values.end(), is_number);
  if (numeric) return ordinal(std::move(name), std::move(values), std::move(def));
  return categorical(std::move(name), std::move(values), std::move(def));
}

}  // namespace

double unit_to_real(const Parameter& p, double u) {
  u = std::clamp(u, 0.0, 1.0);
  // The ends are the declared bounds exactly: exp(log(1e-6)) is 1.0000000000000004e-06.
  if (u == 0.0) return p.low;
  if (u == 1.0) return p.high;
  // Rounding (exp(log(high)) is 1 ulp above high, say) must not leave the declared range.
  const double x = p.log_scale
                       ? std::exp(std::log(p.low) + u * (std::log(p.high) - std::log(p.low)))
                       : p.low + u * (p.high - p.low);
  return std::clamp(x, p.low, p.high);
}

std::string_view to_string(ParamKind k) {
  switch (k) {
    case ParamKind::integer:
      return "integer";
    case ParamKind::ordinal:
      return "ordinal";
    case ParamKind::categorical:
      return "categorical";
    case ParamKind::real:
      return "real";
  }
  return "unknown";
}

// Values are distinct as numbers (2 and 2.0 are one) and as strings (checked by SearchSpace),
// so each maps to one position. An integer range low, low + step, ... needs no table: a
// value's position is (v - low) / step.
struct ValueIndex {
  std::unordered_map<double, std::size_t> numbers;
  std::unordered_map<std::string, std::size_t> strings;
  std::optional<std::int64_t> range_low;
  std::int64_t range_step = 1;
};

namespace {

// Integers within +-2^53 are exact as doubles: a whole double there is one integer.
constexpr double kMaxExactInteger = 9007199254740992.0;

// Position of `v` in the integer range of `p` (its lookup says where it starts), if there.
std::optional<std::size_t> range_position(const Parameter& p, const ValueIndex& range,
                                          const Value& v) {
  std::int64_t x = 0;
  if (const auto* i = std::get_if<std::int64_t>(&v)) {
    x = *i;
  } else if (const auto* d = std::get_if<double>(&v)) {
    if (!(std::floor(*d) == *d && std::abs(*d) <= kMaxExactInteger)) return std::nullopt;
    x = static_cast<std::int64_t>(*d);
  } else {
    return std::nullopt;
  }
  // Both within +-2^53 (checked when the range was indexed): no overflow.
  if (std::abs(static_cast<double>(x)) > kMaxExactInteger) return std::nullopt;
  const std::int64_t offset = x - *range.range_low;
  if (offset < 0 || offset % range.range_step != 0) return std::nullopt;
  const auto at = static_cast<std::size_t>(offset / range.range_step);
  if (at >= p.values.size()) return std::nullopt;
  return at;
}

// Whether `values` are numbers in strictly increasing or decreasing order as doubles: then
// they are distinct as numbers, and as texts (each number's text reads back as itself), and
// the sets that check a list in general (seconds and hundreds of MB for a million) are not
// needed.
bool strictly_monotonic_numbers(const std::vector<Value>& values) {
  if (!std::all_of(values.begin(), values.end(), is_number)) return false;
  const auto increasing = [&](auto before) {
    for (std::size_t i = 1; i < values.size(); ++i) {
      if (!before(as_double(values[i - 1]), as_double(values[i]))) return false;
    }
    return true;
  };
  return increasing(std::less<double>()) || increasing(std::greater<double>());
}

// Whether `p` is the integer range its low and step describe (values low, low + step, ...,
// each within +-2^53), which integer_range makes.
bool is_integer_range(const Parameter& p) {
  if (p.kind != ParamKind::integer || p.step <= 0 || p.values.empty()) return false;
  if (!(std::abs(p.low) <= kMaxExactInteger && std::abs(p.high) <= kMaxExactInteger)) return false;
  auto expected = static_cast<std::int64_t>(p.low);
  for (const auto& v : p.values) {
    const auto* i = std::get_if<std::int64_t>(&v);
    if (!i || *i != expected) return false;
    expected += p.step;
  }
  return true;
}

}  // namespace

std::optional<std::size_t> Parameter::index_of(const Value& v) const {
  if (lookup && lookup->range_low) {
    const auto at = range_position(*this, *lookup, v);
    if (at && same_value(values[*at], v)) return at;
    return std::nullopt;
  }
  if (lookup) {
    if (const auto* s = std::get_if<std::string>(&v)) {
      const auto it = lookup->strings.find(*s);
      if (it != lookup->strings.end()) return it->second;
      return std::nullopt;
    }
    const auto it = lookup->numbers.find(as_double(v));
    if (it != lookup->numbers.end() && same_value(values[it->second], v)) return it->second;
    return std::nullopt;
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (same_value(values[i], v)) return i;
  }
  return std::nullopt;
}

bool Parameter::contains(const Value& v) const {
  if (kind == ParamKind::real) {
    if (!is_number(v)) return false;
    const double x = as_double(v);
    return x >= low && x <= high;
  }
  return index_of(v).has_value();
}

Parameter integer_range(std::string name, std::int64_t low, std::int64_t high, std::int64_t step,
                        std::optional<std::int64_t> default_value) {
  if (step <= 0) throw InvalidInput("parameter '" + name + "': step must be positive");
  if (high < low) {
    throw InvalidInput("parameter '" + name + "': low " + std::to_string(low) + " is above high " +
                       std::to_string(high));
  }
  if ((high - low) / step + 1 > static_cast<std::int64_t>(SearchSpace::kMaxIntegerRange)) {
    throw InvalidInput("parameter '" + name + "': the range has more than " +
                       std::to_string(SearchSpace::kMaxIntegerRange) +
                       " values; use a larger step or a real parameter");
  }
  Parameter p;
  p.name = std::move(name);
  p.kind = ParamKind::integer;
  p.low = static_cast<double>(low);
  p.high = static_cast<double>(high);
  p.step = step;
  for (std::int64_t v = low; v <= high; v += step) p.values.emplace_back(v);
  p.default_value = default_value ? Value(*default_value) : p.values.front();
  p.default_declared = default_value.has_value();
  return p;
}

Parameter ordinal(std::string name, std::vector<Value> values, std::optional<Value> default_value,
                  bool log_scale) {
  Parameter p;
  p.name = std::move(name);
  p.kind = ParamKind::ordinal;
  p.values = std::move(values);
  p.log_scale = log_scale;
  if (!p.values.empty()) p.default_value = default_value ? *default_value : p.values.front();
  p.default_declared = default_value.has_value();
  return p;
}

Parameter categorical(std::string name, std::vector<Value> values,
                      std::optional<Value> default_value) {
  Parameter p = ordinal(std::move(name), std::move(values), std::move(default_value));
  p.kind = ParamKind::categorical;
  return p;
}

Parameter real_interval(std::string name, double low, double high, bool log_scale,
                        std::optional<double> default_value) {
  Parameter p;
  p.name = std::move(name);
  p.kind = ParamKind::real;
  p.low = low;
  p.high = high;
  p.log_scale = log_scale;
  p.default_value =
      default_value ? *default_value : (log_scale ? std::sqrt(low * high) : 0.5 * (low + high));
  p.default_declared = default_value.has_value();
  return p;
}

struct SearchSpace::Cache {
  std::once_flag enumerated;
  std::vector<Configuration> valid;
  /// The enumeration finished (within its budget of visited partial configurations).
  bool complete = false;
  /// Running sums of the valid configurations' sampling weights (unless samples_uniformly).
  std::once_flag weighed;
  std::vector<double> cumulative_weight;
};

SearchSpace::SearchSpace(std::vector<Parameter> parameters,
                         const std::vector<std::string>& constraints)
    : cache_(std::make_shared<Cache>()) {
  if (parameters.empty()) throw InvalidInput("a search space needs at least one parameter");
  {
    std::vector<std::pair<std::string, double>> sizes;
    for (const auto& p : parameters) sizes.emplace_back(p.name, static_cast<double>(p.size()));
    check_total_values(std::move(sizes));
  }
  std::set<std::string> seen;
  for (const auto& p : parameters) {
    if (p.name.empty()) throw InvalidInput("a parameter has an empty name");
    if (!seen.insert(p.name).second) {
      throw InvalidInput("parameter '" + p.name + "' is declared twice");
    }
    if (p.kind == ParamKind::real) {
      if (!(p.low < p.high) || !std::isfinite(p.high - p.low)) {
        throw InvalidInput("parameter '" + p.name +
                           "': a real parameter needs finite low < high, with high - low "
                           "within a double's range (about 1.8e308)");
      }
      if (p.log_scale && p.low <= 0) {
        throw InvalidInput("parameter '" + p.name + "': a log-scale parameter needs low > 0");
      }
    } else {
      if (p.values.empty()) throw InvalidInput("parameter '" + p.name + "' has no values");
      // Numbers compare by value (2 == 2.0), strings by text.
      // Configuration keys and exports write values as text: 1 and "1" would be one value.
      const bool distinct = strictly_monotonic_numbers(p.values);
      std::set<double> numbers;
      std::set<std::string> strings;
      std::set<std::string> texts;
      for (std::size_t at = 0; !distinct && at < p.values.size(); ++at) {
        const auto& v = p.values[at];
        const bool fresh = is_number(v) ? numbers.insert(as_double(v)).second
                                        : strings.insert(std::get<std::string>(v)).second;
        if (!fresh) {
          // Numbers are told apart as doubles: past 2^53 two integers may be one double.
          for (const auto& earlier : p.values) {
            if (&earlier == &v) break;
            if (is_number(v) && is_number(earlier) && as_double(earlier) == as_double(v) &&
                !same_value(earlier, v)) {
              throw InvalidInput("parameter '" + p.name + "' lists " + to_string(earlier) +
                                 " and " + to_string(v) +
                                 ", which are one number as a double (integers beyond 2^53 "
                                 "must differ by more to be told apart); keep one");
            }
          }
          throw InvalidInput("parameter '" + p.name + "' lists the value " + value_text(p, v) +
                             " twice");
        }
        if (!texts.insert(to_string(v)).second) {
          throw InvalidInput("parameter '" + p.name + "' lists the number and the string " +
                             to_string(v) +
                             ", which configuration keys and exports cannot tell apart; keep one");
        }
      }
      if (p.kind != ParamKind::categorical &&
          !std::all_of(p.values.begin(), p.values.end(), is_number)) {
        throw InvalidInput("parameter '" + p.name + "': " + std::string(to_string(p.kind)) +
                           " values must be numbers; use type categorical for strings");
      }
      if (p.log_scale && !all_numeric_positive(p.values)) {
        throw InvalidInput("parameter '" + p.name + "': a log-scale parameter needs values > 0");
      }
    }
    if (!p.contains(p.default_value)) {
      throw InvalidInput("parameter '" + p.name + "': default " + to_string(p.default_value) +
                         " is not allowed; allowed: " + describe_domain(p));
    }
  }
  // Encoding and checking look values up once per parameter and configuration: a table keeps
  // a space of a million integers from costing a million comparisons per lookup.
  for (auto& p : parameters) {
    if (!p.is_discrete() || p.values.size() < kIndexedValues) continue;
    auto index = std::make_shared<ValueIndex>();
    if (is_integer_range(p)) {
      index->range_low = static_cast<std::int64_t>(p.low);
      index->range_step = p.step;
      p.lookup = std::move(index);
      continue;
    }
    for (std::size_t i = 0; i < p.values.size(); ++i) {
      if (const auto* s = std::get_if<std::string>(&p.values[i])) {
        index->strings.emplace(*s, i);
      } else {
        index->numbers.emplace(as_double(p.values[i]), i);
      }
    }
    p.lookup = std::move(index);
  }
  samples_uniformly_ = std::none_of(parameters.begin(), parameters.end(),
                                    [](const Parameter& p) { return log_uniform(p); });
  // Immutable from here on: copies of the space (a session's, say) share them.
  parameters_ = std::make_shared<const std::vector<Parameter>>(std::move(parameters));
  for (const auto& text : constraints) {
    Constraint c;
    c.text = text;
    try {
      c.expression = Expression::parse(text);
    } catch (const ParseError& e) {
      throw ParseError(std::string("constraint: ") + e.what(), e.position());
    }
    c.expression.bind([&](const std::string& name) {
      auto idx = index_of(name);
      if (!idx) {
        throw InvalidInput("constraint \"" + text + "\" names unknown parameter '" + name +
                           "'; parameters are: " + join_names(*parameters_));
      }
      c.parameters.push_back(*idx);
      return *idx;
    });
    std::sort(c.parameters.begin(), c.parameters.end());
    if (c.parameters.empty()) {
      // A constant constraint: decide it now so that a false one is reported clearly.
      if (!c.expression.holds({})) {
        throw InvalidInput("constraint \"" + text +
                           "\" is always false: no configuration is valid");
      }
      continue;
    }
    constraints_.push_back(std::move(c));
  }
}

SearchSpace::SearchSpace(const SearchSpace& other)
    : parameters_(other.parameters_),
      constraints_(other.constraints_),
      notes_(other.notes_),
      samples_uniformly_(other.samples_uniformly_),
      cache_(other.cache_ ? other.cache_ : std::make_shared<Cache>()) {}

SearchSpace& SearchSpace::operator=(const SearchSpace& other) {
  if (this != &other) {
    parameters_ = other.parameters_;
    constraints_ = other.constraints_;
    notes_ = other.notes_;
    samples_uniformly_ = other.samples_uniformly_;
    cache_ = other.cache_ ? other.cache_ : std::make_shared<Cache>();
  }
  return *this;
}

namespace {

// Whether `c` holds at `config` (whose values of the constraint's parameters are set). One that
// cannot be evaluated there (a division by zero, say) fails the whole space: say at which
// values, and how to guard it, as Kernel Tuner's users write their restrictions.
bool constraint_holds(const Constraint& c, const std::vector<Parameter>& parameters,
                      const Configuration& config) {
  try {
    return c.expression.holds(config);
  } catch (const ParseError&) {
    throw;
  } catch (const InvalidInput& e) {
    std::string at;
    std::vector<std::string> zero;
    for (const auto i : c.parameters) {
      at += (at.empty() ? "" : ", ") + parameters[i].name + "=" + to_string(config[i]);
      const auto& v = config[i];
      if (!std::holds_alternative<std::string>(v) && as_double(v) == 0) {
        zero.push_back(parameters[i].name);
      }
    }
    std::string hint;
    const std::string why = e.what();  // names the constraint: 'evaluating "b/a>=1": ...'
    if (why.ends_with("by zero")) {
      const std::string divisor = zero.size() == 1 ? zero[0] : "<divisor>";
      hint = "; guard the divisor: \"" + divisor + " == 0 or " + c.text +
             "\" keeps those configurations, \"" + divisor + " != 0 and " + c.text +
             "\" leaves them out";
    }
    throw InvalidInput(why + " at " + at + hint);
  }
}

// The parameters of a space made empty or moved from: shared, so that a move allocates nothing.
const std::shared_ptr<const std::vector<Parameter>>& no_parameters() {
  static const auto none = std::make_shared<const std::vector<Parameter>>();
  return none;
}

}  // namespace

SearchSpace::SearchSpace() : parameters_(no_parameters()) {}

SearchSpace::SearchSpace(SearchSpace&& other) noexcept
    : parameters_(std::exchange(other.parameters_, no_parameters())),
      constraints_(std::move(other.constraints_)),
      notes_(std::move(other.notes_)),
      samples_uniformly_(other.samples_uniformly_),
      cache_(std::move(other.cache_)) {}

SearchSpace& SearchSpace::operator=(SearchSpace&& other) noexcept {
  if (this != &other) {
    parameters_ = std::exchange(other.parameters_, no_parameters());
    constraints_ = std::move(other.constraints_);
    notes_ = std::move(other.notes_);
    samples_uniformly_ = other.samples_uniformly_;
    cache_ = std::move(other.cache_);
  }
  return *this;
}

SearchSpace::~SearchSpace() = default;

std::optional<std::size_t> SearchSpace::index_of(std::string_view name) const {
  for (std::size_t i = 0; i < parameters_->size(); ++i) {
    if ((*parameters_)[i].name == name) return i;
  }
  return std::nullopt;
}

bool SearchSpace::all_discrete() const {
  return std::all_of(parameters_->begin(), parameters_->end(),
                     [](const Parameter& p) { return p.is_discrete(); });
}

double SearchSpace::cartesian_size() const {
  double size = 1.0;
  for (const auto& p : *parameters_) {
    if (!p.is_discrete()) return std::numeric_limits<double>::infinity();
    size *= static_cast<double>(p.values.size());
  }
  return size;
}

void SearchSpace::enumerate_once() const {
  std::call_once(cache_->enumerated, [this] {
    if (!all_discrete() || cartesian_size() > kMaxPrunedProduct) return;
    // A small product is enumerated whatever it costs; a larger one only while the pruned
    // tree stays within kMaxEnumerationVisits visited nodes. Either gives up past
    // kMaxEnumeratedValid valid configurations.
    const bool capped = cartesian_size() > kMaxEnumerate;
    const auto max_visits = static_cast<std::uint64_t>(kMaxEnumerationVisits);
    // Depth-first over the Cartesian product; each constraint is checked as soon as the last
    // parameter it names is assigned, which prunes whole subtrees.
    const std::size_t d = parameters_->size();
    std::vector<std::vector<const Constraint*>> check_at(d);
    for (const auto& c : constraints_) check_at[c.parameters.back()].push_back(&c);
    Configuration current(d);
    std::vector<std::size_t> index(d, 0);
    std::size_t depth = 0;
    std::uint64_t visits = 0;
    // Valid configurations as value indices, d per configuration, made into Configurations
    // once the walk is complete: a walk that gives up has used one flat block (a few tens of
    // MB at most), which goes back to the system, not millions of small vectors, which stay.
    std::vector<std::uint32_t> found;
    while (true) {
      if (capped && ++visits > max_visits) return;
      current[depth] = (*parameters_)[depth].values[index[depth]];
      bool ok = true;
      for (const Constraint* c : check_at[depth]) {
        if (!constraint_holds(*c, *parameters_, current)) {
          ok = false;
          break;
        }
      }
      if (ok && depth + 1 == d) {
        found.insert(found.end(), index.begin(), index.end());
        if (found.size() > kMaxEnumeratedValid * d) return;  // plenty: sampling finds them
      }
      if (ok && depth + 1 < d) {
        ++depth;
        index[depth] = 0;
        continue;
      }
      // Advance to the next value, backtracking over exhausted parameters.
      while (true) {
        if (++index[depth] < (*parameters_)[depth].values.size()) break;
        if (depth == 0) {
          auto& out = cache_->valid;
          out.reserve(found.size() / d);
          for (std::size_t at = 0; at < found.size(); at += d) {
            Configuration c(d);
            for (std::size_t i = 0; i < d; ++i) c[i] = (*parameters_)[i].values[found[at + i]];
            out.push_back(std::move(c));
          }
          cache_->complete = true;
          return;
        }
        --depth;
      }
    }
  });
}

bool SearchSpace::enumerable() const {
  if (!all_discrete() || !cache_) return false;
  if (cartesian_size() > kMaxPrunedProduct) return false;
  enumerate_once();
  return cache_->complete;
}

const std::vector<Configuration>& SearchSpace::valid_configurations() const {
  if (!cache_) throw InvalidInput("an empty search space has no configurations");
  if (!enumerable()) {
    throw InvalidInput("the space is too large to enumerate (a product of " +
                       nlohmann::json(cartesian_size()).dump() +
                       " points whose constraints leave more than " +
                       std::to_string(static_cast<long long>(kMaxEnumerationVisits)) +
                       " partial configurations to visit, or more than " +
                       std::to_string(kMaxEnumeratedValid) + " valid ones) or has real parameters");
  }
  enumerate_once();
  return cache_->valid;
}

std::optional<std::size_t> SearchSpace::valid_count() const {
  if (!enumerable()) return std::nullopt;
  return valid_configurations().size();
}

bool SearchSpace::satisfies_constraints(const Configuration& c) const {
  for (const auto& constraint : constraints_) {
    if (!constraint_holds(constraint, *parameters_, c)) return false;
  }
  return true;
}

bool SearchSpace::is_valid(const Configuration& c) const {
  if (c.size() != parameters_->size()) return false;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!(*parameters_)[i].contains(c[i])) return false;
  }
  return satisfies_constraints(c);
}

void SearchSpace::check(const Configuration& c) const {
  if (c.size() != parameters_->size()) {
    throw InvalidInput("a configuration needs " + std::to_string(parameters_->size()) +
                       " values (" + join_names(*parameters_) + "), got " +
                       std::to_string(c.size()));
  }
  for (std::size_t i = 0; i < c.size(); ++i) {
    const auto& p = (*parameters_)[i];
    if (!p.contains(c[i])) {
      throw InvalidInput("value " + to_string(c[i]) + " of parameter '" + p.name +
                         "' is not allowed; allowed: " + describe_domain(p));
    }
  }
  for (const auto& constraint : constraints_) {
    if (!constraint_holds(constraint, *parameters_, c)) {
      throw InvalidInput("configuration " + config_text(c) + " violates constraint \"" +
                         constraint.text + "\"");
    }
  }
}

double SearchSpace::sampling_weight(const Configuration& c) const {
  if (samples_uniformly_) return 1.0;
  double w = 1.0;
  for (std::size_t i = 0; i < parameters_->size(); ++i) {
    const auto& p = (*parameters_)[i];
    if (!log_uniform(p)) continue;
    const auto at = p.index_of(c.at(i));
    w *= at ? value_weight(p, *at) : 0.0;
  }
  return w;
}

std::size_t SearchSpace::draw_valid_index(Rng& rng) const {
  const auto& valid = valid_configurations();
  if (samples_uniformly_) {
    return std::uniform_int_distribution<std::size_t>(0, valid.size() - 1)(rng);
  }
  std::call_once(cache_->weighed, [&] {
    auto& sums = cache_->cumulative_weight;
    sums.reserve(valid.size());
    double total = 0.0;
    for (const auto& c : valid) sums.push_back(total += sampling_weight(c));
  });
  const auto& sums = cache_->cumulative_weight;
  const double at = std::uniform_real_distribution<double>(0.0, sums.back())(rng);
  return std::min<std::size_t>(
      static_cast<std::size_t>(std::upper_bound(sums.begin(), sums.end(), at) - sums.begin()),
      valid.size() - 1);
}

Configuration SearchSpace::sample(Rng& rng) const {
  if (enumerable()) {
    const auto& valid = valid_configurations();
    if (valid.empty()) throw InvalidInput("no configuration satisfies the constraints");
    return valid[draw_valid_index(rng)];
  }
  std::size_t draws = kMaxRejections;
  if (auto c = try_sample(rng, draws)) return std::move(*c);
  // Not uniform, but a space whose only valid configurations are the defaults is searched
  // rather than refused.
  if (auto valid = valid_defaults(); !valid.empty()) return std::move(valid.front());
  throw InvalidInput("no valid configuration found in " + std::to_string(kMaxRejections) +
                     " random draws, and neither the default configuration nor the first "
                     "values satisfy the constraints: the constraints allow (almost) nothing");
}

std::vector<Configuration> SearchSpace::valid_defaults() const {
  // A real parameter that the constraints hold to its default (x == 0.5) leaves nothing to
  // search: such a space stays refused.
  if (!all_discrete()) return {};
  std::vector<Configuration> out;
  Configuration defaults = default_configuration();
  Configuration first;
  for (const auto& p : *parameters_) first.push_back(p.values.front());
  const bool same = key(defaults) == key(first);
  if (satisfies_constraints(defaults)) out.push_back(std::move(defaults));
  if (!same && satisfies_constraints(first)) out.push_back(std::move(first));
  return out;
}

double SearchSpace::valid_share(std::size_t draws, Rng& rng) const {
  if (draws == 0) return 0.0;
  std::size_t held = 0;
  Configuration c(parameters_->size());
  for (std::size_t k = 0; k < draws; ++k) {
    for (std::size_t i = 0; i < parameters_->size(); ++i) c[i] = draw((*parameters_)[i], rng);
    held += satisfies_constraints(c) ? 1 : 0;
  }
  return static_cast<double>(held) / static_cast<double>(draws);
}

std::optional<Configuration> SearchSpace::try_sample(Rng& rng, std::size_t& draws) const {
  if (enumerable()) {
    const auto& valid = valid_configurations();
    if (valid.empty()) return std::nullopt;
    return valid[draw_valid_index(rng)];
  }
  // Rejection from the product distribution keeps its shape over the valid set (uniform, or
  // log-uniform along a log_uniform range).
  Configuration c(parameters_->size());
  while (draws > 0) {
    --draws;
    for (std::size_t i = 0; i < parameters_->size(); ++i) c[i] = draw((*parameters_)[i], rng);
    if (satisfies_constraints(c)) return c;
  }
  return std::nullopt;
}

// A parameter's default in a configuration: the listed value itself, not 2.0 for a listed 2,
// so that one configuration has one spelling in its key, on a command line and in every export.
// (The default stays as written in the space itself: its fingerprint, and so the studies made
// with it, do not change.)
Value SearchSpace::default_of(const Parameter& p) {
  if (p.kind == ParamKind::real) return p.default_value;
  const auto i = p.index_of(p.default_value);
  return i ? p.values[*i] : p.default_value;
}

Configuration SearchSpace::default_configuration() const {
  Configuration c;
  for (const auto& p : *parameters_) c.push_back(default_of(p));
  return c;
}

nlohmann::json SearchSpace::config_to_json(const Configuration& c) const {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t i = 0; i < parameters_->size() && i < c.size(); ++i) {
    j[(*parameters_)[i].name] = tunebase::to_json(c[i]);
  }
  return j;
}

Configuration SearchSpace::config_from_json(const nlohmann::json& j, bool fill_defaults) const {
  if (!j.is_object()) {
    throw InvalidInput("a configuration must be a JSON object {\"name\": value}, got " +
                       std::string(j.type_name()));
  }
  for (const auto& [name, value] : j.items()) {
    if (!index_of(name)) {
      throw InvalidInput("unknown parameter '" + name +
                         "'; parameters are: " + join_names(*parameters_));
    }
  }
  Configuration c;
  for (const auto& p : *parameters_) {
    auto it = j.find(p.name);
    if (it == j.end()) {
      if (!fill_defaults) throw InvalidInput("parameter '" + p.name + "' is missing");
      c.push_back(default_of(p));
      continue;
    }
    Value v;
    try {
      v = value_from_json(*it);
    } catch (const InvalidInput& e) {
      throw InvalidInput("parameter '" + p.name + "': " + e.what() +
                         "; allowed: " + describe_domain(p));
    }
    if (!p.contains(v)) {
      throw InvalidInput("value " + it->dump() + " of parameter '" + p.name +
                         "' is not allowed; allowed: " + describe_domain(p));
    }
    // Store the listed value itself so that 2.0 given for 2 compares and prints as 2.
    if (p.is_discrete())
      v = p.values[*p.index_of(v)];
    else
      v = as_double(v);
    c.push_back(std::move(v));
  }
  check(c);
  return c;
}

nlohmann::ordered_json SearchSpace::config_to_ordered_json(const Configuration& c) const {
  nlohmann::ordered_json in_order = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < parameters_->size() && i < c.size(); ++i)
    in_order[(*parameters_)[i].name] = tunebase::to_json(c[i]);
  return in_order;
}

std::string SearchSpace::config_text(const Configuration& c) const {
  nlohmann::ordered_json in_order = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < parameters_->size() && i < c.size(); ++i) {
    const auto& p = (*parameters_)[i];
    in_order[p.name] = value_as_written(c[i], p.python_bool);
  }
  return in_order.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string config_text(const nlohmann::json& config, const nlohmann::json& space) {
  if (!config.is_object()) return config.dump();
  nlohmann::ordered_json in_order = nlohmann::ordered_json::object();
  if (space.is_object() && space.contains("parameters") && space["parameters"].is_array()) {
    for (const auto& p : space["parameters"]) {
      if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) continue;
      const auto& name = p["name"].get_ref<const std::string&>();
      const auto it = config.find(name);
      if (it == config.end()) continue;
      const bool python_bool = p.contains("boolean") && p["boolean"] == true && it->is_number();
      in_order[name] = python_bool
                           ? nlohmann::ordered_json(value_as_written(value_from_json(*it), true))
                           : nlohmann::ordered_json(*it);
    }
  }
  for (const auto& [name, value] : config.items()) {
    if (!in_order.contains(name)) in_order[name] = value;
  }
  return in_order.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string SearchSpace::key(const Configuration& c) const {
  std::string k;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i) k += ',';
    const auto* text = std::get_if<std::string>(&c[i]);
    if (!text || text->find_first_of(",\\") == std::string::npos) {
      k += to_string(c[i]);
      continue;
    }
    // ("a", "b,c") and ("a,b", "c") must not share a key.
    for (char ch : *text) {
      if (ch == ',' || ch == '\\') k += '\\';
      k += ch;
    }
  }
  // One parameter whose value is "" (no flag, say): keys are never empty, and no value gives
  // this one (a backslash in a value is doubled).
  if (k.empty()) return "\\e";
  return k;
}

std::size_t SearchSpace::encoded_dimension() const {
  std::size_t d = 0;
  for (const auto& p : *parameters_) d += p.kind == ParamKind::categorical ? p.values.size() : 1;
  return d;
}

std::vector<double> SearchSpace::encode(const Configuration& c) const {
  std::vector<double> x;
  x.reserve(encoded_dimension());
  for (std::size_t i = 0; i < parameters_->size(); ++i) {
    const auto& p = (*parameters_)[i];
    if (p.kind == ParamKind::real) {
      x.push_back(real_to_unit(p, as_double(c[i])));
      continue;
    }
    const auto idx = p.index_of(c[i]);
    if (!idx) throw InvalidInput("cannot encode value " + to_string(c[i]) + " of '" + p.name + "'");
    if (p.kind == ParamKind::categorical) {
      for (std::size_t k = 0; k < p.values.size(); ++k) x.push_back(k == *idx ? 1.0 : 0.0);
    } else {
      x.push_back(scaled_position(p, *idx));
    }
  }
  return x;
}

std::vector<Configuration> SearchSpace::neighbours(const Configuration& c, Rng& rng) const {
  std::vector<Configuration> out;
  for (std::size_t i = 0; i < parameters_->size(); ++i) {
    const auto& p = (*parameters_)[i];
    auto try_value = [&](Value v) {
      Configuration n = c;
      n[i] = std::move(v);
      if (satisfies_constraints(n)) out.push_back(std::move(n));
    };
    if (p.kind == ParamKind::real) {
      const double u = real_to_unit(p, as_double(c[i]));
      const double step =
          kRealNeighbourStep * std::uniform_real_distribution<double>(0.2, 1.0)(rng);
      if (u > 0) try_value(unit_to_real(p, u - step));
      if (u < 1) try_value(unit_to_real(p, u + step));
      continue;
    }
    const auto idx = p.index_of(c[i]);
    if (!idx) continue;
    if (p.kind == ParamKind::categorical) {
      for (std::size_t k = 0; k < p.values.size(); ++k) {
        if (k != *idx) try_value(p.values[k]);
      }
    } else {
      if (*idx > 0) try_value(p.values[*idx - 1]);
      if (*idx + 1 < p.values.size()) try_value(p.values[*idx + 1]);
    }
  }
  return out;
}

nlohmann::json SearchSpace::to_json() const {
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : *parameters_) {
    nlohmann::json j;
    j["name"] = p.name;
    j["type"] = std::string(to_string(p.kind));
    if (p.kind == ParamKind::integer) {
      j["low"] = static_cast<std::int64_t>(p.low);
      j["high"] = static_cast<std::int64_t>(p.high);
      j["step"] = p.step;
    } else if (p.kind == ParamKind::real) {
      j["low"] = p.low;
      j["high"] = p.high;
    } else {
      j["values"] = nlohmann::json::array();
      for (const auto& v : p.values) j["values"].push_back(tunebase::to_json(v));
    }
    if (p.log_scale) j["log"] = true;
    if (p.python_bool) j["boolean"] = true;  // written only when set: other spaces keep their JSON
    j["default"] = tunebase::to_json(p.default_value);
    params.push_back(std::move(j));
  }
  nlohmann::json constraints = nlohmann::json::array();
  for (const auto& c : constraints_) constraints.push_back(c.text);
  return {{"parameters", params}, {"constraints", constraints}};
}

std::string SearchSpace::fingerprint() const { return fnv1a_hex(to_json().dump()); }

namespace {

// Differences parameters_difference names at most; the rest are counted.
constexpr std::size_t kMaxNamedDifferences = 3;

// The parameters of a space's JSON (to_json) by name, without their defaults: what a
// configuration of the space can be.
std::map<std::string, nlohmann::json> domains_of(const nlohmann::json& space_json) {
  std::map<std::string, nlohmann::json> out;
  for (auto p : space_json.at("parameters")) {
    p.erase("default");
    p.erase("boolean");  // how 0 and 1 are written, not which configurations there are
    out.emplace(p.at("name").get<std::string>(), std::move(p));
  }
  return out;
}

// "1, 2, 4", "0..10 step 2", "[0.5, 2] log": a parameter's domain for people to read.
std::string domain_text(const nlohmann::json& p) {
  std::string out;
  if (p.contains("values")) {
    for (const auto& v : p["values"]) out += (out.empty() ? "" : ", ") + v.dump();
  } else {
    out = p["low"].dump() + ".." + p["high"].dump();
    if (p.contains("step")) out += " step " + p["step"].dump();
  }
  if (p.value("log", false)) out += " (log)";
  return p["type"].get<std::string>() + " " + out;
}

}  // namespace

std::string SearchSpace::parameters_fingerprint() const {
  return parameters_fingerprint(to_json());
}

std::string SearchSpace::parameters_fingerprint(const nlohmann::json& space_json) {
  nlohmann::json domains = nlohmann::json::array();
  for (auto& [name, p] : domains_of(space_json)) domains.push_back(std::move(p));
  return fnv1a_hex(domains.dump());
}

std::string SearchSpace::parameters_difference(const SearchSpace& other) const {
  const auto here = domains_of(to_json());
  const auto there = domains_of(other.to_json());
  std::vector<std::string> differences;
  for (const auto& [name, p] : here) {
    const auto it = there.find(name);
    if (it == there.end()) {
      differences.push_back("parameter " + name + " only here");
    } else if (it->second != p) {
      differences.push_back("parameter " + name + ": " + domain_text(it->second) + " there, " +
                            domain_text(p) + " here");
    }
  }
  for (const auto& [name, p] : there) {
    if (!here.contains(name)) differences.push_back("parameter " + name + " only there");
  }
  std::string out;
  for (std::size_t i = 0; i < differences.size() && i < kMaxNamedDifferences; ++i) {
    out += (out.empty() ? "" : "; ") + differences[i];
  }
  if (differences.size() > kMaxNamedDifferences) {
    out += "; " + std::to_string(differences.size() - kMaxNamedDifferences) + " more";
  }
  return out;
}

SearchSpace SearchSpace::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("parameters") || !j["parameters"].is_array()) {
    throw InvalidInput(
        "a space is a JSON object with \"parameters\": [...] and optional \"constraints\": "
        "[...], or Kernel Tuner's \"tune_params\": {...} with optional \"restrictions\", or a "
        "T1 file's \"ConfigurationSpace\" (see docs/space-format.md)");
  }
  // A misspelt key ("restrictions", Kernel Tuner's word) would drop every constraint silently.
  for (const auto& [key, value] : j.items()) {
    if (key != "parameters" && key != "constraints") {
      throw InvalidInput("unknown field \"" + key +
                         "\" in the space; allowed: parameters, constraints (see "
                         "docs/space-format.md)");
    }
  }
  // Before any list of values is made: each may be within its own limit, and all together not.
  {
    std::vector<std::pair<std::string, double>> sizes;
    for (const auto& pj : j["parameters"]) {
      const auto name = pj.is_object() ? pj.value("name", nlohmann::json()) : nlohmann::json();
      sizes.emplace_back(name.is_string() ? name.get<std::string>() : "?", declared_values(pj));
    }
    check_total_values(std::move(sizes));
  }
  std::vector<Parameter> params;
  std::size_t position = 0;
  for (const auto& pj : j["parameters"]) {
    const std::string where = "parameter #" + std::to_string(position++);
    if (!pj.is_object()) throw InvalidInput(where + " must be an object");
    if (!pj.contains("name") || !pj["name"].is_string()) {
      throw InvalidInput(where + " needs a string \"name\"");
    }
    const std::string name = pj["name"].get<std::string>();
    const std::string here = "parameter '" + name + "'";
    static const std::set<std::string> kKeys = {"name", "type", "values",  "low",    "high",
                                                "step", "log",  "default", "boolean"};
    for (const auto& [key, value] : pj.items()) {
      if (!kKeys.count(key)) {
        throw InvalidInput(
            here + ": unknown field \"" + key +
            "\"; allowed: name, type, values, low, high, step, log, default, boolean");
      }
    }
    if (pj.contains("boolean") && !pj["boolean"].is_boolean()) {
      throw InvalidInput(here + ": \"boolean\" must be true or false, got " + pj["boolean"].dump());
    }
    const bool python_bool = pj.value("boolean", false);
    if (pj.contains("type") && !pj["type"].is_string()) {
      throw InvalidInput(here +
                         ": \"type\" must be a string: integer, ordinal, categorical or real");
    }
    // Without a type, a list is ordinal, unless it holds a string (as Kernel Tuner's lists
    // of compiler flags): then there is no order to it.
    const auto holds_string = [&] {
      if (!pj.contains("values") || !pj["values"].is_array()) return false;
      for (const auto& v : pj["values"]) {
        if (v.is_string()) return true;
      }
      return false;
    };
    std::string type =
        pj.value("type", pj.contains("values") ? (holds_string() ? "categorical" : "ordinal") : "");
    if (pj.contains("log") && !pj["log"].is_boolean()) {
      throw InvalidInput(here + ": \"log\" must be true or false, got " + pj["log"].dump());
    }
    const bool log_scale = pj.contains("log") && pj["log"].get<bool>();
    // A field the type does not read ("step" on a real, "low" on a list) would be ignored.
    const auto only = [&](std::initializer_list<std::string_view> fields) {
      for (const auto& [key, value] : pj.items()) {
        if (key == "name" || key == "type" || key == "default" || key == "boolean") continue;
        if (std::find(fields.begin(), fields.end(), key) != fields.end()) continue;
        std::string allowed = "name, type";
        for (const auto f : fields) allowed += ", " + std::string(f);
        throw InvalidInput(here + ": \"" + key + "\" does not apply to type " + type +
                           "; its fields are " + allowed + ", default");
      }
    };
    std::optional<Value> def;
    const auto in_default = [&](auto&& read) {
      try {
        return read();
      } catch (const InvalidInput& e) {
        throw InvalidInput(here + ": \"default\": " + e.what());
      }
    };
    if (pj.contains("default")) def = in_default([&] { return value_from_json(pj["default"]); });
    auto number = [&](const char* key) {
      if (!pj.contains(key) || !pj[key].is_number()) {
        throw InvalidInput(here + ": type " + type + " needs a number \"" + key + "\"");
      }
      return pj[key].get<double>();
    };
    if (type == "integer" || type == "int") {
      if (pj.contains("values")) {
        only({"values", "log"});
        params.push_back(ordinal(name, values_from_json(pj["values"], here), def, log_scale));
        continue;
      }
      // Integer bounds are stored as doubles: every whole number up to 2^53 is exact there.
      constexpr double kMaxWhole = 9007199254740992.0;
      const auto whole = [&](double v, const std::string& what) {
        if (!(std::floor(v) == v && std::abs(v) <= kMaxWhole)) {
          throw InvalidInput(here + ": " + what +
                             " must be a whole number within +-2^53 (9007199254740992), got " +
                             nlohmann::json(v).dump());
        }
        return static_cast<std::int64_t>(v);
      };
      only({"low", "high", "step", "log"});
      const auto step = pj.contains("step") ? whole(number("step"), "\"step\"") : 1;
      std::optional<std::int64_t> idef;
      if (def) idef = whole(in_default([&] { return as_double(*def); }), "\"default\"");
      params.push_back(integer_range(name, whole(number("low"), "\"low\""),
                                     whole(number("high"), "\"high\""), step, idef));
      params.back().log_scale = log_scale;  // checked with the others: values must be > 0
    } else if (type == "ordinal") {
      only({"values", "log"});
      params.push_back(ordinal(name, values_from_json(pj.value("values", nlohmann::json()), here),
                               def, log_scale));
    } else if (type == "categorical") {
      only({"values"});
      params.push_back(
          categorical(name, values_from_json(pj.value("values", nlohmann::json()), here), def));
    } else if (type == "real" || type == "float") {
      only({"low", "high", "log"});
      std::optional<double> ddef;
      if (def) ddef = in_default([&] { return as_double(*def); });
      params.push_back(real_interval(name, number("low"), number("high"), log_scale, ddef));
    } else {
      throw InvalidInput(here +
                         (type.empty() ? std::string(": no \"type\" (and no \"values\")")
                                       : ": unknown type \"" + type + "\"") +
                         "; allowed: integer, ordinal, categorical, real (int and float are read "
                         "as integer and real)");
    }
    if (python_bool) {
      // Only False and True (0 and 1) can be written as Python's booleans.
      auto& p = params.back();
      if (!p.is_discrete()) {
        throw InvalidInput(here +
                           ": \"boolean\": true says its values are False and True (0 "
                           "and 1), but it is a real interval");
      }
      for (const auto& v : p.values) {
        if (!is_number(v) || (as_double(v) != 0.0 && as_double(v) != 1.0)) {
          throw InvalidInput(here +
                             ": \"boolean\": true says its values are False and True (0 "
                             "and 1), but it has the value " +
                             tunebase::to_json(v).dump());
        }
      }
      p.python_bool = true;
    }
  }
  std::vector<std::string> constraints;
  if (j.contains("constraints")) {
    if (!j["constraints"].is_array())
      throw InvalidInput("\"constraints\" must be a list of strings");
    for (const auto& c : j["constraints"]) {
      if (!c.is_string()) throw InvalidInput("each constraint must be a string, got " + c.dump());
      constraints.push_back(c.get<std::string>());
    }
  }
  return SearchSpace(std::move(params), constraints);
}

SearchSpace SearchSpace::from_t1(const nlohmann::json& j) {
  const auto cs = j.find("ConfigurationSpace");
  if (cs == j.end() || !cs->contains("TuningParameters") || !(*cs)["TuningParameters"].is_array()) {
    throw InvalidInput("a T1 file needs ConfigurationSpace.TuningParameters (a list)");
  }
  std::vector<Parameter> params;
  std::vector<std::string> notes;
  for (const auto& tp : (*cs)["TuningParameters"]) {
    if (!tp.contains("Name") || !tp["Name"].is_string()) {
      throw InvalidInput("a T1 tuning parameter needs a string Name");
    }
    const std::string name = tp["Name"].get<std::string>();
    const std::string here = "T1 parameter '" + name + "'";
    auto listed = python_list(tp.value("Values", nlohmann::json()), here);
    // A numeric Type with values written as strings ("1"): the numbers they spell.
    const auto type = tp.contains("Type") && tp["Type"].is_string() ? tp["Type"].get<std::string>()
                                                                    : std::string();
    if (type == "int" || type == "float") {
      for (auto& v : listed) {
        if (!v.is_string()) continue;
        const auto text = v.get<std::string>();
        std::size_t used = 0;
        try {
          v = type == "int" ? nlohmann::json(std::stoll(text, &used))
                            : nlohmann::json(std::stod(text, &used));
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) {
          throw InvalidInput(here + ": its Type is " + type + " but it lists \"" + text +
                             "\", which is not a number");
        }
      }
    }
    auto values = values_from_json(listed, here);
    std::optional<Value> def;
    if (tp.contains("Default")) {
      auto d = tp["Default"];
      if (d.is_array() && !d.empty()) d = d[0];
      if (!d.is_null()) def = value_from_json(d);
    }
    if (def && !std::any_of(values.begin(), values.end(),
                            [&](const Value& v) { return same_value(v, *def); })) {
      // T1 files in the wild carry defaults outside their value lists.
      notes.push_back(here + ": its Default " + tunebase::to_json(*def).dump() +
                      " is not among its Values; the first value, " +
                      tunebase::to_json(values.front()).dump() + ", is its default");
      def.reset();
    }
    params.push_back(list_parameter(name, std::move(values), def));
  }
  std::vector<std::string> constraints;
  if (cs->contains("Conditions")) {
    for (const auto& c : (*cs)["Conditions"]) {
      if (c.is_string())
        constraints.push_back(c.get<std::string>());
      else if (c.is_object() && c.contains("Expression") && c["Expression"].is_string()) {
        constraints.push_back(c["Expression"].get<std::string>());
      } else {
        throw InvalidInput("a T1 condition needs a string Expression, got " + c.dump());
      }
    }
  }
  SearchSpace space(std::move(params), constraints);
  space.notes_ = std::move(notes);
  return space;
}

SearchSpace SearchSpace::from_kernel_tuner(const nlohmann::json& tune_params,
                                           const std::vector<std::string>& restrictions,
                                           const std::vector<std::string>& order) {
  if (!tune_params.is_object()) {
    throw InvalidInput("tune_params must be an object {\"name\": [values...]}");
  }
  std::vector<std::string> names = order;
  if (names.empty()) {
    for (const auto& [name, values] : tune_params.items()) names.push_back(name);
  }
  std::vector<Parameter> params;
  for (const auto& name : names) {
    auto it = tune_params.find(name);
    if (it == tune_params.end()) {
      throw InvalidInput("tune_params has no parameter '" + name + "' named in the key order");
    }
    params.push_back(list_parameter(name, values_from_json(*it, "tune_params '" + name + "'"), {}));
    // Python's True and False (read as 1 and 0) are remembered, so that a cache written from
    // the space keys them as Kernel Tuner does.
    params.back().python_bool =
        std::all_of(it->begin(), it->end(), [](const nlohmann::json& v) { return v.is_boolean(); });
  }
  return SearchSpace(std::move(params), restrictions);
}

SearchSpace SearchSpace::from_document(const nlohmann::ordered_json& ordered) {
  const auto j = nlohmann::json::parse(ordered.dump());
  // One format per space: keys of two would leave one's parameters or constraints unread.
  if (j.is_object()) {
    const std::vector<std::pair<const char*, std::vector<const char*>>> formats = {
        {"ConfigurationSpace", {"tune_params", "restrictions", "parameters", "constraints"}},
        {"tune_params", {"parameters", "constraints"}}};
    for (const auto& [key, others] : formats) {
      if (!j.contains(key)) continue;
      for (const char* other : others) {
        if (j.contains(other)) {
          throw InvalidInput(std::string("a space has \"") + key + "\" and \"" + other +
                             "\": give one format (tunebase's parameters and constraints, "
                             "Kernel Tuner's tune_params and restrictions, or a T1 file's "
                             "ConfigurationSpace; see docs/space-format.md)");
        }
      }
    }
  }
  if (j.is_object() && j.contains("ConfigurationSpace")) return from_t1(j);
  if (j.is_object() && j.contains("tune_params")) {
    // A misspelt "restrictions" would leave every configuration valid. A Kernel Tuner cache
    // file serves as a space too: its other keys are known and say nothing of the space.
    static const std::vector<std::string> kKernelTunerKeys = {
        "tune_params",    "restrictions",
        "device_name",    "kernel_name",
        "problem_size",   "tune_params_keys",
        "objective",      "cache",
        "schema_version", "objective_higher_is_better"};
    for (const auto& [key, value] : j.items()) {
      if (std::find(kKernelTunerKeys.begin(), kKernelTunerKeys.end(), key) !=
          kKernelTunerKeys.end()) {
        continue;
      }
      if (key == "constants") {
        throw InvalidInput(
            "\"constants\" is not supported in a Kernel Tuner space: restrictions may name "
            "only the parameters in tune_params; write the constant's value into the "
            "restrictions, or make it a parameter with one value");
      }
      throw InvalidInput("unknown key \"" + key +
                         "\" in a Kernel Tuner space; allowed: tune_params, restrictions (and, "
                         "in a Kernel Tuner cache file, device_name, kernel_name, problem_size, "
                         "tune_params_keys, objective, objective_higher_is_better, cache, "
                         "schema_version)");
    }
    if (!ordered["tune_params"].is_object()) {
      throw InvalidInput("tune_params must be an object of parameter name -> list of values");
    }
    std::vector<std::string> order;
    for (const auto& [name, values] : ordered["tune_params"].items()) order.push_back(name);
    std::vector<std::string> restrictions;
    for (const auto& r : j.value("restrictions", nlohmann::json::array())) {
      if (!r.is_string()) throw InvalidInput("each restriction must be a string");
      restrictions.push_back(r.get<std::string>());
    }
    return from_kernel_tuner(j["tune_params"], restrictions, order);
  }
  return from_json(j);
}

SearchSpace SearchSpace::load(const std::string& path) {
  // Plain or gzip, told by the magic bytes as for measurement files: a Kernel Tuner cache
  // (gemm/A100.json.gz) is a space too.
  const std::string text = read_maybe_gzipped(path);
  // ordered_json keeps the parameter order of Kernel Tuner's tune_params.
  const auto ordered = parse_json_text<nlohmann::ordered_json>(text, path);
  SearchSpace space;
  try {
    space = from_document(ordered);
  } catch (const ParseError& e) {
    throw ParseError(path + ": " + e.what(), e.position());
  } catch (const InvalidInput& e) {
    throw InvalidInput(path + ": " + e.what());
  }
  // A space with nothing valid is an error the user should hear about at once. The defaults
  // are tried first: no random draws are needed to find them valid.
  Rng rng(0);
  try {
    if (!space.valid_defaults().empty()) return space;
    (void)space.sample(rng);
  } catch (const InvalidInput& e) {
    throw InvalidInput(path + ": " + e.what());
  }
  return space;
}

}  // namespace tunebase
