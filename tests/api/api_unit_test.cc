// The pieces of the service that need no network: routing, strict JSON reading, the error
// mapping, the OpenAPI document and the metrics text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string_view>

#include "api/comparison_json.h"
#include "api/errors.h"
#include "api/json_reader.h"
#include "api/metrics.h"
#include "api/priors.h"
#include "api/router.h"
#include "api/service.h"
#include "core/error.h"
#include "core/json.h"
#include "core/machine.h"
#include "core/measurements.h"
#include "db/sqlite.h"
#include "db/store.h"
#include "tests/support/shared_data.h"

namespace tunebase::api {
namespace {

// A study of `kernel` on `input` by machine `machine` (registered when new) that measured
// every valid configuration of `space` as `f` says.
void measure_every_configuration(db::Store& store, const std::string& study_name,
                                 const std::string& machine, const db::KernelRecord& kernel,
                                 const SearchSpace& space, const db::TaskRecord& input,
                                 const std::function<Measurement(const Configuration&)>& f) {
  MachineInfo info;
  info.name = machine;
  refresh_fingerprint_hash(info);
  db::NewStudy s;
  s.name = study_name;
  s.kernel = kernel.id;
  s.machine = store.upsert_machine(info).id;
  s.task = input.id;
  const auto study = store.create_study(s);
  for (const auto& c : space.valid_configurations()) {
    store.add_trial(study.id, space.config_to_json(c), space.key(c), f(c));
  }
}

// Kernel "spmv_format" of two formats, csr and ell, measured on inputs given by their rows:
// the best format of an input takes 1.0, the other 3.0.
struct TwoFormats {
  explicit TwoFormats(db::Store& s) : store(s), kernel(s.upsert_kernel("spmv_format", space)) {}

  db::TaskRecord matrix(double rows) {
    return store.upsert_task("spmv_format", {{"rows", rows}}, {{"rows", rows}});
  }
  /// A study of both formats on `input` by `machine`, through `through` (another connection)
  /// when given.
  void measure(const std::string& machine, const db::TaskRecord& input, bool csr_best,
               db::Store* through = nullptr) {
    measure_every_configuration(through ? *through : store, "s" + std::to_string(++studies),
                                machine, kernel, space, input, [&](const Configuration& c) {
                                  const bool csr = std::get<std::string>(c[0]) == "csr";
                                  return Measurement::success(csr == csr_best ? 1.0 : 3.0);
                                });
  }

  db::Store& store;
  const SearchSpace space{{categorical("format", {Value{"csr"}, Value{"ell"}})}, {}};
  const db::KernelRecord kernel;
  int studies = 0;
};

using ::testing::HasSubstr;
using ::testing::Not;

Route make_route(std::string method, std::string pattern) {
  Route r;
  r.method = std::move(method);
  r.pattern = std::move(pattern);
  r.operation_id = r.method + r.pattern;
  r.handler = [](Request&) { return Response::json({{"ok", true}}); };
  return r;
}

// Python's json.dumps writes NaN and Infinity: a body with them is told so; one whose error
// merely lies near such a word is not.
TEST(RequestBodies, PythonsNanAndInfinityAreNamedAsSuch) {
  const auto error_of = [](std::string_view text) -> std::string {
    try {
      (void)parse_json_text(text, "the request body");
    } catch (const ParseError& e) {
      return e.what();
    }
    return "parsed";
  };
  for (const char* text :
       {R"({"value": NaN})", R"({"value": Infinity})", R"({"value": -Infinity})", "[1, NaN]"}) {
    EXPECT_THAT(error_of(text), HasSubstr("NaN and Infinity are not JSON numbers")) << text;
  }
  EXPECT_THAT(error_of(R"({"message": "NaN",})"), Not(HasSubstr("NaN and Infinity")));
  EXPECT_THAT(error_of(R"({"value": NaNa})"), Not(HasSubstr("NaN and Infinity")));
}

// nlohmann reads an integer literal beyond 64 bits as the nearest double; it would be stored as
// another value (1e+20 for 99999999999999999999) without a word.
TEST(RequestBodies, IntegersBeyondSixtyFourBitsAreRefusedNotRounded) {
  // Where it is, in a document of thousands of entries.
  try {
    (void)parse_json_text(
        R"({"cache": {"16,1": {"time": 1.5, "n": [1, 2, 123456789012345678901]}}})", "cache.json");
    ADD_FAILURE() << "read";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("cache.json holds the integer 123456789012345678901 at "
                                    "[\"cache\"][\"16,1\"][\"n\"][2], beyond 64 bits"));
  }
  for (const char* text : {R"({"x": 99999999999999999999})", R"([-9223372036854775809])"}) {
    try {
      (void)parse_json_text(text, "the request body");
      ADD_FAILURE() << text << " was read";
    } catch (const InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr("the request body holds the integer ")) << text;
      EXPECT_THAT(e.what(), HasSubstr(", beyond 64 bits; integers must lie within")) << text;
    }
  }
  // What 64 bits hold, and reals however large, are read.
  EXPECT_EQ(parse_json_text(R"([18446744073709551615, -9223372036854775808, 1e20, 1.5E3])",
                            "the request body")
                .dump(),
            "[18446744073709551615,-9223372036854775808,1e+20,1500.0]");
}

