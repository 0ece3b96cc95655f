// `tunebase worker` against a live server: two workers replaying a measured dataset share one
// study without ever evaluating a configuration twice; a worker whose evaluator tunes another
// space is refused with a clear message.
#include "apps/worker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "apps/cli.h"
#include "kernels/replay.h"
#include "tests/api/api_test_util.h"

// The interrupt flag lives in the tunebase executable's main.cc; the worker loop reads it.
namespace tunebase::cli {
std::atomic<bool> g_interrupted{false};
void install_interrupt_handler() {}
}  // namespace tunebase::cli

namespace tunebase::api {
namespace {

using ::testing::HasSubstr;

std::vector<Value> ints(std::initializer_list<std::int64_t> v) {
  std::vector<Value> out;
  for (auto x : v) out.emplace_back(x);
  return out;
}

// Every configuration of a 4 x 4 x 2 space measured; every 7th failed to compile.
MeasuredDataset measured_dataset(const std::string& kernel) {
  MeasuredDataset d;
  d.device_name = "Replay GPU";
  d.kernel_name = kernel;
  d.format = "kernel_tuner";
  d.space =
      SearchSpace({ordinal("block_size_x", ints({16, 32, 64, 128})),
                   ordinal("block_size_y", ints({1, 2, 4, 8})), ordinal("unroll", ints({0, 1}))},
                  {});
  std::size_t i = 0;
  for (const auto& config : d.space.valid_configurations()) {
    Observation o;
    o.config = config;
    if (++i % 7 == 0) {
      o.result = Measurement::failure(TrialStatus::failed, "CompilationFailedConfig");
    } else {
      const double t = 1.0 + std::abs(std::log2(as_double(config[0]) / 64.0)) +
                       0.1 * as_double(config[1]) + 0.2 * as_double(config[2]);
      o.result = Measurement::success(t, {t, t});
    }
    d.entries.push_back(std::move(o));
  }
  return d;
}

/// Options of a worker on `study` that prints nothing (and names itself `client_id` if given).
cli::WorkerOptions quiet_worker(std::int64_t study, const std::string& token,
                                const std::string& client_id = "") {
  cli::WorkerOptions options;
  options.study = study;
  options.token = token;
  if (!client_id.empty()) options.client_id = client_id;
  options.quiet = true;
  return options;
}

/// Leases one configuration of `study` to `client_id` for `seconds`, as another worker would.
HttpReply lease_one(HttpClient& c, const std::string& token, std::int64_t study,
                    const std::string& client_id, double seconds) {
  return c.post("/v1/studies/" + std::to_string(study) + "/suggestions",
                {{"n", 1}, {"client_id", client_id}, {"lease_seconds", seconds}}, token);
}

/// A study of `e`'s kernel on machine "replay-host", registered with `fingerprint`; `extra`
/// fields join the study's body.
std::int64_t create_study(HttpClient& c, const std::string& token, const Evaluator& e,
                          std::int64_t budget, const std::string& strategy = "random",
                          const nlohmann::json& fingerprint = nlohmann::json::object(),
                          const nlohmann::json& extra = nlohmann::json::object()) {
  EXPECT_EQ(
      c.post("/v1/machines", {{"name", "replay-host"}, {"fingerprint", fingerprint}}, token).status,
      201);
  nlohmann::json body{{"kernel", e.kernel_name()},
                      {"space", e.space().to_json()},
                      {"machine", "replay-host"},
                      {"strategy", strategy},
                      {"budget", budget}};
  body.update(extra);
  const auto s = c.post("/v1/studies", body, token);
  EXPECT_EQ(s.status, 201) << s.body;
  return s.json()["id"].get<std::int64_t>();
}

// A replay that takes a little time, as a real evaluation does: while one worker evaluates, the
// other asks for work.
class SlowReplayEvaluator : public ReplayEvaluator {
 public:
  SlowReplayEvaluator() : ReplayEvaluator(measured_dataset("conv"), "generated.json") {}
  Measurement evaluate(const Configuration& config) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return ReplayEvaluator::evaluate(config);
  }
};

TEST(Worker, TwoWorkersShareAStudyWithoutRepeats) {
  testing::TestServer server;
  ReplayEvaluator evaluator(measured_dataset("conv"), "generated.json");
  auto setup = server.client();
  constexpr std::int64_t kBudget = 24;
  const auto study = create_study(setup, server.token, evaluator, kBudget);

  std::vector<cli::WorkerSummary> summaries(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      SlowReplayEvaluator mine;
      auto client = server.client();
      cli::WorkerOptions options;
      options.study = study;
      options.token = server.token;
      options.client_id = "worker-" + std::to_string(w);
      options.quiet = true;
      summaries[w] = cli::run_worker(mine, client, options);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(summaries[0].evaluated + summaries[1].evaluated, static_cast<std::size_t>(kBudget));
  for (const auto& s : summaries) {
    EXPECT_GE(s.evaluated, 1u) << "one worker took the whole budget";
    EXPECT_THAT(s.stop_reason, ::testing::AnyOf(HasSubstr("budget"), HasSubstr("completed")));
  }

  const auto trials = server.store().trials(db::StudyId{study});
  ASSERT_EQ(trials.size(), static_cast<std::size_t>(kBudget));
  std::set<std::string> keys;
  std::size_t failed = 0;
  for (const auto& t : trials) {
    EXPECT_TRUE(keys.insert(t.config_key).second) << t.config_key << " evaluated twice";
    EXPECT_NE(t.result.status, TrialStatus::pending);
    failed += t.result.status == TrialStatus::failed;
    // The stored result is the replayed one.
    const auto expected = evaluator.lookup_json(t.config);
    EXPECT_EQ(t.result.status, expected.status);
    if (expected.ok()) {
      EXPECT_DOUBLE_EQ(t.result.objective, expected.objective);
    }
  }
  EXPECT_EQ(failed, summaries[0].failed + summaries[1].failed);
}

// A program's output in a failure message need not be UTF-8 (a binary printed by mistake).
class BinaryOutputEvaluator : public ReplayEvaluator {
 public:
  BinaryOutputEvaluator() : ReplayEvaluator(measured_dataset("conv"), "generated.json") {}
  Measurement evaluate(const Configuration&) override {
    return Measurement::failure(TrialStatus::failed, "crashed; output: \xAF\xFF\xFE ok");
  }
};

TEST(Worker, AFailureMessageThatIsNotUtf8IsStoredAndServed) {
  testing::TestServer server;
  BinaryOutputEvaluator evaluator;
  auto client = server.client();
  const auto study = create_study(client, server.token, evaluator, 2);
  auto options = quiet_worker(study, server.token);
  const auto summary = cli::run_worker(evaluator, client, options);
  EXPECT_EQ(summary.evaluated, 2u);
  EXPECT_EQ(summary.failed, 2u);
  const auto trials = server.store().trials(db::StudyId{study});
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& t : trials) {
    EXPECT_EQ(t.result.status, TrialStatus::failed);
    EXPECT_THAT(t.result.message, HasSubstr("crashed; output: "));
    const auto served = client.get("/v1/trials/" + std::to_string(t.id.value), server.token);
    EXPECT_EQ(served.status, 200) << served.body;
  }
}

// An evaluator that says too much: a failure with a program's whole output, a success with a
// trace in its metrics.
class VerboseEvaluator : public ReplayEvaluator {
 public:
  VerboseEvaluator() : ReplayEvaluator(measured_dataset("conv"), "generated.json") {}
  Measurement evaluate(const Configuration& config) override {
    ++calls_;
    if (calls_ == 1) {
      return Measurement::failure(TrialStatus::failed,
                                  std::string(4 * kMaxMessageBytes, 'w') + "\nerror: why");
    }
    if (calls_ == 3) {
      // Within the limit as bytes, but each byte that is not UTF-8 is sent as U+FFFD (three).
      return Measurement::failure(TrialStatus::failed,
                                  std::string(kMaxMessageBytes - 100, '\xFF') + "\nerror: why");
    }
    auto m = ReplayEvaluator::evaluate(config);
    m.metrics = {{"trace", std::string(2 * kMaxMetricsBytes, 't')}};
    // Many repeats of a short kernel: more raw values than a result may hold.
    m.raw.assign(2 * kMaxRawValues + 3, m.objective);
    return m;
  }

