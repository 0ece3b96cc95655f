// Strict reading of JSON request bodies: every error names the field and what is allowed, and
// fields nobody asked for are rejected (a typo must not be silently ignored).
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tunebase::api {

/// Parses a request body as JSON; malformed text is a FieldError on "body" with the position.
/// An empty body parses as an empty object.
nlohmann::json parse_json_body(const std::string& body);

/// Reads one JSON object. Each accessor records its key as known; finish() rejects the rest.
/// A null value counts as absent.
class JsonReader {
 public:
  /// `where`: the path of this object in the request, "" for the body itself. Throws a
  /// FieldError when `object` is not an object.
  explicit JsonReader(const nlohmann::json& object, std::string where = {});
  /// The reader keeps a reference: a temporary would dangle.
  JsonReader(nlohmann::json&& object, std::string where = {}) = delete;

  std::string required_string(const std::string& key);
  std::optional<std::string> optional_string(const std::string& key);
  std::int64_t required_integer(const std::string& key,
                                std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                                std::int64_t max = std::numeric_limits<std::int64_t>::max());
  std::optional<std::int64_t> optional_integer(
      const std::string& key, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
      std::int64_t max = std::numeric_limits<std::int64_t>::max());
  std::optional<double> optional_number(const std::string& key,
                                        double min = -std::numeric_limits<double>::max(),
                                        double max = std::numeric_limits<double>::max());
  std::optional<bool> optional_bool(const std::string& key);
  /// The value if it is an object; FieldError for another type.
  const nlohmann::json* optional_object(const std::string& key);
  const nlohmann::json& required_object(const std::string& key);
  const nlohmann::json* optional_array(const std::string& key);
  const nlohmann::json& required_array(const std::string& key);
  /// A list of finite numbers.
  std::vector<double> optional_numbers(const std::string& key);
  /// One of `allowed` (a string); FieldError listing them otherwise.
  std::optional<std::string> optional_choice(const std::string& key,
                                             const std::vector<std::string>& allowed);

  /// Rejects every key no accessor asked for, listing the allowed ones.
  void finish() const;
  /// Path of `key` in the request, e.g. "measurements[3].config".
  std::string field(const std::string& key) const;

 private:
  const nlohmann::json* find(const std::string& key);
  const nlohmann::json& object_;
  std::string where_;
  std::vector<std::string> known_;
};

}  // namespace tunebase::api
