// Reading JSON text from outside (request bodies, files users give): syntax errors with their
// position, and limits that keep a hostile document from taking the process down.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tunebase {

/// The deepest nesting of arrays and objects tunebase reads. Real inputs nest a few levels;
/// nlohmann's serialiser and copies recurse, so a document nested 100,000 deep would exhaust
/// the stack long after it was parsed.
inline constexpr int kMaxJsonDepth = 64;

/// How parse_json_text treats an object that names one key twice.
enum class DuplicateKeys {
  last_wins,  ///< as JSON parsers do (files whose readers check what matters to them)
  refuse,     ///< InvalidInput naming the key: which value was meant is unclear
};

/// Parses `text` as JSON. `what` names it in messages ("the request body", "cache.json").
/// Throws ParseError (with the byte offset) when the text is not JSON, and InvalidInput when
/// it nests deeper than kMaxJsonDepth, holds a number beyond a double's range or an integer
/// beyond 64 bits, or (refuse) names a key twice in one object.
template <class Json = nlohmann::json>
Json parse_json_text(std::string_view text, std::string_view what,
                     DuplicateKeys duplicates = DuplicateKeys::last_wins);

/// nlohmann's messages start with "[json.exception.parse_error.101] "; users need the rest.
std::string without_exception_tag(const char* what);

}  // namespace tunebase