TEST(Router, MatchesLiteralAndParameterSegments) {
  Router router;
  router.add(make_route("GET", "/v1/studies"));
  router.add(make_route("GET", "/v1/studies/{id}"));
  router.add(make_route("POST", "/v1/studies/{id}/suggestions"));
  const auto m = router.match("POST", "/v1/studies/42/suggestions");
  EXPECT_EQ(m.index, 2u);
  EXPECT_EQ(m.params.at("id"), "42");
  EXPECT_EQ(router.match("GET", "/v1/studies/").index, 0u);
  EXPECT_THROW(router.match("GET", "/v1/nothing"), UnknownRoute);
  try {
    router.match("DELETE", "/v1/studies/3");
    FAIL() << "expected 405";
  } catch (const MethodNotAllowed& e) {
    EXPECT_EQ(e.allow(), "GET, HEAD");  // the server answers HEAD wherever GET is
  }
  EXPECT_EQ(router.match("HEAD", "/v1/studies/3").index, 1u);
  try {
    router.match("HEAD", "/v1/studies/3/suggestions");
    FAIL() << "expected 405";
  } catch (const MethodNotAllowed& e) {
    EXPECT_THAT(e.what(), HasSubstr("HEAD is not allowed on /v1/studies/3/suggestions"));
    EXPECT_EQ(e.allow(), "POST");
  }
}

TEST(Router, SplitsAndDecodesTheTarget) {
  std::string path;
  std::map<std::string, std::string> query;
  split_target("/v1/best?kernel=a%20b&machine=m+1&task=3", path, query);
  EXPECT_EQ(path, "/v1/best");
  EXPECT_EQ(query.at("kernel"), "a b");
  EXPECT_EQ(query.at("machine"), "m 1");
  EXPECT_THROW(split_target("/v1/best?kernel=%zz", path, query), FieldError);
  EXPECT_THROW(split_target("/v1/best?kernel=%4", path, query), FieldError);
  EXPECT_THROW(split_target("/v1/best?a=1&a=2", path, query), FieldError);
  EXPECT_THROW(split_target("/v1/studies/%G1", path, query), FieldError);
}

// RFC 3986: the path is split at its slashes, then each segment decoded; an encoded slash is
// part of a segment.
TEST(Router, DecodesEachSegmentAfterSplittingThePath) {
  Router router;
  router.add(make_route("GET", "/v1/studies"));
  router.add(make_route("GET", "/v1/studies/{id}"));
  std::string path;
  std::map<std::string, std::string> query;
  split_target("/v1/studies%2F3?x=a%2Fb", path, query);
  EXPECT_EQ(path, "/v1/studies%2F3");
  EXPECT_EQ(query.at("x"), "a/b");
  EXPECT_THROW(router.match("GET", path), UnknownRoute);
  EXPECT_THROW(router.match("GET", "/v1%2Fstudies"), UnknownRoute);
  const auto m = router.match("GET", "/v1/%73tudies/4%32");
  EXPECT_EQ(m.index, 1u);
  EXPECT_EQ(m.params.at("id"), "42");
  EXPECT_EQ(router.match("GET", "/v1/studies/a%2Fb").params.at("id"), "a/b");
}

TEST(Router, ChecksQueryParameters) {
  auto route = make_route("GET", "/v1/best");
  route.query = {{"kernel", "string", true, "kernel name", {}},
                 {"task", "integer", false, "task id", {}},
                 {"format", "string", false, "f", {"json", "csv"}}};
  Request r;
  r.query = {{"kernel", "k"}, {"task", "12"}};
  EXPECT_NO_THROW(check_query(route, r));
  r.query = {{"kernel", "k"}, {"tsk", "1"}};
  try {
    check_query(route, r);
    FAIL();
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "query.tsk");
    EXPECT_THAT(e.what(), HasSubstr("allowed: kernel, task, format"));
  }
  r.query = {{"task", "1"}};
  EXPECT_THROW(check_query(route, r), FieldError);
  r.query = {{"kernel", "k"}, {"task", "x1"}};
  EXPECT_THROW(check_query(route, r), FieldError);
  r.query = {{"kernel", "k"}, {"format", "xml"}};
  EXPECT_THROW(check_query(route, r), FieldError);
}

