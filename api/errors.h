// HTTP errors: the errors only the service raises, and the one place where every tunebase
// error becomes a status code and a JSON body.
#pragma once

#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tunebase::api {

/// Bad input in one named field of a request: the body says which field and what is allowed.
/// `field` is a JSON-pointer-like path ("config.block_size_x", "configs[2]", "query.kernel").
class FieldError : public InvalidInput {
 public:
  FieldError(std::string field, const std::string& message)
      : InvalidInput(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

/// A request body over the route's limit: 413.
class PayloadTooLarge : public InvalidInput {
 public:
  /// `part`: what is too large, "body" or "headers".
  explicit PayloadTooLarge(const std::string& message, std::string part = "body")
      : InvalidInput(message), part_(std::move(part)) {}
  const std::string& part() const { return part_; }

 private:
  std::string part_;
};

/// The client did not send its request in time (slow-loris): 408.
class RequestTimeout : public Error {
 public:
  using Error::Error;
};

/// A path that exists with another method: 405.
class MethodNotAllowed : public InvalidInput {
 public:
  MethodNotAllowed(const std::string& message, std::string allow)
      : InvalidInput(message), allow_(std::move(allow)) {}
  /// Value of the Allow header: the methods the path accepts.
  const std::string& allow() const { return allow_; }

 private:
  std::string allow_;
};

/// Too many questions to models wait already (predictions need no token): 503 with Retry-After.
class Overloaded : public Error {
 public:
  Overloaded(const std::string& message, int retry_after_seconds)
      : Error(message), retry_after_seconds_(retry_after_seconds) {}
  int retry_after_seconds() const { return retry_after_seconds_; }

 private:
  int retry_after_seconds_;
};

/// A study of the name asked for exists already: 409 whose body names it
/// (error.existing_study_id) and whose Location header is its path, as a 201's is, so that a
/// client that means "get or create" continues that study.
class StudyExists : public Conflict {
 public:
  StudyExists(const std::string& message, std::int64_t study) : Conflict(message), study_(study) {}
  std::int64_t study() const { return study_; }

 private:
  std::int64_t study_;
};

/// A path no route serves: 404, kept apart from NotFound of a stored thing by its code.
class UnknownRoute : public NotFound {
 public:
  using NotFound::NotFound;
};

/// What a failed request answers.
struct ErrorReply {
  int status = 500;
  /// {"error": {"code": ..., "message": ..., "field": ...}}
  nlohmann::json body;
  /// Headers: X-Tunebase-Error (the code) and X-Tunebase-Message (the message, printable
  /// ASCII, cut at kMaxMessageHeaderBytes), for clients that see no body of an error (CMake's
  /// file(DOWNLOAD)); Allow, WWW-Authenticate and Retry-After where they apply.
  std::vector<std::pair<std::string, std::string>> headers;
  static constexpr std::size_t kMaxMessageHeaderBytes = 1000;
  /// Retry-After of a 503 for a database another connection holds locked (a write transaction
  /// lasts milliseconds; the request already waited the busy timeout).
  static constexpr int kRetryAfterBusySeconds = 1;
};

/// Maps the exception being handled (pass std::current_exception()) to its reply:
/// InvalidInput / ParseError 400, Unauthorized 401, Forbidden 403, NotFound 404,
/// MethodNotAllowed 405, RequestTimeout 408, Conflict 409, PayloadTooLarge 413,
/// StorageError 503 (with Retry-After when the database is locked), Overloaded 503 (with
/// Retry-After), anything else 500 (its message is not shown: it may leak internals).
ErrorReply error_reply(std::exception_ptr error);

/// Runs `f`, re-throwing a tunebase::InvalidInput it raises as a FieldError on `field` (the
/// core names the problem; the service adds where in the request it was).
template <typename F>
auto in_field(const std::string& field, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const FieldError&) {
    throw;
  } catch (const PayloadTooLarge&) {
    throw;
  } catch (const InvalidInput& e) {
    throw FieldError(field, e.what());
  }
}

}  // namespace tunebase::api
