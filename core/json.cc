#include "core/json.h"

#include <cctype>
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

namespace {

// A first pass over JSON text that builds nothing: it refuses nesting past kMaxJsonDepth, an
// integer beyond 64 bits and, when asked, a key named twice in one object. (A parser callback could
// check the same while building, but nlohmann's callback parser scans an object's members each time
// a member object closes: quadratic in a Kernel Tuner cache's entries, minutes for 100,000 of
// them.)
class JsonChecker {
 public:
  JsonChecker(std::string_view what, DuplicateKeys duplicates)
      : what_(what), duplicates_(duplicates) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(nlohmann::json::number_integer_t) { return value(); }
  bool number_unsigned(nlohmann::json::number_unsigned_t) { return value(); }
  // nlohmann reads an integer literal beyond 64 bits as the nearest double:
  // 99999999999999999999 would become 1e+20, another value, without a word.
  bool number_float(nlohmann::json::number_float_t, const std::string& text) {
    value();
    if (text.find_first_of(".eE") == std::string::npos) {
      throw InvalidInput(std::string(what_) + " holds the integer " + text + where() +
                         ", beyond 64 bits; integers must lie within -9223372036854775808 .. "
                         "18446744073709551615 (write it as a real, such as 1e20, if a float is "
                         "meant)");
    }
    return true;
  }
  bool string(std::string&) { return value(); }
  bool binary(nlohmann::json::binary_t&) { return value(); }
  bool start_object(std::size_t) {
    value();
    open(false);
    if (duplicates_ == DuplicateKeys::refuse) objects_.emplace_back();
    return true;
  }
  bool key(std::string& key) {
    path_.back().key = key;
    if (duplicates_ == DuplicateKeys::refuse && !objects_.back().insert(key).second) {
      throw InvalidInput(std::string(what_) + " names the key \"" + key +
                         "\" twice in one object; which value is meant is unclear: give it once");
    }
    return true;
  }
  bool end_object() {
    close();
    if (duplicates_ == DuplicateKeys::refuse) objects_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    value();
    open(true);
    return true;
  }
  bool end_array() {
    close();
    return true;
  }
  // Syntax errors are left to the parse that builds the value, which reports them.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  // Where the parse is, for messages: the key in each open object, the position in each array.
  struct Level {
    bool array = false;
    std::string key;
    std::size_t items = 0;
  };

  void open(bool array) {
    if (path_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
      throw InvalidInput(std::string(what_) + " nests arrays and objects deeper than " +
                         std::to_string(kMaxJsonDepth) + " levels; at most " +
                         std::to_string(kMaxJsonDepth) + " are allowed");
    }
    path_.push_back({array, {}, 0});
  }
  void close() { path_.pop_back(); }
  // A value begins: in an array, the next item.
  bool value() {
    if (!path_.empty() && path_.back().array) ++path_.back().items;
    return true;
  }
  // " at [\"cache\"][\"16,1\"][\"flops\"]" (nothing at the top level).
  std::string where() const {
    std::string out;
    for (const auto& level : path_) {
      out += level.array ? "[" + std::to_string(level.items - 1) + "]"
                         : "[" + nlohmann::json(level.key).dump() + "]";
    }
    return out.empty() ? out : " at " + out;
  }

  std::string_view what_;
  DuplicateKeys duplicates_;
  std::vector<Level> path_;
  std::vector<std::unordered_set<std::string>> objects_;  // keys of each open object
};

}  // namespace

template <class Json>
Json parse_json_text(std::string_view text, std::string_view what, DuplicateKeys duplicates) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw ParseError(std::string(what) + " is empty" +
                         (text.empty() ? std::string(" (no JSON in it)")
                                       : std::string(" (only white space, no JSON)")),
                     0);
  }
  try {
    JsonChecker checker(what, duplicates);
    // A syntax error stops the check where it is; the parse below reports it.
    (void)nlohmann::json::sax_parse(text, &checker);
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const std::size_t position = e.byte > 0 ? e.byte - 1 : 0;
    // Python's json.dumps writes NaN and Infinity unless told not to (allow_nan=False); the
    // parser stops at their first letter.
    const auto at = text.substr(std::min(position, text.size()));
    const auto is_word = [&](std::string_view word) {
      return at.starts_with(word) && (at.size() == word.size() ||
                                      !std::isalnum(static_cast<unsigned char>(at[word.size()])));
    };
    const bool python_float = is_word("NaN") || is_word("Infinity");
    throw ParseError(std::string(what) + " is not valid JSON (at byte " + std::to_string(e.byte) +
                         "): " + without_exception_tag(e.what()) +
                         (python_float ? "; NaN and Infinity are not JSON numbers (Python's "
                                         "json.dumps writes them unless allow_nan=False): send a "
                                         "finite number, or report an evaluation that gave none "
                                         "as \"status\": \"failed\""
                                       : ""),
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