 private:
  int calls_ = 0;
};

// The service refuses messages, metrics and raw values over its limits: the worker cuts them
// down rather than lose the evaluation.
TEST(Worker, AResultThatSaysTooMuchIsCutDownAndStored) {
  testing::TestServer server;
  VerboseEvaluator evaluator;
  auto client = server.client();
  const auto study = create_study(client, server.token, evaluator, 4);
  auto options = quiet_worker(study, server.token);
  const auto summary = cli::run_worker(evaluator, client, options);
  EXPECT_EQ(summary.evaluated, 4u);
  const auto trials = server.store().trials(db::StudyId{study});
  ASSERT_EQ(trials.size(), 4u);
  for (const auto& t : trials) {
    EXPECT_NE(t.result.status, TrialStatus::pending) << "a result was not delivered";
    EXPECT_LE(t.result.message.size(), kMaxMessageBytes);
    EXPECT_TRUE(t.result.metrics.empty() || !t.result.metrics.contains("trace"));
    EXPECT_LE(t.result.raw.size(), kMaxRawValues);
  }
}

// A set-up that cannot evaluate anything (a solver process that does not start).
class UnavailableEvaluator : public ReplayEvaluator {
 public:
  UnavailableEvaluator() : ReplayEvaluator(measured_dataset("conv"), "generated.json") {}
  Measurement evaluate(const Configuration&) override {
    throw EvaluatorUnavailable("the solver process failed to start");
  }
};

// A command that the signal stopping the worker reached too (a service manager stopping the
// whole group).
class StoppedEvaluator : public ReplayEvaluator {
 public:
  StoppedEvaluator() : ReplayEvaluator(measured_dataset("conv"), "generated.json") {}
  Measurement evaluate(const Configuration&) override {
    cli::g_interrupted = true;
    throw EvaluationInterrupted("`bench` was stopped with tunebase (killed by signal 15)");
  }
};

TEST(Worker, AnEvaluationStoppedWithTheWorkerGivesItsLeaseBackAndStoresNoFailure) {
  testing::TestServer server;
  StoppedEvaluator evaluator;
  auto client = server.client();
  const auto study = create_study(client, server.token, evaluator, 5);
  auto options = quiet_worker(study, server.token, "stopped");
  struct Resume {
    ~Resume() { cli::g_interrupted = false; }  // for the tests after this one
  } resume;
  const auto summary = cli::run_worker(evaluator, client, options);
  EXPECT_TRUE(summary.interrupted);
  EXPECT_EQ(summary.evaluated, 0u);
  const auto trials = server.store().trials(db::StudyId{study});
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_TRUE(trials[0].lease_expired()) << to_string(trials[0].result.status);
  EXPECT_THAT(trials[0].result.message, HasSubstr("released by client 'stopped'"));
}

TEST(Worker, AnEvaluatorThatCannotRunGivesItsLeaseBack) {
  testing::TestServer server;
  UnavailableEvaluator evaluator;
  auto client = server.client();
  // Exhaustive search proposes the lowest configuration not taken: the released one again.
  const auto study = create_study(client, server.token, evaluator, 5, "exhaustive");
  auto options = quiet_worker(study, server.token, "broken");
  EXPECT_THROW(cli::run_worker(evaluator, client, options), EvaluatorUnavailable);
  const auto trials = server.store().trials(db::StudyId{study});
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_TRUE(trials[0].lease_expired());  // no failed trial, and no lease left for an hour
  EXPECT_THAT(trials[0].result.message, HasSubstr("released by client 'broken'"));
  ASSERT_TRUE(trials[0].lease_expires_at.has_value());  // ended when released
  EXPECT_LE(db::parse_timestamp(*trials[0].lease_expires_at), std::chrono::system_clock::now());
  // Its configuration is proposed again at once.
  const auto again = client.post("/v1/studies/" + std::to_string(study) + "/suggestions",
                                 {{"n", 1}, {"client_id", "healthy"}}, server.token);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["suggestions"][0]["config"], trials[0].config) << again.body;
  // The lease ends when the client is told it does, to the millisecond, and a study of any
  // strategy names it.
  const auto leased = server.store().get_trial(
      db::TrialId{again.json()["suggestions"][0]["trial_id"].get<std::int64_t>()});
  EXPECT_EQ(again.json()["suggestions"][0]["lease_expires_at"], *leased.lease_expires_at);
  EXPECT_EQ(again.json()["model"]["strategy"], "exhaustive") << again.body;
  // Only the lease's own client releases it, and only while it is leased.
  const auto first = again.json()["suggestions"][0]["trial_id"].get<std::int64_t>();
  const std::string release = "/v1/trials/" + std::to_string(first) + "/release";
  EXPECT_EQ(client.post(release, {{"client_id", "someone"}}, server.token).status, 403);
  EXPECT_EQ(client.post(release, {{"client_id", "healthy"}}, server.token).status, 200);
  const auto twice = client.post(release, {{"client_id", "healthy"}}, server.token);
  EXPECT_EQ(twice.status, 409);
  EXPECT_THAT(twice.body, HasSubstr("is not leased"));
}

