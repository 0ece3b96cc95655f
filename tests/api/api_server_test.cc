// Real HTTP round trips against a server on an ephemeral port: ask/tell, concurrent workers,
// leases, tokens, imports, predictions, metrics and shutdown.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "api/priors.h"
#include "db/study_export.h"
#include "tests/api/api_test_util.h"

namespace tunebase::api {
namespace {

using testing::create_demo_study;
using testing::demo_objective;
using ::testing::HasSubstr;
using testing::TestServer;
using http_response_t = boost::beast::http::response<boost::beast::http::string_body>;

nlohmann::json tell(HttpClient& c, const std::string& token, std::int64_t trial,
                    const std::string& client, double value) {
  auto r = c.post("/v1/trials/" + std::to_string(trial) + "/result",
                  {{"client_id", client},
                   {"value", value},
                   {"raw", {value, value * 1.01}},
                   {"cost_seconds", 0.01}},
                  token);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json();
}

TEST(ApiServer, HealthOpenapiAndUnknownRoutes) {
  TestServer server;
  auto c = server.client();
  EXPECT_EQ(c.get("/healthz").status, 200);
  const auto doc = c.get("/openapi.json");
  ASSERT_EQ(doc.status, 200);
  EXPECT_TRUE(doc.json()["paths"].contains("/v1/studies/{id}/suggestions"));
  const auto missing = c.get("/v2/studies");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["error"]["code"], "unknown_route");
  const auto method = c.request("DELETE", "/v1/studies");
  EXPECT_EQ(method.status, 405);
}

// Machine against machine over HTTP, and why a study's trials failed.
TEST(ApiServer, ComparesMachinesAndSaysWhyTrialsFailed) {
  TestServer server;
  std::vector<Value> xs;
  for (std::int64_t x = 1; x <= 6; ++x) xs.emplace_back(x);
  for (const auto& [device, scale] :
       {std::pair{"gpu-a", 1.0}, std::pair{"gpu-b", 2.0}, std::pair{"gpu-c, 12GB", 3.0}}) {
    MeasuredDataset d;
    d.device_name = device;
    d.kernel_name = "stencil";
    d.format = "kernel_tuner";
    d.space = SearchSpace({ordinal("x", xs)}, {});
    for (std::int64_t x = 1; x <= 6; ++x) {
      // gpu-b cannot compile x = 6.
      d.entries.push_back({{Value{x}},
                           scale > 1.0 && x == 6 ? Measurement::failure(TrialStatus::failed,
                                                                        "CompilationFailedConfig")
                                                 : Measurement::success(scale * double(7 - x))});
    }
    server.store().import_dataset(d);
  }
  auto c = server.client();
  auto r = c.get("/v1/compare?kernel=stencil&machines=gpu-a,gpu-b");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = r.json();
  EXPECT_EQ(j["pairs"][0]["common"], 5);
  EXPECT_DOUBLE_EQ(j["pairs"][0]["spearman"].get<double>(), 1.0);
  EXPECT_EQ(j["pairs"][0]["best_elsewhere"][0]["status"], "failed");  // gpu-a's best, x = 6
  EXPECT_EQ(j["pairs"][0]["runs_on_one_only"][0]["count"], 1);
  EXPECT_EQ(j["machines"][1]["best"]["config"], (nlohmann::json{{"x", 5}}));

  // A comma in a name is sent escaped: only literal commas separate the names.
  r = c.get("/v1/compare?kernel=stencil&machines=gpu-a,gpu-c%2C%2012GB");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["machines"][1]["machine"], "gpu-c, 12GB");

  r = c.get("/v1/compare?kernel=stencil&machines=gpu-a,gpu-z");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("gpu-a, gpu-b"), std::string::npos) << r.body;
  r = c.get("/v1/compare?kernel=stencil&machines=gpu-a");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("two or more machine"), std::string::npos) << r.body;

  r = c.get("/v1/studies/2");
  ASSERT_EQ(r.status, 200) << r.body;
  j = r.json();
  EXPECT_EQ(j["failure_reasons"]["total"], 1);
  EXPECT_EQ(j["failure_reasons"]["reasons"][0]["reason"], "CompilationFailedConfig");
  EXPECT_EQ(j["failure_reasons"]["reasons"][0]["count"], 1);
}

// An encoded slash is part of a path segment (RFC 3986), not a separator.
TEST(ApiServer, AnEncodedSlashDoesNotSeparatePathSegments) {
  TestServer server;
  auto c = server.client();
  const auto id = create_demo_study(c, server.token, "random", 5);
  ASSERT_EQ(c.get("/v1/studies/" + std::to_string(id)).status, 200);
  const auto encoded = c.get("/v1/studies%2F" + std::to_string(id));
  EXPECT_EQ(encoded.status, 404) << encoded.body;
  EXPECT_EQ(encoded.json()["error"]["code"], "unknown_route");
  const auto in_id = c.get("/v1/studies/" + std::to_string(id) + "%2Ftrials");
  EXPECT_EQ(in_id.status, 400) << in_id.body;
  EXPECT_EQ(in_id.json()["error"]["field"], "id");
  EXPECT_EQ(c.get("/v1/studies/" + std::to_string(id) + "/%74rials").status, 200);
}

TEST(ApiServer, FullAskTellStudyWithBayesianOptimisation) {
  TestServer server;
  auto c = server.client();
  constexpr std::int64_t kBudget = 12;
  const auto study = create_demo_study(c, server.token, "bo", kBudget);
  const std::string base = "/v1/studies/" + std::to_string(study);
  std::set<std::string> seen;
  double best = INFINITY;
  for (int round = 0; round < 100; ++round) {
    const auto reply = c.post(base + "/suggestions", {{"n", 1}, {"client_id", "w"}}, server.token);
    ASSERT_EQ(reply.status, 200) << reply.body;
    const auto answer = reply.json();
    if (answer["suggestions"].empty()) {
      EXPECT_TRUE(answer["done"].get<bool>()) << answer.dump();
      break;
    }
    const auto& s = answer["suggestions"][0];
    EXPECT_TRUE(seen.insert(s["config"].dump()).second) << "repeated " << s["config"];
    const double value = demo_objective(s["config"]);
    best = std::min(best, value);
    const auto stored = tell(c, server.token, s["trial_id"], "w", value);
    EXPECT_EQ(stored["status"], "ok");
    EXPECT_DOUBLE_EQ(stored["value"].get<double>(), value);
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kBudget));

  const auto info = c.get(base).json();
  EXPECT_EQ(info["status"], "completed");
  EXPECT_EQ(info["trials"]["ok"], kBudget);
  EXPECT_DOUBLE_EQ(info["best"]["value"].get<double>(), best);
  EXPECT_TRUE(info["kernel"]["space"].contains("parameters"));

  const auto best_known = c.get("/v1/best?kernel=demo&machine=test-machine");
  ASSERT_EQ(best_known.status, 200) << best_known.body;
  EXPECT_EQ(best_known.json()["source"], "measured");
  EXPECT_DOUBLE_EQ(best_known.json()["objective"].get<double>(), best);
  // Asked the other way, the 404 says which direction the studies there have.
  const auto other_way = c.get("/v1/best?kernel=demo&machine=test-machine&direction=maximize");
  EXPECT_EQ(other_way.status, 404) << other_way.body;
  EXPECT_THAT(other_way.json()["error"]["message"].get<std::string>(),
              HasSubstr("what was measured there is in studies that minimize: ask with "
                        "direction=minimize"));
  // Studies of both directions there, only the maximized one measured: the default direction
  // is the one of what was measured.
  const auto study_of = [&](const std::string& direction) {
    auto created = c.post(
        "/v1/studies",
        testing::demo_study_body("test-machine", {{"kernel", "rates"}, {"direction", direction}}),
        server.token);
    EXPECT_EQ(created.status, 201) << created.body;
    return created.json()["id"].get<std::int64_t>();
  };
  const auto times = study_of("minimize");
  const auto rates = study_of("maximize");
  // Every configuration, the highest 7 at bx=4, by=2, unroll=1: a best of few would be said.
  nlohmann::json every_rate = nlohmann::json::array();
  const auto demo = SearchSpace::from_json(testing::demo_space());
  for (const auto& config : demo.valid_configurations()) {
    const auto j = demo.config_to_json(config);
    every_rate.push_back({{"config", j}, {"value", 8.0 - testing::demo_objective(j)}});
  }
  ASSERT_EQ(c.post("/v1/studies/" + std::to_string(rates) + "/measurements",
                   {{"measurements", every_rate}}, server.token)
                .status,
            201);
  const auto measured_way = c.get("/v1/best?kernel=rates&machine=test-machine");
  ASSERT_EQ(measured_way.status, 200) << measured_way.body;
  EXPECT_DOUBLE_EQ(measured_way.json()["objective"].get<double>(), 7.0);
  EXPECT_FALSE(measured_way.json().contains("note")) << measured_way.body;
  // Both measured: minimize (the default), saying that the other way has an answer too.
  ASSERT_EQ(c.post("/v1/studies/" + std::to_string(times) + "/measurements",
                   {{"measurements",
                     {{{"config", {{"bx", 4}, {"by", 2}, {"unroll", 1}}}, {"value", 3.0}}}}},
                   server.token)
                .status,
            201);
  const auto both = c.get("/v1/best?kernel=rates&machine=test-machine&task=" +
                          measured_way.json()["task_id"].dump());
  ASSERT_EQ(both.status, 200) << both.body;
  EXPECT_DOUBLE_EQ(both.json()["objective"].get<double>(), 3.0);
  EXPECT_THAT(both.json()["note"].get<std::string>(),
              HasSubstr("this is the minimize one; direction=maximize gives the other"));

  const auto trials = c.get(base + "/trials?status=ok").json()["trials"];
  EXPECT_EQ(trials.size(), static_cast<std::size_t>(kBudget));
  const auto csv = c.get(base + "/export?format=csv");
  ASSERT_EQ(csv.status, 200);
  EXPECT_THAT(csv.content_type, HasSubstr("text/csv"));
  EXPECT_THAT(csv.body, HasSubstr("bx"));
  const auto exported = c.get(base + "/export");
  ASSERT_EQ(exported.status, 200);
  EXPECT_EQ(exported.json()["trials"].size(), static_cast<std::size_t>(kBudget));
  const auto cache = c.get(base + "/export?format=kernel_tuner");
  ASSERT_EQ(cache.status, 200) << cache.body;
  EXPECT_EQ(cache.json()["cache"].size(), static_cast<std::size_t>(kBudget));
  EXPECT_EQ(cache.json()["device_name"], "test-machine");

  // What it learnt of the parameters: every tuned one, shares summing to 1.
  const auto relevance = c.get(base + "/relevance");
  ASSERT_EQ(relevance.status, 200) << relevance.body;
  const auto parameters = relevance.json()["parameters"];
  ASSERT_EQ(parameters.size(), 3u) << relevance.body;
  double shares = 0.0;
  for (const auto& p : parameters) shares += p["share"].get<double>();
  EXPECT_NEAR(shares, 1.0, 1e-9) << relevance.body;
  EXPECT_FALSE(relevance.json().contains("reason")) << relevance.body;

  // The model of a finished study predicts; its prediction of a measured point is close.
  const auto& measured = trials[0];
  const auto predicted =
      c.post("/v1/predict", {{"study_id", study}, {"configs", {measured["config"]}}});
  ASSERT_EQ(predicted.status, 200) << predicted.body;
  const auto p = predicted.json()["predictions"][0];
  EXPECT_TRUE(predicted.json().contains("unit") && predicted.json()["unit"].is_null())
      << predicted.body;  // the demo study was created without one
  EXPECT_GT(p["upper"].get<double>(), p["lower"].get<double>());
  EXPECT_EQ(p["std_scale"], "log") << predicted.body;  // positive values: the model takes logs
  EXPECT_NEAR(p["mean"].get<double>(), measured["value"].get<double>(),
              0.5 * measured["value"].get<double>());
}

TEST(ApiServer, ConcurrentWorkersNeverReceiveTheSameConfiguration) {
  TestServer server;
  auto setup = server.client();
  const auto study = create_demo_study(setup, server.token, "random", testing::kDemoValid);
  constexpr int kWorkers = 4;
  std::mutex mutex;
  std::multiset<std::string> handed_out;
  std::map<std::string, int> evaluated;  // by worker
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      auto c = server.client();
      const std::string client = "worker-" + std::to_string(w);
      for (;;) {
        const auto reply = c.post("/v1/studies/" + std::to_string(study) + "/suggestions",
                                  {{"n", 2}, {"client_id", client}}, server.token);
        ASSERT_EQ(reply.status, 200) << reply.body;
        const auto answer = reply.json();
        if (answer["suggestions"].empty()) {
          if (answer["done"].get<bool>()) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          continue;
        }
        for (const auto& s : answer["suggestions"]) {
          {
            std::lock_guard lock(mutex);
            handed_out.insert(s["config"].dump());
            ++evaluated[client];
          }
          // An evaluation takes a while, as a real one does: the others ask meanwhile.
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          tell(c, server.token, s["trial_id"], client, demo_objective(s["config"]));
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(handed_out.size(), testing::kDemoValid);
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_GE(evaluated["worker-" + std::to_string(w)], 1) << "worker-" << w << " did nothing";
  }
  EXPECT_EQ(std::set<std::string>(handed_out.begin(), handed_out.end()).size(), handed_out.size());
  const auto counts = server.store().trial_counts(db::StudyId{study});
  EXPECT_EQ(counts.ok, static_cast<std::int64_t>(testing::kDemoValid));
  EXPECT_EQ(counts.pending, 0);
}

// A 200 (or 201) means stored: another connection to the file, as another process would open,
// reads the result at once.
TEST(ApiServer, AnAcknowledgedResultOrMeasurementIsCommittedForOtherReaders) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 10);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto s = c.post(base + "/suggestions", {{"client_id", "w"}}, server.token);
  ASSERT_EQ(s.status, 200) << s.body;
  const auto suggestion = s.json()["suggestions"].at(0);
  const std::int64_t trial = suggestion["trial_id"];
  const auto result = c.post("/v1/trials/" + std::to_string(trial) + "/result",
                             {{"client_id", "w"}, {"value", 2.5}}, server.token);
  ASSERT_EQ(result.status, 200) << result.body;
  {
    const auto reader = db::Store::open(server.db_path(), /*read_only=*/true);
    const auto t = reader.get_trial(db::TrialId{trial});
    EXPECT_EQ(t.result.status, TrialStatus::ok);
    EXPECT_DOUBLE_EQ(t.result.objective, 2.5);
    EXPECT_EQ(t.config, suggestion["config"]);
  }

  // A configuration neither leased nor measured.
  nlohmann::json config = {{"bx", 16}, {"by", 2}, {"unroll", 0}};
  if (config == suggestion["config"]) config["unroll"] = 1;
  const auto added =
      c.post(base + "/measurements", {{"measurements", {{{"config", config}, {"value", 4.25}}}}},
             server.token);
  ASSERT_EQ(added.status, 201) << added.body;
  const std::int64_t measured = added.json()["trial_ids"].at(0);
  {
    const auto reader = db::Store::open(server.db_path(), /*read_only=*/true);
    const auto t = reader.get_trial(db::TrialId{measured});
    EXPECT_EQ(t.result.status, TrialStatus::ok);
    EXPECT_DOUBLE_EQ(t.result.objective, 4.25);
    EXPECT_EQ(t.config, config);
    EXPECT_EQ(reader.trials(db::StudyId{study}).size(), 2u);
  }
}

/// One suggestion of the study at `base` for `client`, leased for `seconds`.
nlohmann::json lease_one(HttpClient& c, const std::string& base, const std::string& token,
                         const std::string& client, double seconds) {
  return c
      .post(base + "/suggestions", {{"n", 1}, {"client_id", client}, {"lease_seconds", seconds}},
            token)
      .json()["suggestions"][0];
}

// The same results get the same forecasts on every call: the model is not refitted (from where
// its last fit ended, moving a little each time) while the results stay as they are.
TEST(ApiServer, APredictionOfTheSameResultsIsTheSameOnEveryCall) {
  TestServer server;
  auto c = server.client();
  // Under 20 results a model is refitted at every step; budget left to propose more.
  const auto study = create_demo_study(c, server.token, "bo", 30);
  const std::string base = "/v1/studies/" + std::to_string(study);
  for (int i = 0; i < 8; ++i) {
    const auto s = lease_one(c, base, server.token, "w", 600);
    tell(c, server.token, s["trial_id"], "w", demo_objective(s["config"]));
  }
  const nlohmann::json configs = {{{"bx", 4}, {"by", 2}, {"unroll", 1}},
                                  {{"bx", 16}, {"by", 1}, {"unroll", 0}}};
  const auto predict = [&] {
    const auto reply = c.post("/v1/predict", {{"study_id", study}, {"configs", configs}});
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.json()["predictions"];
  };
  const auto first = predict();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(predict(), first);
  EXPECT_EQ(predict(), first);
  // A new result: a new model, again the same on every call.
  const auto lease = lease_one(c, base, server.token, "w", 600);
  tell(c, server.token, lease["trial_id"], "w", demo_objective(lease["config"]));
  const auto second = predict();
  EXPECT_NE(second, first);
  EXPECT_EQ(predict(), second);
}

// Left unnamed, an objective is named by its unit as tunebase sweep names it, the unit taken
// from the kernel's studies included: GET /v1/best?objective= then finds it by that name.
TEST(ApiServer, AnObjectiveLeftUnnamedIsNamedByItsUnitAsASweepNamesIt) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  const auto create = [&](const std::string& kernel, nlohmann::json more) {
    more["kernel"] = kernel;
    more["space"] = testing::demo_space();
    more["machine"] = "m";
    const auto reply = c.post("/v1/studies", more, server.token);
    EXPECT_EQ(reply.status, 201) << reply.body;
    return reply.json();
  };
  const auto rate = create("demo", {{"unit", "GFLOP/s"}, {"direction", "maximize"}});
  EXPECT_EQ(rate["objective"], "GFLOP/s");
  EXPECT_EQ(rate["unit"], "GFLOP/s");
  const std::string base = "/v1/studies/" + rate["id"].dump();
  tell(c, server.token, lease_one(c, base, server.token, "w", 60)["trial_id"], "w", 12.5);
  const auto best = c.get("/v1/best?kernel=demo&machine=m&objective=GFLOP%2Fs");
  ASSERT_EQ(best.status, 200) << best.body;
  EXPECT_EQ(best.json()["objective_name"], "GFLOP/s");
  EXPECT_EQ(best.json()["objective"], 12.5);
  // No unit: the one the kernel's studies that maximize a rate took, and its name with it.
  const auto inherited = create("demo", {{"direction", "maximize"}});
  EXPECT_EQ(inherited["unit"], "GFLOP/s");
  EXPECT_EQ(inherited["objective"], "GFLOP/s");
  // A plain number: "value" made larger, "time" made smaller; a time is "time" either way.
  EXPECT_EQ(create("other", {{"direction", "maximize"}})["objective"], "value");
  EXPECT_EQ(create("other", {{"unit", ""}, {"direction", "minimize"}})["objective"], "time");
  EXPECT_EQ(create("other", {{"unit", "us"}, {"direction", "maximize"}})["objective"], "time");
  // Named, it keeps its name.
  EXPECT_EQ(
      create("other",
             {{"unit", "GFLOP/s"}, {"objective", "rate"}, {"direction", "maximize"}})["objective"],
      "rate");
}

// A rate minimised makes the slowest configuration the best: as tunebase sweep --unit GFLOP/s
// without --maximize, a study of a rate without a direction is refused, saying which to give.
TEST(ApiServer, AStudyOfARateNeedsItsDirectionSaid) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "cluster-a"}}, server.token).status, 201);
  nlohmann::json body = {{"kernel", "gemm-rate"},
                         {"machine", "cluster-a"},
                         {"space", {{"tune_params", {{"tile", {1, 2, 4, 8}}}}}},
                         {"budget", 4},
                         {"unit", "GFLOP/s"},
                         {"strategy", "random"}};
  auto r = c.post("/v1/studies", body, server.token);
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["field"], "direction");
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(),
              HasSubstr("\"unit\" \"GFLOP/s\" is a rate, where higher is better: give "
                        "\"direction\": \"maximize\""));
  EXPECT_EQ(c.get("/v1/studies").json()["studies"].size(), 0u);
  for (const auto* unit : {"GB/s", "TFLOPS", "items per second"}) {
    body["unit"] = unit;
    EXPECT_EQ(c.post("/v1/studies", body, server.token).status, 400) << unit;
  }
  // An objective named as a rate, with no unit, is one too; with a unit, the unit says.
  body.erase("unit");
  body["objective"] = "GB/s";
  r = c.post("/v1/studies", body, server.token);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(),
              HasSubstr("\"objective\" \"GB/s\" is a rate"));
  body["unit"] = "";  // an empty unit is none
  EXPECT_EQ(c.post("/v1/studies", body, server.token).status, 400);
  body["unit"] = "ms";
  EXPECT_EQ(c.post("/v1/studies", body, server.token).status, 201);
  EXPECT_EQ(c.get("/v1/studies").json()["studies"].size(), 1u);
  body.erase("objective");
  // Said either way, it is made so; a time or a label needs no direction.
  body["unit"] = "GFLOP/s";
  body["direction"] = "maximize";
  r = c.post("/v1/studies", body, server.token);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json()["direction"], "maximize");
  body["direction"] = "minimize";
  EXPECT_EQ(c.post("/v1/studies", body, server.token).status, 201);
  body.erase("direction");
  for (const auto* unit : {"ms", "seconds", "joules", ""}) {
    body["unit"] = unit;
    r = c.post("/v1/studies", body, server.token);
    EXPECT_EQ(r.status, 201) << unit << ": " << r.body;
    EXPECT_EQ(r.json()["direction"], "minimize");
  }
}

