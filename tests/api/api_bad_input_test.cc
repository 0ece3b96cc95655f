// Every class of bad input gets the right 4xx with a JSON body naming the field and what is
// allowed; the server keeps serving and nothing stored changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "db/study_export.h"
#include "tests/api/api_test_util.h"

namespace tunebase::api {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

struct BadRequest {
  std::string name;
  std::string method;
  std::string target;
  std::string body;
  bool with_token = true;
  int status = 400;
  std::string field;             ///< expected error.field ("" = not checked)
  std::string message_contains;  ///< expected in error.message ("" = not checked)
};

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<TestServer>();
    client_ = std::make_unique<HttpClient>(server_->client());
    study_ = testing::create_demo_study(*client_, server_->token, "random", 20);
    const auto reply = client_->post("/v1/studies/" + std::to_string(study_) + "/suggestions",
                                     {{"n", 2}, {"client_id", "owner"}}, server_->token);
    ASSERT_EQ(reply.status, 200) << reply.body;
    trial_ = reply.json()["suggestions"][0]["trial_id"].get<std::int64_t>();
    done_trial_ = reply.json()["suggestions"][1]["trial_id"].get<std::int64_t>();
    ASSERT_EQ(post("/v1/trials/" + std::to_string(done_trial_) + "/result",
                   {{"client_id", "owner"}, {"value", 3.0}})
                  .status,
              200);
  }

  HttpReply post(const std::string& target, const nlohmann::json& body) {
    return client_->post(target, body, server_->token);
  }

  /// Everything a bad request could have changed.
  nlohmann::json snapshot() {
    auto& store = server_->store();
    nlohmann::json s;
    for (const auto& st : store.list_studies()) {
      s["studies"].push_back(
          nlohmann::json::parse(db::export_study(store, st.id, db::ExportFormat::json)));
      s["status"].push_back(std::string(db::to_string(st.status)));
    }
    for (const auto& m : store.list_machines()) s["machines"].push_back(m.fingerprint);
    for (const auto& k : store.list_kernels()) s["kernels"].push_back(k.version);
    for (const auto& t : store.list_tokens()) s["tokens"].push_back(t.name);
    return s;
  }

  void expect_rejected(const BadRequest& bad) {
    SCOPED_TRACE(bad.name);
    const auto reply =
        client_->request(bad.method, bad.target, bad.body, bad.with_token ? server_->token : "");
    EXPECT_EQ(reply.status, bad.status) << reply.body;
    EXPECT_THAT(reply.content_type, HasSubstr("application/json"));
    nlohmann::json body;
    ASSERT_NO_THROW(body = nlohmann::json::parse(reply.body)) << reply.body;
    ASSERT_TRUE(body.contains("error")) << reply.body;
    EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());
    if (!bad.field.empty()) {
      EXPECT_EQ(body["error"].value("field", ""), bad.field) << reply.body;
    }
    if (!bad.message_contains.empty()) {
      EXPECT_THAT(body["error"]["message"].get<std::string>(), HasSubstr(bad.message_contains));
    }
  }

  std::unique_ptr<TestServer> server_;
  std::unique_ptr<HttpClient> client_;
  std::int64_t study_ = 0;
  std::int64_t trial_ = 0;
  std::int64_t done_trial_ = 0;
};