// Its first lease ends while it is evaluated (taken back, as by another server on the
// database: the worker's renewals are refused from then on), and meanwhile another client is
// given the same configuration (exhaustive search proposes the lowest free one again) and
// reports it.
class SlowFirstEvaluator : public ReplayEvaluator {
 public:
  SlowFirstEvaluator(testing::TestServer& server, std::int64_t study)
      : ReplayEvaluator(measured_dataset("conv"), "generated.json"),
        server_(server),
        study_(study) {}
  Measurement evaluate(const Configuration& config) override {
    if (!first_done_) {
      first_done_ = true;
      server_.store().expire_leases(std::chrono::system_clock::now() + std::chrono::hours(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      auto c = server_.client();
      retaken_ = c.post("/v1/studies/" + std::to_string(study_) + "/suggestions",
                        {{"n", 1}, {"client_id", "other"}}, server_.token)
                     .json()["suggestions"];
      if (retaken_.size() == 1) {
        const auto m = ReplayEvaluator::evaluate(space().config_from_json(retaken_[0]["config"]));
        const auto told = c.post("/v1/trials/" + retaken_[0]["trial_id"].dump() + "/result",
                                 {{"client_id", "other"}, {"status", "ok"}, {"value", m.objective}},
                                 server_.token);
        EXPECT_EQ(told.status, 200) << told.body;
      }
    }
    return ReplayEvaluator::evaluate(config);
  }
  nlohmann::json retaken_;

 private:
  testing::TestServer& server_;
  std::int64_t study_;
  bool first_done_ = false;
};

// Evaluations four times as long as the lease: the worker renews it, and keeps its
// configuration, which another client asking meanwhile is not given.
class SlowEvaluator : public ReplayEvaluator {
 public:
  explicit SlowEvaluator(testing::TestServer& server)
      : ReplayEvaluator(measured_dataset("conv"), "generated.json"), server_(server) {}
  Measurement evaluate(const Configuration& config) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    if (evaluating_.is_null()) {
      evaluating_ = space().config_to_json(config);
      auto c = server_.client();
      other_got_ = lease_one(c, server_.token, study_, "other", 60).json()["suggestions"];
    }
    return ReplayEvaluator::evaluate(config);
  }
  std::int64_t study_ = 0;
  nlohmann::json evaluating_;
  nlohmann::json other_got_;

 private:
  testing::TestServer& server_;
};

TEST(Worker, ALeaseIsRenewedWhileItsEvaluationGoesOn) {
  testing::TestServer server;
  auto c = server.client();
  SlowEvaluator evaluator(server);
  ASSERT_EQ(c.post("/v1/machines", {{"name", "replay-host"}}, server.token).status, 201);
  const auto created = c.post("/v1/studies",
                              {{"kernel", "conv"},
                               {"space", evaluator.space().to_json()},
                               {"machine", "replay-host"},
                               {"strategy", "exhaustive"},
                               {"budget", 3}},
                              server.token);
  ASSERT_EQ(created.status, 201) << created.body;
  const auto study = created.json()["id"].get<std::int64_t>();
  evaluator.study_ = study;
  cli::WorkerOptions options;
  options.study = study;
  options.token = server.token;
  // No --client-id: the renewals name the default one (host:pid), as the leases do.
  options.lease_seconds = 0.1;
  options.max_trials = 2;  // the third configuration is the other client's
  options.quiet = true;
  ::testing::internal::CaptureStderr();
  const auto summary = cli::run_worker(evaluator, c, options);
  const auto warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(warnings.find("ended while it was evaluated"), std::string::npos) << warnings;
  // Exhaustive search gives the lowest free configuration: the one under evaluation, had its
  // lease of 0.1 s ended.
  ASSERT_EQ(evaluator.other_got_.size(), 1u) << evaluator.other_got_.dump();
  EXPECT_NE(evaluator.other_got_[0]["config"], evaluator.evaluating_);
  EXPECT_EQ(summary.evaluated, 2u);
  EXPECT_EQ(summary.refused, 0u);
}

TEST(Worker, AResultRefusedAfterItsLeaseExpiredIsReportedAndTheWorkerGoesOn) {
  testing::TestServer server;
  auto c = server.client();
  ReplayEvaluator reference(measured_dataset("conv"), "generated.json");
  ASSERT_EQ(c.post("/v1/machines", {{"name", "replay-host"}}, server.token).status, 201);
  const auto created = c.post("/v1/studies",
                              {{"kernel", "conv"},
                               {"space", reference.space().to_json()},
                               {"machine", "replay-host"},
                               {"strategy", "exhaustive"},
                               {"budget", 10}},
                              server.token);
  ASSERT_EQ(created.status, 201) << created.body;
  const auto study = created.json()["id"].get<std::int64_t>();

  SlowFirstEvaluator evaluator(server, study);
  cli::WorkerOptions options;
  options.study = study;
  options.token = server.token;
  options.client_id = "slow";
  options.lease_seconds = 0.1;
  options.max_trials = 3;
  options.quiet = true;
  ::testing::internal::CaptureStderr();
  const auto summary = cli::run_worker(evaluator, c, options);
  const auto warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warnings, HasSubstr("ended while it was evaluated"));
  ASSERT_EQ(evaluator.retaken_.size(), 1u) << "the other client was not given the configuration";
  EXPECT_EQ(summary.refused, 1u);
  EXPECT_EQ(summary.evaluated, 3u);
  // The configuration is measured once, by the client that holds it now.
  const auto trials = server.store().trials(db::StudyId{study});
  const auto retaken_trial = evaluator.retaken_[0]["trial_id"].get<std::int64_t>();
  for (const auto& t : trials) {
    if (t.config == evaluator.retaken_[0]["config"] && t.id.value != retaken_trial) {
      EXPECT_FALSE(t.finished_at.has_value()) << "the refused result was stored";
    }
  }
}

