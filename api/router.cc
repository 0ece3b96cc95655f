#include "api/router.h"

#include <algorithm>
#include <charconv>

#include "api/errors.h"
#include "db/json_text.h"

namespace tunebase::api {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX (and '+' as a space in a query); the offset of a bad escape, or npos.
std::size_t decode_percent(std::string_view text, bool plus_is_space, std::string& out) {
  out.clear();
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      const bool complete = i + 2 < text.size();
      const int hi = complete ? hex_digit(text[i + 1]) : -1;
      const int lo = complete ? hex_digit(text[i + 2]) : -1;
      if (hi < 0 || lo < 0) return i;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return std::string_view::npos;
}

}  // namespace

std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  if (const auto bad = decode_percent(text, plus_is_space, out); bad != std::string_view::npos) {
    throw FieldError("target", "bad percent-encoding in the request target near \"" +
                                   std::string(text.substr(bad, 3)) + "\"");
  }
  return out;
}

namespace {

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// HEAD is GET without the body (RFC 9110): it takes the GET routes, and a refusal names HEAD.
std::string_view routed_method(std::string_view method) {
  return method == "HEAD" ? std::string_view("GET") : method;
}

bool is_param(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// `path` as sent: split at its slashes first, then each segment decoded (RFC 3986), so that
// an encoded slash (%2F) is part of a segment, never a separator.
bool matches(std::string_view pattern, std::string_view path,
             std::map<std::string, std::string>* params) {
  const auto want = segments(pattern);
  const auto got = segments(path);
  if (want.size() != got.size()) return false;
  std::string decoded;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (decode_percent(got[i], false, decoded) != std::string_view::npos) return false;
    if (is_param(want[i])) {
      if (params) (*params)[std::string(want[i].substr(1, want[i].size() - 2))] = decoded;
    } else if (want[i] != decoded) {
      return false;
    }
  }
  return true;
}

nlohmann::json error_schema() {
  return {{"type", "object"},
          {"required", {"error"}},
          {"properties",
           {{"error",
             {{"type", "object"},
              {"required", {"code", "message"}},
              {"properties",
               {{"code", {{"type", "string"}}},
                {"message", {{"type", "string"}}},
                {"field", {{"type", "string"}}},
                {"existing_study_id",
                 {{"type", "integer"},
                  {"description",
                   "a 409 of a study name taken: the id of the study that has it"}}}}}}}}}};
}

}  // namespace

std::optional<std::string> Request::query_value(const std::string& name) const {
  auto it = query.find(name);
  if (it == query.end()) return std::nullopt;
  return it->second;
}

std::int64_t Request::id_param(const std::string& name) const {
  auto it = params.find(name);
  const std::string text = it == params.end() ? std::string() : it->second;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    throw FieldError(
        name, "path segment {" + name + "} must be a positive integer id, got \"" + text + "\"");
  }
  return value;
}

Response Response::model_needed() {
  Response r;
  r.needs_model = true;
  return r;
}

Response Response::json(const nlohmann::json& body, int status) {
  Response r;
  r.status = status;
  r.body = db::json_text(body);  // invalid UTF-8 in stored text is replaced, not a 500
  return r;
}

Response Response::text(std::string body, std::string content_type, int status) {
  Response r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

void Router::add(Route route) { routes_.push_back(std::move(route)); }

Router::Match Router::match(std::string_view method, std::string_view path) const {
  std::string allow;
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const auto& r = routes_[i];
    if (!matches(r.pattern, path, nullptr)) continue;
    if (r.method == routed_method(method)) {
      Match m;
      m.route = &r;
      m.index = i;
      matches(r.pattern, path, &m.params);
      return m;
    }
    if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + r.method;
    // The server answers HEAD wherever GET is (its headers, no body).
    if (r.method == "GET" && allow.find("HEAD") == std::string::npos) allow += ", HEAD";
  }
  if (!allow.empty()) {
    throw MethodNotAllowed(
        std::string(method) + " is not allowed on " + std::string(path) + "; allowed: " + allow,
        allow);
  }
  throw UnknownRoute("no route " + std::string(path) +
                     "; the API is described at /openapi.json (routes live under /v1)");
}