TEST(JsonReader, NamesTheFieldAndWhatIsAllowed) {
  const auto body = nlohmann::json::parse(
      R"({"n": 2, "name": "x", "ratio": 0.5, "flag": true, "nested": {"a": 1}, "extra": 1})");
  JsonReader r(body);
  EXPECT_EQ(r.required_integer("n", 1, 10), 2);
  EXPECT_EQ(r.required_string("name"), "x");
  EXPECT_DOUBLE_EQ(*r.optional_number("ratio", 0, 1), 0.5);
  EXPECT_TRUE(*r.optional_bool("flag"));
  EXPECT_EQ(r.optional_object("nested")->at("a"), 1);
  EXPECT_FALSE(r.optional_string("absent"));
  try {
    r.finish();
    FAIL();
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "extra");
    EXPECT_THAT(e.what(), HasSubstr("allowed: n, name, ratio, flag, nested, absent"));
  }

  const nlohmann::json bad{{"n", "two"}, {"m", 11}, {"s", 3}};
  JsonReader wrong(bad, "item[0]");
  try {
    wrong.required_integer("n");
    FAIL();
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "item[0].n");
    EXPECT_THAT(e.what(), HasSubstr("must be an integer, got a string"));
  }
  EXPECT_THROW(wrong.required_integer("m", 1, 10), FieldError);
  EXPECT_THROW(wrong.required_string("s"), FieldError);
  EXPECT_THROW(wrong.required_string("missing"), FieldError);
  const auto array = nlohmann::json::array();
  EXPECT_THROW(JsonReader{array}, FieldError);
}

TEST(JsonReader, MalformedBodyIsAFieldErrorOnBody) {
  try {
    parse_json_body("{\"n\": ");
    FAIL();
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "body");
  }
  EXPECT_TRUE(parse_json_body("  ").is_object());
}

TEST(Errors, EachErrorTypeHasItsStatus) {
  auto status = [](auto error) { return error_reply(std::make_exception_ptr(error)).status; };
  EXPECT_EQ(status(InvalidInput("x")), 400);
  EXPECT_EQ(status(ParseError("x", 3)), 400);
  EXPECT_EQ(status(FieldError("f", "x")), 400);
  EXPECT_EQ(status(Unauthorized("x")), 401);
  EXPECT_EQ(status(Forbidden("x")), 403);
  EXPECT_EQ(status(NotFound("x")), 404);
  EXPECT_EQ(status(MethodNotAllowed("x", "GET")), 405);
  EXPECT_EQ(status(RequestTimeout("x")), 408);
  EXPECT_EQ(status(Conflict("x")), 409);
  EXPECT_EQ(status(PayloadTooLarge("x")), 413);
  EXPECT_EQ(status(StorageError("x")), 503);
  // A locked database may be free a moment later, which Retry-After says; other storage
  // errors (a corrupt or read-only file) are not mended by waiting.
  const auto retry_after = [](const auto& error) {
    const auto r = error_reply(std::make_exception_ptr(error));
    EXPECT_EQ(r.status, 503);
    for (const auto& [name, value] : r.headers) {
      if (name == "Retry-After") return value;
    }
    return std::string("none");
  };
  EXPECT_EQ(retry_after(db::SqliteError("database x is locked", SQLITE_BUSY)), "1");
  EXPECT_EQ(retry_after(db::SqliteError("database x is locked", SQLITE_LOCKED)), "1");
  EXPECT_EQ(retry_after(db::SqliteError("database x is corrupt", SQLITE_CORRUPT)), "none");
  EXPECT_EQ(retry_after(StorageError("x")), "none");
  EXPECT_EQ(status(IoError("x")), 500);
  EXPECT_EQ(status(std::runtime_error("secret detail")), 500);

  const auto reply = error_reply(std::make_exception_ptr(FieldError("budget", "too big")));
  EXPECT_EQ(reply.body["error"]["field"], "budget");
  EXPECT_EQ(reply.body["error"]["message"], "too big");
  EXPECT_EQ(reply.body["error"]["code"], "invalid_input");
  const auto internal = error_reply(std::make_exception_ptr(std::runtime_error("secret detail")));
  EXPECT_THAT(internal.body.dump(), ::testing::Not(HasSubstr("secret")));

  // The code and the message in headers too, for clients that keep no body of an error (CMake's
  // file(DOWNLOAD)): printable ASCII only, and cut short.
  using Headers = std::vector<std::pair<std::string, std::string>>;
  const auto nothing =
      error_reply(std::make_exception_ptr(NotFound("nothing for \"caf\xc3\xa9\"\n")));
  EXPECT_EQ(nothing.headers, (Headers{{"X-Tunebase-Error", "not_found"},
                                      {"X-Tunebase-Message", "nothing for \"caf??\"?"}}));
  const auto route = error_reply(std::make_exception_ptr(UnknownRoute("no route")));
  EXPECT_EQ(route.headers.at(0).second, "unknown_route");
  const auto long_one = error_reply(std::make_exception_ptr(InvalidInput(std::string(5000, 'x'))));
  EXPECT_EQ(long_one.headers.at(1).second.size(), ErrorReply::kMaxMessageHeaderBytes);
  const auto auth = error_reply(std::make_exception_ptr(Unauthorized("x")));
  EXPECT_EQ(auth.headers.at(2),
            (std::pair<std::string, std::string>{"WWW-Authenticate", "Bearer realm=\"tunebase\""}));
}