// Revokes the server's token while it measures.
class RevokingEvaluator : public ReplayEvaluator {
 public:
  explicit RevokingEvaluator(testing::TestServer& server)
      : ReplayEvaluator(measured_dataset("conv"), "generated.json"), server_(server) {}
  Measurement evaluate(const Configuration& config) override {
    server_.store().revoke_token("tester");
    return ReplayEvaluator::evaluate(config);
  }

 private:
  testing::TestServer& server_;
};

TEST(Worker, AResultRefusedForARevokedTokenIsPrintedToBeSentAgain) {
  testing::TestServer server;
  auto c = server.client();
  RevokingEvaluator evaluator(server);
  const auto study = create_study(c, server.token, evaluator, 4);
  auto options = quiet_worker(study, server.token, "w");
  try {
    (void)cli::run_worker(evaluator, c, options);
    ADD_FAILURE() << "a revoked token must stop the worker";
  } catch (const Unauthorized& e) {
    // The measurement is not lost: the body to send with a valid token is in the message.
    EXPECT_THAT(e.what(), HasSubstr("was not delivered: HTTP 401"));
    EXPECT_THAT(e.what(), HasSubstr("/result the body {\"client_id\":\"w\""));
    EXPECT_THAT(e.what(), HasSubstr("with a valid token"));
  }
}

