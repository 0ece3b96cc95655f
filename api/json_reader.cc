#include "api/json_reader.h"

#include <algorithm>
#include <cmath>

#include "api/errors.h"
#include "core/json.h"

namespace tunebase::api {

namespace {

std::string type_name(const nlohmann::json& j) {
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  return "null";
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

nlohmann::json parse_json_body(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return nlohmann::json::object();
  try {
    return parse_json_text(body, "the request body", DuplicateKeys::refuse);
  } catch (const InvalidInput& e) {
    throw FieldError("body", e.what());
  }
}

JsonReader::JsonReader(const nlohmann::json& object, std::string where)
    : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) {
    throw FieldError(where_.empty() ? "body" : where_,
                     (where_.empty() ? std::string("the request body") : where_) +
                         " must be a JSON object, got " + type_name(object_));
  }
}

std::string JsonReader::field(const std::string& key) const {
  return where_.empty() ? key : where_ + "." + key;
}

const nlohmann::json* JsonReader::find(const std::string& key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.push_back(key);
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> JsonReader::optional_string(const std::string& key) {
  const auto* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    throw FieldError(field(key), "\"" + field(key) + "\" must be a string, got " + type_name(*v));
  }
  return v->get<std::string>();
}

std::string JsonReader::required_string(const std::string& key) {
  auto v = optional_string(key);
  if (!v) throw FieldError(field(key), "\"" + field(key) + "\" is required (a string)");
  return *v;
}

std::optional<std::int64_t> JsonReader::optional_integer(const std::string& key, std::int64_t min,
                                                         std::int64_t max) {
  const auto* v = find(key);
  if (!v) return std::nullopt;
  const auto out_of_range = [&] {
    return FieldError(field(key), "\"" + field(key) + "\" must be in [" + std::to_string(min) +
                                      ", " + std::to_string(max) + "], got " + v->dump());
  };
  std::int64_t value = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() &&
        v->get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw out_of_range();
    }
    value = v->get<std::int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             std::floor(v->get<double>()) == v->get<double>() &&
             std::abs(v->get<double>()) < 9.0e15) {
    value = static_cast<std::int64_t>(v->get<double>());
  } else {
    throw FieldError(field(key), "\"" + field(key) + "\" must be an integer, got " + type_name(*v));
  }
  if (value < min || value > max) throw out_of_range();
  return value;
}

std::int64_t JsonReader::required_integer(const std::string& key, std::int64_t min,
                                          std::int64_t max) {
  auto v = optional_integer(key, min, max);
  if (!v) throw FieldError(field(key), "\"" + field(key) + "\" is required (an integer)");
  return *v;
}

std::optional<double> JsonReader::optional_number(const std::string& key, double min, double max) {
  const auto* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    throw FieldError(field(key), "\"" + field(key) + "\" must be a number, got " + type_name(*v));
  }
  const double value = v->get<double>();
  if (!std::isfinite(value) || value < min || value > max) {
    throw FieldError(field(key), "\"" + field(key) + "\" must be a finite number in [" +
                                     nlohmann::json(min).dump() + ", " +
                                     nlohmann::json(max).dump() + "], got " + v->dump());
  }
  return value;
}

std::optional<bool> JsonReader::optional_bool(const std::string& key) {
  const auto* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    throw FieldError(field(key),
                     "\"" + field(key) + "\" must be true or false, got " + type_name(*v));
  }
  return v->get<bool>();
}

const nlohmann::json* JsonReader::optional_object(const std::string& key) {
  const auto* v = find(key);
  if (v && !v->is_object()) {
    throw FieldError(field(key),
                     "\"" + field(key) + "\" must be a JSON object, got " + type_name(*v));
  }
  return v;
}

const nlohmann::json& JsonReader::required_object(const std::string& key) {
  const auto* v = optional_object(key);
  if (!v) throw FieldError(field(key), "\"" + field(key) + "\" is required (a JSON object)");
  return *v;
}

const nlohmann::json* JsonReader::optional_array(const std::string& key) {
  const auto* v = find(key);
  if (v && !v->is_array()) {
    throw FieldError(field(key), "\"" + field(key) + "\" must be an array, got " + type_name(*v));
  }
  return v;
}

const nlohmann::json& JsonReader::required_array(const std::string& key) {
  const auto* v = optional_array(key);
  if (!v) throw FieldError(field(key), "\"" + field(key) + "\" is required (an array)");
  return *v;
}

std::vector<double> JsonReader::optional_numbers(const std::string& key) {
  std::vector<double> out;
  const auto* list = optional_array(key);
  if (!list) return out;
  out.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto& e = (*list)[i];
    if (!e.is_number() || !std::isfinite(e.get<double>())) {
      const std::string f = field(key) + "[" + std::to_string(i) + "]";
      throw FieldError(f, "\"" + f + "\" must be a finite number, got " + e.dump());
    }
    out.push_back(e.get<double>());
  }
  return out;
}

std::optional<std::string> JsonReader::optional_choice(const std::string& key,
                                                       const std::vector<std::string>& allowed) {
  auto v = optional_string(key);
  if (v && std::find(allowed.begin(), allowed.end(), *v) == allowed.end()) {
    throw FieldError(field(key),
                     "\"" + field(key) + "\" is \"" + *v + "\"; allowed: " + join(allowed));
  }
  return v;
}

void JsonReader::finish() const {
  for (const auto& [key, value] : object_.items()) {
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
      throw FieldError(field(key),
                       "unknown field \"" + field(key) + "\"; " +
                           (known_.empty() ? std::string("this body takes no fields ({})")
                                           : "allowed: " + join(known_)));
    }
  }
}

}  // namespace tunebase::api