TEST(ApiServer, ExpiredLeasesAreProposedAgainAndLateResultsAcceptedWhileUntaken) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "exhaustive", 3);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto lease = [&](const std::string& client, double seconds) {
    return lease_one(c, base, server.token, client, seconds);
  };
  const auto result_path = [](const nlohmann::json& s) {
    return "/v1/trials/" + std::to_string(s["trial_id"].get<int>()) + "/result";
  };
  const auto first = lease("vanishing", 0.1);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // several lease checks

  const auto expired = c.get("/v1/trials/" + std::to_string(first["trial_id"].get<int>())).json();
  // Named as the counts and the status filter name it, not as an evaluation that timed out.
  EXPECT_EQ(expired["status"], "lease_ended");
  EXPECT_TRUE(expired["lease_expired"].get<bool>());
  // Listed as the study's counts count it: an ended lease, not an evaluation that timed out.
  const auto ended = c.get(base + "/trials?status=lease_ended").json()["trials"];
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0]["id"], first["trial_id"]);
  EXPECT_TRUE(c.get(base + "/trials?status=timeout").json()["trials"].empty());
  EXPECT_EQ(c.get(base).json()["trials"]["lease_ended"], 1);

  // Exhaustive search takes the lowest free configuration: the released one comes back.
  const auto again = lease("steady", 3600);
  EXPECT_EQ(again["config"], first["config"]);
  EXPECT_NE(again["trial_id"], first["trial_id"]);

  // The vanished worker comes back after the configuration's new client reported it: the late
  // result is refused (it would measure the configuration twice), saying so.
  tell(c, server.token, again["trial_id"], "steady", 2.1);
  const auto late =
      c.post(result_path(first), {{"client_id", "vanishing"}, {"value", 2.0}}, server.token);
  EXPECT_EQ(late.status, 409);
  EXPECT_EQ(late.json()["error"]["code"], "conflict");
  EXPECT_THAT(late.json()["error"]["message"].get<std::string>(),
              HasSubstr("already has a result (trial " + again["trial_id"].dump()));

  // A late result for a configuration nobody took since is accepted, once.
  const auto second = lease("vanishing", 0.1);
  EXPECT_NE(second["config"], first["config"]);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  tell(c, server.token, second["trial_id"], "vanishing", 3.0);
  const auto twice =
      c.post(result_path(second), {{"client_id", "vanishing"}, {"value", 3.5}}, server.token);
  EXPECT_EQ(twice.status, 409);
  EXPECT_THAT(twice.json()["error"]["message"].get<std::string>(),
              HasSubstr("(status ok, value 3, stored "));
  // The same result again is a retry (the client lost the answer): 200, nothing changed.
  const auto retried = c.post(result_path(second),
                              {{"client_id", "vanishing"},
                               {"value", 3.0},
                               {"raw", {3.0, 3.0 * 1.01}},
                               {"cost_seconds", 0.01}},
                              server.token);
  ASSERT_EQ(retried.status, 200) << retried.body;
  EXPECT_TRUE(retried.json()["already_stored"].get<bool>());
  EXPECT_EQ(retried.json()["value"], 3.0);

  // The study goes on with the configuration nobody measured, and then it is done.
  const auto next = lease("steady", 3600);
  EXPECT_NE(next["config"], first["config"]);
  EXPECT_NE(next["config"], second["config"]);
  const auto metrics = c.get("/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("tunebase_leases_expired_total 2"));
}

// Two clients whose evaluations outlast their leases pass a configuration back and forth: each
// late result must be stored, or the study never gets a result for it.
TEST(ApiServer, ALateResultWithdrawsTheNewerLeaseOfItsConfiguration) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "exhaustive", 3);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto lease = [&](const std::string& client, double seconds) {
    return lease_one(c, base, server.token, client, seconds);
  };
  const auto first = lease("slow-a", 0.1);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto again = lease("slow-b", 0.1);
  ASSERT_EQ(again["config"], first["config"]);
  // slow-a reports while slow-b's lease is live: stored, and slow-b's lease withdrawn.
  const auto stored = tell(c, server.token, first["trial_id"], "slow-a", 2.0);
  EXPECT_EQ(stored["status"], "ok");
  const auto refused = c.post("/v1/trials/" + again["trial_id"].dump() + "/result",
                              {{"client_id", "slow-b"}, {"value", 2.5}}, server.token);
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_THAT(refused.json()["error"]["message"].get<std::string>(),
              HasSubstr("measured its configuration meanwhile"));
  // The study goes on with other configurations; the measured one is not proposed again.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto next = lease("slow-b", 3600);
  EXPECT_NE(next["config"], first["config"]);
  const auto counts = server.store().trial_counts(db::StudyId{study});
  EXPECT_EQ(counts.ok, 1);
  EXPECT_EQ(counts.pending, 1);
}

TEST(ApiServer, LateResultsNeverOverrunTheBudget) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 2);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto slow = c.post(base + "/suggestions",
                           {{"n", 2}, {"client_id", "slow"}, {"lease_seconds", 0.1}}, server.token)
                        .json()["suggestions"];
  ASSERT_EQ(slow.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // The expired leases give their places back, and two other configurations fill them.
  const auto space = SearchSpace::from_json(testing::demo_space());
  nlohmann::json others = nlohmann::json::array();
  for (const auto& config : space.valid_configurations()) {
    const auto j = space.config_to_json(config);
    if (others.size() < 2 && j != slow[0]["config"] && j != slow[1]["config"]) {
      others.push_back({{"config", j}, {"value", 1.0}});
    }
  }
  ASSERT_EQ(c.post(base + "/measurements", {{"measurements", others}}, server.token).status, 201);
  // The late results of configurations nobody took again find no room in the budget.
  for (const auto& s : slow) {
    const auto late = c.post("/v1/trials/" + std::to_string(s["trial_id"].get<int>()) + "/result",
                             {{"client_id", "slow"}, {"value", 2.0}}, server.token);
    EXPECT_EQ(late.status, 409) << late.body;
  }
  EXPECT_EQ(server.store().trial_counts(db::StudyId{study}).ok, 2);
}

TEST(ApiServer, BestTakesTheKernelsDirectionAndSaysWhatIsWrongWithAQuestion) {
  TestServer server;
  auto c = server.client();
  // A throughput kernel: every study of it maximizes.
  ASSERT_EQ(c.post("/v1/machines", {{"name", "box"}}, server.token).status, 201);
  const auto created = c.post("/v1/studies",
                              testing::demo_study_body("box", {{"kernel", "rate"},
                                                               {"direction", "maximize"},
                                                               {"objective", "GFLOP/s"},
                                                               {"strategy", "random"}}),
                              server.token);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string base = "/v1/studies/" + std::to_string(created.json()["id"].get<int>());
  // Enough measurements for a prediction elsewhere; the best, 9, at bx=4, by=2, unroll=1.
  nlohmann::json measurements = nlohmann::json::array();
  const auto space = SearchSpace::from_json(testing::demo_space());
  for (const auto& config : space.valid_configurations()) {
    const auto j = space.config_to_json(config);
    measurements.push_back({{"config", j}, {"value", 10.0 - testing::demo_objective(j)}});
  }
  ASSERT_EQ(c.post(base + "/measurements", {{"measurements", measurements}}, server.token).status,
            201);
  // No direction given: the studies' own, so the highest.
  auto r = c.get("/v1/best?kernel=rate&machine=box");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["objective"], 9.0);
  // Asked the other way on a machine that measured nothing, the 404 says which way they go.
  r = c.get("/v1/best?kernel=rate&machine=new-box&direction=minimize");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(),
              HasSubstr("the kernel's studies all maximize: ask with direction=maximize"));
  // An objective no study measures is named with those that are.
  r = c.get("/v1/best?kernel=rate&machine=box&objective=time");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(),
              HasSubstr("has no studies of objective \"time\"; its studies measure GFLOP/s"));
  r = c.get("/v1/best?kernel=rate&machine=box&objective=" + std::string(300, 'o'));
  EXPECT_EQ(r.status, 400) << r.body;
  // A machine not registered but for case is answered as a new one, with a note.
  r = c.get("/v1/best?kernel=rate&machine=BOX");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "predicted");
  EXPECT_THAT(r.json()["note"].get<std::string>(), HasSubstr("did you mean \"box\"?"));
  // Or but for spaces, dashes and underscores inside the name.
  r = c.get("/v1/best?kernel=rate&machine=B-o_%20x");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.json()["note"].get<std::string>(), HasSubstr("did you mean \"box\"?"));
  // Any other name is said to be unknown too, with the machines registered, as tunebase best
  // says it: a misspelt name would get a new machine's prediction without a word.
  r = c.get("/v1/best?kernel=rate&machine=other");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "predicted");
  EXPECT_EQ(r.json()["note"],
            "machine \"other\" is not registered: predicted as for a new machine (registered: "
            "box)")
      << r.body;
  // A registered machine that measured nothing of the kernel gets no such note.
  ASSERT_EQ(c.post("/v1/machines", {{"name", "idle"}}, server.token).status, 201);
  r = c.get("/v1/best?kernel=rate&machine=idle");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "predicted");
  EXPECT_FALSE(r.json().contains("note")) << r.body;
}