TEST_F(BadInput, EachClassGetsItsStatusAndNothingChanges) {
  const auto before = snapshot();
  const std::string study = "/v1/studies/" + std::to_string(study_);
  const std::string trial = "/v1/trials/" + std::to_string(trial_) + "/result";
  const std::string done = "/v1/trials/" + std::to_string(done_trial_) + "/result";
  auto study_body = [](nlohmann::json patch) {
    nlohmann::json b{
        {"kernel", "demo2"}, {"space", testing::demo_space()}, {"machine", "test-machine"}};
    b.merge_patch(patch);
    return b.dump();
  };
  auto measurement = [](nlohmann::json config) {
    return nlohmann::json{{"measurements", {{{"config", config}, {"value", 1.0}}}}}.dump();
  };
  const std::vector<BadRequest> cases = {
      // Malformed JSON.
      {"malformed json", "POST", "/v1/studies", "{\"kernel\": ", true, 400, "body",
       "not valid JSON"},
      {"body not an object", "POST", "/v1/studies", "[1,2]", true, 400, "body", "JSON object"},
      // The last value won: whether 5 or 500 was measured is not a guess to make.
      {"key twice", "POST", study + "/measurements",
       R"({"measurements": [{"config": {"bx": 4, "by": 2, "unroll": 1}, "value": 5,
           "value": 500}]})",
       true, 400, "body", "names the key \"value\" twice in one object"},
      {"malformed result", "POST", trial, "{value: 1}", true, 400, "body", ""},
      // Hostile JSON: nesting that would exhaust the stack when the body is printed or copied
      // (no token needed to send it), and numbers no double holds.
      {"deeply nested", "POST", "/v1/predict",
       R"({"study_id": 1, "configs": [{"a": )" + std::string(100000, '[') +
           std::string(100000, ']') + "}]}",
       false, 400, "body", "deeper than 64 levels"},
      {"number overflow", "POST", "/v1/studies",
       R"({"kernel": "demo2", "machine": "test-machine", "task": {"n": 1e999}})", true, 400, "body",
       "out of range"},
      // Wrong types.
      {"budget as string", "POST", "/v1/studies", study_body({{"budget", "ten"}}), true, 400,
       "budget", "must be an integer"},
      {"n as float", "POST", study + "/suggestions", R"({"n": 1.5, "client_id": "x"})", true, 400,
       "n", "integer"},
      {"value as string", "POST", trial, R"({"client_id": "owner", "value": "fast"})", true, 400,
       "value", "must be a number"},
      {"raw with a string", "POST", trial, R"({"client_id": "owner", "raw": [1, "x"]})", true, 400,
       "raw[1]", ""},
      {"config not an object", "POST", study + "/measurements",
       R"({"measurements": [{"config": [4, 2, 1], "value": 1}]})", true, 400,
       "measurements[0].config", "JSON object"},
      // Unknown fields and names.
      {"unknown field", "POST", "/v1/studies", study_body({{"budgte", 5}}), true, 400, "budgte",
       "allowed:"},
      {"unknown strategy", "POST", "/v1/studies", study_body({{"strategy", "magic"}}), true, 400,
       "strategy", "allowed: "},
      {"unknown direction", "POST", "/v1/studies", study_body({{"direction", "down"}}), true, 400,
       "direction", "minimize, maximize"},
      {"unknown machine", "POST", "/v1/studies", study_body({{"machine", "nowhere"}}), true, 400,
       "machine", "POST /v1/machines"},
      {"unknown parameter type", "POST", "/v1/studies",
       study_body(
           {{"space", {{"parameters", {{{"name", "a"}, {"type", "fuzzy"}, {"values", {1}}}}}}}}),
       true, 400, "space", "allowed: integer, ordinal, categorical, real"},
      // A number as the type was a 500 (a JSON type error inside the space reader).
      {"parameter type not a string", "POST", "/v1/studies",
       study_body(
           {{"space", {{"parameters", {{{"name", "a"}, {"type", 5}, {"low", 1}, {"high", 2}}}}}}}),
       true, 400, "space", "\"type\" must be a string"},
      // Kernel Tuner's "restrictions" were dropped, with every constraint in them.
      {"space with restrictions", "POST", "/v1/studies",
       study_body({{"space",
                    {{"parameters", {{{"name", "a"}, {"values", {1, 2}}}}},
                     {"restrictions", {"a > 1"}}}}}),
       true, 400, "space", "unknown field \"restrictions\""},
      // Accepted, it was answered "the strategy found no new configuration" forever.
      {"constraint only a point of a real satisfies", "POST", "/v1/studies",
       study_body(
           {{"space",
             {{"parameters", {{{"name", "x"}, {"type", "real"}, {"low", 0.0}, {"high", 1.0}}}},
              {"constraints", {"x == 0.5"}}}}}),
       true, 400, "space", "no valid configuration found in"},
      {"constraint naming nothing", "POST", "/v1/studies",
       study_body(
           {{"space",
             {{"parameters", {{{"name", "a"}, {"values", {1, 2}}}}}, {"constraints", {"b < 2"}}}}}),
       true, 400, "space", ""},
      {"unknown parameter in config", "POST", study + "/measurements",
       measurement({{"bx", 4}, {"by", 2}, {"unroll", 1}, {"bz", 1}}), true, 400,
       "measurements[0].config", "unknown parameter 'bz'"},
      {"unknown result status", "POST", trial, R"({"client_id": "owner", "status": "crashed"})",
       true, 400, "status", "ok, failed, timeout, invalid"},
      {"pending is not a result", "POST", trial, R"({"client_id": "owner", "status": "pending"})",
       true, 400, "status", ""},
      {"unknown query parameter", "GET", "/v1/best?kernel=demo&machine=test-machine&color=red", "",
       true, 400, "query.color", "allowed: kernel, machine"},
      {"negative after", "GET", study + "/trials?after=-1", "", true, 400, "query.after",
       "must be an integer >= 0, got \"-1\""},
      // A page of a listing holds 1 to 10000 items.
      {"limit 0", "GET", study + "/trials?limit=0", "", true, 400, "query.limit",
       "must be an integer >= 1 and <= 10000, got \"0\""},
      {"negative limit", "GET", study + "/trials?limit=-5", "", true, 400, "query.limit",
       "must be an integer >= 1 and <= 10000"},
      {"fractional limit", "GET", study + "/trials?limit=1.5", "", true, 400, "query.limit",
       "got \"1.5\""},
      {"limit as a word", "GET", study + "/trials?limit=all", "", true, 400, "query.limit", ""},
      {"limit over the maximum", "GET", study + "/trials?limit=10001", "", true, 400,
       "query.limit", "<= 10000, got \"10001\""},
      {"studies limit 0", "GET", "/v1/studies?limit=0", "", true, 400, "query.limit", ""},
      {"machines limit over", "GET", "/v1/machines?limit=99999999999999999999", "", true, 400,
       "query.limit", ""},
      {"machines after negative", "GET", "/v1/machines?after=-1", "", true, 400, "query.after",
       ""},
      {"a field for a route that takes none", "POST", study + "/stop", R"({"x": 1})", true, 400,
       "x", "this body takes no fields"},
      {"export format", "GET", study + "/export?format=xml", "", true, 400, "query.format",
       "json, csv, kernel_tuner"},
      {"best without kernel", "GET", "/v1/best?machine=test-machine", "", true, 400, "query.kernel",
       ""},
      // An empty kernel was looked up, and "nothing measured for kernel \"\"" came back as 404.
      {"best with an empty kernel", "GET", "/v1/best?kernel&machine=test-machine", "", true, 400,
       "query.kernel", "is required (kernel name), got an empty value"},
      {"best with an empty machine", "GET", "/v1/best?kernel=demo&machine=", "", true, 400,
       "query.machine", "got an empty value"},
      {"best of a kernel nobody measured", "GET", "/v1/best?kernel=nothing&machine=nowhere", "",
       true, 404, "", "unknown kernel \"nothing\"; the kernels stored are demo"},
      {"best for a machine no machine can be", "GET", "/v1/best?kernel=demo&machine=a%0d%0ab", "",
       true, 400, "query.machine", "without tabs, line breaks"},
      {"best for task 0", "GET", "/v1/best?kernel=demo&machine=m&task=0", "", true, 400,
       "query.task", "must be an integer >= 1, got \"0\""},
      {"best for task abc", "GET", "/v1/best?kernel=demo&machine=m&task=abc", "", true, 400,
       "query.task", "must be an integer >= 1, got \"abc\""},
      {"best for a machine name not UTF-8", "GET", "/v1/best?kernel=demo&machine=%FF%FE", "", true,
       400, "query.machine", "bytes of text (UTF-8)"},
      // Values outside a parameter's domain, and constraint violations.
      {"value outside domain", "POST", study + "/measurements",
       measurement({{"bx", 3}, {"by", 2}, {"unroll", 1}}), true, 400, "measurements[0].config",
       "allowed"},
      {"constraint violated", "POST", study + "/measurements",
       measurement({{"bx", 16}, {"by", 8}, {"unroll", 1}}), true, 400, "measurements[0].config",
       "bx*by <= 32"},
      {"predict outside domain", "POST", "/v1/predict",
       nlohmann::json{{"study_id", study_}, {"configs", {{{"bx", 5}, {"by", 2}, {"unroll", 1}}}}}
           .dump(),
       true, 400, "configs[0]", "allowed"},
      {"n zero", "POST", study + "/suggestions", R"({"n": 0, "client_id": "x"})", true, 400, "n",
       "[1, 1000]"},
      {"n too many", "POST", study + "/suggestions", R"({"n": 5000, "client_id": "x"})", true, 400,
       "n", "[1, 1000]"},
      {"negative lease", "POST", study + "/suggestions",
       R"({"n": 1, "client_id": "x", "lease_seconds": -1})", true, 400, "lease_seconds", ""},
      {"negative cost", "POST", trial, R"({"client_id": "owner", "value": 1, "cost_seconds": -2})",
       true, 400, "cost_seconds", ""},
      {"budget zero", "POST", "/v1/studies", study_body({{"budget", 0}}), true, 400, "budget", ""},
      {"exhaustive search of reals", "POST", "/v1/studies",
       study_body({{"strategy", "exhaustive"},
                   {"space",
                    {{"parameters", {{{"name", "x"}, {"type", "real"}, {"low", 0}, {"high", 1}}}},
                     {"constraints", nlohmann::json::array()}}}}),
       true, 400, "strategy", "needs an enumerable space"},
      {"unit too long", "POST", "/v1/studies", study_body({{"unit", std::string(40, 'u')}}), true,
       400, "unit", "at most 32 bytes"},
      {"unit with a line break", "POST", "/v1/studies", study_body({{"unit", "m\ns"}}), true, 400,
       "unit", "control characters"},
      {"lease zero", "POST", study + "/suggestions",
       R"({"n": 1, "client_id": "x", "lease_seconds": 0})", true, 400, "lease_seconds",
       "must be > 0 and at most 604800"},
      {"seed beyond 64-bit signed", "POST", "/v1/studies",
       R"({"kernel": "demo2", "machine": "test-machine", "seed": 18446744073709551615})", true, 400,
       "seed", "must be in [0, 9223372036854775807]"},
      {"negative strategy option", "POST", "/v1/studies",
       study_body({{"strategy", "bo"}, {"strategy_options", {{"initial_design", -3}}}}), true, 400,
       "strategy_options", "initial_design must be a whole number in [0, 1000000]"},
      {"unknown strategy option", "POST", "/v1/studies",
       study_body({{"strategy_options", {{"inital_design", 5}}}}), true, 400, "strategy_options",
       "known options: seed, initial_design"},
      {"option of another strategy", "POST", "/v1/studies",
       study_body({{"strategy", "random"}, {"strategy_options", {{"kappa", 2}}}}), true, 400,
       "strategy_options", "strategy random takes no option \"kappa\" (another strategy's); its "
       "options: seed"},
      {"integer range past 2^53", "POST", "/v1/studies",
       study_body({{"space",
                    {{"parameters",
                      {{{"name", "a"},
                        {"type", "integer"},
                        {"low", 0},
                        {"high", 9223372036854775806LL}}}}}}}),
       true, 400, "space", "whole number within +-2^53"},
      // Each range within its limit, together more values than a space may keep.
      {"ranges too wide together", "POST", "/v1/studies",
       study_body({{"space",
                    {{"parameters",
                      {{{"name", "a"}, {"type", "integer"}, {"low", 0}, {"high", 999998}},
                       {{"name", "b"}, {"type", "integer"}, {"low", 0}, {"high", 999998}}}}}}}),
       true, 400, "space", "a space may list at most 1000000"},
      // Names are one line of text.
      {"name with NUL", "POST", "/v1/machines", R"({"name": "m\u0000x"})", true, 400, "name",
       "control characters"},
      {"oversize fingerprint", "POST", "/v1/machines",
       R"({"name": "big", "fingerprint": {"x": ")" + std::string(20000, 'a') + R"("}})", true, 400,
       "fingerprint", "must be at most 16384 bytes"},
      // Every listing and export of a study carries its results' messages and metrics.
      {"oversize message", "POST", trial,
       nlohmann::json{{"client_id", "owner"},
                      {"status", "failed"},
                      {"message", std::string(kMaxMessageBytes + 1, 'm')}}
           .dump(),
       true, 400, "message", "\"message\" must be at most 65536 bytes, got 65537"},
      {"oversize metrics", "POST", trial,
       nlohmann::json{{"client_id", "owner"},
                      {"value", 1.0},
                      {"metrics", {{"log", std::string(kMaxMetricsBytes, 'x')}}}}
           .dump(),
       true, 400, "metrics", "\"metrics\" must be at most 65536 bytes as JSON"},
      {"oversize measurement message", "POST", study + "/measurements",
       nlohmann::json{{"measurements",
                       {{{"config", {{"bx", 4}, {"by", 4}, {"unroll", 0}}},
                         {"status", "failed"},
                         {"message", std::string(kMaxMessageBytes + 1, 'm')}}}}}
           .dump(),
       true, 400, "measurements[0].message", "must be at most 65536 bytes"},
      // Stored free text and objects are bounded too: every listing of studies carries them.
      {"oversize task", "POST", "/v1/studies",
       study_body({{"task", {{"command", std::string(20000, 'c')}}}}), true, 400, "task",
       "\"task\" must be at most 16384 bytes as JSON (a description of the input), got 200"},
      {"oversize task_features", "POST", "/v1/studies",
       study_body({{"task_features", [] {
                      nlohmann::json f;
                      for (int i = 0; i < 2000; ++i) f["feature_" + std::to_string(i)] = i;
                      return f;
                    }()}}),
       true, 400, "task_features", "\"task_features\" must be at most 16384 bytes as JSON"},
      {"oversize strategy_options", "POST", "/v1/studies",
       study_body({{"strategy_options", {{"note", std::string(20000, 'o')}}}}), true, 400,
       "strategy_options", "must be at most 16384 bytes as JSON, got 200"},
      {"oversize objective", "POST", "/v1/studies",
       study_body({{"objective", std::string(300, 'o')}}), true, 400, "objective",
       "must be 1 to 200 bytes of text"},
      {"objective with a line break", "POST", "/v1/studies", study_body({{"objective", "a\nb"}}),
       true, 400, "objective", "line breaks"},
      {"too many prior machines", "POST", "/v1/studies",
       study_body({{"prior_machines", std::vector<std::string>(1001, "test-machine")}}), true, 400,
       "prior_machines", "may name at most 1000 machines, got 1001"},
      {"oversize prior machine name", "POST", "/v1/studies",
       study_body({{"prior_machines", {std::string(300, 'p')}}}), true, 400, "prior_machines[0]",
       "must be 1 to 200 bytes"},
      {"oversize raw", "POST", trial,
       nlohmann::json{{"client_id", "owner"}, {"raw", std::vector<double>(kMaxRawValues + 1, 1.0)}}
           .dump(),
       true, 400, "raw", "\"raw\" must hold at most 4096 values, got 4097"},
      {"oversize measurement raw", "POST", study + "/measurements",
       nlohmann::json{{"measurements",
                       {{{"config", {{"bx", 4}, {"by", 4}, {"unroll", 0}}},
                         {"raw", std::vector<double>(kMaxRawValues + 1, 1.0)}}}}}
           .dump(),
       true, 400, "measurements[0].raw", "must hold at most 4096 values"},
      {"oversize measurement client id", "POST", study + "/measurements",
       nlohmann::json{{"client_id", std::string(300, 'x')},
                      {"measurements",
                       {{{"config", {{"bx", 4}, {"by", 4}, {"unroll", 0}}}, {"value", 1.0}}}}}
           .dump(),
       true, 400, "client_id", "must be 1 to 200 bytes"},
      {"oversize result client id", "POST", trial,
       nlohmann::json{{"client_id", std::string(300000, 'x')}, {"value", 1.0}}.dump(), true, 400,
       "client_id", "must be 1 to 200 bytes"},
      {"blank name", "POST", "/v1/machines", R"({"name": "   "})", true, 400, "name",
       "not only spaces"},
      {"digits-only study name", "POST", "/v1/studies", study_body({{"name", "123"}}), true, 400,
       "name", "would read as a study id"},
      {"ok without value", "POST", trial, R"({"client_id": "owner"})", true, 400, "value", "raw"},
      {"misspelt value", "POST", trial, R"({"client_id": "owner", "objective": 0.3})", true, 400,
       "objective", "unknown field \"objective\"; allowed: client_id, status, value"},
      {"Python's NaN", "POST", trial, R"({"client_id": "owner", "value": NaN})", true, 400, "",
       "allow_nan=False): send a finite number, or report an evaluation that gave none as "
       "\"status\": \"failed\""},
      {"failure with value", "POST", trial,
       R"({"client_id": "owner", "status": "failed", "value": 2})", true, 400, "value", ""},
      {"missing client id", "POST", trial, R"({"value": 1})", true, 400, "client_id", "required"},
      {"empty space", "POST", "/v1/studies",
       study_body(
           {{"space",
             {{"parameters", {{{"name", "a"}, {"values", {1, 2}}}}}, {"constraints", {"a > 5"}}}}}),
       true, 400, "space", "no configuration"},
      {"non-numeric id", "GET", "/v1/studies/abc", "", true, 400, "id", "positive integer"},
      {"bad percent encoding", "GET", "/v1/best?kernel=%zz&machine=x", "", true, 400, "target", ""},
      // Unknown ids.
      {"unknown study", "GET", "/v1/studies/999", "", true, 404, "", "study 999"},
      {"suggest unknown study", "POST", "/v1/studies/999/suggestions", R"({"client_id": "x"})",
       true, 404, "", ""},
      {"result unknown trial", "POST", "/v1/trials/999/result",
       R"({"client_id": "owner", "value": 1})", true, 404, "", ""},
      {"predict unknown study", "POST", "/v1/predict", R"({"study_id": 999, "configs": [{}]})",
       true, 404, "", ""},
      {"export unknown study", "GET", "/v1/studies/999/export", "", true, 404, "", ""},
      {"measurements for an unknown study, badly", "POST", "/v1/studies/999/measurements",
       R"({"measurements": 3})", true, 404, "", "study 999"},
      // Someone else's trial, and a second result.
      {"foreign trial", "POST", trial, R"({"client_id": "intruder", "value": 1})", true, 403, "",
       "owner"},
      {"second result", "POST", done, R"({"client_id": "owner", "value": 1})", true, 409, "",
       "accepted once"},
      {"measured configuration again", "POST", study + "/measurements",
       measurement(server_->store().get_trial(db::TrialId{done_trial_}).config), true, 409, "",
       "already has another result"},
      {"leased configuration", "POST", study + "/measurements",
       measurement(server_->store().get_trial(db::TrialId{trial_}).config), true, 409, "",
       "leased to client"},
      {"duplicate study name", "POST", "/v1/studies",
       study_body({{"name", server_->store().get_study(db::StudyId{study_}).name}}), true, 409, "",
       ""},
      // Invalid tokens.
      {"no token", "POST", "/v1/machines", R"({"name": "m"})", false, 401, "Authorization", ""},
      {"invalid token", "POST", "/v1/machines", R"({"name": "m"})", false, 401, "", ""},
      // Routes and methods.
      {"unknown route", "GET", "/v1/nothing", "", true, 404, "", "/openapi.json"},
      {"wrong method", "PUT", "/v1/studies", "{}", true, 405, "", "allowed: POST, GET"},
  };
  for (const auto& c : cases) {
    if (c.name == "invalid token") {
      SCOPED_TRACE(c.name);
      const auto reply = client_->request(c.method, c.target, c.body, "0123456789abcdef");
      EXPECT_EQ(reply.status, 401) << reply.body;
      continue;
    }
    expect_rejected(c);
  }
  EXPECT_EQ(client_->get("/healthz").status, 200);
  EXPECT_EQ(snapshot(), before);
}

