#include "core/json.h"

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
Json parse_json_text(std::string_view text, std::string_view what) {
  // The parser itself is iterative; the callback sees the depth of every array and object.
  const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t event, Json&) {
    if ((event == nlohmann::json::parse_event_t::object_start ||
         event == nlohmann::json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw InvalidInput(std::string(what) + " nests arrays and objects deeper than " +
                         std::to_string(kMaxJsonDepth) + " levels; at most " +
                         std::to_string(kMaxJsonDepth) + " are allowed");
    }
    return true;
  };
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

template nlohmann::json parse_json_text<nlohmann::json>(std::string_view, std::string_view);
template nlohmann::ordered_json parse_json_text<nlohmann::ordered_json>(std::string_view,
                                                                        std::string_view);

}  // namespace tunebase