// A measured best says how many configurations it was chosen from, and that a few (fewer than
// 10: a handful posted by hand, or a sweep stopped early) may be far from the best.
TEST(ApiServer, AMeasuredBestOfFewConfigurationsSaysHowFew) {
  TestServer server;
  auto c = server.client();
  const auto id = testing::create_demo_study(c, server.token, "random", 100, "m");
  const std::string measurements = "/v1/studies/" + std::to_string(id) + "/measurements";
  ASSERT_EQ(c.post(measurements,
                   {{"measurements",
                     {{{"config", {{"bx", 1}, {"by", 1}, {"unroll", 0}}}, {"value", 5.0}}}}},
                   server.token)
                .status,
            201);
  auto r = c.get("/v1/best?kernel=demo&machine=m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "measured");
  EXPECT_EQ(r.json()["measured_configurations"], 1) << r.body;
  EXPECT_THAT(r.json().value("note", ""),
              HasSubstr("only 1 of " + std::to_string(testing::kDemoValid) +
                        " valid configurations measured on \"m\""));
  EXPECT_THAT(r.json().value("note", ""),
              HasSubstr("/v1/studies/" + std::to_string(id) + "/suggestions) measures more"));
  // The route named is one the server has.
  const auto note = r.json().value("note", "");
  const auto route = note.substr(note.find("POST /v1/studies/") + 5);
  EXPECT_TRUE(
      c.get("/openapi.json")
          .json()["paths"]
          .contains("/v1/studies/{id}/" +
                    route.substr(route.rfind('/') + 1, route.find(')') - route.rfind('/') - 1)))
      << note;
  // Every valid configuration measured: the best there is, with nothing to add.
  nlohmann::json every = nlohmann::json::array();
  const auto space = SearchSpace::from_json(testing::demo_space());
  for (const auto& config : space.valid_configurations()) {
    const auto j = space.config_to_json(config);
    if (j != nlohmann::json{{"bx", 1}, {"by", 1}, {"unroll", 0}}) {
      every.push_back({{"config", j}, {"value", testing::demo_objective(j)}});
    }
  }
  // Ten, as many as a search measures before its model speaks: no longer a handful.
  const nlohmann::json nine(every.begin(), every.begin() + 9);
  ASSERT_EQ(c.post(measurements, {{"measurements", nine}}, server.token).status, 201);
  r = c.get("/v1/best?kernel=demo&machine=m&direction=minimize");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["measured_configurations"], 10) << r.body;
  EXPECT_FALSE(r.json().contains("note")) << r.body;
  const nlohmann::json rest(every.begin() + 9, every.end());
  ASSERT_EQ(c.post(measurements, {{"measurements", rest}}, server.token).status, 201);
  r = c.get("/v1/best?kernel=demo&machine=m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["objective"], 1.0);
  EXPECT_EQ(r.json()["measured_configurations"], testing::kDemoValid) << r.body;
  EXPECT_FALSE(r.json().contains("note")) << r.body;
}

// measured_configurations counts configurations, not results: one measured for two inputs (or
// twice, by a sweep and an import) is one configuration of the space measured there.
TEST(ApiServer, AMeasuredBestCountsAConfigurationMeasuredInTwoStudiesOnce) {
  TestServer server;
  auto c = server.client();
  const auto first = testing::create_demo_study(c, server.token, "random", 100, "m");
  auto second = c.post(
      "/v1/studies", testing::demo_study_body("m", {{"task", {{"n", 2}}}, {"strategy", "random"}}),
      server.token);
  ASSERT_EQ(second.status, 201) << second.body;
  const nlohmann::json configs{{{"bx", 1}, {"by", 1}, {"unroll", 0}},
                               {{"bx", 2}, {"by", 1}, {"unroll", 0}}};
  for (const auto id : {first, second.json()["id"].get<std::int64_t>()}) {
    nlohmann::json measurements = nlohmann::json::array();
    for (const auto& config : configs) {
      measurements.push_back({{"config", config}, {"value", testing::demo_objective(config)}});
    }
    ASSERT_EQ(c.post("/v1/studies/" + std::to_string(id) + "/measurements",
                     {{"measurements", measurements}}, server.token)
                  .status,
              201);
  }
  const auto r = c.get("/v1/best?kernel=demo&machine=m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "measured");
  EXPECT_EQ(r.json()["measured_configurations"], 2) << r.body;
  EXPECT_THAT(r.json().value("note", ""),
              HasSubstr("only 2 of " + std::to_string(testing::kDemoValid) +
                        " valid configurations measured on \"m\""));
}

// A kernel whose space gained a parameter: its best is of the newest space, whose
// configurations hold that parameter (an older one's, better or not, is no configuration of the
// kernel now), counted among that space's, with a note that the older studies were left out.
// A version that differs only in its constraints measures the same configurations and stays.
TEST(ApiServer, AMeasuredBestIsOfTheNewestSpacesParameters) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  const auto study = [&](const std::string& name, const nlohmann::json& space,
                         const nlohmann::json& measurements) {
    const auto created = c.post("/v1/studies",
                                {{"kernel", "kv"},
                                 {"machine", "m"},
                                 {"name", name},
                                 {"unit", "ms"},
                                 {"strategy", "random"},
                                 {"space", space}},
                                server.token);
    ASSERT_EQ(created.status, 201) << created.body;
    if (measurements.empty()) return;
    ASSERT_EQ(c.post("/v1/studies/" + created.json()["id"].dump() + "/measurements",
                     {{"measurements", measurements}}, server.token)
                  .status,
              201);
  };
  study("kv-old", {{"tune_params", {{"block", {32, 64, 128}}}}},
        {{{"config", {{"block", 32}}}, {"value", 1.0}},
         {{"config", {{"block", 64}}}, {"value", 1.5}},
         {{"config", {{"block", 128}}}, {"value", 2.0}}});
  study("kv-new", {{"tune_params", {{"block", {32, 64, 128}}, {"tile", {1, 2, 4}}}}},
        {{{"config", {{"block", 32}, {"tile", 1}}}, {"value", 5.0}},
         {{"config", {{"block", 64}, {"tile", 2}}}, {"value", 4.0}}});
  auto r = c.get("/v1/best?kernel=kv&machine=m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["config"], (nlohmann::json{{"block", 64}, {"tile", 2}})) << r.body;
  EXPECT_EQ(r.json()["study"], "kv-new") << r.body;
  EXPECT_EQ(r.json()["measured_configurations"], 2) << r.body;
  EXPECT_THAT(r.json().value("note", ""),
              HasSubstr("1 study measured kernel \"kv\" on \"m\" in a search space with other "
                        "parameters"));
  EXPECT_THAT(r.json().value("note", ""), HasSubstr(") and is left out"));
  // The same parameters with a constraint: one question, its better value the best.
  study("kv-restricted",
        {{"tune_params", {{"block", {32, 64, 128}}, {"tile", {1, 2, 4}}}},
         {"restrictions", {"block * tile <= 256"}}},
        {{{"config", {{"block", 128}, {"tile", 1}}}, {"value", 3.0}}});
  r = c.get("/v1/best?kernel=kv&machine=m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["config"], (nlohmann::json{{"block", 128}, {"tile", 1}})) << r.body;
  EXPECT_EQ(r.json()["measured_configurations"], 3) << r.body;
  // A newer constraint forbids the best two: the best configuration it allows answers, before
  // the newer space has a result too.
  study("kv-tighter",
        {{"tune_params", {{"block", {32, 64, 128}}, {"tile", {1, 2, 4}}}},
         {"restrictions", {"block * tile <= 64"}}},
        nlohmann::json::array());
  r = c.get("/v1/best?kernel=kv&machine=m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["config"], (nlohmann::json{{"block", 32}, {"tile", 1}})) << r.body;
  EXPECT_EQ(r.json()["study"], "kv-new") << r.body;
  // The space of the newest study is the kernel's now, though an older version's.
  study("kv-restricted again",
        {{"tune_params", {{"block", {32, 64, 128}}, {"tile", {1, 2, 4}}}},
         {"restrictions", {"block * tile <= 256"}}},
        nlohmann::json::array());
  r = c.get("/v1/best?kernel=kv&machine=m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["config"], (nlohmann::json{{"block", 128}, {"tile", 1}})) << r.body;
}

// PETSc solves to rtol 1e-3 are faster than to 1e-8 without being better. A study keeps how it
// was measured; its best is of the studies measured as the newest one, with a note naming both
// settings, and it learns only from studies measured alike.
TEST(ApiServer, StudiesMeasuredWithOtherSettingsAreNeitherComparedNorLearnedFrom) {
  TestServer server;
  auto c = server.client();
  for (const auto* m : {"m", "other"}) {
    ASSERT_EQ(c.post("/v1/machines", {{"name", m}}, server.token).status, 201);
  }
  const nlohmann::json tight{{"clock", "wall"}, {"rtol", 1e-8}};
  const nlohmann::json loose{{"clock", "wall"}, {"rtol", 1e-3}};
  const nlohmann::json space{{"tune_params", {{"pc", {"jacobi", "ilu", "sor"}}}}};
  const auto study = [&](const std::string& name, const std::string& machine,
                         const nlohmann::json& measurement, const nlohmann::json& measurements) {
    nlohmann::json body{{"kernel", "solve"}, {"machine", machine}, {"name", name},
                        {"unit", "s"},       {"space", space},     {"measurement", measurement}};
    const auto created = c.post("/v1/studies", body, server.token);
    EXPECT_EQ(created.status, 201) << created.body;
    EXPECT_EQ(created.json()["settings"].value("measurement", nlohmann::json::object()),
              measurement)
        << created.body;
    if (!measurements.empty()) {
      EXPECT_EQ(c.post("/v1/studies/" + created.json()["id"].dump() + "/measurements",
                       {{"measurements", measurements}}, server.token)
                    .status,
                201);
    }
    return created.json();
  };
  study("loose", "m", loose, {{{"config", {{"pc", "jacobi"}}}, {"value", 1.0}}});
  study("tight", "m", tight,
        {{{"config", {{"pc", "ilu"}}}, {"value", 3.0}},
         {{"config", {{"pc", "sor"}}}, {"value", 4.0}}});
  const auto r = c.get("/v1/best?kernel=solve&machine=m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["config"], (nlohmann::json{{"pc", "ilu"}})) << r.body;
  EXPECT_EQ(r.json()["measured_configurations"], 2) << r.body;
  EXPECT_THAT(r.json().value("note", ""),
              HasSubstr("1 study measured kernel \"solve\" on \"m\" with other settings (clock "
                        "wall, rtol 0.001) and is left out: this is the best of those measured as "
                        "the newest study (clock wall, rtol 1e-08), whose times compare"));
  // Priors: only the tight study's for a tight study elsewhere (its strategy, left to the
  // server, learns from them); none measured as a study of no settings is.
  // Asked for again under its name, measured otherwise: the 409 says so.
  const auto taken = c.post("/v1/studies",
                            {{"kernel", "solve"},
                             {"machine", "m"},
                             {"name", "tight"},
                             {"space", space},
                             {"measurement", loose}},
                            server.token);
  ASSERT_EQ(taken.status, 409) << taken.body;
  EXPECT_THAT(taken.body, HasSubstr("continue that study (measured with clock wall, rtol 1e-08, "
                                    "not clock wall, rtol 0.001 as asked)"));
  const auto elsewhere = study("tight elsewhere", "other", tight, {});
  EXPECT_EQ(elsewhere["strategy"], "bo-transfer");
  EXPECT_EQ(study("kept none", "other", nlohmann::json::object(), {})["strategy"], "bo");
  // A machine measured nowhere is predicted from the studies measured as the newest one with a
  // result: 5 tight results, not the loose one.
  ASSERT_EQ(c.post("/v1/studies/" + elsewhere["id"].dump() + "/measurements",
                   {{"measurements",
                     {{{"config", {{"pc", "jacobi"}}}, {"value", 3.0}},
                      {{"config", {{"pc", "ilu"}}}, {"value", 1.0}},
                      {{"config", {{"pc", "sor"}}}, {"value", 2.0}}}}},
                   server.token)
                .status,
            201);
  const auto predicted = c.get("/v1/best?kernel=solve&machine=new");
  ASSERT_EQ(predicted.status, 200) << predicted.body;
  EXPECT_EQ(predicted.json()["source"], "predicted") << predicted.body;
  EXPECT_EQ(predicted.json()["based_on"]["trials"], 5) << predicted.body;
}

// A prediction that has too little to learn from says when studies measured otherwise were
// left out: they may be most of what there is.
TEST(ApiServer, TooLittleToPredictFromNamesTheStudiesMeasuredOtherwise) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  const nlohmann::json space{{"tune_params", {{"pc", {"jacobi", "ilu", "sor"}}}}};
  const auto study = [&](const std::string& name, double rtol, const nlohmann::json& values) {
    const auto created = c.post("/v1/studies",
                                {{"kernel", "solve"},
                                 {"machine", "m"},
                                 {"name", name},
                                 {"unit", "s"},
                                 {"space", space},
                                 {"measurement", {{"clock", "wall"}, {"rtol", rtol}}}},
                                server.token);
    ASSERT_EQ(created.status, 201) << created.body;
    nlohmann::json measurements = nlohmann::json::array();
    for (const auto& [pc, value] : values.items()) {
      measurements.push_back({{"config", {{"pc", pc}}}, {"value", value}});
    }
    ASSERT_EQ(c.post("/v1/studies/" + created.json()["id"].dump() + "/measurements",
                     {{"measurements", measurements}}, server.token)
                  .status,
              201);
  };
  study("loose", 1e-3, {{"jacobi", 1.0}, {"ilu", 2.0}, {"sor", 3.0}});
  study("tight", 1e-8, {{"ilu", 4.0}});
  const auto r = c.get("/v1/best?kernel=solve&machine=new");
  ASSERT_EQ(r.status, 404) << r.body;
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(),
              HasSubstr("to predict from; predictions learn only from the studies measured as "
                        "the newest one with a result (clock wall, rtol 1e-08): 1 study measured "
                        "otherwise (clock wall, rtol 0.001) is left out"))
      << r.body;
}

// Successes that all have one value show no spread: a forecast from them cannot say how far
// another configuration may lie, and says so rather than give a zero-wide interval as if certain.
TEST(ApiServer, AForecastFromEqualValuesSaysItsIntervalCannotBeEstimated) {
  TestServer server;
  auto c = server.client();
  const auto id = testing::create_demo_study(c, server.token, "random", 100, "m");
  nlohmann::json alike = nlohmann::json::array();
  for (const int bx : {1, 2, 4, 8}) {
    alike.push_back({{"config", {{"bx", bx}, {"by", 1}, {"unroll", 0}}}, {"value", 2.0}});
  }
  ASSERT_EQ(c.post("/v1/studies/" + std::to_string(id) + "/measurements", {{"measurements", alike}},
                   server.token)
                .status,
            201);
  const auto r = c.post("/v1/predict",
                        {{"study_id", id}, {"configs", {{{"bx", 16}, {"by", 2}, {"unroll", 1}}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const auto f = r.json()["predictions"][0];
  const bool honest_width = f["lower"].get<double>() < f["upper"].get<double>();
  const bool says_so = f.value("note", "").find("cannot be estimated") != std::string::npos;
  EXPECT_TRUE(honest_width || says_so) << r.body;
}

// A result ends its lease: a finished trial shows no lease time, in every reply that holds it.
TEST(ApiServer, AFinishedTrialShowsNoLease) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 3);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto leased = c.post(base + "/suggestions", {{"n", 2}, {"client_id", "w"}}, server.token)
                          .json()["suggestions"];
  ASSERT_EQ(leased.size(), 2u);
  const auto reported = tell(c, server.token, leased[0]["trial_id"], "w", 1.0);
  EXPECT_TRUE(reported["finished_at"].is_string()) << reported.dump();
  EXPECT_TRUE(reported["lease_expires_at"].is_null()) << reported.dump();
  EXPECT_EQ(reported["lease_expired"], false) << reported.dump();
  const auto finished = c.get("/v1/trials/" + leased[0]["trial_id"].dump()).json();
  EXPECT_TRUE(finished["lease_expires_at"].is_null()) << finished.dump();
  // The lease still held shows when it ends, as the suggestion said.
  const auto held = c.get("/v1/trials/" + leased[1]["trial_id"].dump()).json();
  EXPECT_EQ(held["lease_expires_at"], leased[1]["lease_expires_at"]) << held.dump();
  for (const auto& t : c.get(base + "/trials").json()["trials"]) {
    EXPECT_EQ(t["lease_expires_at"].is_null(), t["finished_at"].is_string()) << t.dump();
  }
  const auto exported = c.get(base + "/export").json();
  for (const auto& t : exported["trials"]) {
    EXPECT_EQ(t["lease_expires_at"].is_null(), t["finished_at"].is_string()) << t.dump();
  }
}

TEST(ApiServer, AStudyIsCompletedByTheResultThatSpendsItsBudget) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 3);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto leased = c.post(base + "/suggestions", {{"n", 2}, {"client_id", "w"}}, server.token)
                          .json()["suggestions"];
  ASSERT_EQ(leased.size(), 2u);
  for (const auto& s : leased) tell(c, server.token, s["trial_id"], "w", 1.0);
  EXPECT_EQ(c.get(base).json()["status"], "active");
  // The third result, an outside measurement, spends the budget: no further request needed.
  const auto space = SearchSpace::from_json(testing::demo_space());
  for (const auto& config : space.valid_configurations()) {
    const auto j = space.config_to_json(config);
    if (j == leased[0]["config"] || j == leased[1]["config"]) continue;
    ASSERT_EQ(c.post(base + "/measurements", {{"measurements", {{{"config", j}, {"value", 2.0}}}}},
                     server.token)
                  .status,
              201);
    break;
  }
  EXPECT_EQ(c.get(base).json()["status"], "completed") << c.get(base).body;

  // The same when a reported result spends it.
  const auto one = create_demo_study(c, server.token, "random", 1, "test-machine", "one");
  const std::string one_base = "/v1/studies/" + std::to_string(one);
  const auto lease = c.post(one_base + "/suggestions", {{"n", 1}, {"client_id", "w"}}, server.token)
                         .json()["suggestions"];
  ASSERT_EQ(lease.size(), 1u);
  tell(c, server.token, lease[0]["trial_id"], "w", 1.0);
  EXPECT_EQ(c.get(one_base).json()["status"], "completed");

  // And when every configuration is measured before the budget is spent.
  const auto all = create_demo_study(c, server.token, "random", 100, "test-machine", "all");
  const std::string all_base = "/v1/studies/" + std::to_string(all);
  const auto every =
      c.post(all_base + "/suggestions", {{"n", 50}, {"client_id", "w"}}, server.token)
          .json()["suggestions"];
  ASSERT_EQ(every.size(), testing::kDemoValid);
  for (const auto& s : every) tell(c, server.token, s["trial_id"], "w", 1.0);
  const auto done =
      c.post(all_base + "/suggestions", {{"n", 1}, {"client_id", "w"}}, server.token).json();
  EXPECT_TRUE(done["done"].get<bool>()) << done.dump();
  EXPECT_EQ(c.get(all_base).json()["status"], "completed");

  // Every configuration measured outside the service: completed by the last measurement.
  const auto outside = create_demo_study(c, server.token, "random", 100, "test-machine", "out");
  const std::string outside_base = "/v1/studies/" + std::to_string(outside);
  ASSERT_EQ(c.get(outside_base).json()["status"], "active");  // the session is loaded
  nlohmann::json measurements = nlohmann::json::array();
  for (const auto& config : space.valid_configurations()) {
    measurements.push_back({{"config", space.config_to_json(config)}, {"value", 1.0}});
  }
  ASSERT_EQ(
      c.post(outside_base + "/measurements", {{"measurements", measurements}}, server.token).status,
      201);
  EXPECT_EQ(c.get(outside_base).json()["status"], "completed");
}

TEST(ApiServer, AStoppedStudySuggestsNothingButTakesTheResultsOfItsLeases) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 100);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto lease = lease_one(c, base, server.token, "w", 3600);
  EXPECT_EQ(c.post(base + "/stop", nlohmann::json::object()).status, 401);  // a write
  const auto stopped = c.post(base + "/stop", nlohmann::json::object(), server.token);
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  EXPECT_EQ(stopped.json()["status"], "stopped");
  const auto after = c.post(base + "/suggestions", {{"client_id", "w"}}, server.token).json();
  EXPECT_TRUE(after["suggestions"].empty());
  EXPECT_TRUE(after["done"].get<bool>());
  EXPECT_THAT(after["reason"].get<std::string>(), HasSubstr("is stopped"));
  tell(c, server.token, lease["trial_id"], "w", 1.0);
  EXPECT_EQ(c.get(base).json()["trials"]["ok"], 1);
  EXPECT_EQ(c.post(base + "/stop", nlohmann::json::object(), server.token).status, 200);
  EXPECT_EQ(c.post(base + "/stop", {{"now", true}}, server.token).status, 400);
  EXPECT_EQ(c.request("POST", base + "/stop", "", server.token).status, 200);  // no body
  EXPECT_EQ(c.post("/v1/studies/999/stop", nlohmann::json::object(), server.token).status, 404);
  // A study whose budget is spent has nothing to stop.
  const auto done = create_demo_study(c, server.token, "random", 1, "test-machine", "one");
  const std::string one = "/v1/studies/" + std::to_string(done);
  tell(c, server.token, lease_one(c, one, server.token, "w", 3600)["trial_id"], "w", 1.0);
  EXPECT_EQ(c.post(one + "/stop", nlohmann::json::object(), server.token).status, 409);
}

// A study Kernel Tuner's cache cannot hold (of a real interval) is refused on the query parameter
// that asked for the format, as other query errors are.
TEST(ApiServer, AnExportFormatThatCannotHoldTheStudyIsRefusedOnTheQuery) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  // A real interval: a cache lists every value of each parameter.
  const nlohmann::json real_space = {
      {"parameters", {{{"name", "x"}, {"type", "real"}, {"low", 0.5}, {"high", 2.0}}}}};
  const auto study =
      c.post("/v1/studies", testing::demo_study_body("m", {{"space", real_space}}), server.token);
  ASSERT_EQ(study.status, 201) << study.body;
  const std::string base = "/v1/studies/" + study.json()["id"].dump();
  const auto refused = c.get(base + "/export?format=kernel_tuner");
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(refused.json()["error"]["field"], "query.format");
  EXPECT_THAT(refused.error_message(), HasSubstr("export it as json or csv"));
  EXPECT_EQ(c.get(base + "/export?format=csv").status, 200);
}

TEST(ApiServer, WritesNeedAValidTokenAndResultsTheirOwnClient) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 5);
  const std::string target = "/v1/studies/" + std::to_string(study) + "/suggestions";
  const nlohmann::json body{{"n", 1}, {"client_id", "a"}};

  const auto none = c.post(target, body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.json()["error"]["field"], "Authorization");
  EXPECT_EQ(c.post(target, body, "not-a-token").status, 401);
  EXPECT_EQ(c.request("POST", target, body.dump(), "", "application/json").status, 401);
  const auto basic = c.request("POST", target, body.dump());
  EXPECT_EQ(basic.status, 401);

  const auto second = server.store().create_token("second");
  server.store().revoke_token("second");
  EXPECT_EQ(c.post(target, body, second).status, 401);

  // Reads stay open by default.
  EXPECT_EQ(c.get("/v1/studies").status, 200);

  const auto s = c.post(target, body, server.token).json()["suggestions"][0];
  const auto foreign = c.post("/v1/trials/" + std::to_string(s["trial_id"].get<int>()) + "/result",
                              {{"client_id", "b"}, {"value", 1.0}}, server.token);
  EXPECT_EQ(foreign.status, 403);
  EXPECT_THAT(foreign.json()["error"]["message"].get<std::string>(), HasSubstr("client \"a\""));
  EXPECT_EQ(server.store().get_trial(db::TrialId{s["trial_id"].get<std::int64_t>()}).result.status,
            TrialStatus::pending);
}

TEST(ApiServer, AuthReadsClosesReads) {
  ServiceOptions closed;
  closed.auth_reads = true;
  TestServer server(testing::fast_options(), closed);
  auto c = server.client();
  EXPECT_EQ(c.get("/v1/studies").status, 401);
  EXPECT_EQ(c.get("/v1/studies", server.token).status, 200);
  // Health stays open, but where the database lies is not for anyone to read: its file name.
  const auto health = c.get("/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json()["database"], "api.db") << health.body;
}

// A Kernel-Tuner-cache-like file: 4 x 3 configurations, one failed, time = f(block sizes).
std::string kernel_tuner_cache(const std::string& device, double scale, int fastest_bx = 64) {
  nlohmann::json cache = nlohmann::json::object();
  for (int bx : {16, 32, 64, 128}) {
    for (int by : {1, 2, 4}) {
      const std::string key = std::to_string(bx) + "," + std::to_string(by);
      nlohmann::json entry{{"block_size_x", bx}, {"block_size_y", by}};
      if (bx == 128 && by == 4) {
        entry["time"] = "CompilationFailedConfig";
      } else {
        const double t =
            scale * (1.0 + std::abs(std::log2(bx / double(fastest_bx))) + 0.3 * std::abs(by - 2));
        entry["time"] = t;
        entry["times"] = {t, t * 1.02, t * 0.99};
      }
      cache[key] = entry;
    }
  }
  return nlohmann::json{
      {"device_name", device},
      {"kernel_name", "convolution"},
      {"problem_size", {4096, 4096}},
      {"tune_params_keys", {"block_size_x", "block_size_y"}},
      {"tune_params", {{"block_size_x", {16, 32, 64, 128}}, {"block_size_y", {1, 2, 4}}}},
      {"cache", cache}}
      .dump();
}

std::string gzip(const std::string& bytes) {
  z_stream zs{};
  // 15 + 16: a gzip header and trailer around the deflate stream.
  EXPECT_EQ(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&zs, bytes.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(ApiServer, AnUploadThatDecompressesPastTheLimitIsRefused) {
  TestServer server;
  auto c = server.client();
  // A gzip bomb: well under the upload limit, its JSON text is over the import limit.
  const auto bomb = gzip(std::string(kMaxImportTextBytes + (1u << 20), ' '));
  ASSERT_LT(bomb.size(), kMaxImportBytes);
  const auto r = c.request("POST", "/v1/import", bomb, server.token, "application/gzip");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(),
              HasSubstr("decompresses to more than 256 MiB of JSON"));
  EXPECT_TRUE(c.get("/v1/studies").json()["studies"].empty());
}

// A study that is not active answers questions to its model from its results, read from the
// Store: once, not at every question (an import of 100,000 trials took 0.4 s a prediction, and
// a few clients asking at once held up every study's suggestions), until its results change.
TEST(ApiServer, QuestionsToTheModelOfAStudyThatIsNotActiveReadItsResultsOnce) {
  TestServer server;
  auto c = server.client();
  auto cache = nlohmann::json::parse(kernel_tuner_cache("GPU A", 1.0));
  const auto full = cache;
  cache["cache"].erase("16,1");
  cache["cache"].erase("16,2");
  const auto imported = c.request("POST", "/v1/import?machine=gpu-a", cache.dump(), server.token);
  ASSERT_EQ(imported.status, 201) << imported.body;
  const auto study = imported.json()["study_id"];
  const std::string base = "/v1/studies/" + study.dump();
  ASSERT_NE(c.get(base).json()["status"], "active");
  const nlohmann::json ask{{"study_id", study},
                           {"configs", {{{"block_size_x", 16}, {"block_size_y", 2}}}}};
  const auto first = c.post("/v1/predict", ask);
  ASSERT_EQ(first.status, 200) << first.body;
  const auto& manager = server.service().studies();
  const auto reads = manager.model_reads();
  EXPECT_EQ(c.post("/v1/predict", ask).body, first.body);
  EXPECT_EQ(c.get(base + "/relevance").status, 200);
  EXPECT_EQ(c.post("/v1/predict", ask).body, first.body);
  EXPECT_EQ(manager.model_reads(), reads);
  // A result added: read again.
  ASSERT_EQ(c.post(base + "/measurements",
                   {{"measurements",
                     {{{"config", {{"block_size_x", 16}, {"block_size_y", 1}}}, {"value", 0.5}}}}},
                   server.token)
                .status,
            201);
  const auto measured = c.post("/v1/predict", ask);
  EXPECT_EQ(measured.status, 200);
  EXPECT_EQ(manager.model_reads(), reads + 1);
  // An import that extends the study (through the Store, beside the study manager): again.
  auto rest = full;
  rest["cache"].erase("16,1");
  const auto extended = c.request("POST", "/v1/import?machine=gpu-a", rest.dump(), server.token);
  ASSERT_EQ(extended.status, 201) << extended.body;
  ASSERT_EQ(extended.json()["study_id"], study);
  ASSERT_EQ(extended.json()["trials"], 1);
  const auto after = c.post("/v1/predict", ask);
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(manager.model_reads(), reads + 2);
  EXPECT_NE(after.body, measured.body) << "the configuration measured is predicted as before";
}

// What a validating client checks of a reply against the published schema (the subset of
// JSON Schema the document uses): the first difference, or "" when it conforms.
// `root`: the document whose components a "$ref" names.
std::string schema_mismatch(const nlohmann::json& v, const nlohmann::json& schema,
                            const nlohmann::json& root, const std::string& at = "$") {
  if (schema.contains("$ref")) {
    const auto ref = schema["$ref"].get<std::string>();
    if (!ref.starts_with("#/") || !root.contains(nlohmann::json::json_pointer(ref.substr(1)))) {
      return at + ": \"$ref\" " + ref + " names nothing in the document";
    }
    return schema_mismatch(v, root[nlohmann::json::json_pointer(ref.substr(1))], root, at);
  }
  if (v.is_null() && schema.value("nullable", false)) return "";
  if (schema.contains("allOf")) {
    for (const auto& part : schema["allOf"]) {
      if (auto why = schema_mismatch(v, part, root, at); !why.empty()) return why;
    }
  }
  if (schema.contains("enum") &&
      std::find(schema["enum"].begin(), schema["enum"].end(), v) == schema["enum"].end()) {
    return at + ": " + v.dump() + " is not one of " + schema["enum"].dump();
  }
  const std::string type = schema.value("type", "");
  const bool fits = type.empty() || (type == "object" && v.is_object()) ||
                    (type == "array" && v.is_array()) || (type == "string" && v.is_string()) ||
                    (type == "integer" && v.is_number_integer()) ||
                    (type == "number" && v.is_number()) || (type == "boolean" && v.is_boolean());
  if (!fits) return at + ": " + v.dump() + " is not of type " + type;
  if (v.is_object()) {
    const auto properties = schema.value("properties", nlohmann::json::object());
    for (const auto& name : schema.value("required", nlohmann::json::array())) {
      if (!v.contains(name.get<std::string>())) return at + ": no required " + name.dump();
    }
    for (const auto& [key, value] : v.items()) {
      if (properties.contains(key)) {
        if (auto why = schema_mismatch(value, properties[key], root, at + "." + key); !why.empty())
          return why;
      } else if (!schema.value("additionalProperties", true)) {
        return at + ": \"" + key + "\" is not in the schema";
      }
    }
  }
  if (v.is_array() && schema.contains("items")) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (auto why =
              schema_mismatch(v[i], schema["items"], root, at + "[" + std::to_string(i) + "]");
          !why.empty())
        return why;
    }
  }
  return "";
}