std::size_t Router::body_limit(std::string_view method, std::string_view path) const {
  const auto route = find(method, path);
  return route ? routes_[*route].body_limit : kMaxBodyBytes;
}

std::optional<std::size_t> Router::find(std::string_view method, std::string_view path) const {
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const auto& r = routes_[i];
    if (r.method == routed_method(method) && matches(r.pattern, path, nullptr)) return i;
  }
  return std::nullopt;
}

void split_target(std::string_view target, std::string& path,
                  std::map<std::string, std::string>& query,
                  std::map<std::string, std::string>* raw_query) {
  const auto q = target.find('?');
  // The path stays as sent: the router splits it, then decodes each segment. Its escapes are
  // checked here, so that a bad one is named rather than matching no route.
  path = std::string(target.substr(0, q));
  for (const auto segment : segments(path)) percent_decode(segment, false);
  query.clear();
  if (raw_query) raw_query->clear();
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const auto pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    std::string name = percent_decode(pair.substr(0, eq), true);
    std::string value =
        eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true);
    if (query.count(name)) {
      throw FieldError("query." + name, "query parameter \"" + name + "\" is given twice");
    }
    if (raw_query && eq != std::string_view::npos) raw_query->emplace(name, pair.substr(eq + 1));
    query.emplace(std::move(name), std::move(value));
  }
}

void check_query(const Route& route, const Request& request) {
  for (const auto& [name, value] : request.query) {
    const auto it = std::find_if(route.query.begin(), route.query.end(),
                                 [&](const QueryParam& p) { return p.name == name; });
    if (it == route.query.end()) {
      std::string allowed;
      for (const auto& p : route.query) allowed += (allowed.empty() ? "" : ", ") + p.name;
      throw FieldError("query." + name, "unknown query parameter \"" + name + "\" for " +
                                            route.method + " " + route.pattern +
                                            "; allowed: " + (allowed.empty() ? "none" : allowed));
    }
    if (!it->allowed.empty() &&
        std::find(it->allowed.begin(), it->allowed.end(), value) == it->allowed.end()) {
      std::string allowed;
      for (const auto& a : it->allowed) allowed += (allowed.empty() ? "" : ", ") + a;
      throw FieldError("query." + name, "query parameter \"" + name + "\" is \"" + value +
                                            "\"; allowed: " + allowed);
    }
    if (it->type == "integer") {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size() || v < it->minimum ||
          (it->maximum && v > *it->maximum)) {
        throw FieldError("query." + name,
                         "query parameter \"" + name +
                             "\" must be an integer >= " + std::to_string(it->minimum) +
                             (it->maximum ? " and <= " + std::to_string(*it->maximum) : "") +
                             ", got \"" + value + "\"");
      }
    }
  }
  for (const auto& p : route.query) {
    const auto given = request.query.find(p.name);
    if (p.required && (given == request.query.end() || given->second.empty())) {
      throw FieldError("query." + p.name,
                       "query parameter \"" + p.name + "\" is required (" + p.description + ")" +
                           (given == request.query.end() ? "" : ", got an empty value"));
    }
  }
}