TEST(OpenApi, DocumentsEveryRegisteredRoute) {
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("o.db"));
  Service service(store);
  const auto doc = openapi_document(service.router(), false);
  EXPECT_EQ(doc["openapi"], "3.0.3");
  std::set<std::string> operation_ids;
  for (const auto& r : service.router().routes()) {
    std::string method = r.method;
    std::transform(method.begin(), method.end(), method.begin(), ::tolower);
    // The paths are written from these routes; whether the request bodies documented are the
    // ones accepted is BadInput.EachJsonBodysSchemaHasExactlyTheFieldsTheServerAccepts.
    const auto& op = doc.at("paths").at(r.pattern).at(method);
    EXPECT_FALSE(op["summary"].get<std::string>().empty()) << r.pattern;
    EXPECT_TRUE(op["responses"].contains(std::to_string(r.success_status))) << r.pattern;
    EXPECT_TRUE(op["responses"].contains("400")) << r.pattern;
    EXPECT_TRUE(operation_ids.insert(op["operationId"].get<std::string>()).second)
        << "duplicate operationId " << op["operationId"];
    if (r.access == Access::write) {
      EXPECT_TRUE(op.contains("security")) << r.pattern;
      EXPECT_TRUE(op["responses"].contains("401")) << r.pattern;
    }
    if (r.pattern.find("{id}") != std::string::npos) {
      EXPECT_EQ(op["parameters"][0]["in"], "path") << r.pattern;
    }
    // Any route may fail inside (api/errors.cc answers 500 "internal"); every error body is
    // the one Error schema.
    EXPECT_TRUE(op["responses"].contains("500")) << r.pattern;
    for (const auto& [status, response] : op["responses"].items()) {
      if (status < "400" || (r.own_unavailable_answer && status == "503")) continue;
      EXPECT_EQ(response["content"]["application/json"]["schema"],
                nlohmann::json({{"$ref", "#/components/schemas/Error"}}))
          << method << " " << r.pattern << " " << status;
    }
  }
  EXPECT_EQ(doc["components"]["schemas"]["Error"]["required"], nlohmann::json({"error"}));
  // A body the route takes when given, and does without (resume: the budget stays; stop:
  // nothing to say, {} at most).
  const auto& paths = doc["paths"];
  EXPECT_EQ(paths["/v1/studies/{id}/resume"]["post"]["requestBody"]["required"], false);
  EXPECT_EQ(paths["/v1/studies/{id}/stop"]["post"]["requestBody"]["required"], false);
  EXPECT_EQ(paths["/v1/studies/{id}/stop"]["post"]["requestBody"]["content"]["application/json"]
                 ["schema"]["properties"],
            nlohmann::json::object());
  EXPECT_EQ(paths["/v1/studies"]["post"]["requestBody"]["required"], true);
  // A study that is active is refused deletion with 409; /healthz answers 503 with its own body.
  EXPECT_TRUE(doc["paths"]["/v1/studies/{id}"]["delete"]["responses"].contains("409"));
  EXPECT_EQ(doc["paths"]["/healthz"]["get"]["responses"]["503"]["content"]["application/json"]
               ["schema"]["required"],
            nlohmann::json({"status", "database"}));
  // OpenAPI 3.0 reads nullable only beside a type.
  const auto& best = doc["paths"]["/v1/studies/{id}"]["get"]["responses"]["200"]["content"]
                        ["application/json"]["schema"]["properties"]["best"];
  EXPECT_EQ(best["type"], "object");
  EXPECT_EQ(best["nullable"], true);
  // Every route the issue names is registered (and so documented).
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"post", "/v1/studies"},
                                                        {"get", "/v1/studies"},
                                                        {"get", "/v1/studies/{id}"},
                                                        {"get", "/v1/studies/{id}/trials"},
                                                        {"post", "/v1/studies/{id}/suggestions"},
                                                        {"post", "/v1/trials/{id}/result"},
                                                        {"post", "/v1/studies/{id}/measurements"},
                                                        {"get", "/v1/best"},
                                                        {"post", "/v1/predict"},
                                                        {"post", "/v1/machines"},
                                                        {"get", "/v1/machines"},
                                                        {"post", "/v1/import"},
                                                        {"get", "/v1/studies/{id}/export"},
                                                        {"get", "/healthz"},
                                                        {"get", "/metrics"},
                                                        {"get", "/openapi.json"}}) {
    EXPECT_TRUE(doc["paths"].contains(path) && doc["paths"][path].contains(method))
        << method << " " << path;
  }
}