TEST(ApiServer, RepliesMatchTheSchemasTheServerPublishes) {
  TestServer server;
  auto c = server.client();
  const auto doc = c.get("/openapi.json").json();
  const auto check = [&](const std::string& method, const std::string& pattern,
                         const HttpReply& reply) {
    SCOPED_TRACE(method + " " + pattern + " -> " + std::to_string(reply.status));
    const auto& responses = doc["paths"][pattern][method]["responses"];
    ASSERT_TRUE(responses.contains(std::to_string(reply.status))) << reply.body;
    const auto& schema =
        responses[std::to_string(reply.status)]["content"]["application/json"]["schema"];
    EXPECT_EQ(schema_mismatch(reply.json(), schema, doc), "") << reply.body;
  };
  check("get", "/healthz", c.get("/healthz"));
  check(
      "post", "/v1/machines",
      c.post("/v1/machines", {{"name", "gpu-new"}, {"fingerprint", {{"cpu", "x"}}}}, server.token));
  check("post", "/v1/import",
        c.request("POST", "/v1/import?machine=gpu-a", kernel_tuner_cache("GPU A", 1.0),
                  server.token));
  check("get", "/v1/machines", c.get("/v1/machines"));
  ASSERT_EQ(c.post("/v1/machines", {{"name", "gpu-b"}}, server.token).status, 201);
  const auto created =
      c.post("/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-b"}, {"budget", 6}},
             server.token);
  check("post", "/v1/studies", created);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string base = "/v1/studies/" + created.json()["id"].dump();
  const auto asked = c.post(base + "/suggestions", {{"n", 3}, {"client_id", "w"}}, server.token);
  check("post", "/v1/studies/{id}/suggestions", asked);
  const auto leases = asked.json()["suggestions"];
  ASSERT_EQ(leases.size(), 3u) << asked.body;
  const auto trial = [&](int i, const std::string& what) {
    return "/v1/trials/" + leases[i]["trial_id"].dump() + what;
  };
  check("post", "/v1/trials/{id}/result",
        c.post(trial(0, "/result"), {{"client_id", "w"}, {"value", 1.5}}, server.token));
  check("post", "/v1/trials/{id}/result",
        c.post(trial(1, "/result"), {{"client_id", "w"}, {"status", "failed"}}, server.token));
  check("post", "/v1/trials/{id}/lease",
        c.post(trial(2, "/lease"), {{"client_id", "w"}, {"lease_seconds", 60}}, server.token));
  check("post", "/v1/trials/{id}/release",
        c.post(trial(2, "/release"), {{"client_id", "w"}}, server.token));
  check("post", "/v1/trials/{id}/release",  // 409: released already
        c.post(trial(2, "/release"), {{"client_id", "w"}}, server.token));
  check("get", "/v1/trials/{id}", c.get(trial(0, "")));
  check("get", "/v1/trials/{id}", c.get(trial(2, "")));
  check("post", "/v1/studies/{id}/measurements",
        c.post(base + "/measurements",
               {{"measurements",
                 {{{"config", {{"block_size_x", 128}, {"block_size_y", 8}}}, {"value", 2.0}}}}},
               server.token));
  check("get", "/v1/studies/{id}/trials", c.get(base + "/trials"));
  check("get", "/v1/studies/{id}", c.get(base));
  check("get", "/v1/studies", c.get("/v1/studies"));
  // Each with its input, as tunebase studies --json prints it.
  EXPECT_TRUE(c.get("/v1/studies").json()["studies"][0].contains("task"));
  check("get", "/v1/best", c.get("/v1/best?kernel=convolution&machine=gpu-b"));    // measured
  check("get", "/v1/best", c.get("/v1/best?kernel=convolution&machine=gpu-new"));  // predicted
  const auto unregistered = c.get("/v1/best?kernel=convolution&machine=gpu-unknown");
  EXPECT_TRUE(unregistered.json().contains("note")) << unregistered.body;
  check("get", "/v1/best", unregistered);
  check("post", "/v1/predict",
        c.post("/v1/predict", {{"study_id", created.json()["id"]},
                               {"configs", {{{"block_size_x", 64}, {"block_size_y", 2}}}}}));
  check("get", "/v1/studies/{id}/export", c.get(base + "/export"));
  check("get", "/v1/studies/{id}/relevance", c.get(base + "/relevance"));
  check("post", "/v1/studies/{id}/stop", c.post(base + "/stop", {}, server.token));
  check("post", "/v1/studies/{id}/resume", c.post(base + "/resume", {}, server.token));
  // Errors too.
  check("post", "/v1/studies", c.post("/v1/studies", {{"kernel", 3}}, server.token));
  check("get", "/v1/trials/{id}", c.get("/v1/trials/999999"));
}

// A POST sent as raw bytes (the client keeps no headers): the whole reply, headers first.
std::string raw_post(const TestServer& server, const std::string& target, const std::string& body,
                     const std::string& token) {
  return testing::raw_exchange(
      server.port(), "POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
                         "\r\nContent-Type: application/json\r\n"
                         "Content-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

// The value of header `name` in a raw reply, or "none".
std::string header_value(const std::string& reply, const std::string& name) {
  const auto end = reply.find("\r\n\r\n");
  const auto at = reply.substr(0, end).find("\r\n" + name + ": ");
  if (at == std::string::npos) return "none";
  const auto start = at + name.size() + 4;
  return reply.substr(start, reply.find("\r\n", start) - start);
}

// 201 Created says where the resource is: a study, the study an import made.
TEST(ApiServer, ACreatedStudySaysWhereItIs) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  const auto created =
      raw_post(server, "/v1/studies", testing::demo_study_body("m").dump(), server.token);
  ASSERT_THAT(created, ::testing::StartsWith("HTTP/1.1 201")) << created;
  const auto study = nlohmann::json::parse(created.substr(created.find("\r\n\r\n") + 4));
  EXPECT_EQ(header_value(created, "Location"), "/v1/studies/" + study["id"].dump());
  // Every reply says when it was made (RFC 9110 requires Date of a server with a clock).
  EXPECT_THAT(
      header_value(created, "Date"),
      ::testing::MatchesRegex("(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9][0-9] "
                              "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) 20[0-9][0-9] "
                              "[0-2][0-9]:[0-5][0-9]:[0-6][0-9] GMT"))
      << created;
  EXPECT_EQ(c.get(header_value(created, "Location")).json()["id"], study["id"]);

  const auto imported =
      raw_post(server, "/v1/import?machine=gpu-a", kernel_tuner_cache("GPU A", 1.0), server.token);
  ASSERT_THAT(imported, ::testing::StartsWith("HTTP/1.1 201")) << imported;
  const auto import = nlohmann::json::parse(imported.substr(imported.find("\r\n\r\n") + 4));
  EXPECT_EQ(header_value(imported, "Location"), "/v1/studies/" + import["study_id"].dump());
  // The document says so, for a generated client to read it.
  const auto doc = c.get("/openapi.json").json();
  for (const char* path : {"/v1/studies", "/v1/import"}) {
    EXPECT_TRUE(doc["paths"][path]["post"]["responses"]["201"]["headers"].contains("Location"))
        << path;
  }
  EXPECT_TRUE(
      doc["paths"]["/v1/studies"]["get"]["responses"]["503"]["headers"].contains("Retry-After"));
  // Imported before: nothing created.
  const auto again =
      raw_post(server, "/v1/import?machine=gpu-a", kernel_tuner_cache("GPU A", 1.0), server.token);
  ASSERT_THAT(again, ::testing::StartsWith("HTTP/1.1 200")) << again;
  EXPECT_EQ(header_value(again, "Location"), "none");
}

// Get or create: workers that all create one study by its name at once get one 201, and the
// others a 409 that names the study (existing_study_id, Location), to continue it; GET
// /v1/studies?name= finds it too.
TEST(ApiServer, AStudyNameTakenIsAnsweredWithTheStudyThatHasIt) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  auto body = testing::demo_study_body("m", {{"strategy", "random"}, {"budget", 4}});
  body["name"] = "race-study";
  std::vector<std::string> replies(4);
  {
    std::vector<std::thread> workers;
    for (auto& reply : replies) {
      workers.emplace_back(
          [&] { reply = raw_post(server, "/v1/studies", body.dump(), server.token); });
    }
    for (auto& w : workers) w.join();
  }
  std::vector<std::string> conflicts;
  std::string created;
  for (const auto& reply : replies) {
    if (reply.starts_with("HTTP/1.1 201")) {
      EXPECT_TRUE(created.empty()) << reply;
      created = reply;
    } else {
      EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 409")) << reply;
      conflicts.push_back(reply);
    }
  }
  ASSERT_FALSE(created.empty());
  ASSERT_EQ(conflicts.size(), 3u);
  const auto id = nlohmann::json::parse(created.substr(created.find("\r\n\r\n") + 4))["id"];
  for (const auto& reply : conflicts) {
    const auto error = nlohmann::json::parse(reply.substr(reply.find("\r\n\r\n") + 4))["error"];
    EXPECT_EQ(error["existing_study_id"], id) << reply;
    EXPECT_EQ(error["message"], "a study named \"race-study\" exists already: study " + id.dump() +
                                    " (GET /v1/studies/" + id.dump() +
                                    ", demo on m); choose another name, or continue that study");
    EXPECT_EQ(header_value(reply, "Location"), "/v1/studies/" + id.dump()) << reply;
  }
  // Found by its name (and by its name and kernel); another name, or kernel, finds none.
  const auto named = c.get("/v1/studies?name=race-study").json()["studies"];
  ASSERT_EQ(named.size(), 1u) << named.dump();
  EXPECT_EQ(named[0]["id"], id);
  EXPECT_EQ(c.get("/v1/studies?name=race-study&kernel=demo").json()["studies"].size(), 1u);
  EXPECT_TRUE(c.get("/v1/studies?name=race-study&kernel=other").json()["studies"].empty());
  EXPECT_TRUE(c.get("/v1/studies?name=no-such-study").json()["studies"].empty());
  ASSERT_EQ(c.post("/v1/studies", testing::demo_study_body("m"), server.token).status, 201);
  EXPECT_EQ(c.get("/v1/studies").json()["studies"].size(), 2u);
  // The document says so.
  const auto doc = c.get("/openapi.json").json();
  const auto& conflict = doc["paths"]["/v1/studies"]["post"]["responses"]["409"];
  EXPECT_TRUE(conflict["headers"].contains("Location")) << conflict.dump();
  EXPECT_TRUE(doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"].contains(
      "existing_study_id"));
  bool has_name = false;
  for (const auto& p : doc["paths"]["/v1/studies"]["get"]["parameters"]) {
    has_name = has_name || p["name"] == "name";
  }
  EXPECT_TRUE(has_name);
}

// Imports are in ms; a study created without a unit takes the kernel's, and one in seconds is
// compared with them as times, not as numbers.
TEST(ApiServer, TimesOfAKernelInDifferentUnitsAreComparedAsTimes) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(
      c.request("POST", "/v1/import?machine=gpu-a", kernel_tuner_cache("GPU A", 1.0), server.token)
          .status,
      201);
  const auto inherited =
      c.post("/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-a"}, {"name", "x"}},
             server.token);
  ASSERT_EQ(inherited.status, 201) << inherited.body;
  EXPECT_EQ(inherited.json()["unit"], "ms") << inherited.body;
  const auto in_seconds =
      c.post("/v1/studies",
             {{"kernel", "convolution"}, {"machine", "gpu-a"}, {"name", "in s"}, {"unit", "s"}},
             server.token);
  ASSERT_EQ(in_seconds.status, 201) << in_seconds.body;
  EXPECT_EQ(in_seconds.json()["unit"], "s");
  const auto leased = c.post("/v1/studies/" + in_seconds.json()["id"].dump() + "/suggestions",
                             {{"n", 1}, {"client_id", "w"}}, server.token);
  ASSERT_EQ(leased.status, 200) << leased.body;
  const auto trial = leased.json()["suggestions"][0]["trial_id"].dump();
  // 0.5 s: a smaller number than the import's best 1.0 ms, and 500 times slower.
  ASSERT_EQ(
      c.post("/v1/trials/" + trial + "/result", {{"client_id", "w"}, {"value", 0.5}}, server.token)
          .status,
      200);
  const auto best = c.get("/v1/best?kernel=convolution&machine=gpu-a").json();
  EXPECT_DOUBLE_EQ(best["objective"].get<double>(), 1.0) << best;
  EXPECT_EQ(best["unit"], "ms");
  // Now the kernel's times are in ms and in s: a study without a unit could be either, and
  // one study of plain numbers among them would make every comparison one of numbers again.
  auto r = c.post("/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-a"}}, server.token);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["field"], "unit");
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(), HasSubstr("in ms, s: give"));
  // Said to be plain numbers, or of the other direction (a score): no unit taken.
  r = c.post("/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-a"}, {"unit", ""}},
             server.token);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(r.json()["unit"].is_null()) << r.body;
  // Its numbers cannot be placed among the times: best is still the fastest time, and a new
  // study without a unit is still asked for one.
  ASSERT_EQ(c.post("/v1/studies/" + r.json()["id"].dump() + "/measurements",
                   {{"measurements",
                     {{{"config", {{"block_size_x", 16}, {"block_size_y", 1}}}, {"value", 0.1}}}}},
                   server.token)
                .status,
            201);
  EXPECT_DOUBLE_EQ(
      c.get("/v1/best?kernel=convolution&machine=gpu-a").json()["objective"].get<double>(), 1.0);
  EXPECT_EQ(
      c.post("/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-a"}}, server.token).status,
      400);
  r = c.post("/v1/studies",
             {{"kernel", "convolution"}, {"machine", "gpu-a"}, {"direction", "maximize"}},
             server.token);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(r.json()["unit"].is_null()) << r.body;
  // The inherited unit is a unit of time: a negative value is refused there too.
  const auto lease_x = c.post("/v1/studies/" + inherited.json()["id"].dump() + "/suggestions",
                              {{"n", 1}, {"client_id", "w"}}, server.token);
  ASSERT_EQ(lease_x.status, 200) << lease_x.body;
  const auto negative =
      c.post("/v1/trials/" + lease_x.json()["suggestions"][0]["trial_id"].dump() + "/result",
             {{"client_id", "w"}, {"value", -1.0}}, server.token);
  EXPECT_EQ(negative.status, 400) << negative.body;
}

// The unit a study without one takes is read from the studies that measured something; a
// unit of time written another way is refused or read as time; a prediction is of one
// objective, in its unit.
TEST(ApiServer, UnitsAreReadFromStudiesThatMeasuredAndSpeltAsTimes) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m1"}}, server.token).status, 201);
  const auto study = [&](nlohmann::json body) {
    body["kernel"] = "demo";
    body["machine"] = "m1";
    body["space"] = testing::demo_space();
    const auto r = c.post("/v1/studies", body, server.token);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json();
  };
  const auto measure = [&](const nlohmann::json& s, int bx, double value) {
    const auto r =
        c.post("/v1/studies/" + s["id"].dump() + "/measurements",
               {{"measurements",
                 {{{"config", {{"bx", bx}, {"by", 1}, {"unroll", 0}}}, {"value", value}}}}},
               server.token);
    EXPECT_EQ(r.status, 201) << r.body;
  };
  const auto plain = study({{"unit", ""}});
  measure(plain, 1, 3.0);
  const auto in_ms = study({{"unit", "ms"}});  // nothing measured yet
  EXPECT_TRUE(study(nlohmann::json::object())["unit"].is_null());
  measure(in_ms, 2, 1.0);
  // A unit of time however written is stored by its short name, as sweep --unit stores it.
  EXPECT_EQ(study({{"unit", "MS"}})["unit"], "ms");
  EXPECT_EQ(study({{"unit", "sec"}})["unit"], "s");
  // The micro sign is microseconds: 500 us is faster than 1.0 ms.
  const auto micro = study({{"unit", "\u00b5s"}});
  measure(micro, 4, 500.0);
  measure(micro, 1, 2000.0);
  measure(in_ms, 8, 3.0);
  const auto best = c.get("/v1/best?kernel=demo&machine=m1").json();
  EXPECT_DOUBLE_EQ(best["objective"].get<double>(), 500.0) << best;
  // A machine with nothing measured: a prediction of the time, in ms or us, not a blend with
  // the energy measured beside it.
  const auto energy = study({{"objective", "energy"}, {"unit", "J"}});
  measure(energy, 16, 0.1);
  const auto predicted = c.get("/v1/best?kernel=demo&machine=m9").json();
  EXPECT_EQ(predicted["source"], "predicted") << predicted;
  EXPECT_NE(predicted["config"]["bx"], 16) << predicted;
  EXPECT_TRUE(predicted["unit"] == "ms" || predicted["unit"] == "us") << predicted;
}

// Inputs without features: a new machine's prediction for one of them comes from the other
// machines' measurements of that input, not from every input's.
TEST(ApiServer, APredictionForAnInputWithoutFeaturesComesFromThatInput) {
  TestServer server;
  auto c = server.client();
  const auto import = [&](const std::string& machine, const std::string& input, int fastest) {
    const auto r = c.request(
        "POST", "/v1/import?machine=" + machine + "&input=%7B%22matrix%22%3A%22" + input + "%22%7D",
        kernel_tuner_cache(machine, 1.0, fastest), server.token);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json()["task_id"].get<std::int64_t>();
  };
  // Input a (fastest at block_size_x 64) on three machines, input b (fastest at 16) on one.
  import("gpu-a", "a", 64);
  import("gpu-b", "a", 64);
  import("gpu-c", "a", 64);
  const auto b = import("gpu-a", "b", 16);
  const auto predicted =
      c.get("/v1/best?kernel=convolution&machine=gpu-new&task=" + std::to_string(b));
  ASSERT_EQ(predicted.status, 200) << predicted.body;
  EXPECT_EQ(predicted.json()["source"], "predicted");
  EXPECT_EQ(predicted.json()["config"]["block_size_x"], 16) << predicted.body;
  EXPECT_EQ(predicted.json()["based_on"]["inputs"], 1) << predicted.body;
  EXPECT_EQ(predicted.json()["task_id"], b);
  // Input c, measured once elsewhere: too little to predict from, so every input's measurements.
  const auto c_study = c.post(
      "/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-b"}, {"task", {{"matrix", "c"}}}},
      server.token);
  ASSERT_EQ(c_study.status, 201) << c_study.body;
  ASSERT_EQ(c.post("/v1/studies/" + c_study.json()["id"].dump() + "/measurements",
                   {{"measurements",
                     {{{"config", {{"block_size_x", 32}, {"block_size_y", 2}}}, {"value", 2.0}}}}},
                   server.token)
                .status,
            201);
  const auto few =
      c.get("/v1/best?kernel=convolution&machine=gpu-new&task=" + c_study.json()["task_id"].dump());
  ASSERT_EQ(few.status, 200) << few.body;
  EXPECT_EQ(few.json()["source"], "predicted");
  EXPECT_GT(few.json()["based_on"]["inputs"].get<int>(), 1) << few.body;
}

