#include "core/value.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.h"

namespace tunebase {

bool is_number(const Value& v) { return !std::holds_alternative<std::string>(v); }

double as_double(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  throw InvalidInput("expected a number, got the string \"" + std::get<std::string>(v) + "\"");
}

std::string to_string(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    // Shortest text that reads back to the same double, as Python's repr does.
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d);
    std::string s(buf, end);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  }
  return std::get<std::string>(v);
}

std::string python_text(const Value& v) {
  const auto* d = std::get_if<double>(&v);
  if (!d) return to_string(v);
  if (std::isnan(*d)) return "nan";
  if (std::isinf(*d)) return *d > 0 ? "inf" : "-inf";
  // Python's repr: the shortest digits that read back, in positional notation when the
  // decimal exponent is in -4 .. 15, else as d.ddde+XX (two exponent digits at least).
  char buf[40];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d, std::chars_format::scientific);
  const std::string sci(buf, end);  // [-]d[.ddd]e(+|-)XX
  const auto e = sci.find('e');
  const bool negative = sci.front() == '-';
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c >= '0' && c <= '9') digits += c;
  }
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0)
    return out + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  const auto whole = static_cast<std::size_t>(exponent) + 1;
  if (digits.size() <= whole) return out + digits + std::string(whole - digits.size(), '0') + ".0";
  return out + digits.substr(0, whole) + "." + digits.substr(whole);
}

nlohmann::json to_json(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::get<std::string>(v);
}

Value value_from_json(const nlohmann::json& j) {
  if (j.is_number_unsigned() &&
      j.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw InvalidInput("integer " + j.dump() +
                       " is out of range; integers must lie within -2^63 .. 2^63-1 "
                       "(-9223372036854775808 .. 9223372036854775807)");
  }
  // Kernel Tuner takes any Python value as a tune_params value, True and False too, and Python
  // holds True == 1 and False == 0 (one dict key): read as those integers, as T1's Values are.
  if (j.is_boolean()) return std::int64_t{j.get<bool>() ? 1 : 0};
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_number_float()) {
    const double d = j.get<double>();
    return d;
  }
  if (j.is_string()) return j.get<std::string>();
  // "got null", "got the boolean true", "got the array [1, 2]": null names itself.
  throw InvalidInput(
      "expected a number or a string, got " +
      (j.is_null() ? std::string("null") : "the " + std::string(j.type_name()) + " " + j.dump()));
}

namespace {

// An integer against a real, exactly: converting the integer to a double would round it (past
// 2^53), converting the real to an integer would drop its fraction.
std::partial_ordering compare_exactly(std::int64_t i, double d) {
  if (std::isnan(d)) return std::partial_ordering::unordered;
  constexpr double kTwo63 = 9223372036854775808.0;
  if (d >= kTwo63) return std::partial_ordering::less;
  if (d < -kTwo63) return std::partial_ordering::greater;
  const double whole = std::trunc(d);
  const auto w = static_cast<std::int64_t>(whole);  // exact: within range, no fraction
  if (i != w) return i < w ? std::partial_ordering::less : std::partial_ordering::greater;
  if (d > whole) return std::partial_ordering::less;
  if (d < whole) return std::partial_ordering::greater;
  return std::partial_ordering::equivalent;
}

}  // namespace

std::partial_ordering compare_numbers(const Value& a, const Value& b) {
  const auto* ai = std::get_if<std::int64_t>(&a);
  const auto* bi = std::get_if<std::int64_t>(&b);
  if (ai && bi) return *ai <=> *bi;
  if (ai) return compare_exactly(*ai, as_double(b));
  if (bi) return 0 <=> compare_exactly(*bi, as_double(a));
  return as_double(a) <=> as_double(b);
}

bool same_value(const Value& a, const Value& b) {
  if (is_number(a) && is_number(b)) return compare_numbers(a, b) == 0;
  if (!is_number(a) && !is_number(b)) return std::get<std::string>(a) == std::get<std::string>(b);
  return false;
}

}  // namespace tunebase
