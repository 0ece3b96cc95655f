#include "api/errors.h"

#include <spdlog/spdlog.h>

#include <string>

#include "db/sqlite.h"

namespace tunebase::api {

namespace {

ErrorReply reply(int status, const char* code, const std::string& message,
                 const std::string& field = {}) {
  ErrorReply r;
  r.status = status;
  nlohmann::json error{{"code", code}, {"message", message}};
  if (!field.empty()) error["field"] = field;
  r.body = {{"error", std::move(error)}};
  std::string printable;
  for (const char c : message.substr(0, ErrorReply::kMaxMessageHeaderBytes)) {
    printable += c >= 0x20 && c < 0x7f ? c : '?';
  }
  r.headers = {{"X-Tunebase-Error", code}, {"X-Tunebase-Message", std::move(printable)}};
  return r;
}

}  // namespace

// The one place where error types become status codes. Order matters: subclasses first.
ErrorReply error_reply(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const FieldError& e) {
    return reply(400, "invalid_input", e.what(), e.field());
  } catch (const PayloadTooLarge& e) {
    return reply(413, "payload_too_large", e.what(), e.part());
  } catch (const MethodNotAllowed& e) {
    auto r = reply(405, "method_not_allowed", e.what());
    r.headers.emplace_back("Allow", e.allow());
    return r;
  } catch (const ParseError& e) {
    return reply(400, "parse_error", e.what());
  } catch (const InvalidInput& e) {
    return reply(400, "invalid_input", e.what());
  } catch (const Forbidden& e) {
    return reply(403, "forbidden", e.what());
  } catch (const Unauthorized& e) {
    auto r = reply(401, "unauthorized", e.what(), "Authorization");
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tunebase\"");
    return r;
  } catch (const UnknownRoute& e) {
    return reply(404, "unknown_route", e.what());
  } catch (const NotFound& e) {
    return reply(404, "not_found", e.what());
  } catch (const RequestTimeout& e) {
    return reply(408, "request_timeout", e.what());
  } catch (const StudyExists& e) {
    auto r = reply(409, "conflict", e.what());
    r.body["error"]["existing_study_id"] = e.study();
    r.headers.emplace_back("Location", "/v1/studies/" + std::to_string(e.study()));
    return r;
  } catch (const Conflict& e) {
    return reply(409, "conflict", e.what());
  } catch (const Overloaded& e) {
    auto r = reply(503, "overloaded", e.what());
    r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_seconds()));
    return r;
  } catch (const db::SqliteError& e) {
    auto r = reply(503, "storage_unavailable", e.what());
    // Another connection holds the write lock: the same request may succeed once it is done.
    if (e.busy()) {
      r.headers.emplace_back("Retry-After", std::to_string(ErrorReply::kRetryAfterBusySeconds));
    }
    return r;
  } catch (const StorageError& e) {
    // The database is busy or unusable: the request may succeed later, nothing was written.
    return reply(503, "storage_unavailable", e.what());
  } catch (const std::exception& e) {
    spdlog::error("internal error while serving a request: {}", e.what());
    return reply(500, "internal", "internal server error; the server log has the details");
  } catch (...) {
    spdlog::error("internal error while serving a request: unknown exception");
    return reply(500, "internal", "internal server error; the server log has the details");
  }
}

}  // namespace tunebase::api