// A build system asks for the best configuration of an input by its features (a problem size):
// a stored input's measurements when one has them, else a prediction for an input measured
// nowhere, from the others by their features.
TEST(ApiServer, BestForAnInputGivenByItsFeatures) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m1"}}, server.token).status, 201);
  std::vector<nlohmann::json> configs;
  for (int bx : {1, 2, 4, 8, 16}) {
    for (int by : {1, 2, 4, 8}) {
      for (int unroll : {0, 1}) {
        if (bx * by <= 32) configs.push_back({{"bx", bx}, {"by", by}, {"unroll", unroll}});
      }
    }
  }
  std::map<int, std::int64_t> tasks;
  for (int n : {1, 4}) {
    tasks[n] = testing::measure_demo_input(c, server.token, "m1", n, configs)["task_id"]
                   .get<std::int64_t>();
  }
  const auto best = [&](const std::string& machine, const std::string& features) {
    return c.get("/v1/best?kernel=demo&machine=" + machine + "&task_features=" + features);
  };
  // {"n":4}: the stored input with those features, measured here.
  auto r = best("m1", "%7B%22n%22%3A4%7D");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "measured");
  EXPECT_EQ(r.json()["task_id"], tasks[4]);
  EXPECT_DOUBLE_EQ(r.json()["objective"].get<double>(), 4.0);
  // {"n":2}: measured nowhere, here either (this machine measured other inputs).
  for (const std::string machine : {"m1", "m2"}) {
    r = best(machine, "%7B%22n%22%3A2%7D");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["source"], "predicted") << r.body;
    EXPECT_EQ(r.json()["task_features"], (nlohmann::json{{"n", 2}}));
    EXPECT_THAT(r.json()["note"].get<std::string>(), HasSubstr("an input measured nowhere"));
    EXPECT_THAT(r.json()["note"].get<std::string>(), Not(HasSubstr("outside every measured")));
    EXPECT_FALSE(r.json()["based_on"].contains("features_outside_measured")) << r.body;
    EXPECT_EQ(r.json()["config"], (nlohmann::json{{"bx", 4}, {"by", 2}, {"unroll", 1}}));
    // Its best measured 1.0 ms at n = 1 and 4.0 at n = 4: forecast between the two, not at
    // either (the nearest input's times, as before).
    EXPECT_GT(r.json()["objective"].get<double>(), 1.2) << r.body;
    EXPECT_LT(r.json()["objective"].get<double>(), 3.0) << r.body;
  }
  // Far beyond the inputs measured: the nearest one's times, nothing extrapolated (nor pulled
  // back to the average of all).
  r = best("m2", "%7B%22n%22%3A100%7D");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GT(r.json()["objective"].get<double>(), 3.5) << r.body;
  EXPECT_LT(r.json()["objective"].get<double>(), 4.6) << r.body;
  // ... and says that the input lies outside every measured one, along which feature.
  EXPECT_EQ(r.json()["based_on"]["features_outside_measured"],
            (nlohmann::json{"n 100, measured inputs 1 .. 4"}))
      << r.body;
  EXPECT_THAT(r.json()["note"].get<std::string>(),
              HasSubstr("the input lies outside every measured input (n 100, measured inputs 1 "
                        ".. 4): what ran on those may run slowly or fail on it"));
  // So does one of no size where every measured input had some, however near the span.
  r = best("m2", "%7B%22n%22%3A0%7D");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["based_on"]["features_outside_measured"],
            (nlohmann::json{"n 0, measured inputs 1 .. 4"}))
      << r.body;
  // A feature no stored input has is said to be left out (a typo for "n").
  r = best("m2", "%7B%22N%22%3A2%7D");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.json()["note"].get<std::string>(),
              HasSubstr("no stored input of kernel \"demo\" has the feature \"N\""));
  EXPECT_THAT(r.json()["note"].get<std::string>(), HasSubstr("task_features lacks \"n\""));
  // It names no stored input, so no stored input's measurements answer as if it were this one:
  // the model predicts it.
  EXPECT_EQ(r.json()["source"], "predicted") << r.body;
  EXPECT_EQ(r.json()["based_on"]["chosen_from"], "model") << r.body;
  EXPECT_FALSE(r.json()["based_on"].contains("sources_that_ran_it")) << r.body;
  // Another input with the same features, measured on m3: each machine is answered with the
  // one it measured, and told that two match.
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m3"}}, server.token).status, 201);
  const auto other = c.post("/v1/studies",
                            {{"kernel", "demo"},
                             {"machine", "m3"},
                             {"unit", "ms"},
                             {"task", {{"size", "four"}}},
                             {"task_features", {{"n", 4}}}},
                            server.token);
  ASSERT_EQ(other.status, 201) << other.body;
  ASSERT_EQ(c.post("/v1/studies/" + other.json()["id"].dump() + "/measurements",
                   {{"measurements", {{{"config", configs[0]}, {"value", 42.0}}}}}, server.token)
                .status,
            201);
  r = best("m3", "%7B%22n%22%3A4%7D");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "measured");
  EXPECT_DOUBLE_EQ(r.json()["objective"].get<double>(), 42.0);
  EXPECT_THAT(r.json()["note"].get<std::string>(),
              HasSubstr("2 stored inputs have these task_features"));
  r = best("m1", "%7B%22n%22%3A4%7D");
  EXPECT_DOUBLE_EQ(r.json()["objective"].get<double>(), 4.0) << r.body;
  // An input whose studies maximize (a rate): its direction, as with task=.
  const auto rate = c.post("/v1/studies",
                           {{"kernel", "demo"},
                            {"machine", "m1"},
                            {"unit", "GFLOP/s"},
                            {"objective", "GFLOP/s"},
                            {"direction", "maximize"},
                            {"task", {{"n", 8}}},
                            {"task_features", {{"n", 8}}}},
                           server.token);
  ASSERT_EQ(rate.status, 201) << rate.body;
  ASSERT_EQ(c.post("/v1/studies/" + rate.json()["id"].dump() + "/measurements",
                   {{"measurements",
                     {{{"config", configs[1]}, {"value", 20.0}},
                      {{"config", configs[2]}, {"value", 10.0}},
                      {{"config", configs[3]}, {"value", 5.0}},
                      {{"config", configs[4]}, {"value", 2.0}}}}},
                   server.token)
                .status,
            201);
  r = best("m1", "%7B%22n%22%3A8%7D");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "measured") << r.body;
  EXPECT_DOUBLE_EQ(r.json()["objective"].get<double>(), 20.0);
  // Also from a machine with no studies of the kernel: a prediction that maximizes the rate,
  // in its unit, for that input.
  r = best("m4", "%7B%22n%22%3A8%7D");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["source"], "predicted") << r.body;
  EXPECT_EQ(r.json()["config"], configs[1]) << r.body;
  EXPECT_EQ(r.json()["unit"], "GFLOP/s") << r.body;
  EXPECT_EQ(r.json()["task_id"], rate.json()["task_id"]) << r.body;
  // Mistakes.
  r = c.get("/v1/best?kernel=demo&machine=m1&task=1&task_features=%7B%22n%22%3A2%7D");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(), HasSubstr("not both"));
  r = best("m1", "%7B%22n%22%3A%22big%22%7D");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["field"], "query.task_features.n");
  r = best("m1", "%5B2%5D");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.json()["error"]["message"].get<std::string>(), HasSubstr("a JSON object"));
  r = best("m1", "%7B%22n%22");
  EXPECT_EQ(r.status, 400) << r.body;
}

TEST(ApiServer, APredictedBestTakesInEveryMeasurementStoredBeforeIt) {
  // The server keeps what predictions read of the store while it is unchanged (PriorCache):
  // a measurement stored since, here or by another process, is in the next prediction, and
  // every answer is the one read afresh from the store.
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m1"}}, server.token).status, 201);
  const auto measure = [&](int n) {
    testing::measure_demo_input(c, server.token, "m1", n,
                                {nlohmann::json{{"bx", 4}, {"by", 2}, {"unroll", 1}},
                                 nlohmann::json{{"bx", 1}, {"by", 1}, {"unroll", 0}},
                                 nlohmann::json{{"bx", 16}, {"by", 2}, {"unroll", 1}}});
  };
  for (int n : {1, 4, 16}) measure(n);
  const auto best = [&](int n) {
    const auto r = c.get("/v1/best?kernel=demo&machine=m1&task_features=%7B%22n%22%3A" +
                         std::to_string(n) + "%7D");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["source"], "predicted") << r.body;
    return r.json();
  };
  // As a server that reads everything for each answer would answer.
  const auto from_store = [&](int n) {
    const auto store = db::Store::open(server.db_path(), /*read_only=*/true);
    const auto p =
        predict_best(store, "demo", store.find_machine("m1")->id, std::nullopt,
                     db::Direction::minimize, "", {{"n", n}}, store.find_kernel("demo")->version);
    EXPECT_TRUE(p.has_value());
    return p ? predicted_best_json("demo", "m1", *p) : nlohmann::json();
  };
  const auto expect_as_from_store = [&](int n, int inputs) {
    const auto answer = best(n);
    const auto expected = from_store(n);
    EXPECT_EQ(answer["based_on"], expected["based_on"]) << n;
    EXPECT_EQ(answer["based_on"]["inputs"], inputs) << answer;
    for (const char* field : {"config", "objective", "lower", "upper"}) {
      EXPECT_EQ(answer[field], expected[field]) << n << " " << field;
    }
  };
  expect_as_from_store(2, 3);
  expect_as_from_store(8, 3);
  measure(64);
  expect_as_from_store(2, 4);
  expect_as_from_store(32, 4);
  // Another process stores a measurement of a fifth input.
  {
    db::Store other(server.db_path());
    const auto kernel = other.find_kernel("demo");
    const auto task = other.upsert_task("demo", {{"n", 128}}, {{"n", 128}});
    db::NewStudy late;
    late.name = "other process";
    late.kernel = kernel->id;
    late.machine = other.find_machine("m1")->id;
    late.task = task.id;
    late.settings = {{"unit", "ms"}};
    const auto study = other.create_study(late);
    const auto space = SearchSpace::from_json(testing::demo_space());
    const nlohmann::json config{{"bx", 4}, {"by", 2}, {"unroll", 1}};
    other.add_trial(study.id, config, space.key(space.config_from_json(config)),
                    Measurement::success(128.0));
  }
  expect_as_from_store(2, 5);
  expect_as_from_store(100, 5);
}

TEST(ApiServer, ImportsKernelTunerCachesPlainAndGzipped) {
  TestServer server;
  auto c = server.client();
  const auto plain =
      c.request("POST", "/v1/import?machine=gpu-a", kernel_tuner_cache("GPU A", 1.0), server.token);
  ASSERT_EQ(plain.status, 201) << plain.body;
  EXPECT_EQ(plain.json()["trials"], 12);
  EXPECT_EQ(plain.json()["failed"], 1);

  const auto zipped =
      c.request("POST", "/v1/import?study_name=zipped", gzip(kernel_tuner_cache("GPU B", 2.0)),
                server.token, "application/gzip");
  ASSERT_EQ(zipped.status, 201) << zipped.body;
  EXPECT_EQ(zipped.json()["trials"], 12);
  const auto machines = c.get("/v1/machines").json()["machines"];
  EXPECT_EQ(machines.size(), 2u);  // gpu-a and the file's own device name

  // The same file again: 200, nothing new is stored; under another study name, a conflict.
  const auto again =
      c.request("POST", "/v1/import?machine=gpu-a", kernel_tuner_cache("GPU A", 1.0), server.token);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["trials"], 0);
  EXPECT_EQ(again.json()["already_stored"], 12);
  const auto copy = c.request("POST", "/v1/import?machine=gpu-a&study_name=copy",
                              kernel_tuner_cache("GPU A", 1.0), server.token);
  EXPECT_EQ(copy.status, 409) << copy.body;
  EXPECT_EQ(c.get("/v1/studies").json()["studies"].size(), 2u);
  // A form upload (curl -F) is told how to send the file instead.
  const auto form = c.request("POST", "/v1/import", "--boundary\r\n...", server.token,
                              "multipart/form-data; boundary=boundary");
  EXPECT_EQ(form.status, 400) << form.body;
  EXPECT_THAT(form.json()["error"]["message"].get<std::string>(),
              HasSubstr("send the file itself as the body: curl --data-binary @FILE"));

  const auto best = c.get("/v1/best?kernel=convolution&machine=gpu-a").json();
  EXPECT_EQ(best["source"], "measured");
  EXPECT_DOUBLE_EQ(best["objective"].get<double>(), 1.0);
  EXPECT_EQ(best["unit"], "ms");  // Kernel Tuner's times are milliseconds
  EXPECT_EQ(best["config"], (nlohmann::json{{"block_size_x", 64}, {"block_size_y", 2}}));

  // A machine with nothing measured gets a prediction from the others' measurements.
  ASSERT_EQ(c.post("/v1/machines", {{"name", "gpu-new"}}, server.token).status, 201);
  const auto predicted = c.get("/v1/best?kernel=convolution&machine=gpu-new");
  ASSERT_EQ(predicted.status, 200) << predicted.body;
  const auto p = predicted.json();
  EXPECT_EQ(p["source"], "predicted");
  EXPECT_EQ(p["config"]["block_size_x"], 64);
  EXPECT_EQ(p["based_on"]["machines"], 2);
  EXPECT_GT(p["upper"].get<double>(), p["lower"].get<double>());
  // Also for a machine nobody registered yet: a build system asks before it measures.
  const auto unregistered = c.get("/v1/best?kernel=convolution&machine=gpu-unregistered");
  ASSERT_EQ(unregistered.status, 200) << unregistered.body;
  EXPECT_EQ(unregistered.json()["source"], "predicted");
  EXPECT_EQ(unregistered.json()["config"], p["config"]);
  // Any other new name: the same prediction (fitted once), under its own name.
  const auto another = c.get("/v1/best?kernel=convolution&machine=ci-runner-7");
  ASSERT_EQ(another.status, 200) << another.body;
  EXPECT_EQ(another.json()["machine"], "ci-runner-7");
  EXPECT_EQ(another.json()["config"], p["config"]);
  EXPECT_EQ(another.json()["objective"], unregistered.json()["objective"]);
  // Measured there by another process (a sweep, a CLI import): measured at once, although
  // the prediction is cached for longer.
  {
    db::Store other(server.db_path());
    other.import_dataset(parse_measurements(kernel_tuner_cache("gpu-unregistered", 3.0), "x"));
  }
  const auto measured = c.get("/v1/best?kernel=convolution&machine=gpu-unregistered");
  ASSERT_EQ(measured.status, 200) << measured.body;
  EXPECT_EQ(measured.json()["source"], "measured") << measured.body;
  // Nor past failures there: what failed on a machine is left out of its prediction.
  std::size_t failures = 0;
  {
    auto failing = parse_measurements(kernel_tuner_cache("gpu-new", 1.0), "x");
    for (auto& e : failing.entries) e.result = Measurement::failure(TrialStatus::failed, "no");
    failures = failing.entries.size();
    db::Store(server.db_path()).import_dataset(failing);
  }
  const auto after_failures = c.get("/v1/best?kernel=convolution&machine=gpu-new");
  ASSERT_EQ(after_failures.status, 404) << after_failures.body;  // everything failed there
  // Failed evaluations are something measured: the 404 says how many and where to read why.
  const auto why_not = after_failures.json()["error"]["message"].get<std::string>();
  EXPECT_THAT(why_not, HasSubstr("no successful measurement for kernel \"convolution\" on "
                                 "machine \"gpu-new\""));
  EXPECT_THAT(why_not, ::testing::ContainsRegex(
                           "\\(direction minimize; " + std::to_string(failures) +
                           " evaluations, all failed: GET /v1/studies/[0-9]+ \\(tunebase trials "
                           "--study [0-9]+\\) shows why\\)"));
  EXPECT_THAT(why_not, ::testing::Not(HasSubstr("nothing measured")));

  // A task that does not exist is not predicted for.
  const auto no_task = c.get("/v1/best?kernel=convolution&machine=gpu-unregistered&task=999");
  EXPECT_EQ(no_task.status, 404) << no_task.body;
  EXPECT_THAT(no_task.json()["error"]["message"].get<std::string>(),
              HasSubstr("task 999 does not exist"));

  // A kernel nobody measured: a clear 404 naming those there are.
  const auto unknown = c.get("/v1/best?kernel=nothing&machine=gpu-new");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.json()["error"]["message"].get<std::string>(),
              HasSubstr("unknown kernel \"nothing\"; the kernels stored are convolution"));

  // The kernel can be named (T4 files have no kernel name; here it renames the cache's).
  const auto renamed = c.request("POST", "/v1/import?machine=gpu-c&kernel=conv2d",
                                 kernel_tuner_cache("GPU C", 3.0), server.token);
  ASSERT_EQ(renamed.status, 201) << renamed.body;
  EXPECT_EQ(renamed.json()["kernel"], "conv2d");
  EXPECT_EQ(c.get("/v1/best?kernel=conv2d&machine=gpu-c").status, 200);
}

TEST(ApiServer, StudiesLearnFromOtherMachinesUnlessToldNotTo) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(
      c.request("POST", "/v1/import?machine=gpu-a", kernel_tuner_cache("GPU A", 1.0), server.token)
          .status,
      201);
  ASSERT_EQ(c.post("/v1/machines", {{"name", "gpu-new"}}, server.token).status, 201);

  // No strategy given and gpu-a measured this kernel: bo-transfer, and its very first
  // suggestion is what gpu-a ran best (the priors' consensus, zero-shot).
  const auto created =
      c.post("/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-new"}}, server.token);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json()["strategy"], "bo-transfer");
  const std::string base = "/v1/studies/" + std::to_string(created.json()["id"].get<int>());
  const auto first = c.post(base + "/suggestions", {{"client_id", "w"}}, server.token);
  ASSERT_EQ(first.status, 200) << first.body;
  const auto answer = first.json();
  EXPECT_EQ(answer["model"]["priors"], 1);
  EXPECT_EQ(answer["model"]["phase"], "priors' consensus");
  EXPECT_TRUE(answer["model"]["weights"].contains("GPU A") ||
              answer["model"]["weights"].contains("gpu-a"))
      << answer.dump();
  const auto config = answer["suggestions"][0]["config"];
  EXPECT_EQ(config["block_size_x"], 64) << config.dump();  // gpu-a's three best have bx = 64

  // Predictions of the new study come from the prior before it measured anything.
  const auto forecast = c.post("/v1/predict",
                               {{"study_id", created.json()["id"]},
                                {"configs",
                                 {{{"block_size_x", 64}, {"block_size_y", 2}},
                                  {{"block_size_x", 16}, {"block_size_y", 1}}}}},
                               server.token);
  ASSERT_EQ(forecast.status, 200) << forecast.body;
  const auto predictions = forecast.json()["predictions"];
  EXPECT_LT(predictions[0]["mean"].get<double>(), predictions[1]["mean"].get<double>())
      << predictions.dump();

  // transfer: false, or priors restricted to machines that measured nothing: plain bo.
  const auto isolated = c.post(
      "/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-new"}, {"transfer", false}},
      server.token);
  ASSERT_EQ(isolated.status, 201) << isolated.body;
  EXPECT_EQ(isolated.json()["strategy"], "bo");
  ASSERT_EQ(c.post("/v1/machines", {{"name", "gpu-elsewhere"}}, server.token).status, 201);
  const auto restricted = c.post(
      "/v1/studies",
      {{"kernel", "convolution"}, {"machine", "gpu-new"}, {"prior_machines", {"gpu-elsewhere"}}},
      server.token);
  ASSERT_EQ(restricted.status, 201) << restricted.body;
  EXPECT_EQ(restricted.json()["strategy"], "bo");
  // A machine nobody registered is a typo, not a reason to turn transfer off silently.
  const auto unknown =
      c.post("/v1/studies",
             {{"kernel", "convolution"}, {"machine", "gpu-new"}, {"prior_machines", {"gpu-typo"}}},
             server.token);
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.json()["error"]["field"], "prior_machines") << unknown.body;
  EXPECT_NE(unknown.json()["error"]["message"].get<std::string>().find("gpu-typo"),
            std::string::npos)
      << unknown.body;
  const auto bad = c.post(
      "/v1/studies", {{"kernel", "convolution"}, {"machine", "gpu-new"}, {"prior_machines", {7}}},
      server.token);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["field"], "prior_machines[0]") << bad.body;
}

TEST(ApiServer, AStudyTakesKernelTunerAndT1SpacesAsTheCliDoes) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  // Sent as text: Kernel Tuner's parameter order (not alphabetical) is kept.
  const auto kt = c.request("POST", "/v1/studies", R"({"kernel": "kt", "machine": "m", "space": {
      "tune_params": {"tile": [1, 2, 4], "block": [32, 64], "variant": ["a", "b"]},
      "restrictions": ["tile * block <= 128"]}})",
                            server.token);
  ASSERT_EQ(kt.status, 201) << kt.body;
  const auto space = kt.json()["kernel"]["space"];
  ASSERT_EQ(space["parameters"].size(), 3u) << space.dump();
  EXPECT_EQ(space["parameters"][0]["name"], "tile");
  EXPECT_EQ(space["parameters"][1]["name"], "block");
  EXPECT_EQ(space["constraints"][0], "tile * block <= 128");
  const auto t1 = c.request("POST", "/v1/studies", R"({"kernel": "t1", "machine": "m", "space": {
      "ConfigurationSpace": {"TuningParameters": [
        {"Name": "bx", "Type": "int", "Values": "[16, 32, 64]", "Default": 16},
        {"Name": "by", "Type": "int", "Values": [1, 2], "Default": 1}],
       "Conditions": [{"Parameters": ["bx", "by"], "Expression": "bx * by <= 64"}]}}})",
                            server.token);
  ASSERT_EQ(t1.status, 201) << t1.body;
  EXPECT_EQ(t1.json()["kernel"]["space"]["parameters"].size(), 2u);
  // Two formats at once: one would be left unread.
  const auto mixed =
      c.request("POST", "/v1/studies",
                R"({"kernel": "mx", "machine": "m", "space": {"tune_params": {"z": [1, 2]},
          "constraints": ["z > 1"]}})",
                server.token);
  EXPECT_EQ(mixed.status, 400) << mixed.body;
  EXPECT_THAT(mixed.body, HasSubstr("give one format"));
  // Neither: the error names all three formats.
  const auto bad =
      c.request("POST", "/v1/studies",
                R"({"kernel": "x", "machine": "m", "space": {"params": []}})", server.token);
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.json()["error"]["message"].get<std::string>(),
              HasSubstr("or Kernel Tuner's \"tune_params\""));
}

