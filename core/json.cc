#include "core/json.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "core/error.h"

namespace tunebase {

std::string without_exception_tag(const char* what) {
  std::string s(what);
  if (!s.empty() && s.front() == '[') {
    if (auto close = s.find("] "); close != std::string::npos) s.erase(0, close + 2);
  }
  return s;
}

template <class Json>
Json parse_json_text(std::string_view text, std::string_view what, DuplicateKeys duplicates) {
  // The keys of each open object, innermost last (refuse only).
  std::vector<std::unordered_set<std::string>> open_objects;
  // The parser itself is iterative; the callback sees the depth of every array and object.
  const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t event, Json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth) {
      throw InvalidInput(std::string(what) + " nests arrays and objects deeper than " +
                         std::to_string(kMaxJsonDepth) + " levels; at most " +
                         std::to_string(kMaxJsonDepth) + " are allowed");
    }
    if (duplicates == DuplicateKeys::refuse) {
      if (event == Event::object_start) {
        open_objects.emplace_back();
      } else if (event == Event::object_end && !open_objects.empty()) {
        open_objects.pop_back();
      } else if (event == Event::key && !open_objects.empty() &&
                 !open_objects.back().insert(parsed.template get<std::string>()).second) {
        throw InvalidInput(std::string(what) + " names the key \"" +
                           parsed.template get<std::string>() +
                           "\" twice in one object; which value is meant is unclear: give it once");
      }
    }
    return true;
  };
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw ParseError(std::string(what) + " is empty" +
                         (text.empty() ? std::string(" (no JSON in it)")
                                       : std::string(" (only white space, no JSON)")),
                     0);
  }
  try {
    return Json::parse(text, limit_depth);
  } catch (const nlohmann::json::parse_error& e) {
    const std::size_t position = e.byte > 0 ? e.byte - 1 : 0;
    throw ParseError(std::string(what) + " is not valid JSON (at byte " + std::to_string(e.byte) +
                         "): " + without_exception_tag(e.what()),
                     position);
  } catch (const nlohmann::json::out_of_range& e) {
    // 406: a number literal such as 1e999 that no double holds.
    throw InvalidInput(std::string(what) + " holds a number out of range (" +
                       without_exception_tag(e.what()) +
                       "); numbers must lie within +-1.7976931348623157e308");
  }
}

template nlohmann::json parse_json_text<nlohmann::json>(std::string_view, std::string_view,
                                                        DuplicateKeys);
template nlohmann::ordered_json parse_json_text<nlohmann::ordered_json>(std::string_view,
                                                                        std::string_view,
                                                                        DuplicateKeys);

}  // namespace tunebase