// A command that printed a negative time for its first configuration (a clock that went back).
class NegativeFirstEvaluator : public ReplayEvaluator {
 public:
  NegativeFirstEvaluator() : ReplayEvaluator(measured_dataset("conv"), "generated.json") {}
  std::string objective_unit() const override { return "ms"; }
  Measurement evaluate(const Configuration& config) override {
    if (first_.is_null()) {
      first_ = space().config_to_json(config);
      return Measurement::success(-1.5, {-1.5}, 0.25);
    }
    return ReplayEvaluator::evaluate(config);
  }
  nlohmann::json first_;
};

TEST(Worker, AResultTheServerRefusesIsStoredAsAFailureSayingWhy) {
  testing::TestServer server;
  auto c = server.client();
  NegativeFirstEvaluator evaluator;
  const auto study = create_study(c, server.token, evaluator, 3, "random", nlohmann::json::object(),
                                  {{"unit", "ms"}});
  auto options = quiet_worker(study, server.token, "w");
  ::testing::internal::CaptureStderr();
  const auto summary = cli::run_worker(evaluator, c, options);
  const auto warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warnings, HasSubstr("warning: the server refused the result of trial "));
  EXPECT_THAT(warnings, HasSubstr("a time cannot be negative"));
  EXPECT_THAT(warnings, HasSubstr("stored as a failed trial"));
  // The worker went on, and nothing is left leased.
  EXPECT_EQ(summary.evaluated, 3u) << summary.stop_reason;
  EXPECT_EQ(summary.failed, 1u);
  std::size_t refused = 0;
  for (const auto& t : server.store().trials(db::StudyId{study})) {
    EXPECT_NE(t.result.status, TrialStatus::pending) << t.config.dump() << " is still leased";
    if (t.config != evaluator.first_) continue;
    ++refused;
    EXPECT_EQ(t.result.status, TrialStatus::failed);
    EXPECT_THAT(t.result.message, HasSubstr("a time cannot be negative"));
    EXPECT_THAT(t.result.message, HasSubstr("measured -1.5"));
  }
  EXPECT_EQ(refused, 1u);
}

// Remembers the configurations it evaluated, in order.
class RecordingEvaluator : public ReplayEvaluator {
 public:
  RecordingEvaluator() : ReplayEvaluator(measured_dataset("conv"), "generated.json") {}
  Measurement evaluate(const Configuration& config) override {
    evaluated.push_back(space().config_to_json(config));
    return ReplayEvaluator::evaluate(config);
  }
  std::vector<nlohmann::json> evaluated;
};

TEST(Worker, TakesUpItsOwnLeaseWhoseReplyWasLost) {
  testing::TestServer server;
  RecordingEvaluator evaluator;
  auto c = server.client();
  const auto study = create_study(c, server.token, evaluator, 3);
  // A suggestion made for this worker whose reply never reached it.
  const auto lost = c.post("/v1/studies/" + std::to_string(study) + "/suggestions",
                           {{"n", 1}, {"client_id", "w1"}}, server.token);
  ASSERT_EQ(lost.status, 200) << lost.body;
  auto options = quiet_worker(study, server.token, "w1");
  ::testing::internal::CaptureStderr();
  const auto summary = cli::run_worker(evaluator, c, options);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("takes them up as its own"));
  EXPECT_EQ(summary.evaluated, 3u) << summary.stop_reason;
  const auto counts = server.store().trial_counts(db::StudyId{study});
  EXPECT_EQ(counts.pending, 0);
  EXPECT_EQ(counts.total, 3);
  // First: it holds a place in the budget, and nobody else evaluates it until it ends.
  ASSERT_FALSE(evaluator.evaluated.empty());
  EXPECT_EQ(evaluator.evaluated.front(), lost.json()["suggestions"][0]["config"]);
}