TEST(ApiServer, AStudyDeletedByAnotherProcessLeavesTheServersPriors) {
  TestServer server;
  auto c = server.client();
  for (const char* m : {"mp", "mq"}) {
    ASSERT_EQ(c.post("/v1/machines", {{"name", m}}, server.token).status, 201);
  }
  const auto study = [&](const char* name, const char* machine) {
    const auto r =
        c.post("/v1/studies",
               testing::demo_study_body(
                   machine, {{"name", name}, {"strategy", "bo-transfer"}, {"budget", 20}}),
               server.token);
    EXPECT_EQ(r.status, 201) << r.body;
    return "/v1/studies/" + r.json()["id"].dump();
  };
  const auto prior = study("prior", "mp");
  nlohmann::json list = nlohmann::json::array();
  for (const auto& config : {nlohmann::json{{"bx", 4}, {"by", 2}, {"unroll", 1}},
                             nlohmann::json{{"bx", 1}, {"by", 1}, {"unroll", 0}},
                             nlohmann::json{{"bx", 16}, {"by", 2}, {"unroll", 1}},
                             nlohmann::json{{"bx", 2}, {"by", 4}, {"unroll", 0}}}) {
    list.push_back({{"config", config}, {"value", demo_objective(config)}});
  }
  ASSERT_EQ(c.post(prior + "/measurements", {{"measurements", list}}, server.token).status, 201);
  ASSERT_EQ(c.post(prior + "/stop", nlohmann::json::object(), server.token).status, 200);
  const auto target = study("target", "mq");
  int clients = 0;  // a new client each time: "w" would be given its own live lease back
  const auto suggest = [&] {
    const auto r = c.post(target + "/suggestions",
                          {{"n", 1}, {"client_id", "w" + std::to_string(++clients)}}, server.token);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["model"]["priors"].get<int>();
  };
  EXPECT_EQ(suggest(), 1);
  // tunebase delete beside the server: another connection to the file.
  {
    db::Store other(server.db_path());
    const auto id = other.find_study("prior")->id;
    EXPECT_EQ(other.delete_study(id), 4u);
  }
  EXPECT_EQ(suggest(), 0);
}

TEST(ApiServer, AStudyTakesPriorsMeasuredAfterItStarted) {
  TestServer server;
  server.service().studies().set_priors_recheck(std::chrono::milliseconds(0));
  auto c = server.client();
  for (const char* m : {"mp", "mq", "mr"}) {
    ASSERT_EQ(c.post("/v1/machines", {{"name", m}}, server.token).status, 201);
  }
  const auto study = [&](const char* name, const char* machine, nlohmann::json extra) {
    extra["name"] = name;
    const auto r = c.post("/v1/studies", testing::demo_study_body(machine, extra), server.token);
    EXPECT_EQ(r.status, 201) << r.body;
    return "/v1/studies/" + r.json()["id"].dump();
  };
  const auto measure = [&](const std::string& base, std::initializer_list<nlohmann::json> configs) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& config : configs) {
      list.push_back({{"config", config}, {"value", demo_objective(config)}});
    }
    const auto r = c.post(base + "/measurements", {{"measurements", list}}, server.token);
    EXPECT_EQ(r.status, 201) << r.body;
  };
  int clients = 0;  // a new client each time: "w" would be given its own live lease back
  const auto suggest = [&](const std::string& base) {
    const auto r = c.post(base + "/suggestions",
                          {{"n", 1}, {"client_id", "w" + std::to_string(++clients)}}, server.token);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["model"];
  };
  // Made before anything else measured the kernel: its default strategy is bo, and a chosen
  // bo stays bo whatever is measured later.
  const auto target = study("target", "mq", {{"budget", 20}});
  const auto chosen = study("chosen", "mq", {{"budget", 20}, {"strategy", "bo"}});
  EXPECT_EQ(suggest(target)["strategy"], "bo");
  EXPECT_EQ(suggest(chosen)["priors"], 0);

  // Another machine measures the kernel while the study runs: its next suggestion learns
  // from it, with the strategy a study made now would get; the study says so.
  const auto prior = study("prior", "mp", {{"strategy", "random"}});
  measure(prior, {{{"bx", 4}, {"by", 2}, {"unroll", 1}},
                  {{"bx", 1}, {"by", 1}, {"unroll", 0}},
                  {{"bx", 16}, {"by", 2}, {"unroll", 1}},
                  {{"bx", 2}, {"by", 4}, {"unroll", 0}}});
  auto model = suggest(target);
  EXPECT_EQ(model["strategy"], "bo-transfer") << model.dump();
  EXPECT_EQ(model["priors"], 1) << model.dump();
  EXPECT_EQ(c.get(target).json()["strategy"], "bo-transfer");
  model = suggest(chosen);
  EXPECT_EQ(model["strategy"], "bo") << model.dump();
  EXPECT_EQ(c.get(chosen).json()["strategy"], "bo");

  // A third machine: a second source.
  measure(study("third", "mr", {{"strategy", "random"}}),
          {{{"bx", 8}, {"by", 1}, {"unroll", 0}}, {{"bx", 2}, {"by", 2}, {"unroll", 1}}});
  EXPECT_EQ(suggest(target)["priors"], 2);
  // Nothing the target itself was told is lost in the rebuilds: 3 leases live.
  EXPECT_EQ(c.get(target).json()["trials"]["pending"], 3) << c.get(target).body;
}

// An import through the server reaches its running studies at their next suggestion, not
// after the interval at which they look for measurements made elsewhere.
TEST(ApiServer, AnImportHereReachesRunningStudiesAtOnce) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "gpu-new"}}, server.token).status, 201);
  const auto created = c.post(
      "/v1/studies",
      {{"kernel", "convolution"},
       {"machine", "gpu-new"},
       {"space",
        {{"tune_params", {{"block_size_x", {16, 32, 64, 128}}, {"block_size_y", {1, 2, 4}}}}}}},
      server.token);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string base = "/v1/studies/" + created.json()["id"].dump();
  int clients = 0;  // a new client each time: "w" would be given its own live lease back
  const auto suggest = [&] {
    const auto r = c.post(base + "/suggestions", {{"client_id", "w" + std::to_string(++clients)}},
                          server.token);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["model"];
  };
  EXPECT_EQ(suggest()["strategy"], "bo");
  ASSERT_EQ(
      c.request("POST", "/v1/import?machine=gpu-a", kernel_tuner_cache("GPU A", 1.0), server.token)
          .status,
      201);
  const auto model = suggest();
  EXPECT_EQ(model["strategy"], "bo-transfer") << model.dump();
  EXPECT_EQ(model["priors"], 1) << model.dump();
}

TEST(ApiServer, ExternalMeasurementsAreStoredAndLearnedFrom) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 10);
  const std::string base = "/v1/studies/" + std::to_string(study);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& config : {nlohmann::json{{"bx", 4}, {"by", 2}, {"unroll", 1}},
                             nlohmann::json{{"bx", 1}, {"by", 1}, {"unroll", 0}},
                             nlohmann::json{{"bx", 16}, {"by", 2}, {"unroll", 1}}}) {
    list.push_back({{"config", config}, {"value", demo_objective(config)}});
  }
  list.push_back({{"config", {{"bx", 2}, {"by", 8}, {"unroll", 0}}},
                  {"status", "failed"},
                  {"message", "out of registers"}});
  const auto added = c.post(base + "/measurements", {{"measurements", list}}, server.token);
  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(added.json()["trial_ids"].size(), 4u);
  // A client's retry (its connection dropped before the answer): the same results are
  // answered with their trials and stored once; a failure's retry too.
  const auto retried = c.post(base + "/measurements", {{"measurements", list}}, server.token);
  EXPECT_EQ(retried.status, 200) << retried.body;
  EXPECT_EQ(retried.json()["trial_ids"], added.json()["trial_ids"]);
  EXPECT_EQ(retried.json()["already_stored"], 4);
  EXPECT_EQ(server.store().trials(db::StudyId{study}).size(), 4u);
  // Another value for a measured configuration is a conflict, saying both.
  auto other = list[0];
  other["value"] = other["value"].get<double>() * 2.0;
  const auto conflict = c.post(base + "/measurements", {{"measurements", {other}}}, server.token);
  EXPECT_EQ(conflict.status, 409) << conflict.body;
  EXPECT_THAT(conflict.json()["error"]["message"].get<std::string>(),
              HasSubstr("already has another result"));
  // A retry with something new: the new one is stored, 201.
  auto mixed = list;
  mixed.push_back({{"config", {{"bx", 8}, {"by", 4}, {"unroll", 1}}}, {"value", 5.0}});
  const auto more = c.post(base + "/measurements", {{"measurements", mixed}}, server.token);
  EXPECT_EQ(more.status, 201) << more.body;
  EXPECT_EQ(more.json()["already_stored"], 4);
  EXPECT_EQ(more.json()["trial_ids"].size(), 5u);
  EXPECT_EQ(server.store().trials(db::StudyId{study}).size(), 5u);
  list = mixed;
  // Deleted (a mistaken import): refused while active, then gone with its trials.
  {
    const auto doomed =
        "/v1/studies/" + std::to_string(create_demo_study(c, server.token, "random", 10));
    const auto active = c.request("DELETE", doomed, "", server.token);
    EXPECT_EQ(active.status, 409) << active.body;
    ASSERT_EQ(c.post(doomed + "/stop", nlohmann::json::object(), server.token).status, 200);
    const auto deleted = c.request("DELETE", doomed, "", server.token);
    ASSERT_EQ(deleted.status, 200) << deleted.body;
    EXPECT_EQ(c.get(doomed).status, 404);
    EXPECT_EQ(c.request("DELETE", doomed, "", server.token).status, 404);
    EXPECT_EQ(c.get(base).status, 200);
  }
  // Too few results to say how much each parameter matters: empty, saying why.
  const auto relevance = c.get(base + "/relevance").json();
  EXPECT_TRUE(relevance["parameters"].empty());
  EXPECT_THAT(relevance["reason"].get<std::string>(),
              HasSubstr("two successful results per encoded input"));
  EXPECT_THAT(relevance["reason"].get<std::string>(),
              HasSubstr("it has 4 successful results"));  // one failed
  // Plenty of results, all of one value: nothing to rank the parameters by (the GP's
  // lengthscales, fitted to nothing, gave shares all the same).
  {
    const auto flat = create_demo_study(c, server.token, "random", 20);
    const std::string flat_base = "/v1/studies/" + std::to_string(flat);
    nlohmann::json same = nlohmann::json::array();
    for (int bx : {1, 2, 4, 8}) {
      for (int by : {1, 2, 4}) {
        for (int unroll : {0, 1}) {
          same.push_back(
              {{"config", {{"bx", bx}, {"by", by}, {"unroll", unroll}}}, {"value", 5.0}});
        }
      }
    }
    ASSERT_EQ(c.post(flat_base + "/measurements", {{"measurements", same}}, server.token).status,
              201);
    const auto flat_relevance = c.get(flat_base + "/relevance").json();
    EXPECT_TRUE(flat_relevance["parameters"].empty()) << flat_relevance.dump();
    EXPECT_EQ(flat_relevance["reason"],
              "every successful result has the same value: nothing tells the parameters apart");
  }
  // A study of times (its unit says so) takes no negative one.
  const auto unit_study = c.post(
      "/v1/studies", testing::demo_study_body("test-machine", {{"unit", "ms"}, {"name", "timed"}}),
      server.token);
  ASSERT_EQ(unit_study.status, 201) << unit_study.body;
  const auto negative =
      c.post("/v1/studies/" + std::to_string(unit_study.json()["id"].get<int>()) + "/measurements",
             {{"measurements", {{{"config", list[0]["config"]}, {"value", -1.0}}}}}, server.token);
  EXPECT_EQ(negative.status, 400) << negative.body;
  EXPECT_THAT(negative.json()["error"]["message"].get<std::string>(),
              HasSubstr("a time cannot be negative"));

  // The session knows them: 5 more suggestions fill the budget of 10, none repeats them.
  std::set<std::string> external;
  for (const auto& m : list) external.insert(m["config"].dump());
  const auto reply =
      c.post(base + "/suggestions", {{"n", 10}, {"client_id", "w"}}, server.token).json();
  EXPECT_EQ(reply["suggestions"].size(), 5u) << reply.dump();
  for (const auto& s : reply["suggestions"]) EXPECT_FALSE(external.count(s["config"].dump()));

  const auto predicted =
      c.post("/v1/predict", {{"study_id", study}, {"configs", {list[0]["config"]}}});
  ASSERT_EQ(predicted.status, 200) << predicted.body;
  EXPECT_EQ(predicted.json()["predictions"].size(), 1u);
}

TEST(ApiServer, ABatchOfMeasurementsMayHoldTensOfThousands) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  constexpr int kEntries = 50000;  // about 2 MB of JSON, over the 1 MiB of ordinary routes
  const nlohmann::json space{
      {"parameters", {{{"name", "n"}, {"type", "integer"}, {"low", 1}, {"high", kEntries}}}}};
  const auto created = c.post(
      "/v1/studies", {{"kernel", "many"}, {"space", space}, {"machine", "m"}, {"budget", 10}},
      server.token);
  ASSERT_EQ(created.status, 201) << created.body;
  nlohmann::json list = nlohmann::json::array();
  for (int n = 1; n <= kEntries; ++n) list.push_back({{"config", {{"n", n}}}, {"value", 1.0 + n}});
  const nlohmann::json body{{"measurements", list}};
  ASSERT_GT(body.dump().size(), kMaxBodyBytes);
  const auto added =
      c.post("/v1/studies/" + std::to_string(created.json()["id"].get<int>()) + "/measurements",
             body, server.token);
  ASSERT_EQ(added.status, 201) << added.body.substr(0, 300);
  EXPECT_EQ(added.json()["trial_ids"].size(), static_cast<std::size_t>(kEntries));
}

TEST(ApiServer, MeasurementsAddedWhileSuggestingNeverMeasureAConfigurationTwice) {
  TestServer server;
  auto setup = server.client();
  const auto study = create_demo_study(setup, server.token, "random", testing::kDemoValid);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto configs = SearchSpace::from_json(testing::demo_space()).valid_configurations();
  const auto space = SearchSpace::from_json(testing::demo_space());
  std::vector<std::thread> threads;
  for (int w = 0; w < 3; ++w) {
    // Workers: suggest and report until the study is done.
    threads.emplace_back([&, w] {
      auto c = server.client();
      const std::string client = "worker-" + std::to_string(w);
      for (int round = 0; round < 200; ++round) {
        const auto answer =
            c.post(base + "/suggestions", {{"n", 1}, {"client_id", client}}, server.token).json();
        if (answer["suggestions"].empty()) {
          if (answer.value("done", false)) return;
          continue;
        }
        const auto& s = answer["suggestions"][0];
        tell(c, server.token, s["trial_id"], client, demo_objective(s["config"]));
      }
    });
    // Measurers: add results for configurations the workers are likely to be given next.
    threads.emplace_back([&, w] {
      auto c = server.client();
      for (std::size_t i = w; i < configs.size(); i += 3) {
        const auto config = space.config_to_json(configs[i]);
        const auto r =
            c.post(base + "/measurements",
                   {{"measurements", {{{"config", config}, {"value", 5.0}}}}}, server.token);
        EXPECT_TRUE(r.status == 201 || r.status == 409) << r.body;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::map<std::string, int> results;
  for (const auto& t : server.store().trials(db::StudyId{study})) {
    if (t.finished_at) ++results[t.config_key];
  }
  EXPECT_EQ(results.size(), testing::kDemoValid);
  for (const auto& [key, n] : results) EXPECT_EQ(n, 1) << key << " was measured " << n << " times";
}

TEST(ApiServer, WhatAnotherProcessWritesToTheDatabaseIsSeen) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "exhaustive", 10);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto space = SearchSpace::from_json(testing::demo_space());
  const auto configs = space.valid_configurations();
  // The server knows the study before the other process writes.
  const auto first =
      c.post(base + "/suggestions", {{"n", 1}, {"client_id", "w"}}, server.token).json();
  ASSERT_EQ(first["suggestions"].size(), 1u);
  tell(c, server.token, first["suggestions"][0]["trial_id"], "w", 1.5);

  // Another process (its own connection to the file) measures three configurations and
  // leases a fourth: those exhaustive search would propose next.
  db::Store other(server.db_path());
  std::set<std::string> taken{first["suggestions"][0]["config"].dump()};
  for (std::size_t i = 1; i <= 4; ++i) {
    const auto config = space.config_to_json(configs[i]);
    taken.insert(config.dump());
    if (i < 4) {
      other.add_trial(db::StudyId{study}, config, space.key(configs[i]), Measurement::success(2.0),
                      "sweep");
    } else {
      other.add_pending_trial(db::StudyId{study}, config, space.key(configs[i]), "elsewhere", 3600);
    }
  }
  // Budget 10: 4 results and 1 lease leave 5, none of them a taken configuration.
  const auto reply =
      c.post(base + "/suggestions", {{"n", 10}, {"client_id", "w"}}, server.token).json();
  EXPECT_EQ(reply["suggestions"].size(), 5u) << reply.dump();
  for (const auto& s : reply["suggestions"]) {
    EXPECT_FALSE(taken.count(s["config"].dump())) << s["config"] << " was handed out again";
  }

  // The other process ends the study: the server hands out nothing more.
  other.set_study_status(db::StudyId{study}, db::StudyStatus::completed);
  const auto done =
      c.post(base + "/suggestions", {{"n", 1}, {"client_id", "w"}}, server.token).json();
  EXPECT_TRUE(done["suggestions"].empty()) << done.dump();
  EXPECT_TRUE(done["done"].get<bool>());
  EXPECT_THAT(done["reason"].get<std::string>(), HasSubstr("completed"));
}

TEST(ApiServer, ConfigurationsAnotherServerLeasedFirstAreReplacedNotDropped) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "exhaustive", 10);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto ask = [&](const std::string& client) {
    return c.post(base + "/suggestions", {{"n", 1}, {"client_id", client}}, server.token).json();
  };
  const auto first = ask("w");
  ASSERT_EQ(first["suggestions"].size(), 1u) << first.dump();
  // A second server on the same database leases what exhaustive search proposes next. It shares
  // this server's connection, so this server does not notice the write (as when the lease lands
  // between its last look at the Store and its own lease): the Store refuses that lease.
  StudyManager other(server.store());
  const auto taken = other.suggest(db::StudyId{study}, 1, "other-server-worker", 3600);
  ASSERT_EQ(taken.leases.size(), 1u);
  // Another client ("w" would be given its own live lease back).
  const auto reply = ask("w2");
  ASSERT_EQ(reply["suggestions"].size(), 1u) << reply.dump();
  EXPECT_NE(reply["suggestions"][0]["config"], taken.leases[0].config);
  EXPECT_NE(reply["suggestions"][0]["config"], first["suggestions"][0]["config"]);
}

// A budget taken by live leases: the reply says what holds it and when to ask again (when the
// first lease ends), not every second.
TEST(ApiServer, ABudgetHeldByLeasesSaysWhenToAskAgain) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 3);
  const std::string path = "/v1/studies/" + std::to_string(study) + "/suggestions";
  const auto ask = [&](int n, double lease_seconds, const std::string& client = "w") {
    return c
        .post(path, {{"n", n}, {"client_id", client}, {"lease_seconds", lease_seconds}},
              server.token)
        .json();
  };
  const auto first = ask(5, 600);
  ASSERT_EQ(first["suggestions"].size(), 3u) << first.dump();
  EXPECT_EQ(first["reason"],
            "the budget of 3 evaluations has room for 3 more beside 0 results and 0 live leases");
  // Another client: "w" would be given its own leases back (AClientIsGivenItsOwnLiveLeasesBack).
  const auto none = ask(1, 600, "v");
  EXPECT_TRUE(none["suggestions"].empty()) << none.dump();
  EXPECT_FALSE(none["done"].get<bool>());
  EXPECT_EQ(none["reason"],
            "the budget of 3 evaluations has room for 0 more beside 0 results and 3 live leases");
  const double retry = none["retry_after_seconds"].get<double>();
  EXPECT_GT(retry, 590.0);
  EXPECT_LT(retry, 700.0);
  // The study shows its seed and unit at the top, as it uses them.
  const auto shown = c.get("/v1/studies/" + std::to_string(study)).json();
  EXPECT_EQ(shown["seed"], 7) << shown.dump();
  EXPECT_TRUE(shown.contains("unit") && shown["unit"].is_null()) << shown.dump();
  // Nothing measured yet: no forecast, saying how many results it would take.
  const auto forecast =
      c.post("/v1/predict", {{"study_id", study}, {"configs", {first["suggestions"][0]["config"]}}},
             server.token);
  EXPECT_EQ(forecast.status, 409) << forecast.body;
  EXPECT_THAT(forecast.json()["error"]["message"].get<std::string>(),
              HasSubstr("has 0 successful results, too few for a model (it needs 3"));
}