// What OpenAPI 3.0 (JSON Schema draft 4/5) cannot read in a schema object, at `at`; "" when
// nothing. 3.1 (JSON Schema 2020-12) wrote these differently or added them.
std::string openapi_31_form(const nlohmann::json& schema, const std::string& at) {
  if (!schema.is_object()) return at + " is not a schema object";
  for (const char* key :
       {"const", "examples", "prefixItems", "$defs", "$schema", "$id", "if", "then", "else",
        "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
        "contentMediaType", "contentEncoding", "patternProperties", "propertyNames"}) {
    if (schema.contains(key)) return at + " has \"" + key + "\" (not in OpenAPI 3.0)";
  }
  if (schema.contains("type") && !schema["type"].is_string()) {
    return at + ": \"type\" is " + schema["type"].dump() + "; 3.0 takes one type (and nullable)";
  }
  for (const char* bound : {"exclusiveMinimum", "exclusiveMaximum"}) {
    if (!schema.contains(bound)) continue;
    if (!schema[bound].is_boolean()) {
      return at + ": \"" + bound + "\" is " + schema[bound].dump() +
             "; 3.0 takes a boolean beside minimum / maximum";
    }
    const char* limit = std::string_view(bound) == "exclusiveMinimum" ? "minimum" : "maximum";
    if (!schema.contains(limit)) return at + ": \"" + bound + "\" without \"" + limit + "\"";
  }
  if (schema.contains("$ref") && schema.size() > 1) {
    return at + ": \"$ref\" beside other keys, which 3.0 ignores";
  }
  if (schema.contains("enum") && !schema.contains("nullable") &&
      std::find(schema["enum"].begin(), schema["enum"].end(), nullptr) != schema["enum"].end()) {
    return at + ": null in an enum without nullable";
  }
  const auto each = [&](const char* key) -> std::string {
    if (!schema.contains(key)) return "";
    for (std::size_t i = 0; i < schema[key].size(); ++i) {
      auto why = openapi_31_form(schema[key][i], at + "." + key + "[" + std::to_string(i) + "]");
      if (!why.empty()) return why;
    }
    return "";
  };
  for (const char* key : {"allOf", "anyOf", "oneOf"}) {
    if (auto why = each(key); !why.empty()) return why;
  }
  for (const char* key : {"items", "not"}) {
    if (!schema.contains(key)) continue;
    if (auto why = openapi_31_form(schema[key], at + "." + key); !why.empty()) return why;
  }
  if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
    auto why = openapi_31_form(schema["additionalProperties"], at + ".additionalProperties");
    if (!why.empty()) return why;
  }
  const auto properties = schema.value("properties", nlohmann::json::object());
  for (const auto& [name, property] : properties.items()) {
    if (auto why = openapi_31_form(property, at + ".properties." + name); !why.empty()) return why;
  }
  return "";
}

// Every schema of the document: the values of "schema" keys (parameters, bodies, responses)
// and of components.schemas.
void each_schema(const nlohmann::json& node, const std::string& at,
                 const std::function<void(const nlohmann::json&, const std::string&)>& f) {
  if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      each_schema(node[i], at + "[" + std::to_string(i) + "]", f);
  }
  if (!node.is_object()) return;
  for (const auto& [key, value] : node.items()) {
    if (key == "schema") {
      f(value, at + "." + key);
    } else if (key == "schemas" && at == "$.components") {
      for (const auto& [name, schema] : value.items()) f(schema, at + ".schemas." + name);
    } else {
      each_schema(value, at + "." + key, f);
    }
  }
}

TEST(OpenApi, EverySchemaIsWrittenInTheFormOfTheVersionDeclared) {
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("o.db"));
  Service service(store);
  for (const bool auth_reads : {false, true}) {
    const auto doc = openapi_document(service.router(), auth_reads);
    ASSERT_EQ(doc["openapi"], "3.0.3");
    std::size_t schemas = 0;
    each_schema(doc, "$", [&](const nlohmann::json& schema, const std::string& at) {
      ++schemas;
      EXPECT_EQ(openapi_31_form(schema, at), "");
    });
    EXPECT_GT(schemas, 50u);
  }
  // The walk finds what 3.0 cannot read.
  EXPECT_NE(openapi_31_form({{"type", "number"}, {"exclusiveMinimum", 0}}, "$"), "");
  EXPECT_NE(openapi_31_form({{"type", {"string", "null"}}}, "$"), "");
  EXPECT_NE(openapi_31_form({{"properties", {{"a", {{"const", 1}}}}}}, "$"), "");
  EXPECT_NE(openapi_31_form({{"items", {{"examples", {1, 2}}}}}, "$"), "");
  EXPECT_EQ(openapi_31_form({{"type", "number"}, {"minimum", 0}, {"exclusiveMinimum", true}}, "$"),
            "");
}

TEST(Routes, RepliesThatGrowWithAStudyAreBuiltOffTheIoThreads) {
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("r.db"));
  Service service(store);
  for (const auto& r : service.router().routes()) {
    if (r.pattern == "/v1/studies/{id}/export" || r.pattern == "/v1/studies/{id}/trials") {
      EXPECT_EQ(r.runs, Runs::compute) << r.pattern;
    }
    if (r.pattern == "/healthz") {
      EXPECT_EQ(r.runs, Runs::io);
    }
  }
}