// The fields a route's request schema documents are the fields the server accepts: a field it
// reads that the schema lacks cannot be found by a client, and one documented that it does not
// read is refused as unknown. The server names what it accepts when refusing an unknown field.
TEST_F(BadInput, EachJsonBodysSchemaHasExactlyTheFieldsTheServerAccepts) {
  const auto doc = client_->get("/openapi.json");
  ASSERT_EQ(doc.status, 200) << doc.body;
  const auto paths = doc.json().at("paths");
  const nlohmann::json config = {{"bx", 1}, {"by", 1}, {"unroll", 0}};
  // A body each route reads to the end (its required fields), for a study and a trial that
  // exist; "zz_unknown" is then the one field refused.
  const std::map<std::string, nlohmann::json> valid_bodies = {
      {"/v1/machines", {{"name", "schema-probe"}}},
      {"/v1/studies", {{"kernel", "demo"}, {"machine", "test-machine"}}},
      {"/v1/studies/{id}/resume", nlohmann::json::object()},
      {"/v1/studies/{id}/stop", nlohmann::json::object()},
      {"/v1/studies/{id}/suggestions", {{"client_id", "probe"}}},
      {"/v1/trials/{id}/result", {{"client_id", "probe"}, {"value", 1.0}}},
      {"/v1/trials/{id}/release", {{"client_id", "probe"}}},
      {"/v1/trials/{id}/lease", {{"client_id", "probe"}}},
      {"/v1/studies/{id}/measurements", {{"measurements", {{{"config", config}, {"value", 1.0}}}}}},
      {"/v1/predict", {{"study_id", study_}, {"configs", {config}}}}};
  const auto target_of = [&](std::string path) {
    const auto at = path.find("{id}");
    if (at != std::string::npos) {
      path.replace(at, 4, std::to_string(path.rfind("/v1/trials/", 0) == 0 ? trial_ : study_));
    }
    return path;
  };
  // The names after "allowed: " in the refusal of "zz_unknown" (at `where`).
  const auto accepted = [&](const std::string& target, const nlohmann::json& body,
                            const std::string& where) {
    const auto reply = post(target, body);
    EXPECT_EQ(reply.status, 400) << target << ": " << reply.body;
    const std::string message = reply.error_message();
    const std::string refusal = "unknown field \"" + where + "zz_unknown\"; allowed: ";
    const auto at = message.find(refusal);
    std::set<std::string> names;
    if (message.find("unknown field \"" + where + "zz_unknown\"; this body takes no fields") !=
        std::string::npos) {
      return names;
    }
    if (at == std::string::npos) {
      ADD_FAILURE() << target << " did not refuse the unknown field: " << reply.body;
      return names;
    }
    std::stringstream list(message.substr(at + refusal.size()));
    for (std::string name; std::getline(list, name, ',');) {
      names.insert(name.substr(name.find_first_not_of(' ')));
    }
    return names;
  };
  const auto properties = [](const nlohmann::json& schema) {
    std::set<std::string> names;
    for (const auto& [name, property] : schema.at("properties").items()) names.insert(name);
    return names;
  };

  std::size_t checked = 0;
  for (const auto& [path, methods] : paths.items()) {
    if (!methods.contains("post")) continue;
    const auto& op = methods.at("post");
    if (!op.contains("requestBody")) continue;
    const auto& content = op.at("requestBody").at("content");
    if (!content.contains("application/json")) continue;
    SCOPED_TRACE(path);
    const auto body = valid_bodies.find(path);
    if (body == valid_bodies.end()) {
      ADD_FAILURE() << "no valid body for " << path << " in this test: add one";
      continue;
    }
    const auto& schema = content.at("application/json").at("schema");
    nlohmann::json with_unknown = body->second;
    with_unknown["zz_unknown"] = 1;
    EXPECT_EQ(accepted(target_of(path), with_unknown, ""), properties(schema));
    ++checked;
    // The measurements' entries are read as strictly, and documented as their items.
    if (path == "/v1/studies/{id}/measurements") {
      nlohmann::json inner = body->second;
      inner["measurements"][0]["zz_unknown"] = 1;
      EXPECT_EQ(accepted(target_of(path), inner, "measurements[0]."),
                properties(schema.at("properties").at("measurements").at("items")));
    }
  }
  EXPECT_EQ(checked, valid_bodies.size());
}