// A client that died and restarted with its client_id (or asks twice) is given its own live
// leases back first, renewed, as Vizier's SuggestTrials gives a client its active trials: they
// no longer lock it out of the budget for the hour a lease lasts.
TEST(ApiServer, AClientIsGivenItsOwnLiveLeasesBack) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 4);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto ask = [&](int n, const std::string& client, double lease_seconds) {
    const auto reply =
        c.post(base + "/suggestions",
               {{"n", n}, {"client_id", client}, {"lease_seconds", lease_seconds}}, server.token);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.json();
  };
  const auto a = ask(2, "A", 3600);
  ASSERT_EQ(a["suggestions"].size(), 2u) << a.dump();
  for (const auto& s : a["suggestions"]) EXPECT_EQ(s["resumed"], false);
  // A dies; B takes and reports the other two.
  const auto b = ask(2, "B", 3600);
  ASSERT_EQ(b["suggestions"].size(), 2u) << b.dump();
  for (const auto& s : b["suggestions"]) {
    EXPECT_EQ(s["resumed"], false);
    tell(c, server.token, s["trial_id"], "B", testing::demo_objective(s["config"]));
  }
  // A restarts and asks: its two leases, renewed to the lease asked now, and nothing new.
  const auto again = ask(3, "A", 60);
  ASSERT_EQ(again["suggestions"].size(), 2u) << again.dump();
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(again["suggestions"][i]["trial_id"], a["suggestions"][i]["trial_id"]);
    EXPECT_EQ(again["suggestions"][i]["config"], a["suggestions"][i]["config"]);
    EXPECT_EQ(again["suggestions"][i]["resumed"], true);
    EXPECT_LT(again["suggestions"][i]["lease_expires_at"].get<std::string>(),
              a["suggestions"][i]["lease_expires_at"].get<std::string>());
  }
  EXPECT_FALSE(again["done"].get<bool>());
  const auto ids =
      a["suggestions"][0]["trial_id"].dump() + ", " + a["suggestions"][1]["trial_id"].dump();
  EXPECT_EQ(again["reason"],
            "the budget of 4 evaluations has room for 0 more beside 2 results and 2 live leases; "
            "of them, trials " +
                ids + " are client \"A\"'s own (given back in this answer, resumed: true)");
  const auto trial = c.get("/v1/trials/" + a["suggestions"][0]["trial_id"].dump()).json();
  EXPECT_EQ(trial["lease_expires_at"], again["suggestions"][0]["lease_expires_at"]);
  // n below what it holds: the oldest first.
  const auto one = ask(1, "A", 60);
  ASSERT_EQ(one["suggestions"].size(), 1u) << one.dump();
  EXPECT_EQ(one["suggestions"][0]["trial_id"], a["suggestions"][0]["trial_id"]);
  EXPECT_FALSE(one.contains("reason")) << one.dump();
  // Asked with resume_leases: false (a client that tracks its own, as tunebase worker), new
  // leases only: none fit.
  const auto fresh = c.post(base + "/suggestions",
                            {{"n", 1}, {"client_id", "A"}, {"resume_leases", false}}, server.token)
                         .json();
  EXPECT_TRUE(fresh["suggestions"].empty()) << fresh.dump();
  EXPECT_EQ(fresh["reason"],
            "the budget of 4 evaluations has room for 0 more beside 2 results and 2 live leases");
  // Another client is given none of them.
  const auto other = ask(1, "C", 60);
  EXPECT_TRUE(other["suggestions"].empty()) << other.dump();
  EXPECT_EQ(other["reason"],
            "the budget of 4 evaluations has room for 0 more beside 2 results and 2 live leases");
  // The trials of one client, as a restarted client finds its own.
  const auto mine = c.get(base + "/trials?status=pending&client_id=A").json()["trials"];
  ASSERT_EQ(mine.size(), 2u) << mine.dump();
  EXPECT_EQ(mine[0]["id"], a["suggestions"][0]["trial_id"]);
  EXPECT_EQ(c.get(base + "/trials?client_id=B").json()["trials"].size(), 2u);
  EXPECT_TRUE(c.get(base + "/trials?status=pending&client_id=B").json()["trials"].empty());
  EXPECT_TRUE(c.get(base + "/trials?client_id=nobody").json()["trials"].empty());
  // A reported lease is not given back, the one it holds still is.
  tell(c, server.token, a["suggestions"][0]["trial_id"], "A",
       testing::demo_objective(a["suggestions"][0]["config"]));
  const auto last = ask(1, "A", 60);
  ASSERT_EQ(last["suggestions"].size(), 1u) << last.dump();
  EXPECT_EQ(last["suggestions"][0]["trial_id"], a["suggestions"][1]["trial_id"]);
  // A result measured elsewhere spends the budget: the lease still held comes back, and the
  // study is not done for this client, whatever n it asks.
  std::set<std::string> taken;
  for (const auto& t : c.get(base + "/trials").json()["trials"]) taken.insert(t["config"].dump());
  const auto space = SearchSpace::from_json(testing::demo_space());
  for (const auto& config : space.valid_configurations()) {
    const auto j = space.config_to_json(config);
    if (taken.count(j.dump())) continue;
    ASSERT_EQ(c.post(base + "/measurements", {{"measurements", {{{"config", j}, {"value", 9.0}}}}},
                     server.token)
                  .status,
              201);
    break;
  }
  for (const int n : {1, 3}) {
    const auto spent = ask(n, "A", 60);
    ASSERT_EQ(spent["suggestions"].size(), 1u) << spent.dump();
    EXPECT_EQ(spent["suggestions"][0]["trial_id"], a["suggestions"][1]["trial_id"]);
    EXPECT_FALSE(spent["done"].get<bool>()) << n << ": " << spent.dump();
  }
  EXPECT_EQ(ask(3, "A", 60)["reason"],
            "the budget of 4 evaluations is spent; the live leases given back here still take "
            "their results");
  EXPECT_TRUE(ask(1, "C", 60)["done"].get<bool>());
  // Stopped, it proposes nothing, and says where a client finds the leases it still holds.
  ASSERT_EQ(c.post(base + "/stop", nlohmann::json::object(), server.token).status, 200);
  const auto stopped = ask(1, "A", 60);
  EXPECT_TRUE(stopped["done"].get<bool>());
  EXPECT_THAT(stopped["reason"].get<std::string>(),
              HasSubstr("results of live leases are still taken: GET " + base +
                        "/trials?client_id=A&status=pending lists this client's"));
}

// A stopped study whose dead client holds leases (for up to a week) is not stuck: the 409 names
// the leases and the way out, and force=true ends them with the study.
TEST(ApiServer, AStudyWithLiveLeasesIsDeletedWithForce) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 10);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto leased =
      c.post(base + "/suggestions", {{"n", 2}, {"client_id", "dead"}, {"lease_seconds", 600000}},
             server.token)
          .json()["suggestions"];
  ASSERT_EQ(leased.size(), 2u);
  ASSERT_EQ(c.post(base + "/stop", nlohmann::json::object(), server.token).status, 200);
  const auto refused = c.request("DELETE", base, "", server.token);
  ASSERT_EQ(refused.status, 409) << refused.body;
  EXPECT_THAT(refused.json()["error"]["message"].get<std::string>(),
              HasSubstr("has 2 live leases (client \"dead\": trials " +
                        leased[0]["trial_id"].dump() + ", " + leased[1]["trial_id"].dump() +
                        "): delete it once they reported or ended, or end them as you delete it "
                        "(DELETE " +
                        base + "?force=true"));
  EXPECT_EQ(c.request("DELETE", base + "?force=yes", "", server.token).status, 400);
  EXPECT_EQ(c.get(base).status, 200);
  const auto deleted = c.request("DELETE", base + "?force=true", "", server.token);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json()["trials"], 2);
  EXPECT_EQ(deleted.json()["leases_ended"], 2);
  EXPECT_EQ(c.get(base).status, 404);
  // The dead client's result, should it come after all, finds no trial.
  const auto late = c.post("/v1/trials/" + leased[0]["trial_id"].dump() + "/result",
                           {{"client_id", "dead"}, {"value", 1.0}}, server.token);
  EXPECT_EQ(late.status, 404) << late.body;
  // An active study is refused, force or not: stop it first.
  const auto active =
      "/v1/studies/" + std::to_string(create_demo_study(c, server.token, "random", 3));
  EXPECT_EQ(c.request("DELETE", active + "?force=true", "", server.token).status, 409);
}

// A client whose evaluation outlasts its lease extends it, and keeps the configuration.
TEST(ApiServer, ALeaseIsExtendedByItsClient) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 5);
  const auto leased =
      c.post("/v1/studies/" + std::to_string(study) + "/suggestions",
             {{"n", 1}, {"client_id", "slow"}, {"lease_seconds", 0.3}}, server.token)
          .json()["suggestions"][0];
  const std::string trial = "/v1/trials/" + leased["trial_id"].dump();
  const auto extended =
      c.post(trial + "/lease", {{"client_id", "slow"}, {"lease_seconds", 600}}, server.token);
  ASSERT_EQ(extended.status, 200) << extended.body;
  EXPECT_GT(extended.json()["lease_expires_at"].get<std::string>(),
            leased["lease_expires_at"].get<std::string>());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const auto still = c.get(trial).json();
  EXPECT_EQ(still["status"], "pending") << still.dump();
  EXPECT_FALSE(still["lease_expired"].get<bool>());

  EXPECT_EQ(c.post(trial + "/lease", {{"client_id", "other"}}, server.token).status, 403);
  const auto zero =
      c.post(trial + "/lease", {{"client_id", "slow"}, {"lease_seconds", 0}}, server.token);
  EXPECT_EQ(zero.status, 400) << zero.body;
  tell(c, server.token, leased["trial_id"], "slow", 2.0);
  const auto done = c.post(trial + "/lease", {{"client_id", "slow"}}, server.token);
  EXPECT_EQ(done.status, 409) << done.body;
  EXPECT_THAT(done.json()["error"]["message"].get<std::string>(),
              HasSubstr("is not leased: it has a result"));
}

// A study whose budget is spent, or that was stopped, is taken up again over the API as a
// resumed sweep takes it up.
TEST(ApiServer, AStudyIsResumedWithALargerBudget) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 2);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const auto ask = [&] {
    return c.post(base + "/suggestions", {{"n", 5}, {"client_id", "w"}}, server.token).json();
  };
  const auto first = ask();
  ASSERT_EQ(first["suggestions"].size(), 2u) << first.dump();
  for (const auto& s : first["suggestions"]) tell(c, server.token, s["trial_id"], "w", 1.0);
  EXPECT_EQ(c.get(base).json()["status"], "completed") << c.get(base).body;
  const auto spent = c.post(base + "/resume", nlohmann::json::object(), server.token);
  EXPECT_EQ(spent.status, 409) << spent.body;
  EXPECT_THAT(spent.json()["error"]["message"].get<std::string>(),
              HasSubstr("has spent its budget of 2 evaluations; resume it with a larger one"));
  const auto same = c.post(base + "/resume", {{"budget", 2}}, server.token);
  EXPECT_EQ(same.status, 400) << same.body;
  EXPECT_EQ(same.json()["error"]["field"], "budget");
  EXPECT_THAT(same.json()["error"]["message"].get<std::string>(),
              HasSubstr("2 results and one more to resume; give at least 3"));
  // Refused: nothing changed.
  EXPECT_EQ(c.get(base).json()["budget"], 2);
  EXPECT_EQ(c.get(base).json()["status"], "completed");

  const auto resumed = c.post(base + "/resume", {{"budget", 4}}, server.token);
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(resumed.json()["status"], "active");
  EXPECT_EQ(resumed.json()["budget"], 4);
  EXPECT_EQ(ask()["suggestions"].size(), 2u);
  // Active, with 2 results and 2 live leases: its budget holds them all.
  const auto lowered = c.post(base + "/resume", {{"budget", 3}}, server.token);
  EXPECT_EQ(lowered.status, 400) << lowered.body;
  EXPECT_THAT(lowered.json()["error"]["message"].get<std::string>(),
              HasSubstr("2 results and 2 live leases; give at least 4"));

  ASSERT_EQ(c.post(base + "/stop", nlohmann::json::object(), server.token).status, 200);
  EXPECT_TRUE(ask()["done"].get<bool>());
  ASSERT_EQ(c.post(base + "/resume", nlohmann::json::object(), server.token).status, 200);
  const auto after = ask();
  EXPECT_FALSE(after["done"].get<bool>()) << after.dump();
}

// A server that starts on leases that ended while no server ran spares them for a while: their
// workers, retrying, renew them or report before their configurations are handed out again.
TEST(ApiServer, LeasesThatEndedWhileNoServerRanAreSparedAfterAStart) {
  auto options = testing::fast_options();
  options.lease_check_interval = std::chrono::hours(1);  // expiry only as called below
  TestServer server(options);
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 10);
  StudyManager running_before(server.store());
  const auto leased = c.post("/v1/studies/" + std::to_string(study) + "/suggestions",
                             {{"n", 2}, {"client_id", "w"}, {"lease_seconds", 0.05}}, server.token)
                          .json()["suggestions"];
  ASSERT_EQ(leased.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  StudyManager restarted(server.store());  // both leases ended before it started
  EXPECT_EQ(restarted.expire_leases(), 0u);
  const db::TrialId first{leased[0]["trial_id"].get<std::int64_t>()};
  const auto renewed = restarted.extend(first, "w", 60);
  EXPECT_EQ(renewed.result.status, TrialStatus::pending);
  // A manager that ran all along expires the other one.
  EXPECT_EQ(running_before.expire_leases(), 1u);
  EXPECT_EQ(server.store().get_trial(first).result.status, TrialStatus::pending);
}

// A study that is only sent results (imports, measurements from elsewhere) keeps none of them
// in memory for a session that does not exist; the session, once asked for, reads them all.
TEST(ApiServer, ResultsAreQueuedOnlyForAStudysSession) {
  TestServer server;
  auto c = server.client();
  const auto study = db::StudyId{create_demo_study(c, server.token, "exhaustive", 10)};
  StudyManager manager(server.store());
  const auto config = [](int bx, int by, int unroll) {
    return nlohmann::json{{"bx", bx}, {"by", by}, {"unroll", unroll}};
  };
  manager.add_measurements(study, {config(1, 1, 0), config(1, 1, 1)},
                           {Measurement::success(2.0), Measurement::success(3.0)}, "elsewhere");
  manager.add_measurements(study, {config(1, 2, 0)}, {Measurement::success(4.0)}, "elsewhere");
  EXPECT_EQ(manager.queued_events(study), 0u);

  // Exhaustive search takes the first configuration nobody measured.
  const auto first = manager.suggest(study, 1, "w", 3600);
  ASSERT_EQ(first.leases.size(), 1u);
  EXPECT_EQ(first.leases[0].config, config(1, 2, 1));
  // From now on results are queued for the session, which takes them in when next asked.
  manager.add_measurements(study, {config(1, 4, 0)}, {Measurement::success(5.0)}, "elsewhere");
  EXPECT_EQ(manager.queued_events(study), 1u);
  // Another client: "w" would be given its own live lease back first.
  const auto second = manager.suggest(study, 1, "w2", 3600);
  ASSERT_EQ(second.leases.size(), 1u);
  EXPECT_EQ(second.leases[0].config, config(1, 4, 1));
  EXPECT_EQ(manager.queued_events(study), 0u);
}

TEST(ApiServer, AStudyShowsItsOwnBestAndAMachineKeepsItsFingerprint) {
  TestServer server;
  auto c = server.client();
  const auto first = create_demo_study(c, server.token, "random", 10);
  const auto second = create_demo_study(c, server.token, "random", 10);
  const auto add = [&](std::int64_t study, const nlohmann::json& config, double value) {
    const auto reply =
        c.post("/v1/studies/" + std::to_string(study) + "/measurements",
               {{"measurements", {{{"config", config}, {"value", value}}}}}, server.token);
    ASSERT_EQ(reply.status, 201) << reply.body;
  };
  add(first, {{"bx", 4}, {"by", 2}, {"unroll", 1}}, 1.0);
  add(second, {{"bx", 1}, {"by", 1}, {"unroll", 0}}, 5.0);
  add(second, {{"bx", 2}, {"by", 1}, {"unroll", 0}}, 4.0);
  // The second study's best is its own, although the first holds a better one.
  const auto shown = c.get("/v1/studies/" + std::to_string(second)).json();
  ASSERT_TRUE(shown["best"].is_object()) << shown.dump();
  EXPECT_EQ(shown["best"]["value"], 4.0) << shown.dump();

  // Registering a known machine again without a fingerprint keeps the stored one.
  // It existed: 200, not 201 Created.
  const auto again = c.post("/v1/machines", {{"name", "test-machine"}}, server.token);
  EXPECT_EQ(again.status, 200) << again.body;
  const auto machine = server.store().find_machine("test-machine");
  ASSERT_TRUE(machine);
  EXPECT_EQ(machine->fingerprint, (nlohmann::json{{"cpu", "test"}}));
  const auto updated =
      c.post("/v1/machines", {{"name", "test-machine"}, {"fingerprint", {{"cpu", "other"}}}},
             server.token);
  EXPECT_EQ(updated.status, 200) << updated.body;
  EXPECT_EQ(updated.json()["fingerprint"], (nlohmann::json{{"cpu", "other"}})) << updated.body;
  EXPECT_EQ(c.post("/v1/machines", {{"name", "brand-new"}}, server.token).status, 201);
}

// Sends one GET on `stream` and reads the whole reply.
http_response_t get_on(boost::beast::tcp_stream& stream, const std::string& target,
                       unsigned version) {
  namespace http = boost::beast::http;
  http::request<http::empty_body> request{http::verb::get, target, version};
  request.set(http::field::host, "127.0.0.1");
  http::write(stream, request);
  boost::beast::flat_buffer buffer;
  http_response_t reply;
  http::read(stream, buffer, reply);
  return reply;
}

TEST(ApiServer, ExportsAndTrialListsAreStreamedInChunks) {
  TestServer server;
  auto c = server.client();
  const db::StudyId study{create_demo_study(c, server.token, "random", 2000)};
  // More trials than one piece holds (db::StudyExport::kDefaultPageTrials).
  std::vector<db::NewTrial> trials;
  for (int i = 0; i < 1200; ++i) {
    trials.push_back(
        {{{"bx", i}, {"by", 1}, {"unroll", i % 2}},
         std::to_string(i) + ",1," + std::to_string(i % 2),
         i % 7 ? Measurement::success(1.0 + i) : Measurement::failure(TrialStatus::failed, "no"),
         "w"});
  }
  server.store().add_trials(study, trials);
  const std::string target = "/v1/studies/" + std::to_string(study.value) + "/export";

  namespace net = boost::asio;
  net::io_context io;
  boost::beast::tcp_stream stream(io);
  stream.connect({net::ip::make_address("127.0.0.1"), server.port()});
  for (const auto* format : {"json", "csv"}) {
    const auto reply = get_on(stream, target + "?format=" + format, 11);
    ASSERT_EQ(reply.result_int(), 200) << reply.body().substr(0, 300);
    EXPECT_TRUE(reply.chunked()) << format;
    EXPECT_EQ(reply.body(), db::export_study(server.store(), study,
                                             format == std::string("csv") ? db::ExportFormat::csv
                                                                          : db::ExportFormat::json))
        << format;
  }
  EXPECT_EQ(nlohmann::json::parse(get_on(stream, target, 11).body())["trials"].size(), 1200u);
  // The connection is kept for the next request.
  EXPECT_EQ(get_on(stream, "/healthz", 11).result_int(), 200);

  // HTTP/1.0 has no chunks: the reply ends when the server closes the connection.
  boost::beast::tcp_stream old(io);
  old.connect({net::ip::make_address("127.0.0.1"), server.port()});
  const auto reply = get_on(old, target + "?format=csv", 10);
  EXPECT_FALSE(reply.chunked());
  EXPECT_EQ(reply.body(), db::export_study(server.store(), study, db::ExportFormat::csv));
  boost::beast::error_code ec;
  char byte = 0;
  old.socket().read_some(net::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, net::error::eof);

  // An unknown study is a 404 before anything is streamed.
  EXPECT_EQ(get_on(stream, "/v1/studies/999/export", 11).result_int(), 404);

  // HEAD: GET's headers, no body, and the connection goes on.
  for (const std::string& target_head : {target, std::string("/healthz")}) {
    namespace http = boost::beast::http;
    http::request<http::empty_body> head{http::verb::head, target_head, 11};
    head.set(http::field::host, "127.0.0.1");
    http::write(stream, head);
    boost::beast::flat_buffer buffer;
    http::response_parser<http::empty_body> parser;
    parser.skip(true);
    http::read_header(stream, buffer, parser);
    EXPECT_EQ(parser.get().result_int(), 200) << target_head;
    EXPECT_EQ(buffer.size(), 0u) << "a body after the headers of HEAD " << target_head;
  }
  EXPECT_EQ(get_on(stream, "/healthz", 11).result_int(), 200);

  // The trial list is streamed too, and can be asked for what is new since a poll.
  const std::string list = "/v1/studies/" + std::to_string(study.value) + "/trials";
  const auto all = get_on(stream, list, 11);
  EXPECT_TRUE(all.chunked());
  const auto trials_json = nlohmann::json::parse(all.body())["trials"];
  ASSERT_EQ(trials_json.size(), 1200u);
  const auto failed = nlohmann::json::parse(get_on(stream, list + "?status=failed", 11).body());
  EXPECT_EQ(failed["trials"].size(), 172u);  // i % 7 == 0 for i < 1200
  const auto after = trials_json[1195]["id"].get<std::int64_t>();
  const auto recent =
      nlohmann::json::parse(get_on(stream, list + "?after=" + std::to_string(after), 11).body());
  ASSERT_EQ(recent["trials"].size(), 4u);
  EXPECT_EQ(recent["trials"][0]["id"], trials_json[1196]["id"]);
  // Pages larger and smaller than the store's (500 trials): each ends where it says the next
  // begins, and together they are the list.
  for (const std::size_t limit : {499, 500, 501, 700}) {
    SCOPED_TRACE(limit);
    std::vector<nlohmann::json> ids;
    std::string from;
    for (std::size_t pages = 1; pages <= 3; ++pages) {
      const auto paged = get_on(stream, list + "?limit=" + std::to_string(limit) + from, 11);
      EXPECT_TRUE(paged.chunked());
      const auto page = nlohmann::json::parse(paged.body());
      for (const auto& t : page["trials"]) ids.push_back(t["id"]);
      const bool last = pages * limit >= 1200;
      ASSERT_EQ(page["trials"].size(), last ? 1200 - (pages - 1) * limit : limit);
      if (last) {
        EXPECT_TRUE(page["next_after"].is_null());
        break;
      }
      ASSERT_EQ(page["next_after"], ids.back());
      from = "&after=" + page["next_after"].dump();
    }
    ASSERT_EQ(ids.size(), 1200u);
    for (std::size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], trials_json[i]["id"]) << i;
  }
  EXPECT_EQ(get_on(stream, "/v1/studies/999/trials", 11).result_int(), 404);
}