TEST(Metrics, RendersPrometheusText) {
  Metrics m({"GET /v1/best", "POST /v1/trials/{id}/result"});
  m.record_request(0, 200, 0.0004);
  m.record_request(0, 200, 0.003);
  m.record_request(1, 409, 0.002);
  m.record_request(2, 404, 0.0001);  // unmatched
  m.record_suggestions(0.25, 3);
  m.record_result(TrialStatus::failed);
  const auto text = m.render(2, 5);
  EXPECT_THAT(text,
              HasSubstr("tunebase_http_requests_total{route=\"GET /v1/best\",code=\"200\"} 2"));
  EXPECT_THAT(text, HasSubstr("route=\"POST /v1/trials/{id}/result\",code=\"409\"} 1"));
  EXPECT_THAT(text, HasSubstr("route=\"unmatched\",code=\"404\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "tunebase_http_request_duration_seconds_bucket{route=\"GET /v1/best\",le=\"0.0005\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "tunebase_http_request_duration_seconds_bucket{route=\"GET /v1/best\",le=\"0.005\"} 2"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "tunebase_http_request_duration_seconds_bucket{route=\"GET /v1/best\",le=\"+Inf\"} 2"));
  EXPECT_THAT(text, HasSubstr("tunebase_suggestions_total 3"));
  EXPECT_THAT(text, HasSubstr("tunebase_trials_reported_total{status=\"failed\"} 1"));
  EXPECT_THAT(text, HasSubstr("tunebase_pending_leases 5"));
  EXPECT_THAT(text, HasSubstr("tunebase_active_studies 2"));
}

TEST(PredictedBest, IsAConfigurationOtherMachinesRanWell) {
  // Two machines measured x = 1..9 but 5; both are best at 4 and 6. A smooth model puts its
  // lowest mean between them, at 5, which nobody ran (in a Kernel Tuner cache: perhaps
  // because it does not compile). The prediction is what ran well elsewhere.
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("t.db"));
  std::vector<Value> xs;
  for (std::int64_t x = 1; x <= 9; ++x) xs.emplace_back(x);
  for (const auto& [device, scale] : {std::pair{"gpu-a", 1.0}, std::pair{"gpu-b", 1.5}}) {
    MeasuredDataset d;
    d.device_name = device;
    d.kernel_name = "stencil";
    d.format = "kernel_tuner";
    d.space = SearchSpace({ordinal("x", xs)}, {});
    for (std::int64_t x = 1; x <= 9; ++x) {
      if (x == 5) continue;
      const double t = scale * (x == 4 ? 2.0 : x == 6 ? 2.01 : 1.0 + 2.0 * std::abs(x - 5.0));
      d.entries.push_back({{Value{x}}, Measurement::success(t)});
    }
    store.import_dataset(d);
  }
  const auto p =
      predict_best(store, "stencil", std::nullopt, std::nullopt, db::Direction::minimize, "");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->config, (nlohmann::json{{"x", 4}}));
  EXPECT_TRUE(p->from_measurements);
  EXPECT_EQ(p->sources, 2u);
  EXPECT_EQ(p->sources_that_ran_it, 2u);
  EXPECT_DOUBLE_EQ(p->mean_quantile, 0.0);
  EXPECT_EQ(p->unit, "ms");
  const auto j = predicted_best_json("stencil", "gpu-new", *p);
  EXPECT_EQ(j["based_on"]["chosen_from"], "measurements");
  EXPECT_EQ(j["unit"], "ms");
}

TEST(PredictedBest, AnInputIsAnsweredInItsOwnSpaceByThoseWhoMeasuredIt) {
  // A solver whose space depends on its input (cg only for symmetric matrices): two kernel
  // versions. Machine m1 measured a symmetric and an unsymmetric matrix, m2 another
  // unsymmetric one. A new machine asking for an input is answered in that input's version,
  // by the consensus of the sources that measured that very input, not by a model's pick
  // across inputs (which proposed what failed on it).
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("t.db"));
  const auto space_of = [](std::vector<Value> ksps) {
    return SearchSpace({categorical("ksp", std::move(ksps)), integer_range("x", 1, 4)}, {});
  };
  const auto symmetric = space_of({Value{"cg"}, Value{"gmres"}, Value{"minres"}});
  const auto general = space_of({Value{"gmres"}, Value{"bicg"}});
  const auto sym_kernel = store.upsert_kernel("solver", symmetric);
  const auto gen_kernel = store.upsert_kernel("solver", general);
  ASSERT_NE(sym_kernel.version, gen_kernel.version);
  const auto task = [&](const std::string& matrix, double rows, double sym) {
    return store.upsert_task("solver", {{"matrix", matrix}}, {{"rows", rows}, {"symmetric", sym}});
  };
  const auto spd = task("spd", 100, 1);
  const auto west = task("west", 479, 0);
  const auto big = task("big", 90000, 0);
  int studies = 0;
  // Studies in this order: the general version is the latest when "spd" is asked about.
  const auto measure = [&](const std::string& machine, const db::KernelRecord& kernel,
                           const SearchSpace& space, const db::TaskRecord& input,
                           const std::function<Measurement(const Configuration&)>& f) {
    measure_every_configuration(store, "s" + std::to_string(++studies), machine, kernel, space,
                                input, f);
  };
  const auto ksp = [](const Configuration& c) { return std::get<std::string>(c[0]); };
  const auto x = [](const Configuration& c) { return std::get<std::int64_t>(c[1]); };
  measure("m1", sym_kernel, symmetric, spd, [&](const Configuration& c) {
    return Measurement::success((ksp(c) == "cg" ? 1.0 : 3.0) + 0.1 * std::abs(x(c) - 2.0));
  });
  // On "west" only bicg with x = 3 runs; elsewhere gmres at x = 1 is fastest.
  measure("m1", gen_kernel, general, west, [&](const Configuration& c) {
    return ksp(c) == "bicg" && x(c) == 3
               ? Measurement::success(5.0)
               : Measurement::failure(TrialStatus::failed, "DIVERGED_PC_FAILED");
  });
  measure("m2", gen_kernel, general, big, [&](const Configuration& c) {
    return Measurement::success((ksp(c) == "gmres" ? 1.0 : 9.0) + 0.5 * (x(c) - 1.0));
  });

  const auto ask = [&](std::optional<db::TaskId> input) {
    return predict_best(store, "solver", std::nullopt, input, db::Direction::minimize, "time");
  };
  const auto on_spd = ask(spd.id);
  ASSERT_TRUE(on_spd.has_value());
  EXPECT_EQ(on_spd->kernel_version, sym_kernel.version);
  EXPECT_EQ(on_spd->config, (nlohmann::json{{"ksp", "cg"}, {"x", 2}}));
  const auto on_west = ask(west.id);
  ASSERT_TRUE(on_west.has_value());
  EXPECT_EQ(on_west->kernel_version, gen_kernel.version);
  EXPECT_EQ(on_west->config, (nlohmann::json{{"ksp", "bicg"}, {"x", 3}}));
  EXPECT_TRUE(on_west->from_measurements);
  EXPECT_EQ(on_west->sources, 1u);
  // Without an input: the latest version, every input's measurements.
  const auto any = ask(std::nullopt);
  ASSERT_TRUE(any.has_value());
  EXPECT_EQ(any->kernel_version, gen_kernel.version);
  EXPECT_EQ(any->inputs, 2u);
}