TEST_F(BadInput, OversizeBodiesGet413) {
  const auto before = snapshot();
  // Over the 1 MiB limit of ordinary routes (sent in full).
  const std::string big = "{\"name\": \"" + std::string(kMaxBodyBytes + 10, 'x') + "\"}";
  const auto reply = client_->request("POST", "/v1/machines", big, server_->token);
  EXPECT_EQ(reply.status, 413) << reply.body.substr(0, 200);
  EXPECT_EQ(reply.json()["error"]["code"], "payload_too_large");

  // A declared length over the limit is refused before the body is read.
  const std::string auth = "Authorization: Bearer " + server_->token + "\r\n";
  const auto raw =
      testing::raw_exchange(server_->port(), "POST /v1/studies HTTP/1.1\r\nHost: x\r\n" + auth +
                                                 "Content-Length: 999999999\r\n\r\n{");
  EXPECT_THAT(raw, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(raw, HasSubstr("payload_too_large"));

  // Imports have a larger limit, but one too.
  const auto import_raw = testing::raw_exchange(
      server_->port(), "POST /v1/import HTTP/1.1\r\nHost: x\r\n" + auth +
                           "Content-Length: " + std::to_string(kMaxImportBytes + 1) + "\r\n\r\n");
  EXPECT_THAT(import_raw, HasSubstr("HTTP/1.1 413"));

  // A client without a valid token is answered from the headers: its body (within the limit)
  // is neither invited (no 100 Continue) nor read.
  for (const std::string& token_header : {std::string(), std::string("Authorization: Bearer "
                                                                     "no-such-token\r\n")}) {
    const auto unauthorized = testing::raw_exchange(
        server_->port(), "POST /v1/import HTTP/1.1\r\nHost: x\r\n" + token_header +
                             "Expect: 100-continue\r\nContent-Length: " +
                             std::to_string(kMaxImportBytes - 1) + "\r\n\r\n");
    EXPECT_THAT(unauthorized, ::testing::StartsWith("HTTP/1.1 401"));
    EXPECT_THAT(unauthorized, Not(HasSubstr("100 Continue")));
  }

  // Headers over the header limit.
  const auto headers = testing::raw_exchange(
      server_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " +
                           std::string(kMaxHeaderBytes + 100, 'y') + "\r\n\r\n");
  EXPECT_THAT(headers, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(headers, HasSubstr(R"("field":"headers")"));

  // A body over its route's limit counts under its route in /metrics, read or declared; only
  // headers too large to read the target from count as unmatched.
  const auto metrics = client_->get("/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("route=\"POST /v1/machines\",code=\"413\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("route=\"POST /v1/studies\",code=\"413\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("route=\"POST /v1/import\",code=\"413\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("route=\"unmatched\",code=\"413\"} 1"));

  EXPECT_EQ(client_->get("/healthz").status, 200);
  EXPECT_EQ(snapshot(), before);
}

// A body is framed by Content-Length or by chunked alone. Another transfer coding would leave
// the body to be read as the next request (request smuggling past a proxy that frames it
// otherwise): refused, and the connection closed with the bytes after it unread.
TEST_F(BadInput, ATransferEncodingOtherThanChunkedIsRefusedAndNothingIsSmuggled) {
  const auto before = snapshot();
  const std::string auth = "Authorization: Bearer " + server_->token + "\r\n";
  // Would register a machine if it were read as a request.
  const std::string smuggled_body = R"({"name": "smuggled"})";
  const std::string smuggled =
      "POST /v1/machines HTTP/1.1\r\nHost: x\r\n" + auth +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(smuggled_body.size()) +
      "\r\n\r\n" + smuggled_body;
  for (const char* coding :
       {"Transfer-Encoding: gzip\r\n", "Transfer-Encoding: identity\r\n",
        "Transfer-Encoding: xchunked\r\n", "Transfer-Encoding: chunked, gzip\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"}) {
    SCOPED_TRACE(coding);
    const auto reply =
        testing::raw_exchange(server_->port(), "POST /v1/machines HTTP/1.1\r\nHost: x\r\n" + auth +
                                                   coding + "\r\n" + smuggled);
    EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 400")) << reply;
    EXPECT_THAT(reply, HasSubstr("Connection: close"));
    EXPECT_THAT(reply, HasSubstr(R"("field":"Transfer-Encoding")"));
    EXPECT_THAT(reply, HasSubstr("with Transfer-Encoding: chunked alone"));
    // One reply: the bytes after the headers were not taken for a request.
    EXPECT_EQ(reply.find("HTTP/1.1", 1), std::string::npos) << reply;
  }
  // HTTP/1.0 has no transfer codings.
  const auto old =
      testing::raw_exchange(server_->port(), "POST /v1/machines HTTP/1.0\r\n" + auth +
                                                 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_THAT(old, ::testing::StartsWith("HTTP/1.0 400")) << old;
  EXPECT_THAT(old, HasSubstr("an HTTP/1.0 request has no Transfer-Encoding"));
  EXPECT_FALSE(server_->store().find_machine("smuggled").has_value());
  EXPECT_EQ(snapshot(), before);

  // chunked alone, however capitalised, is read as ever.
  const std::string body = R"({"name": "chunked-machine"})";
  std::ostringstream size;
  size << std::hex << body.size();
  const auto chunked = testing::raw_exchange(
      server_->port(), "POST /v1/machines HTTP/1.1\r\nHost: x\r\n" + auth +
                           "Content-Type: application/json\r\nTransfer-Encoding: Chunked\r\n"
                           "Connection: close\r\n\r\n" +
                           size.str() + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_THAT(chunked, ::testing::StartsWith("HTTP/1.1 201")) << chunked;
  EXPECT_TRUE(server_->store().find_machine("chunked-machine").has_value());
}

// RFC 9112 3.2: an HTTP/1.1 request without Host, or with two, is a 400. HTTP/1.0 needs none.
TEST_F(BadInput, AnHttp11RequestNeedsOneHost) {
  const auto none = testing::raw_exchange(server_->port(),
                                          "GET /v1/studies HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(none, ::testing::StartsWith("HTTP/1.1 400")) << none;
  EXPECT_THAT(none, HasSubstr(R"("field":"Host")"));
  EXPECT_THAT(none, HasSubstr("an HTTP/1.1 request needs a Host header"));
  const auto two = testing::raw_exchange(
      server_->port(),
      "GET /v1/studies HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(two, ::testing::StartsWith("HTTP/1.1 400")) << two;
  EXPECT_THAT(two, HasSubstr("the request has 2 Host header lines"));
  const auto old = testing::raw_exchange(server_->port(), "GET /v1/studies HTTP/1.0\r\n\r\n");
  EXPECT_THAT(old, ::testing::StartsWith("HTTP/1.0 200")) << old;
  const auto with_host = testing::raw_exchange(
      server_->port(), "GET /v1/studies HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(with_host, ::testing::StartsWith("HTTP/1.1 200")) << with_host;
}

// DELETE is irreversible: a body with fields (meant for another route, or a mistake) is refused
// as POST .../stop refuses one, before anything is deleted; none, or {}, deletes.
TEST_F(BadInput, ADeleteWithFieldsInItsBodyDeletesNothing) {
  const std::string study = "/v1/studies/" + std::to_string(study_);
  ASSERT_EQ(post(study + "/stop", nlohmann::json::object()).status, 200);
  ASSERT_EQ(
      post("/v1/trials/" + std::to_string(trial_) + "/release", {{"client_id", "owner"}}).status,
      200);
  const auto before = snapshot();
  for (const auto& [method, target] :
       {std::pair<std::string, std::string>{"DELETE", study}, {"POST", study + "/stop"}}) {
    SCOPED_TRACE(method);
    const auto reply = client_->request(method, target, R"({"x": 1})", server_->token);
    EXPECT_EQ(reply.status, 400) << reply.body;
    EXPECT_EQ(reply.json()["error"]["field"], "x");
    EXPECT_THAT(reply.error_message(), HasSubstr("this body takes no fields ({})"));
  }
  EXPECT_EQ(client_->request("DELETE", study, "[]", server_->token).status, 400);
  EXPECT_EQ(snapshot(), before);
  const auto deleted = client_->request("DELETE", study, "{}", server_->token);
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(client_->get(study).status, 404);
}

// A HEAD refused from its headers (no token where reads need one) is answered without a body,
// as every HEAD is.
TEST(Unauthorized, AHeadIsRefusedWithoutABody) {
  ServiceOptions service;
  service.auth_reads = true;
  testing::TestServer server(testing::fast_options(), service);
  const auto reply = testing::raw_exchange(
      server.port(), "HEAD /v1/studies HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 401"));
  const auto end_of_headers = reply.find("\r\n\r\n");
  ASSERT_NE(end_of_headers, std::string::npos) << reply;
  EXPECT_EQ(reply.substr(end_of_headers + 4), "") << reply;
}

// HEAD takes the GET routes; where a path has none, the refusal names HEAD, the method sent
// (curl -I), not the GET it is routed as.
TEST(MethodNotAllowed, AHeadOnAPostOnlyRouteIsRefusedAsHead) {
  testing::TestServer server;
  const auto reply = testing::raw_exchange(
      server.port(), "HEAD /v1/predict HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(reply, HasSubstr("X-Tunebase-Message: HEAD is not allowed on /v1/predict"));
  EXPECT_THAT(reply, HasSubstr("Allow: POST\r\n"));
  EXPECT_THAT(reply, ::testing::Not(HasSubstr("GET is not allowed")));
  const auto head = testing::raw_exchange(
      server.port(), "HEAD /v1/studies HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(head, ::testing::StartsWith("HTTP/1.1 200"));
}

TEST_F(BadInput, SlowClientsGet408AndOthersAreServedMeanwhile) {
  namespace net = boost::asio;
  const auto before = snapshot();
  net::io_context ioc;
  net::ip::tcp::socket slow(ioc);
  slow.connect({net::ip::make_address("127.0.0.1"), server_->port()});
  // Half a request line, then silence past the header timeout (500 ms in these tests).
  net::write(slow, net::buffer(std::string("POST /v1/machines HTTP/1.1\r\nHost: x\r\n")));
  const auto started = std::chrono::steady_clock::now();
  // Others are served while the slow client dawdles.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(client_->get("/healthz").status, 200);
  std::string reply;
  boost::system::error_code ec;
  net::read(slow, net::dynamic_buffer(reply), ec);
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 408"));
  EXPECT_THAT(reply, HasSubstr("request_timeout"));
  EXPECT_LT(waited, std::chrono::seconds(3));

  // A body that stops half way: 408 after the body timeout.
  net::ip::tcp::socket stalled(ioc);
  stalled.connect({net::ip::make_address("127.0.0.1"), server_->port()});
  net::write(
      stalled,
      net::buffer(std::string("POST /v1/machines HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                              "Authorization: Bearer " +
                              server_->token + "\r\n\r\n{\"name\": ")));
  std::string stalled_reply;
  net::read(stalled, net::dynamic_buffer(stalled_reply), ec);
  EXPECT_THAT(stalled_reply, HasSubstr("HTTP/1.1 408"));

  // Garbage instead of HTTP.
  const auto garbage = testing::raw_exchange(server_->port(), "HELLO\x01\x02 nonsense\r\n\r\n");
  EXPECT_THAT(garbage, HasSubstr("HTTP/1.1 400"));

  EXPECT_EQ(client_->get("/healthz").status, 200);
  EXPECT_EQ(snapshot(), before);
}

TEST(Health, FailsOnceARequestFoundTheDatabaseCorrupt) {
  // A study of 3,000 trials, its file then damaged in the middle (as a bad disk or a copy cut
  // short leaves it): the health check, which a load balancer reads, must stop saying ok.
  tunebase::testing::TempDir dir;
  const auto path = dir.file("damaged.db");
  {
    db::Store store(path);
    MachineInfo info;
    info.name = "m";
    const auto machine = store.upsert_machine(info);
    const auto kernel = store.upsert_kernel(
        "k", SearchSpace::from_json(nlohmann::json::parse(
                 R"({"parameters": [{"name": "x", "type": "integer", "low": 0, "high": 9999}]})")));
    db::NewStudy study;
    study.name = "big";
    study.kernel = kernel.id;
    study.machine = machine.id;
    study.task = store.upsert_task("k", {{"n", 1}}).id;
    const auto s = store.create_study(study);
    for (int x = 0; x < 3000; ++x) {
      store.add_trial(s.id, {{"x", x}}, std::to_string(x), Measurement::success(1.0 + x));
    }
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  ASSERT_GT(bytes.size(), 100u * 4096u);
  std::fill(bytes.begin() + 60 * 4096, bytes.begin() + 62 * 4096, '\xff');
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  TestServer server(testing::fast_options(), {}, path);
  auto client = server.client();
  EXPECT_EQ(client.get("/healthz").status, 200);
  try {
    const auto trials = client.get("/v1/studies/1/trials", server.token);
    EXPECT_NE(trials.status, 200) << "read a damaged table whole";
  } catch (const std::exception&) {
    // A streamed reply cut off when the damage was met.
  }
  const auto health = client.get("/healthz");
  EXPECT_EQ(health.status, 503) << health.body;
  EXPECT_EQ(health.json()["status"], "corrupt");
  EXPECT_THAT(health.json()["message"].get<std::string>(), HasSubstr("is corrupt"));
}

TEST_F(BadInput, AResultOfAStudyOfTimesIsNeverNegative) {
  auto created = post("/v1/studies", {{"kernel", "demo"},
                                      {"space", testing::demo_space()},
                                      {"machine", "test-machine"},
                                      {"unit", "ms"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const auto study = created.json()["id"].get<std::int64_t>();
  const auto leased =
      post("/v1/studies/" + std::to_string(study) + "/suggestions", {{"n", 1}, {"client_id", "w"}});
  ASSERT_EQ(leased.status, 200) << leased.body;
  const std::string result =
      "/v1/trials/" + leased.json()["suggestions"][0]["trial_id"].dump() + "/result";
  auto r = post(result, {{"client_id", "w"}, {"value", -2.5}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["field"], "value");
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(),
              HasSubstr("a time cannot be negative (study " + std::to_string(study) +
                        " measures times in ms), got -2.5"));
  r = post(result, {{"client_id", "w"}, {"value", 2.0}, {"raw", {2.0, -1.0}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["field"], "raw");
  // Refused, the lease still stands: the right value is accepted.
  EXPECT_EQ(post(result, {{"client_id", "w"}, {"value", 2.0}}).status, 200);
  // A study without a time unit (a score, a difference) takes negative values.
  const auto other = post("/v1/trials/" + std::to_string(trial_) + "/result",
                          {{"client_id", "owner"}, {"value", -1.0}});
  EXPECT_EQ(other.status, 200) << other.body;
}

TEST_F(BadInput, ATasksFeaturesAreNumbersAndAreNotRewrittenByAnotherStudy) {
  nlohmann::json body{{"kernel", "demo"},
                      {"space", testing::demo_space()},
                      {"machine", "test-machine"},
                      {"task", {{"n", 1000}}},
                      {"task_features", {{"n", 1000}}}};
  auto r = post("/v1/studies", body);
  ASSERT_EQ(r.status, 201) << r.body;
  const auto task = r.json()["task_id"].get<std::int64_t>();
  // Other features for the same task would move an earlier study's input under its transfer.
  body["task_features"] = {{"n", 2000}};
  r = post("/v1/studies", body);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(),
              HasSubstr("has the features {\"n\":1000}"));
  body["task_features"] = {{"n", "big"}};
  r = post("/v1/studies", body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["field"], "task_features.n");
  EXPECT_EQ(server_->store().get_task(db::TaskId{task}).features, (nlohmann::json{{"n", 1000}}));
  // The same features, or none, are fine.
  body["task_features"] = {{"n", 1000}};
  EXPECT_EQ(post("/v1/studies", body).status, 201);
  body.erase("task_features");
  EXPECT_EQ(post("/v1/studies", body).status, 201);
}

}  // namespace
}  // namespace tunebase::api
