// The route table: every endpoint once, with what the router, the authoriser, the server (body
// limits, which pool runs it) and the OpenAPI document need to know about it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tunebase::api {

/// Default request body limit; import uploads get kMaxImportBytes.
inline constexpr std::size_t kMaxBodyBytes = 1 << 20;
/// A Kernel Tuner cache of a large space is tens of MB of JSON (less gzipped).
inline constexpr std::size_t kMaxImportBytes = 64u << 20;
/// A batch of outside measurements or of configurations to predict: room for the 100,000
/// entries a request may hold (about 100 bytes each).
inline constexpr std::size_t kMaxMeasurementsBodyBytes = 16u << 20;
/// The most JSON an import upload may decompress to: parsing takes about 8 times this in
/// memory, per upload. Larger files are imported with `tunebase import` on the server's machine.
inline constexpr std::size_t kMaxImportTextBytes = 256u << 20;

/// Where a route's handler runs, so that neither model fits nor disk flushes delay quick
/// requests.
enum class Runs {
  io,       ///< quick reads: on the I/O threads
  compute,  ///< model fitting and acquisition for suggestions, large replies: the compute pool
  model,    ///< questions to a study's model (predictions, relevance, a predicted best), which
            ///< need no token: a small pool of their own with a bounded queue, so that however
            ///< many are asked, suggestions and results never wait behind them
  writer,   ///< small commits (results, measurements): the writer thread, which commits the
            ///< requests that arrived meanwhile together (group commit)
};

/// An HTTP request as handlers see it (independent of Boost.Beast).
struct Request {
  std::string method;  ///< "GET", "POST", ... ("HEAD" takes the GET routes)
  std::string path;    ///< path without the query, as sent: the router decodes each segment
  std::map<std::string, std::string> query;
  /// The query's values as sent (still percent-encoded), for a list whose separator must be
  /// told from an escaped one in a name (machines=A,B with "Tesla P100%2C 12GB").
  std::map<std::string, std::string> raw_query;
  /// Values of {name} segments of the matched pattern.
  std::map<std::string, std::string> params;
  std::string authorization;
  std::string content_type;
  std::string body;
  /// Name of the API token that authorised the request, when one did.
  std::string token_name;
  /// Where the handler runs (a handler on an I/O thread may ask for the compute pool).
  Runs running_on = Runs::io;

  /// A query parameter, or nullopt.
  std::optional<std::string> query_value(const std::string& name) const;
  /// A path parameter that must be a positive integer id; FieldError otherwise.
  std::int64_t id_param(const std::string& name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  /// A reply that grows with the data (a study's export) is made piece by piece: `body` is the
  /// first piece, and `more` appends the next one to its argument, false at the end. The server
  /// sends it chunked, makes each piece where the route runs and waits until the client took
  /// one before making the next, so a slow reader holds one piece in memory, not the reply.
  std::function<bool(std::string&)> more;
  /// Set by a handler on an I/O thread that found it must fit a model: the server runs it
  /// again on the model pool.
  bool needs_model = false;

  static Response model_needed();
  static Response json(const nlohmann::json& body, int status = 200);
  static Response text(std::string body, std::string content_type, int status = 200);
};

using Handler = std::function<Response(Request&)>;

/// Who may call a route.
enum class Access {
  open,   ///< always (health, metrics, the API description)
  read,   ///< open unless the server was started with --auth-reads
  write,  ///< needs a valid bearer token
};

/// Handles every queued request of one writer route at once; one response per request.
using BatchHandler = std::function<std::vector<Response>(std::vector<Request*>&)>;

struct QueryParam {
  std::string name;
  std::string type = "string";  ///< OpenAPI type: string, integer
  bool required = false;
  std::string description;
  std::vector<std::string> allowed;  ///< enum values, when the parameter is a choice
  std::int64_t minimum = 0;          ///< the least value of an integer (1 for an id)
  std::optional<std::int64_t> maximum = std::nullopt;  ///< the greatest integer, when bounded
};

struct Route {
  std::string method;   ///< GET, POST
  std::string pattern;  ///< "/v1/studies/{id}/trials"
  std::string operation_id;
  std::string summary;
  Access access = Access::read;
  Runs runs = Runs::io;
  std::size_t body_limit = kMaxBodyBytes;
  std::vector<QueryParam> query;
  /// JSON schema of the body (null: no body). Non-JSON uploads give request_content_type.
  nlohmann::json request_schema;
  std::string request_content_type = "application/json";
  /// Whether a request must carry the body (false: an empty body is taken as {}).
  bool request_body_required = true;
  int success_status = 200;
  /// The route answers success_status when it creates the resource and 200 when the resource
  /// already existed (an update, or nothing to change); the handler sets which.
  bool may_update = false;
  /// The created resource's path is in a Location header of success_status (a created study).
  bool created_location = false;
  /// What its 409 means, when more than a conflict with the stored state (empty: that). Set
  /// on a created_location route, its 409 names the resource that exists in a Location header.
  std::string conflict_description;
  std::string response_content_type = "application/json";
  nlohmann::json response_schema = nlohmann::json::object();
  /// Other media types the success may have ({"text/csv": schema}), chosen by the query.
  /// Its 503 is its own answer (response_schema), not the error body: /healthz.
  bool own_unavailable_answer = false;
  nlohmann::json other_responses = nlohmann::json::object();
  Handler handler;
  /// Writer routes may handle their queued requests together (one commit for all).
  BatchHandler batch_handler;
  /// Stores measurements: answers cached from before (best known) are stale after it.
  bool changes_measurements = false;
  /// May be answered by a model, on the model pool (runs is Runs::model, or the handler asks
  /// for it): 503 with Retry-After when too many such questions wait.
  bool asks_model = false;
};

/// Matches requests to routes. Patterns are literal segments and {name} segments.
class Router {
 public:
  void add(Route route);
  const std::vector<Route>& routes() const { return routes_; }

  struct Match {
    const Route* route = nullptr;
    std::size_t index = 0;
    std::map<std::string, std::string> params;
  };
  /// The route for (method, path). Throws UnknownRoute for a path no route has, and
  /// MethodNotAllowed (naming the allowed methods) for a known path with another method.
  Match match(std::string_view method, std::string_view path) const;
  /// The route whose body limit applies, or kMaxBodyBytes when none matches.
  std::size_t body_limit(std::string_view method, std::string_view path) const;
  /// The index of the route for (method, path), or none (match without its throws).
  std::optional<std::size_t> find(std::string_view method, std::string_view path) const;

 private:
  std::vector<Route> routes_;
};

/// `text` with its %XX escapes decoded (and '+' as a space when `plus_is_space`: a query).
/// Throws FieldError for a bad escape.
std::string percent_decode(std::string_view text, bool plus_is_space);

/// Splits "/a/b?x=1&y=%20" into the path (left encoded: Router::match splits it at '/', then
/// decodes each segment, so "%2F" never separates segments) and the decoded query map (and,
/// when asked, the values as sent: Request::raw_query). Throws
/// FieldError for bad percent-encoding or a repeated query parameter.
void split_target(std::string_view target, std::string& path,
                  std::map<std::string, std::string>& query,
                  std::map<std::string, std::string>* raw_query = nullptr);

/// Checks the query parameters against the route: unknown names and missing required ones
/// are FieldErrors naming the parameter and what is allowed.
void check_query(const Route& route, const Request& request);

/// The OpenAPI 3 document of every route in `router`.
nlohmann::json openapi_document(const Router& router, bool auth_reads);

}  // namespace tunebase::api