TEST(PredictedBest, AMachineThatMeasuredOtherInputsIsPredictedFromThemNotFromOtherMachines) {
  // A CPU runs csr fastest on every matrix it measured, two GPUs ell. A new matrix, and one
  // that only the GPUs measured, are predicted for the CPU from the CPU's own measurements:
  // with the GPUs' beside them, a model that knows nothing of the CPU on the new input weighs
  // the three machines alike and answers ell, 3 times slower there.
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("t.db"));
  TwoFormats spmv(store);
  for (const double rows : {100.0, 1000.0, 10000.0, 100000.0}) {
    const auto input = spmv.matrix(rows);
    spmv.measure("cpu", input, true);
    spmv.measure("gpu-a", input, false);
    spmv.measure("gpu-b", input, false);
  }
  const auto gpus_only = spmv.matrix(50000.0);
  spmv.measure("gpu-a", gpus_only, false);
  spmv.measure("gpu-b", gpus_only, false);
  const auto cpu = store.find_machine("cpu");
  ASSERT_TRUE(cpu.has_value());

  const auto new_matrix =
      predict_best(store, "spmv_format", cpu->id, std::nullopt, db::Direction::minimize, "",
                   {{"rows", 5000.0}}, spmv.kernel.version);
  ASSERT_TRUE(new_matrix.has_value());
  EXPECT_EQ(new_matrix->config, (nlohmann::json{{"format", "csr"}}));
  EXPECT_TRUE(new_matrix->this_machine_only);
  EXPECT_EQ(new_matrix->machines, 1u);
  EXPECT_EQ(new_matrix->inputs, 4u);
  EXPECT_EQ(predicted_best_json("spmv_format", "cpu", *new_matrix)["based_on"]["this_machine_only"],
            true);

  const auto measured_elsewhere =
      predict_best(store, "spmv_format", cpu->id, gpus_only.id, db::Direction::minimize, "");
  ASSERT_TRUE(measured_elsewhere.has_value());
  EXPECT_EQ(measured_elsewhere->config, (nlohmann::json{{"format", "csr"}}));
  EXPECT_TRUE(measured_elsewhere->this_machine_only);

  // A machine that measured nothing is still predicted from every machine's measurements.
  const auto unknown =
      predict_best(store, "spmv_format", std::nullopt, gpus_only.id, db::Direction::minimize, "");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->config, (nlohmann::json{{"format", "ell"}}));
  EXPECT_FALSE(unknown->this_machine_only);
}