// While it evaluates its first configuration, asks the study for a suggestion as client
// `client_id` (another worker, or a twin started with the same client id) and keeps the answer.
class AskingEvaluator : public ReplayEvaluator {
 public:
  AskingEvaluator(testing::TestServer& server, std::int64_t study, std::string client_id)
      : ReplayEvaluator(measured_dataset("conv"), "generated.json"),
        server_(server),
        study_(study),
        client_id_(std::move(client_id)) {}
  Measurement evaluate(const Configuration& config) override {
    if (answer_.is_null()) {
      auto c = server_.client();
      // As a tunebase worker asks (a twin worker): new leases only.
      answer_ =
          c.post("/v1/studies/" + std::to_string(study_) + "/suggestions",
                 {{"n", 1}, {"client_id", client_id_}, {"resume_leases", false}}, server_.token)
              .json();
    }
    return ReplayEvaluator::evaluate(config);
  }
  nlohmann::json answer_;

 private:
  testing::TestServer& server_;
  std::int64_t study_;
  std::string client_id_;
};

TEST(Worker, LeavesALeaseOfItsNameMadeForAnotherWorkerAlone) {
  testing::TestServer server;
  ReplayEvaluator reference(measured_dataset("conv"), "generated.json");
  auto c = server.client();
  const auto study = create_study(c, server.token, reference, 3);
  AskingEvaluator evaluator(server, study, "w1");  // a twin of the worker
  auto options = quiet_worker(study, server.token, "w1");
  const auto summary = cli::run_worker(evaluator, c, options);
  ASSERT_EQ(evaluator.answer_["suggestions"].size(), 1u);
  EXPECT_EQ(summary.evaluated, 2u) << summary.stop_reason;
  const auto twin =
      server.store().get_trial(db::TrialId{evaluator.answer_["suggestions"][0]["trial_id"]});
  EXPECT_EQ(twin.result.status, TrialStatus::pending) << "the twin's lease was evaluated here";
  // The twin's lease (an hour) holds the rest of the budget: the worker says when it ends.
  EXPECT_THAT(summary.stop_reason, HasSubstr("more may come when the first live lease ends, in"));
  EXPECT_THAT(summary.stop_reason, HasSubstr(" s: --patience "));
}

TEST(Worker, RefusesToReplayAnotherDevicesMeasurements) {
  testing::TestServer server;
  auto c = server.client();
  ReplayEvaluator evaluator(measured_dataset("conv"), "generated.json");  // "Replay GPU"
  cli::WorkerOptions options;
  options.study =
      create_study(c, server.token, evaluator, 3, "random", {{"device_name", "NVIDIA A100"}});
  options.token = server.token;
  options.quiet = true;
  EXPECT_THAT([&] { (void)cli::run_worker(evaluator, c, options); },
              ::testing::ThrowsMessage<InvalidInput>(
                  HasSubstr("is of machine replay-host (device NVIDIA A100), but the replayed "
                            "file was measured on Replay GPU")));
  EXPECT_TRUE(server.store().trials(db::StudyId{options.study}).empty());
}

TEST(Worker, AnAnswerThatIsNotFinalIsAskedAgainEvenWithoutPatience) {
  testing::TestServer server;
  ReplayEvaluator evaluator(measured_dataset("conv"), "generated.json");
  auto c = server.client();
  const auto study = create_study(c, server.token, evaluator, 2);
  // Another client holds the rest of the budget for a moment: the answer after the worker's
  // first trial is empty but not done.
  const auto other = lease_one(c, server.token, study, "other", 0.5);
  ASSERT_EQ(other.status, 200) << other.body;
  auto options = quiet_worker(study, server.token, "w1");
  ASSERT_EQ(options.patience_seconds, 0.0);
  const auto summary = cli::run_worker(evaluator, c, options);
  EXPECT_EQ(summary.evaluated, 2u) << summary.stop_reason;
}

TEST(Worker, RefusesAnEvaluatorForAnotherSpace) {
  testing::TestServer server;
  ReplayEvaluator evaluator(measured_dataset("conv"), "generated.json");
  auto client = server.client();
  const auto study = create_study(client, server.token, evaluator, 5);
  ReplayEvaluator other(measured_dataset("gemm"), "other.json");
  auto options = quiet_worker(study, server.token);
  try {
    cli::run_worker(other, client, options);
    FAIL() << "the worker accepted an evaluator of another kernel";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("tunes kernel \"conv\""));
    EXPECT_THAT(e.what(), HasSubstr("this worker's evaluator is \"gemm\""));
  }
  EXPECT_TRUE(server.store().trials(db::StudyId{study}).empty());

  options.token = "wrong";
  EXPECT_THROW(cli::run_worker(evaluator, client, options), Unauthorized);
}

