// The value of one tuning parameter and its conversions.
#pragma once

#include <compare>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace tunebase {

/// A parameter value: an integer, a real, or a string (categorical).
using Value = std::variant<std::int64_t, double, std::string>;

/// One point of a search space: one value per parameter, in the space's parameter order.
using Configuration = std::vector<Value>;

bool is_number(const Value& v);
/// The numeric value of an integer or real; throws InvalidInput for a string.
double as_double(const Value& v);
/// Text of a value in configuration keys: `16`, `0.5`, `abc` (the shortest text that reads
/// back to the same number, so 1e-04 where Python writes 0.0001).
std::string to_string(const Value& v);
/// Python's str() of a value, which Kernel Tuner's cache keys are made of: `16`, `0.0001`,
/// `100000.0`, `1e-05`, `1e+16`, `abc`.
std::string python_text(const Value& v);
nlohmann::json to_json(const Value& v);
/// Integer for a JSON integer, real for a JSON real (2.0 stays a real), or string; true and
/// false as 1 and 0 (Python's True == 1, for Kernel Tuner's tune_params); throws InvalidInput
/// for an integer beyond int64 and anything else (null, array, object).
Value value_from_json(const nlohmann::json& j);
/// Equality that treats 2 and 2.0 as the same number. An integer and a real are compared
/// exactly, as Python does (2**53 + 1 is not 2.0**53, though it rounds to it).
bool same_value(const Value& a, const Value& b);
/// The order of two numbers, exact between an integer and a real (as Python's); unordered
/// when one is NaN. InvalidInput for a string.
std::partial_ordering compare_numbers(const Value& a, const Value& b);

}  // namespace tunebase