TEST(PredictedBest, RestsOnTheNearestInputsWhenThousandsWereMeasured) {
  // A machine measured more inputs than a prediction may rest on: a new input is predicted from
  // the nearest of them, at a cost that does not grow with the inputs stored.
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("t.db"));
  const SearchSpace space({categorical("format", {Value{"csr"}, Value{"ell"}})}, {});
  const auto kernel = store.upsert_kernel("spmv_format", space);
  const std::size_t measured = kMaxPredictionInputsPerSource + 20;
  for (std::size_t i = 0; i < measured; ++i) {
    const double rows = std::pow(10.0, 2.0 + 4.0 * static_cast<double>(i) / measured);
    const auto input = store.upsert_task("spmv_format", {{"rows", rows}}, {{"rows", rows}});
    // ell is fastest on the large matrices only.
    measure_every_configuration(store, "s" + std::to_string(i), "gpu", kernel, space, input,
                                [&](const Configuration& c) {
                                  const bool csr = std::get<std::string>(c[0]) == "csr";
                                  return Measurement::success(csr == (rows < 1e4) ? 1.0 : 2.0);
                                });
  }
  const auto gpu = store.find_machine("gpu");
  ASSERT_TRUE(gpu.has_value());
  for (const double rows : {300.0, 3e5}) {
    const auto p = predict_best(store, "spmv_format", gpu->id, std::nullopt,
                                db::Direction::minimize, "", {{"rows", rows}}, kernel.version);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->inputs, kMaxPredictionInputsPerSource);
    EXPECT_EQ(p->config, (nlohmann::json{{"format", rows < 1e4 ? "csr" : "ell"}}));
  }
}

TEST(PredictedBest, FromTheCacheIsAsFromTheStoreAndTakesInANewMeasurement) {
  // Predictions through a PriorCache read the kernel's priors once while the store is
  // unchanged, apply each question's exclusions to them, and read again after any write.
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("t.db"));
  TwoFormats spmv(store);
  for (const double rows : {100.0, 1000.0, 10000.0}) {
    spmv.measure("cpu", spmv.matrix(rows), true);
    spmv.measure("gpu", spmv.matrix(rows), false);
  }
  const auto gpu_only = spmv.matrix(50000.0);
  spmv.measure("gpu", gpu_only, false);
  const auto cpu = store.find_machine("cpu")->id;
  const auto gpu = store.find_machine("gpu")->id;

  PriorCache cache;
  // New inputs on either machine or on a new one, an input one machine measured, asked for
  // the other and for itself (its own measurement of it excluded).
  struct Question {
    std::optional<db::MachineId> machine;
    std::optional<db::TaskId> task;
    nlohmann::json features;
  };
  const std::vector<Question> questions{{cpu, std::nullopt, {{"rows", 5000.0}}},
                                        {cpu, std::nullopt, {{"rows", 200.0}}},
                                        {gpu, std::nullopt, {{"rows", 300.0}}},
                                        {std::nullopt, std::nullopt, {{"rows", 700.0}}},
                                        {cpu, gpu_only.id, {}},
                                        {gpu, gpu_only.id, {}}};
  const auto answer = [&](const Question& q, PriorCache* with) {
    const auto p =
        q.task ? predict_best(store, "spmv_format", q.machine, q.task, db::Direction::minimize, "",
                              {}, {}, with)
               : predict_best(store, "spmv_format", q.machine, std::nullopt,
                              db::Direction::minimize, "", q.features, spmv.kernel.version, with);
    return p ? predicted_best_json("spmv_format", "m", *p) : nlohmann::json();
  };
  for (const auto& q : questions) {
    const auto cached = answer(q, &cache);
    EXPECT_FALSE(cached.is_null());
    EXPECT_EQ(cached, answer(q, nullptr)) << q.features << " " << cached;
  }
  // Read once: the studies, their counts and the priors of the one version and objective.
  const auto reads = cache.reads();
  EXPECT_EQ(reads, 3u);
  const auto on_cpu = answer(questions[0], &cache);
  EXPECT_EQ(cache.reads(), reads);
  EXPECT_EQ(on_cpu["based_on"]["inputs"], 3);

  // A fourth input measured on the cpu is in the next prediction.
  spmv.measure("cpu", spmv.matrix(4000.0), true);
  const auto after = answer(questions[0], &cache);
  EXPECT_EQ(after["based_on"]["inputs"], 4) << after;
  EXPECT_EQ(after, answer(questions[0], nullptr));
  EXPECT_GT(cache.reads(), reads);
  // Also when another connection (another process) stored it.
  {
    db::Store other(dir.file("t.db"));
    spmv.measure("cpu", other.upsert_task("spmv_format", {{"rows", 20000.0}}, {{"rows", 20000.0}}),
                 true, &other);
  }
  EXPECT_EQ(answer(questions[0], &cache)["based_on"]["inputs"], 5);
}

TEST(FailureReasonsJson, AReasonIsWholeAndOthersAreByStatus) {
  FailureBreakdown b;
  const std::string long_reason(kMaxReasonBytes + 50, 'x');
  b.reasons = {{TrialStatus::failed, long_reason, 4, "x"}};
  b.others = {{TrialStatus::timeout, 3, 1}};
  b.other_trials = 3;
  b.other_reasons = 1;
  const auto j = failure_reasons_json(b);
  EXPECT_EQ(j["reasons"][0]["reason"], long_reason);
  EXPECT_EQ(j["others"]["trials"], 3);
  EXPECT_EQ(j["others"]["by_status"],
            nlohmann::json::parse(R"([{"status": "timeout", "trials": 3, "reasons": 1}])"));
}

}  // namespace
}  // namespace tunebase::api