TEST(Worker, RefusesAnEvaluatorForAnotherInput) {
  testing::TestServer server;
  auto client = server.client();
  auto measured_at = [](int size) {
    auto d = measured_dataset("conv");
    d.problem_size = {size, size};
    return d;
  };
  ReplayEvaluator evaluator(measured_at(4096), "generated.json");
  cli::WorkerOptions options;
  options.study = create_study(client, server.token, evaluator, 5, "random",
                               nlohmann::json::object(), {{"task", evaluator.task()}});
  options.token = server.token;
  options.quiet = true;
  ReplayEvaluator other(measured_at(8192), "generated.json");
  try {
    cli::run_worker(other, client, options);
    FAIL() << "the worker accepted an evaluator of another input";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("measures the input {\"problem_size\":[4096,4096]}"));
    EXPECT_THAT(e.what(), HasSubstr("this worker's evaluator measures "
                                    "{\"problem_size\":[8192,8192]}"));
  }
  EXPECT_TRUE(server.store().trials(db::StudyId{options.study}).empty());
  // The study's own input is accepted.
  options.max_trials = 1;
  EXPECT_EQ(cli::run_worker(evaluator, client, options).evaluated, 1u);
}

// A replay whose number is in `unit` and better lower or higher as told: a command's --unit
// and --maximize.
class ObjectiveEvaluator : public ReplayEvaluator {
 public:
  ObjectiveEvaluator(std::string unit, bool minimize)
      : ReplayEvaluator(measured_dataset("conv"), "generated.json"),
        unit_(std::move(unit)),
        minimize_(minimize) {}
  std::string objective_unit() const override { return unit_; }
  bool minimize() const override { return minimize_; }

 private:
  std::string unit_;
  bool minimize_;
};

TEST(Worker, RefusesAStudyOfAnotherUnitOrDirection) {
  testing::TestServer server;
  auto c = server.client();
  ObjectiveEvaluator in_ms("ms", true);
  const auto study = create_study(c, server.token, in_ms, 3, "random", nlohmann::json::object(),
                                  {{"name", "units"}, {"unit", "ms"}, {"direction", "minimize"}});
  auto options = quiet_worker(study, server.token);
  const std::string refused = "study " + std::to_string(study) +
                              " ('units', which minimizes its objective in ms) cannot be joined "
                              "as given: ";
  // Seconds stored in a study of milliseconds: 17.5 s would read as 17.5 ms.
  ObjectiveEvaluator in_s("s", true);
  EXPECT_THAT([&] { (void)cli::run_worker(in_s, c, options); },
              ::testing::ThrowsMessage<Conflict>(
                  HasSubstr(refused + "its objective is in ms: give --unit ms (or --create-study "
                                      "NAME for a new study)")));
  // A rate stored in a study of times: its best would be the slowest configuration.
  ObjectiveEvaluator rate("GFLOP/s", false);
  EXPECT_THAT([&] { (void)cli::run_worker(rate, c, options); },
              ::testing::ThrowsMessage<Conflict>(
                  HasSubstr(refused + "it minimizes its objective: leave out --maximize; its "
                                      "objective is in ms: give --unit ms")));
  EXPECT_TRUE(server.store().trials(db::StudyId{study}).empty());
  // The study's own unit and direction are accepted.
  options.max_trials = 1;
  EXPECT_EQ(cli::run_worker(in_ms, c, options).evaluated, 1u);
}

TEST(Worker, WithoutAUnitTakesTheStudysButNotItsDirection) {
  testing::TestServer server;
  auto c = server.client();
  ObjectiveEvaluator rate("GFLOP/s", false);
  const auto study =
      create_study(c, server.token, rate, 3, "random", nlohmann::json::object(),
                   {{"name", "rates"}, {"unit", "GFLOP/s"}, {"direction", "maximize"}});
  auto options = quiet_worker(study, server.token);
  // A command with neither --unit nor --maximize: a rate would be minimised.
  ObjectiveEvaluator plain("", true);
  try {
    (void)cli::run_worker(plain, c, options);
    FAIL() << "a worker that minimises joined a study that maximizes";
  } catch (const Conflict& e) {
    EXPECT_THAT(e.what(), HasSubstr("('rates', which maximizes its objective in GFLOP/s) cannot be "
                                    "joined as given: it maximizes its objective: add --maximize "
                                    "(or"));
  }
  EXPECT_TRUE(server.store().trials(db::StudyId{study}).empty());
  // With --maximize and no --unit, its numbers are the study's GFLOP/s, and shown so.
  ObjectiveEvaluator plain_max("", false);
  options.quiet = false;
  ::testing::internal::CaptureStderr();
  const auto summary = cli::run_worker(plain_max, c, options);
  const auto printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(summary.evaluated, 3u) << summary.stop_reason;
  EXPECT_THAT(printed, ::testing::ContainsRegex("trial [0-9]+ .* -> [0-9.]+ GFLOP/s\n")) << printed;
}

// A replay that says how it measured, as a PETSc solve's tolerance and clock.
class MeasuredEvaluator : public ReplayEvaluator {
 public:
  explicit MeasuredEvaluator(double rtol)
      : ReplayEvaluator(measured_dataset("conv"), "generated.json"), rtol_(rtol) {}
  nlohmann::json measurement_settings() const override {
    return {{"clock", "wall"}, {"max_it", 10000}, {"rtol", rtol_}};
  }