nlohmann::json openapi_document(const Router& router, bool auth_reads) {
  nlohmann::json paths = nlohmann::json::object();
  for (const auto& r : router.routes()) {
    nlohmann::json op{{"operationId", r.operation_id}, {"summary", r.summary}};
    nlohmann::json parameters = nlohmann::json::array();
    for (const auto seg : segments(r.pattern)) {
      if (!is_param(seg)) continue;
      parameters.push_back({{"name", std::string(seg.substr(1, seg.size() - 2))},
                            {"in", "path"},
                            {"required", true},
                            {"schema", {{"type", "integer"}, {"minimum", 1}}}});
    }
    for (const auto& q : r.query) {
      nlohmann::json schema{{"type", q.type}};
      if (q.type == "integer") schema["minimum"] = q.minimum;
      if (q.maximum) schema["maximum"] = *q.maximum;
      if (!q.allowed.empty()) schema["enum"] = q.allowed;
      parameters.push_back({{"name", q.name},
                            {"in", "query"},
                            {"required", q.required},
                            {"description", q.description},
                            {"schema", schema}});
    }
    if (!parameters.empty()) op["parameters"] = parameters;
    if (!r.request_schema.is_null()) {
      op["requestBody"] = {{"required", r.request_body_required},
                           {"content", {{r.request_content_type, {{"schema", r.request_schema}}}}}};
    }
    nlohmann::json responses = nlohmann::json::object();
    nlohmann::json content{{r.response_content_type, {{"schema", r.response_schema}}}};
    for (const auto& [type, schema] : r.other_responses.items())
      content[type] = {{"schema", schema}};
    if (r.may_update) {
      responses["200"] = {{"description", "it existed: updated, or nothing to change"},
                          {"content", content}};
    }
    responses[std::to_string(r.success_status)] = {
        {"description", r.may_update ? "created" : "success"}, {"content", std::move(content)}};
    if (r.created_location) {
      responses[std::to_string(r.success_status)]["headers"] = {
          {"Location",
           {{"description", "the path of the study created (/v1/studies/{id})"},
            {"schema", {{"type", "string"}}}}}};
    }
    const nlohmann::json error_content = {
        {"application/json", {{"schema", {{"$ref", "#/components/schemas/Error"}}}}}};
    auto error = [&](int status, const std::string& why) {
      responses[std::to_string(status)] = {{"description", why}, {"content", error_content}};
    };
    error(400,
          "malformed JSON, a wrong type, an unknown field or name, a value outside its "
          "domain or a violated constraint; error.field names the field");
    const bool secured = r.access == Access::write || (r.access == Access::read && auth_reads);
    if (secured) {
      error(401, "no bearer token, or an unknown or revoked one");
      op["security"] = nlohmann::json::array({{{"bearerAuth", nlohmann::json::array()}}});
    }
    if (r.access == Access::write && r.pattern.starts_with("/v1/trials/")) {
      error(403, "the trial is leased to another client");
    }
    error(404,
          "the study or trial of the path is unknown, or the kernel, machine, task or "
          "objective the query names");
    error(408, "the request was not received in time");
    error(405, "the path takes other methods, which the Allow header lists");
    if (r.method == "POST" || r.method == "DELETE") {
      error(409, r.conflict_description.empty() ? "a conflict with the stored state"
                                                : r.conflict_description);
      if (r.created_location && !r.conflict_description.empty()) {
        responses["409"]["headers"] = {
            {"Location",
             {{"description",
               "when a study of the name asked for exists: its path (/v1/studies/{id})"},
              {"schema", {{"type", "string"}}}}}};
      }
    }
    error(413, "the body is over the route's limit (" + std::to_string(r.body_limit) +
                   " bytes), or the request line and headers over the server's");
    if (r.own_unavailable_answer) {
      responses["503"] = {
          {"description", "the database was found corrupt"},
          {"content", {{r.response_content_type, {{"schema", r.response_schema}}}}}};
    } else {
      error(503, std::string("the database is unavailable (busy, read-only, or found corrupt); "
                             "nothing was written") +
                     (r.asks_model ? "; or (code \"overloaded\") too many questions to models "
                                     "are waiting: ask again after Retry-After"
                                   : ""));
      responses["503"]["headers"] = {
          {"Retry-After",
           {{"description",
             std::string("seconds to wait before trying again, when another connection held the "
                         "database") +
                 (r.asks_model ? " or the questions to models were too many" : "") +
                 " (absent when waiting would not help)"},
            {"schema", {{"type", "integer"}}}}}};
    }
    error(500,
          "an internal error (a bug): the message hides its details, which the server log has");
    op["responses"] = responses;
    std::string method = r.method;
    std::transform(method.begin(), method.end(), method.begin(), ::tolower);
    paths[r.pattern][method] = op;
  }
  return {{"openapi", "3.0.3"},
          {"info",
           {{"title", "tunebase"},
            {"version", "1"},
            {"description",
             "Autotuning service: ask/tell studies, best-known configurations, predictions, "
             "imports and exports of measurements."}}},
          {"paths", paths},
          {"components",
           {{"securitySchemes",
             {{"bearerAuth",
               {{"type", "http"},
                {"scheme", "bearer"},
                {"description", "a token from `tunebase token create NAME --db FILE`"}}}}},
            {"schemas", {{"Error", error_schema()}}}}}};
}

}  // namespace tunebase::api