TEST(ApiServer, MetricsCountRequestsSuggestionsAndResults) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 4);
  const auto s = c.post("/v1/studies/" + std::to_string(study) + "/suggestions",
                        {{"n", 1}, {"client_id", "w"}}, server.token)
                     .json()["suggestions"][0];
  tell(c, server.token, s["trial_id"], "w", 1.0);
  c.get("/v1/studies/999");
  const auto text = c.get("/metrics");
  EXPECT_THAT(text.content_type, HasSubstr("text/plain"));
  EXPECT_THAT(text.body, HasSubstr("route=\"POST /v1/studies/{id}/suggestions\",code=\"200\"} 1"));
  EXPECT_THAT(text.body, HasSubstr("route=\"GET /v1/studies/{id}\",code=\"404\"} 1"));
  EXPECT_THAT(text.body, HasSubstr("tunebase_trials_reported_total{status=\"ok\"} 1"));
  EXPECT_THAT(text.body, HasSubstr("tunebase_suggestions_total 1"));
  EXPECT_THAT(text.body, HasSubstr("tunebase_suggestion_duration_seconds_count 1"));
}

TEST(ApiServer, StopsPromptlyWithIdleKeepAliveConnections) {
  tunebase::testing::TempDir dir;
  const auto path = dir.file("kept.db");
  auto server = std::make_unique<TestServer>(testing::fast_options(), ServiceOptions{}, path);
  auto c = server->client();
  ASSERT_EQ(c.get("/healthz").status, 200);  // leaves a kept-alive connection open
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  db::Store reopened(path);  // closed cleanly and usable
  EXPECT_EQ(reopened.list_tokens().size(), 1u);
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

TEST(ApiServer, OutOfFileDescriptorsPausesAcceptingInsteadOfSpinning) {
  TestServer server;
  ASSERT_EQ(server.client().get("/healthz").status, 200);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  std::size_t open_now = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++open_now;
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // 100 connections the server cannot all accept, held for 1.5 s (POSIX calls only).
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server.port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 100; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd >= 0) connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    }
    usleep(1'500'000);
    _exit(0);
  }
  rlimit low = old;
  low.rlim_cur = open_now + 10;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double used = cpu_seconds() - before;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  int status = 0;
  waitpid(child, &status, 0);
  // Accepting again at once after EMFILE keeps a core busy (about 0.5 s of CPU here).
  EXPECT_LT(used, 0.1) << "the server spun on accept errors";
  // Once the connections are gone, the server answers again.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(server.client().get("/healthz").status, 200);
}

// A study of the demo kernel with 8 measured results: enough for a model to predict from.
std::int64_t measured_demo_study(HttpClient& c, const std::string& token,
                                 const std::string& machine) {
  const auto study = create_demo_study(c, token, "random", 30, machine);
  nlohmann::json list = nlohmann::json::array();
  for (int bx : {1, 2, 4, 8}) {
    for (int by : {1, 2}) {
      const nlohmann::json config{{"bx", bx}, {"by", by}, {"unroll", 1}};
      list.push_back({{"config", config}, {"value", demo_objective(config)}});
    }
  }
  const auto added = c.post("/v1/studies/" + std::to_string(study) + "/measurements",
                            {{"measurements", list}}, token);
  EXPECT_EQ(added.status, 201) << added.body;
  return study;
}

// The value of gauge or counter `name` in /metrics (-1 when absent).
double metric(HttpClient& c, const std::string& name) {
  const auto text = c.get("/metrics").body;
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

// Waits (up to 20 s) until gauge `name` is `value`.
bool wait_for_metric(HttpClient& c, const std::string& name, double value) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    if (metric(c, name) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Questions to models (predictions need no token) wait in a pool and a queue of their own: while
// one keeps the model pool busy, suggestions and results are answered at once, and past the
// queue's bound a question is told to come back (503 with Retry-After) rather than wait.
TEST(ApiServer, QuestionsToModelsWaitApartFromSuggestionsInABoundedQueue) {
  auto options = testing::fast_options();
  options.compute_threads = 1;
  options.model_threads = 1;
  options.max_model_questions = 1;
  TestServer server(options);
  auto c = server.client();
  const auto study = measured_demo_study(c, server.token, "m");
  const auto other = create_demo_study(c, server.token, "random", 10, "m");
  // 100,000 configurations to predict: about a second of the model pool's time.
  const nlohmann::json config{{"bx", 4}, {"by", 2}, {"unroll", 1}};
  const nlohmann::json many{
      {"study_id", study},
      {"configs", nlohmann::json(std::vector<nlohmann::json>(100000, config))}};
  std::atomic<bool> answered{false};
  HttpReply slow;
  std::thread asking([&] {
    auto own = server.client();
    slow = own.post("/v1/predict", many);
    answered = true;
  });
  ASSERT_TRUE(wait_for_metric(c, "tunebase_model_questions", 1));
  // The queue is full: one more question is refused at once, saying when to ask again.
  const nlohmann::json one{{"study_id", study}, {"configs", {config}}};
  const auto refused = raw_post(server, "/v1/predict", one.dump(), server.token);
  EXPECT_THAT(refused, ::testing::StartsWith("HTTP/1.1 503")) << refused;
  EXPECT_EQ(header_value(refused, "Retry-After"), "1");
  EXPECT_THAT(refused, HasSubstr(R"("code":"overloaded")"));
  // Suggestions and results do not wait for the model pool.
  const auto leased = c.post("/v1/studies/" + std::to_string(other) + "/suggestions",
                             {{"client_id", "w"}}, server.token);
  ASSERT_EQ(leased.status, 200) << leased.body;
  const auto result =
      c.post("/v1/trials/" + leased.json()["suggestions"][0]["trial_id"].dump() + "/result",
             {{"client_id", "w"}, {"value", 2.0}}, server.token);
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_FALSE(answered) << "the suggestion waited for the prediction";
  asking.join();
  EXPECT_EQ(slow.status, 200);
  EXPECT_EQ(slow.json()["predictions"].size(), 100000u);
  EXPECT_EQ(metric(c, "tunebase_model_questions"), 0);
  EXPECT_EQ(metric(c, "tunebase_model_questions_refused_total"), 1);
  EXPECT_EQ(c.post("/v1/predict", one).status, 200);
  // The published document says so.
  const auto doc = c.get("/openapi.json").json();
  EXPECT_THAT(
      doc["paths"]["/v1/predict"]["post"]["responses"]["503"]["description"].get<std::string>(),
      HasSubstr("overloaded"));
}

// A question whose client hung up while it waited (curl -m) is not answered: the model's time
// goes to questions someone will read.
TEST(ApiServer, AQuestionWhoseClientHungUpIsSkipped) {
  auto options = testing::fast_options();
  options.model_threads = 1;
  TestServer server(options);
  auto c = server.client();
  const auto study = measured_demo_study(c, server.token, "m");
  const nlohmann::json config{{"bx", 4}, {"by", 2}, {"unroll", 1}};
  const nlohmann::json many{
      {"study_id", study},
      {"configs", nlohmann::json(std::vector<nlohmann::json>(100000, config))}};
  HttpReply slow;
  std::thread asking([&] {
    auto own = server.client();
    slow = own.post("/v1/predict", many);
  });
  ASSERT_TRUE(wait_for_metric(c, "tunebase_model_questions", 1));
  // Asked, queued behind the slow one, then the client is gone.
  {
    namespace net = boost::asio;
    net::io_context ioc;
    net::ip::tcp::socket socket(ioc);
    socket.connect({net::ip::make_address("127.0.0.1"), server.port()});
    const auto body = nlohmann::json{{"study_id", study}, {"configs", {config}}}.dump();
    net::write(socket, net::buffer("POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\n\r\n" + body));
    ASSERT_TRUE(wait_for_metric(c, "tunebase_model_questions", 2));
  }
  asking.join();
  EXPECT_EQ(slow.status, 200);
  ASSERT_TRUE(wait_for_metric(c, "tunebase_model_questions", 0));
  EXPECT_EQ(metric(c, "tunebase_model_questions_skipped_total"), 1);
  EXPECT_THAT(
      c.get("/metrics").body,
      HasSubstr("tunebase_http_requests_total{route=\"POST /v1/predict\",code=\"200\"} 1\n"));
  // A client that stays is answered as ever.
  EXPECT_EQ(c.post("/v1/predict", {{"study_id", study}, {"configs", {config}}}).status, 200);
  EXPECT_EQ(metric(c, "tunebase_model_questions_skipped_total"), 1);
}

TEST(ApiServer, RefusesToListenOnABusyPort) {
  TestServer first;
  tunebase::testing::TempDir dir;
  db::Store store(dir.file("b.db"));
  Service service(store);
  auto options = testing::fast_options();
  options.port = first.port();
  try {
    Server second(service, options);
    FAIL() << "a second server listened on a busy port";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(first.port())));
  }
}

// A client of a large study takes its trials a page at a time: limit, then after = the reply's
// next_after until it is null. Without limit the reply is as before: every trial, no next_after.
TEST(ApiServer, ListingsComeInPagesWithLimitAndNextAfter) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 20);
  const std::string base = "/v1/studies/" + std::to_string(study);
  const std::string list = base + "/trials";
  nlohmann::json measurements = nlohmann::json::array();
  for (int bx : {1, 2, 4, 8}) {
    for (int by : {1, 2}) {
      // Every third one failed: a filter by status pages too.
      const bool failed = measurements.size() % 3 == 2;
      nlohmann::json m{{"config", {{"bx", bx}, {"by", by}, {"unroll", 0}}}};
      if (failed) {
        m["status"] = "failed";
      } else {
        m["value"] = bx + by;
      }
      measurements.push_back(m);
    }
  }
  ASSERT_EQ(c.post(base + "/measurements", {{"measurements", measurements}}, server.token).status,
            201);
  const auto all = c.get(list).json();
  ASSERT_EQ(all["trials"].size(), 8u);
  EXPECT_FALSE(all.contains("next_after")) << "a reply without limit is as before";

  // Every page in turn, for each page size (the last page full or not).
  const auto walk = [&](const std::string& query, std::size_t limit) {
    std::vector<nlohmann::json> seen;
    std::string after;
    for (int pages = 0; pages < 20; ++pages) {
      const auto reply = c.get(list + "?" + query + "limit=" + std::to_string(limit) + after);
      EXPECT_EQ(reply.status, 200) << reply.body;
      const auto page = reply.json();
      EXPECT_LE(page["trials"].size(), limit);
      for (const auto& t : page["trials"]) seen.push_back(t["id"]);
      EXPECT_TRUE(page.contains("next_after")) << page.dump();
      if (page["next_after"].is_null()) return seen;
      EXPECT_EQ(page["next_after"], page["trials"].back()["id"]);
      after = "&after=" + page["next_after"].dump();
    }
    ADD_FAILURE() << "no last page";
    return seen;
  };
  std::vector<nlohmann::json> ids;
  for (const auto& t : all["trials"]) ids.push_back(t["id"]);
  for (std::size_t limit : {1, 3, 4, 7, 8, 9, 10000}) {
    SCOPED_TRACE(limit);
    EXPECT_EQ(walk("", limit), ids);
  }
  std::vector<nlohmann::json> failed_ids;
  const auto failed = c.get(list + "?status=failed").json();
  for (const auto& t : failed["trials"]) failed_ids.push_back(t["id"]);
  ASSERT_EQ(failed_ids.size(), 2u) << failed.dump();
  EXPECT_EQ(walk("status=failed&", 1), failed_ids);
  // A full page that is the last one says so: nothing follows.
  EXPECT_TRUE(c.get(list + "?limit=8").json()["next_after"].is_null());
  EXPECT_EQ(c.get(list + "?limit=7").json()["next_after"], ids[6]);

  // Studies and machines page the same way.
  for (int i = 0; i < 2; ++i) {
    create_demo_study(c, server.token, "random", 5, "machine-" + std::to_string(i));
  }
  const auto studies = c.get("/v1/studies?limit=2").json();
  ASSERT_EQ(studies["studies"].size(), 2u);
  EXPECT_EQ(studies["next_after"], studies["studies"][1]["id"]);
  const auto rest = c.get("/v1/studies?limit=2&after=" + studies["next_after"].dump()).json();
  ASSERT_EQ(rest["studies"].size(), 1u);
  EXPECT_TRUE(rest["next_after"].is_null());
  EXPECT_EQ(c.get("/v1/studies").json()["studies"].size(), 3u);
  EXPECT_FALSE(c.get("/v1/studies").json().contains("next_after"));
  const auto machines = c.get("/v1/machines?limit=2").json();
  ASSERT_EQ(machines["machines"].size(), 2u);
  const auto last = c.get("/v1/machines?limit=2&after=" + machines["next_after"].dump()).json();
  ASSERT_EQ(last["machines"].size(), 1u);
  EXPECT_EQ(last["machines"][0]["name"], "machine-1");
  EXPECT_TRUE(last["next_after"].is_null());

  // The limit's bounds are in the OpenAPI document.
  const auto doc = c.get("/openapi.json").json();
  const auto& params = doc["paths"]["/v1/studies/{id}/trials"]["get"]["parameters"];
  bool documented = false;
  for (const auto& p : params) {
    if (p["name"] != "limit") continue;
    documented = p["schema"]["minimum"] == 1 && p["schema"]["maximum"] == 10000;
  }
  EXPECT_TRUE(documented) << params.dump();
}

// A client that lists over HTTP (the worker) takes a listing a page at a time: each request
// small, however many trials the study holds.
TEST(ApiServer, GetAllPagesReadsAListingAPageAtATime) {
  TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "m"}}, server.token).status, 201);
  nlohmann::json x{{"name", "x"}, {"type", "integer"}, {"low", 0}, {"high", 9999}};
  nlohmann::json space{{"parameters", nlohmann::json::array({x})}};
  const auto made =
      c.post("/v1/studies",
             {{"kernel", "wide"}, {"machine", "m"}, {"strategy", "random"}, {"space", space}},
             server.token);
  ASSERT_EQ(made.status, 201) << made.body;
  const auto study = "/v1/studies/" + made.json()["id"].dump();
  const std::size_t count = 2 * static_cast<std::size_t>(kListPageItems) + 5;
  nlohmann::json measurements = nlohmann::json::array();
  for (std::size_t i = 0; i < count; ++i) {
    measurements.push_back({{"config", {{"x", i}}}, {"value", 1.0 + static_cast<double>(i)}});
  }
  ASSERT_EQ(c.post(study + "/measurements", {{"measurements", measurements}}, server.token).status,
            201);
  std::vector<std::int64_t> xs;
  const auto reply = get_all_pages(c, study + "/trials?status=ok", "trials", server.token,
                                   [&](const nlohmann::json& t) {
                                     xs.push_back(t["config"]["x"].get<std::int64_t>());
                                     return true;
                                   });
  EXPECT_EQ(reply.status, 200) << reply.body;
  ASSERT_EQ(xs.size(), count);
  for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(xs[i], static_cast<std::int64_t>(i));
  EXPECT_THAT(c.get("/metrics").body,
              HasSubstr("route=\"GET /v1/studies/{id}/trials\",code=\"200\"} 3"));
  // `each` ends the walk early: one page read.
  std::size_t taken = 0;
  get_all_pages(c, study + "/trials", "trials", server.token,
                [&](const nlohmann::json&) { return ++taken < 10; });
  EXPECT_EQ(taken, 10u);
  EXPECT_THAT(c.get("/metrics").body,
              HasSubstr("route=\"GET /v1/studies/{id}/trials\",code=\"200\"} 4"));
}

// A result is accepted once. Sent again as it was (a retry after a lost answer, with its
// metrics' keys in another order) it is answered with the stored trial; sent with anything
// different it is a 409 that says what is stored and what differs, and nothing changes.
TEST(ApiServer, AResultSentAgainWithOtherContentIsAConflict) {
  TestServer server;
  auto c = server.client();
  const auto study = create_demo_study(c, server.token, "random", 10);
  const auto trial = c.post("/v1/studies/" + std::to_string(study) + "/suggestions",
                            {{"n", 1}, {"client_id", "w"}}, server.token)
                         .json()["suggestions"][0]["trial_id"]
                         .get<std::int64_t>();
  const std::string path = "/v1/trials/" + std::to_string(trial) + "/result";
  const auto send = [&](const std::string& body) {
    return c.request("POST", path, body, server.token);
  };
  const std::string fields =
      R"("client_id": "w", "value": 0.1, "raw": [0.1, 0.30000000000000004], "cost_seconds": 1.5,
         "message": "ran")";
  ASSERT_EQ(send("{" + fields + R"(, "metrics": {"gflops": 12.5, "bytes": 3}})").status, 200);
  const auto stored = c.get("/v1/trials/" + std::to_string(trial)).json();

  const auto retry = send("{" + fields + R"(, "metrics": {"bytes": 3.0, "gflops": 12.5}})");
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_TRUE(retry.json()["already_stored"].get<bool>());

  const std::map<std::string, std::string> others = {
      {"value", R"("client_id": "w", "value": 0.2, "raw": [0.1, 0.30000000000000004],
                   "cost_seconds": 1.5, "message": "ran", "metrics": {"gflops": 12.5, "bytes": 3})"},
      {"raw", R"("client_id": "w", "value": 0.1, "raw": [0.1, 0.3], "cost_seconds": 1.5,
                 "message": "ran", "metrics": {"gflops": 12.5, "bytes": 3})"},
      {"cost_seconds", R"("client_id": "w", "value": 0.1, "raw": [0.1, 0.30000000000000004],
                          "cost_seconds": 2, "message": "ran",
                          "metrics": {"gflops": 12.5, "bytes": 3})"},
      {"message", R"("client_id": "w", "value": 0.1, "raw": [0.1, 0.30000000000000004],
                     "cost_seconds": 1.5, "metrics": {"gflops": 12.5, "bytes": 3})"},
      {"metrics", "{" + fields + R"(, "metrics": {"gflops": 12.6, "bytes": 3}})"},
      {"metrics, no metrics", "{" + fields + "}"},
      {"status failed", R"("client_id": "w", "status": "failed", "message": "ran")"}};
  for (const auto& [differs, body] : others) {
    SCOPED_TRACE(differs);
    const auto reply = send(body.front() == '{' ? body : "{" + body + "}");
    EXPECT_EQ(reply.status, 409) << reply.body;
    const auto message = reply.error_message();
    EXPECT_THAT(message, HasSubstr("already has a result (status ok, value 0.1, stored "));
    const auto field = differs.substr(0, differs.find(','));
    EXPECT_THAT(message, HasSubstr("differs in " + field)) << message;
  }
  EXPECT_THAT(send("{" + others.at("value") + "}").error_message(),
              HasSubstr("differs in value 0.2"));
  EXPECT_EQ(c.get("/v1/trials/" + std::to_string(trial)).json(), stored);

  // Measurements added again are told the same way.
  const std::string measurements = "/v1/studies/" + std::to_string(study) + "/measurements";
  // Not the configuration of the trial above.
  const nlohmann::json config{
      {"bx", 1},
      {"by", 1},
      {"unroll", stored["config"] == nlohmann::json{{"bx", 1}, {"by", 1}, {"unroll", 0}} ? 1 : 0}};
  const auto add = [&](const nlohmann::json& metrics) {
    return c.post(measurements,
                  {{"measurements", {{{"config", config}, {"value", 2.0}, {"metrics", metrics}}}}},
                  server.token);
  };
  ASSERT_EQ(add({{"a", 1}}).status, 201);
  EXPECT_EQ(add({{"a", 1}}).status, 200);
  const auto other = add({{"a", 2}});
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_THAT(other.error_message(), HasSubstr("differing in metrics"));
}

}  // namespace
}  // namespace tunebase::api