 private:
  double rtol_;
};

TEST(Worker, AStudyItCreatesKeepsItsMeasurementSettingsAndRefusesOthers) {
  testing::TestServer server;
  auto c = server.client();
  ASSERT_EQ(c.post("/v1/machines", {{"name", "replay-host"}}, server.token).status, 201);
  MeasuredEvaluator tight(1e-8);
  auto body = cli::new_study_request(tight, "solves", "replay-host");
  body["strategy"] = "random";
  const auto created = c.post("/v1/studies", body, server.token);
  ASSERT_EQ(created.status, 201) << created.body;
  const auto study = created.json()["id"].get<std::int64_t>();
  EXPECT_EQ(created.json()["settings"]["measurement"], tight.measurement_settings())
      << created.body;
  // Solved to another tolerance, its times would not compare with the study's.
  MeasuredEvaluator loose(1e-3);
  auto options = quiet_worker(study, server.token);
  EXPECT_THAT([&] { (void)cli::run_worker(loose, c, options); },
              ::testing::ThrowsMessage<Conflict>(HasSubstr(
                  "study " + std::to_string(study) +
                  " ('solves') cannot be joined as given: its trials were measured with clock "
                  "wall, max_it 10000, rtol 1e-08, this worker measures with clock wall, max_it "
                  "10000, rtol 0.001: give the options the study was made with (for petsc --rtol, "
                  "--max-it and --cpu-time) (or --create-study NAME for a new study)")));
  EXPECT_TRUE(server.store().trials(db::StudyId{study}).empty());
  options.max_trials = 1;
  EXPECT_EQ(cli::run_worker(tight, c, options).evaluated, 1u);
  // A GPU kernel's evaluator keeps none, and its studies are as before.
  ReplayEvaluator replay(measured_dataset("conv"), "generated.json");
  EXPECT_FALSE(cli::new_study_request(replay, "gpu", "replay-host").contains("measurement"));
}

TEST(Worker, AKilledWorkersLeaseEndsWithinMinutes) {
  testing::TestServer server;
  ReplayEvaluator reference(measured_dataset("conv"), "generated.json");
  auto c = server.client();
  const auto study = create_study(c, server.token, reference, 1);
  // Another client asks while the worker evaluates: with the study's whole budget leased to
  // the worker, the answer says when the worker's lease ends.
  AskingEvaluator evaluator(server, study, "other");
  // As `tunebase worker` without --lease: renewed every third of it while it evaluates, the
  // lease may be short, and a worker that is killed holds its configuration no longer.
  auto options = quiet_worker(study, server.token, "w1");
  EXPECT_EQ(cli::run_worker(evaluator, c, options).evaluated, 1u);
  ASSERT_TRUE(evaluator.answer_["suggestions"].empty()) << evaluator.answer_;
  ASSERT_TRUE(evaluator.answer_.contains("retry_after_seconds")) << evaluator.answer_;
  // (The lease's end is stored to the millisecond: a hair past 300 s.)
  EXPECT_LE(evaluator.answer_["retry_after_seconds"].get<double>(), 301.0);
  EXPECT_GT(evaluator.answer_["retry_after_seconds"].get<double>(), 200.0);
}

TEST(Worker, SaysThatADeadWorkersLeasesAreTakenUpByItsClientId) {
  testing::TestServer server;
  ReplayEvaluator evaluator(measured_dataset("conv"), "generated.json");
  auto c = server.client();
  const auto study = create_study(c, server.token, evaluator, 2);
  // A worker killed after it was given a configuration: its lease holds the rest of the budget.
  const auto dead = lease_one(c, server.token, study, "dead-worker", 300);
  ASSERT_EQ(dead.status, 200) << dead.body;
  auto options = quiet_worker(study, server.token, "w1");
  const auto summary = cli::run_worker(evaluator, c, options);
  EXPECT_EQ(summary.evaluated, 1u) << summary.stop_reason;
  EXPECT_THAT(summary.stop_reason, HasSubstr("more may come when the first live lease ends, in"));
  EXPECT_THAT(summary.stop_reason,
              HasSubstr("or, if the worker with client id \"dead-worker\" died, a worker started "
                        "with --client-id 'dead-worker' takes its leases up at once"));
  // As said: the dead worker's configuration is measured now, not in 300 s.
  auto heir = quiet_worker(study, server.token, "dead-worker");
  const auto taken_up = cli::run_worker(evaluator, c, heir);
  EXPECT_EQ(taken_up.evaluated, 1u) << taken_up.stop_reason;
  const auto trial = server.store().get_trial(
      db::TrialId{dead.json()["suggestions"][0]["trial_id"].get<std::int64_t>()});
  EXPECT_NE(trial.result.status, TrialStatus::pending);
  EXPECT_EQ(trial.client_id, "dead-worker");
}

}  // namespace
}  // namespace tunebase::api
