#include "apps/worker.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "apps/cli.h"
#include "apps/evaluators.h"
#include "apps/sweep.h"
#include "core/error.h"
#include "core/machine.h"
#include "db/json_text.h"

namespace tunebase::cli {

namespace {

// While a trial is evaluated, its lease is renewed every third of its length (POST
// /v1/trials/{id}/lease) on a connection of its own: an evaluation may take longer than the
// lease, and a worker that dies still gives its configuration back when the lease ends.
class LeaseKeeper {
 public:
  LeaseKeeper(const api::HttpClient& client, std::int64_t trial, const std::string& client_id,
              const WorkerOptions& options)
      : thread_([this, url = base_url(client), trial, client_id, &options] {
          const auto every = std::chrono::duration<double>(
              std::max(options.lease_seconds / 3.0, kMinRenewalSeconds));
          std::unique_lock lock(mutex_);
          while (!cv_.wait_for(lock, every, [this] { return stop_; })) {
            lock.unlock();
            const bool kept = renew(url, trial, client_id, options);
            lock.lock();
            if (!kept) {
              lost_ = true;
              return;
            }
          }
        }) {}
  ~LeaseKeeper() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  /// A renewal was refused: the lease ended, or was never this worker's.
  bool lost() const {
    std::lock_guard lock(mutex_);
    return lost_;
  }

 private:
  static constexpr double kMinRenewalSeconds = 0.05;

  static std::string base_url(const api::HttpClient& client) {
    const auto& host = client.host();
    return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(client.port());
  }
  // False when the server refused (409, 403, 404); a server that cannot be reached is asked
  // again at the next renewal (the lease may still hold).
  static bool renew(const std::string& url, std::int64_t trial, const std::string& client_id,
                    const WorkerOptions& options) {
    try {
      api::HttpClient client(url, std::chrono::seconds(10));
      const auto reply = client.post(
          "/v1/trials/" + std::to_string(trial) + "/lease",
          {{"client_id", client_id}, {"lease_seconds", options.lease_seconds}}, options.token);
      return reply.status < 400 || reply.status >= 500;
    } catch (const std::exception&) {
      return true;
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool lost_ = false;
  std::thread thread_;
};

// A result that cannot be delivered is retried this often, waiting kRetryDelay longer each time
// (the server may be restarting: about half a minute in all); the measurement is never dropped
// silently.
constexpr int kMaxAttempts = 8;
constexpr auto kRetryDelay = std::chrono::seconds(1);
constexpr auto kPollStep = std::chrono::milliseconds(100);
// An answer with no suggestion that is not done and says when to ask again (the rest of the
// budget is leased to other workers, or another server on the same database took what was
// proposed) is asked again at least this often, even with --patience 0: such a race is over
// by the next request.
constexpr int kMinRetriesWhenNotDone = 3;
// Longest wait between two requests for suggestions when none was given.
constexpr double kMaxPollSeconds = 5.0;
// Studies named when --study names none of the server's.
constexpr std::size_t kListedStudies = 10;

std::string default_client_id() { return host_name() + ":" + std::to_string(getpid()); }

/// Sleeps up to `seconds`, waking early on Ctrl-C.
void interruptible_sleep(double seconds) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(seconds));
  while (!g_interrupted && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(kPollStep);
  }
}

/// Sends a request (`send`), retrying when the server cannot be reached or is unavailable
/// (503); `resent` (when given) is set when it was sent more than once, and `waiting` (when
/// given) is printed before the first wait.
template <typename Send>
api::HttpReply send_with_retry(const Send& send, bool* resent = nullptr,
                               std::string_view waiting = {}) {
  for (int attempt = 1;; ++attempt) {
    if (resent && attempt > 1) *resent = true;
    try {
      auto reply = send();
      if (reply.status != 503 || attempt == kMaxAttempts) return reply;
    } catch (const IoError&) {
      if (attempt == kMaxAttempts) throw;
    }
    if (attempt == 1 && !waiting.empty()) std::cerr << "note: " << waiting << "\n";
    std::this_thread::sleep_for(kRetryDelay * attempt);
  }
}

api::HttpReply post_with_retry(api::HttpClient& client, const std::string& target,
                               const nlohmann::json& body, const std::string& token,
                               bool* resent = nullptr) {
  return send_with_retry([&] { return client.post(target, body, token); }, resent);
}

[[noreturn]] void fail_reply(const std::string& what, const api::HttpReply& reply) {
  const std::string message =
      what + " failed (HTTP " + std::to_string(reply.status) + "): " + reply.error_message();
  if (reply.status == 401 || reply.status == 403) throw Unauthorized(message);
  if (reply.status == 404) throw NotFound(message);
  if (reply.status == 409) throw Conflict(message);
  if (reply.status >= 400 && reply.status < 500) throw InvalidInput(message);
  throw Error(message);
}

/// The live leases of this client id in the study, as suggestions ({"trial_id", "config"}).
std::vector<nlohmann::json> own_pending_trials(api::HttpClient& client,
                                               const std::string& study_path,
                                               const std::string& client_id,
                                               const std::string& token) {
  std::vector<nlohmann::json> out;
  const auto reply = api::get_all_pages(
      client, study_path + "/trials?status=pending", "trials", token, [&](const nlohmann::json& t) {
        if (t.value("client_id", std::string()) == client_id) {
          out.push_back({{"trial_id", t["id"]}, {"config", t["config"]}});
        }
        return true;
      });
  if (reply.status != 200) out.clear();
  return out;
}

/// The client id of the live lease of the study that ends first; none when it cannot be read.
std::optional<std::string> first_lease_holder(api::HttpClient& client,
                                              const std::string& study_path,
                                              const std::string& token) {
  std::optional<std::string> holder;
  std::string first_end;
  // ISO 8601 times of one time zone, as the server gives them, sort as text.
  const auto keep_first = [&](const nlohmann::json& trial) {
    const auto ends = trial.find("lease_expires_at");
    if (ends == trial.end() || !ends->is_string()) return true;
    if (!holder || ends->get_ref<const std::string&>() < first_end) {
      first_end = ends->get<std::string>();
      holder = trial.value("client_id", std::string());
    }
    return true;
  };
  try {
    const auto reply = api::get_all_pages(client, study_path + "/trials?status=pending", "trials",
                                          token, keep_first);
    if (reply.status != 200) holder.reset();
  } catch (const std::exception&) {
    holder.reset();  // only a hint in the worker's summary
  }
  if (holder && holder->empty()) holder.reset();
  return holder;
}

nlohmann::json result_body(const Measurement& measured, const std::string& client_id) {
  const auto m = storable(measured);
  nlohmann::json body{{"client_id", client_id}, {"cost_seconds", m.cost_seconds}, {"raw", m.raw}};
  body["status"] = std::string(to_string(m.status));
  if (m.ok()) body["value"] = m.objective;
  if (!m.message.empty()) body["message"] = m.message;
  if (m.metrics.is_object()) body["metrics"] = m.metrics;
  return body;
}

/// The id of the study `study` names on the server: its id (digits; study names are never
/// digits only) or its name, as `tunebase sweep --study` takes it.
std::int64_t study_id_on_server(api::HttpClient& client, const std::string& study,
                                const std::string& token) {
  if (std::all_of(study.begin(), study.end(), [](unsigned char c) { return std::isdigit(c); })) {
    std::int64_t id = 0;
    const auto [end, error] = std::from_chars(study.data(), study.data() + study.size(), id);
    if (error != std::errc() || end != study.data() + study.size() || id <= 0) {
      throw InvalidInput("--study " + study + " is no study id: give a positive id or a name");
    }
    return id;
  }
  std::optional<std::int64_t> found;
  std::vector<std::string> names;
  const auto reply =
      api::get_all_pages(client, "/v1/studies", "studies", token, [&](const nlohmann::json& s) {
        names.push_back(s.value("name", std::string()));
        if (names.back() == study) found = s["id"].get<std::int64_t>();
        return !found;
      });
  if (found) return *found;
  if (reply.status != 200) fail_reply("listing the studies to find '" + study + "'", reply);
  std::string known;
  for (std::size_t i = 0; i < names.size() && i < kListedStudies; ++i) {
    known += (i ? ", '" : "'") + names[i] + "'";
  }
  if (names.size() > kListedStudies) known += ", ...";
  const auto similar = similar_machine_name(study, names);  // but for case, spaces, - and _
  throw NotFound("the server has no study named '" + study + "'" +
                 (!similar.empty() ? "; did you mean '" + similar + "'?"
                  : known.empty()  ? " (it has no study yet)"
                                   : " (its studies: " + known + "; GET /v1/studies lists all)") +
                 "; --create-study NAME creates one");
}

/// What is stored in place of a result the server refused as sent (HTTP 400: a negative time
/// in a study of times, say): a failed trial that carries the server's reason and what was
/// measured, so that nothing measured is lost and nobody measures the configuration again for
/// the same refusal.
Measurement refused_result(const Measurement& measured, const std::string& why) {
  std::string message = "the server refused the result as measured (" + why + ")";
  if (measured.ok()) message += "; measured " + db::format_number(measured.objective);
  if (!measured.message.empty()) message += "; " + measured.message;
  return storable(Measurement::failure(TrialStatus::failed, message, measured.cost_seconds));
}

}  // namespace

nlohmann::json new_study_request(const Evaluator& evaluator, const std::string& name,
                                 const std::string& machine) {
  nlohmann::json task = evaluator.task();
  nlohmann::json features = nlohmann::json::object();
  if (task.contains("features")) {
    features = task["features"];
    task.erase("features");
  }
  nlohmann::json body{{"name", name},
                      {"kernel", evaluator.kernel_name()},
                      {"space", evaluator.space().to_json()},
                      {"machine", machine},
                      {"task", task},
                      {"task_features", features},
                      {"direction", evaluator.minimize() ? "minimize" : "maximize"}};
  if (const auto unit = evaluator.objective_unit(); !unit.empty()) body["unit"] = unit;
  // Kept by the study, as a sweep's: workers that join later are checked against it, and
  // priors and the measured best take only studies measured alike.
  if (const auto measurement = evaluator.measurement_settings(); !measurement.empty()) {
    body["measurement"] = measurement;
  }
  return body;
}

WorkerSummary run_worker(Evaluator& evaluator, api::HttpClient& client,
                         const WorkerOptions& options) {
  const std::string study_path = "/v1/studies/" + std::to_string(options.study);
  // A worker started while its server restarts waits for it, as later requests do.
  const auto study_reply =
      send_with_retry([&] { return client.get(study_path, options.token); }, nullptr,
                      "the server does not answer yet; trying again for about " +
                          std::to_string(kMaxAttempts * (kMaxAttempts - 1) / 2) + " s");
  if (study_reply.status != 200)
    fail_reply("reading study " + std::to_string(options.study), study_reply);
  const auto study = study_reply.json();
  const auto kernel_name = study["kernel"]["name"].get<std::string>();
  const auto version = study["kernel"]["version"].get<std::string>();
  const auto& space = evaluator.space();
  if (kernel_name != evaluator.kernel_name() || version != space.fingerprint()) {
    throw InvalidInput("study " + std::to_string(options.study) + " tunes kernel \"" + kernel_name +
                       "\" (space " + version + "), but this worker's evaluator is \"" +
                       evaluator.kernel_name() + "\" (space " + space.fingerprint() +
                       "); start the worker with the evaluator options the study was created with");
  }
  // What the study's numbers mean: a result in another unit, or a rate stored in a study of
  // times, would be stored as a wrong number. An evaluator that names no unit (a command
  // without --unit prints a plain number) takes the study's.
  const bool study_minimizes = study.value("direction", std::string("minimize")) != "maximize";
  const auto study_unit =
      study.contains("unit") && study["unit"].is_string() ? study["unit"].get<std::string>() : "";
  const std::string unit =
      evaluator.objective_unit().empty() ? study_unit : evaluator.objective_unit();
  if (const auto differs =
          objective_mismatch(study_minimizes, study_unit, evaluator.minimize(), unit);
      !differs.empty()) {
    throw Conflict(
        "study " + std::to_string(options.study) + " ('" + study.value("name", std::string()) +
        "', which " + (study_minimizes ? "minimizes" : "maximizes") + " its objective" +
        (study_unit.empty() ? std::string() : " in " + study_unit) +
        ") cannot be joined as given: " + differs + " (or --create-study NAME for a new study)");
  }
  if (const auto differs = measurement_mismatch(study.value("settings", nlohmann::json::object()),
                                                evaluator, "worker");
      !differs.empty()) {
    throw Conflict("study " + std::to_string(options.study) + " ('" +
                   study.value("name", std::string()) + "') cannot be joined as given: " + differs +
                   " (or --create-study NAME for a new study)");
  }
  // The input is part of what a study measures (a command's includes its command line): results
  // of another input would be stored as this one's. A study created with no input description
  // says nothing to compare with.
  nlohmann::json task = evaluator.task();
  if (task.is_object()) task.erase("features");
  const auto study_task = study.value("task", nlohmann::json::object());
  if (!study_task.empty() && study_task != task) {
    throw InvalidInput("study " + std::to_string(options.study) + " measures the input " +
                       study_task.dump() + ", but this worker's evaluator measures " + task.dump() +
                       "; start the worker with the evaluator options (--cmd, --size, --matrix, "
                       "...) the study was created with, or create a study for this input");
  }
  // Measurements replayed from a file are the file's device's: stored in a study of a machine
  // registered as another device, they would pass for that machine's.
  if (const auto device = evaluator.measured_on(); device && !device->empty()) {
    const auto study_machine = study.value("machine", std::string());
    (void)api::get_all_pages(
        client, "/v1/machines", "machines", options.token, [&](const nlohmann::json& m) {
          if (m.value("name", std::string()) != study_machine) return true;
          const auto fingerprint = m.value("fingerprint", nlohmann::json::object());
          const auto registered = fingerprint.value("device_name", std::string());
          if (!registered.empty() && registered != *device) {
            throw InvalidInput("study " + std::to_string(options.study) + " is of machine " +
                               study_machine + " (device " + registered +
                               "), but the replayed file was measured on " + *device +
                               "; its times would be stored as " + study_machine +
                               "'s: create a study for that device (--create-study)");
          }
          return false;
        });
  }
  const std::string client_id = options.client_id.empty() ? default_client_id() : options.client_id;

  // Leases of this client id that this process takes up as its own: those from before it
  // started (a previous worker of this name that died, or a reply lost on the way) and, once a
  // suggestion request had to be resent, those whose reply may have been lost; as the server
  // gives a client its own live leases back (resumed: true). Not any other live lease of this
  // name: that may be another worker's, started with the same --client-id, and both would
  // evaluate its configuration; so it asks with resume_leases: false.
  std::set<std::int64_t> inherited;
  for (const auto& t : own_pending_trials(client, study_path, client_id, options.token)) {
    inherited.insert(t["trial_id"].get<std::int64_t>());
  }
  if (!inherited.empty()) {
    std::cerr << "warning: " << inherited.size() << " trial(s) of study " << options.study
              << " are leased to client id \"" << client_id
              << "\" already; this worker takes them up as its own, so if another worker runs "
                 "with this --client-id, give each worker its own\n";
  }
  bool resent_suggestion_request = false;

  WorkerSummary summary;
  auto waited_since = std::chrono::steady_clock::time_point{};
  int empty_answers = 0;  // in a row
  bool warned_about_lease = false;
  while (!g_interrupted) {
    if (options.max_trials && summary.evaluated >= options.max_trials) {
      summary.stop_reason = "evaluated --max-trials " + std::to_string(options.max_trials);
      break;
    }
    nlohmann::json answer;
    if (!inherited.empty()) {
      // Leases inherited from a worker of this name that died go first: they hold places in
      // the budget, and nobody else evaluates them until they end.
      for (const auto& mine : own_pending_trials(client, study_path, client_id, options.token)) {
        if (inherited.erase(mine["trial_id"].get<std::int64_t>())) {
          answer = {{"suggestions", nlohmann::json::array({mine})}};
          break;
        }
      }
      if (answer.is_null()) inherited.clear();  // they ended, or were reported, meanwhile
    }
    if (answer.is_null()) {
      const auto reply = post_with_retry(client, study_path + "/suggestions",
                                         {{"n", 1},
                                          {"client_id", client_id},
                                          {"lease_seconds", options.lease_seconds},
                                          {"resume_leases", false}},
                                         options.token, &resent_suggestion_request);
      if (reply.status != 200) fail_reply("asking for a suggestion", reply);
      answer = reply.json();
    }
    if (answer["suggestions"].empty() && !answer.value("done", false) &&
        resent_suggestion_request) {
      // A lease of ours whose reply never arrived holds a configuration nobody evaluates until
      // it expires: take it up.
      const auto mine = own_pending_trials(client, study_path, client_id, options.token);
      if (!mine.empty()) answer["suggestions"] = nlohmann::json::array({mine.front()});
    }
    const auto& suggestions = answer["suggestions"];
    if (suggestions.empty()) {
      const std::string reason = answer.value("reason", std::string("no suggestion"));
      const auto now = std::chrono::steady_clock::now();
      if (waited_since == std::chrono::steady_clock::time_point{}) waited_since = now;
      const double waited = std::chrono::duration<double>(now - waited_since).count();
      const bool retry_soon =
          answer.contains("retry_after_seconds") && ++empty_answers <= kMinRetriesWhenNotDone;
      if (answer.value("done", false) || (waited >= options.patience_seconds && !retry_soon)) {
        summary.stop_reason = reason;
        if (!answer.value("done", false) && answer.contains("retry_after_seconds")) {
          // Leases of other workers (perhaps dead ones) hold the rest of the budget.
          const auto wait = std::ceil(answer["retry_after_seconds"].get<double>());
          summary.stop_reason += "; more may come when the first live lease ends, in " +
                                 db::format_number(wait) + " s: --patience " +
                                 db::format_number(wait) + " waits for it";
          // A worker that was killed (SIGKILL, a lost machine) cannot give its leases back; one
          // started with its client id takes them up as its own at once.
          const auto holder = first_lease_holder(client, study_path, options.token);
          summary.stop_reason +=
              holder ? ", or, if the worker with client id \"" + *holder +
                           "\" died, a worker started with --client-id '" + *holder +
                           "' takes its leases up at once"
                     : ", or, if their worker died, a worker started with its --client-id "
                       "takes its leases up at once";
        }
        break;
      }
      // The server's hint is when the first live lease ends (up to an hour); a release or the
      // patience limit may come sooner. Past the patience, the few answers asked again (a race
      // with another server) come a second apart.
      const double hint = answer.value("retry_after_seconds", 1.0);
      const double patience_left = options.patience_seconds - waited;
      interruptible_sleep(patience_left > 0.0
                              ? std::min({hint, kMaxPollSeconds, std::max(patience_left, 1.0)})
                              : std::min(hint, 1.0));
      continue;
    }
    waited_since = {};
    empty_answers = 0;
    const auto& suggestion = suggestions.front();
    const auto trial_id = suggestion["trial_id"].get<std::int64_t>();
    const auto config = space.config_from_json(suggestion["config"]);
    Measurement m;
    const auto evaluation_start = std::chrono::steady_clock::now();
    bool lease_lost = false;
    // The lease goes back at once, so that other workers measure the configuration instead of
    // waiting for the lease to end.
    const auto release = [&] {
      try {
        (void)client.post("/v1/trials/" + std::to_string(trial_id) + "/release",
                          {{"client_id", client_id}}, options.token);
      } catch (const std::exception&) {
        // The server is away: the lease ends by itself.
      }
    };
    try {
      const LeaseKeeper keeper(client, trial_id, client_id, options);
      m = evaluator.evaluate(config);
      lease_lost = keeper.lost();
    } catch (const BackendError& e) {
      m = Measurement::failure(TrialStatus::failed, e.what());
    } catch (const EvaluationInterrupted& e) {
      // Stopped with the worker (g_interrupted is set): no result, and no failure of the
      // configuration.
      release();
      std::cerr << "note: " << e.what() << "; trial " << trial_id << " is given back\n";
      break;
    } catch (const EvaluatorUnavailable&) {
      // The evaluator cannot run at all (its set-up failed). (Any other error keeps the lease
      // until it ends: a configuration that breaks the evaluator must not go from worker to
      // worker at once.)
      release();
      throw;
    }
    const double evaluation_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - evaluation_start).count();
    if (lease_lost && !warned_about_lease) {
      // Its configuration may have gone to another worker meanwhile: one of the two measured
      // it for nothing. Said once, not for every trial.
      warned_about_lease = true;
      std::cerr << "warning: the lease of trial " << trial_id << " ended while it was evaluated ("
                << evaluation_seconds << " s; renewed every " << options.lease_seconds / 3.0
                << " s for " << options.lease_seconds
                << " s more): its configuration may have been given to another worker\n";
    }
    const std::string trial_path = "/v1/trials/" + std::to_string(trial_id);
    const auto body = result_body(m, client_id);
    // What to send again by hand when the server stays away: the measurement is not lost.
    const auto undelivered_text = [&](const std::string& why) {
      return "the result of trial " + std::to_string(trial_id) + " " + space.config_text(config) +
             " was not delivered: " + why + "; to store it, POST to the server's " + trial_path +
             "/result the body " + db::json_text(body);
    };
    const auto undelivered = [&](const std::string& why) { return IoError(undelivered_text(why)); };
    const auto deliver = [&](const nlohmann::json& result) {
      try {
        return post_with_retry(client, trial_path + "/result", result, options.token);
      } catch (const IoError& e) {
        throw undelivered(e.what());
      }
    };
    auto told = deliver(body);
    if (told.status == 400) {
      // Left leased, the configuration would wait for the lease to end, then be measured and
      // refused again by the next worker.
      const auto why = told.error_message();
      m = refused_result(m, why);
      told = deliver(result_body(m, client_id));
      std::cerr << "warning: the server refused the result of trial " << trial_id << " "
                << space.config_text(config) << ": " << why
                << (told.status == 200 ? "; it is stored as a failed trial with that message\n"
                                       : "; its lease is given back\n");
      if (told.status == 400) release();
    }
    if (told.status >= 500) {
      throw undelivered("HTTP " + std::to_string(told.status) + ": " + told.error_message());
    }
    if (told.status == 401) {
      // The token was revoked while the worker measured: the measurement itself is sound.
      throw Unauthorized(undelivered_text("HTTP 401: " + told.error_message()) +
                         " with a valid token");
    }
    if (told.status == 409) {
      // Either a resend after a lost reply (the first send was stored: nothing to do), or the
      // lease expired and the configuration went to another client: the result is refused,
      // and the worker goes on with the next suggestion.
      const auto reply_now = client.get(trial_path, options.token);
      const auto stored = reply_now.status == 200 ? reply_now.json() : nlohmann::json::object();
      const bool ours = stored.contains("finished_at") && !stored["finished_at"].is_null() &&
                        stored.value("client_id", std::string()) == client_id;
      if (!ours) {
        std::cerr << "warning: the result of trial " << trial_id
                  << " was not stored: " << told.error_message() << "\n";
        ++summary.refused;
        continue;
      }
    } else if (told.status != 200) {
      fail_reply("reporting the result of trial " + std::to_string(trial_id), told);
    }
    ++summary.evaluated;
    if (!m.ok()) {
      ++summary.failed;
      summary.last_failure = m.message;
    }
    if (!options.quiet) {
      std::cerr << "trial " << trial_id << " " << space.config_text(config) << " -> "
                << (m.ok() ? format_objective(m.objective, unit)
                           : std::string(to_string(m.status)) + " (" + m.message + ")")
                << "\n";
    }
  }
  summary.interrupted = g_interrupted;
  if (summary.interrupted) summary.stop_reason = "interrupted";
  return summary;
}

void add_worker_command(CLI::App& app) {
  struct Args {
    EvaluatorSpec spec;
    WorkerOptions worker;
    std::string server = "http://127.0.0.1:8080";
    std::string study, create_study, machine, strategy;
    std::int64_t budget = 0;
    std::int64_t seed = -1;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "worker", "Ask a tunebase server for configurations, evaluate them here, report results");
  add_evaluator_options(*cmd, args->spec);
  // A worker on a study with a unit reads its command's number in that unit (run_worker).
  cmd->get_option("--unit")->description(
      "Unit of the number the command prints: s, ms, us or ns (shown as times) or a label such "
      "as GFLOP/s; it must be the study's (default: the study's unit; none with "
      "--create-study, a plain number)");
  cmd->add_option("--server", args->server, "Server URL, http://HOST:PORT")->capture_default_str();
  cmd->add_option("--study", args->study, "Study to work on: its id or its name");
  cmd->add_option("--token", args->worker.token,
                  "API token (default: $TUNEBASE_TOKEN); see `tunebase token create`");
  cmd->add_option("--client-id", args->worker.client_id,
                  "Name of this worker, unique per worker (default host:pid); a worker takes up "
                  "leases of its name left from before it started");
  cmd->add_option("--lease", args->worker.lease_seconds,
                  "Seconds a suggestion is reserved for this worker, renewed every third of "
                  "that while it is evaluated: a worker that is killed gives it back when it "
                  "ends, or at once to a worker started with its --client-id")
      ->check(CLI::Range(0.001, 604800.0))
      ->capture_default_str();
  cmd->add_option("--max-trials", args->worker.max_trials, "Stop after this many trials")
      ->check(CLI::Range(std::size_t{1}, kMaxBudget));
  cmd->add_option("--patience", args->worker.patience_seconds,
                  "Seconds to wait for leases of other workers to come back before stopping "
                  "(an answer that is not final is asked again " +
                      std::to_string(kMinRetriesWhenNotDone) + " times in any case)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--create-study", args->create_study,
                  "Create a study with this name for the evaluator's kernel and work on it "
                  "(prints its id for more workers)");
  auto* machine = cmd->add_option("--machine", args->machine,
                                  "With --create-study: machine name (default host)");
  auto* strategy = cmd->add_option(
      "--strategy", args->strategy,
      "With --create-study: search strategy (default: the server's, bo-transfer when other "
      "machines or inputs measured the kernel, else bo)");
  auto* budget =
      cmd->add_option(
             "--budget", args->budget,
             "With --create-study: number of evaluations (default: none, the study runs until "
             "every configuration is measured or the workers stop)")
          ->check(CLI::Range(std::int64_t{1}, static_cast<std::int64_t>(kMaxBudget)));
  auto* seed = cmd->add_option("--seed", args->seed, "With --create-study: random seed")
                   ->check(CLI::Range(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()));
  // A study that exists has its own; given with --study they would be silently ignored.
  for (auto* option : {machine, strategy, budget, seed}) option->needs("--create-study");
  cmd->add_flag("--quiet,-q", args->worker.quiet, "Print only the summary");
  cmd->callback([args] {
    install_interrupt_handler();
    if (args->worker.token.empty()) {
      if (const char* t = std::getenv("TUNEBASE_TOKEN")) args->worker.token = t;
    }
    if (args->study.empty() && args->create_study.empty()) {
      throw InvalidInput("worker needs --study ID or NAME (or --create-study NAME)");
    }
    auto evaluator = make_evaluator(args->spec);
    api::HttpClient client(args->server);
    if (args->create_study.empty()) {
      args->worker.study = study_id_on_server(client, args->study, args->worker.token);
    }
    if (!args->create_study.empty()) {
      const MachineInfo info = results_machine(*evaluator, args->machine);
      const auto m =
          client.post("/v1/machines", {{"name", info.name}, {"fingerprint", info.fingerprint}},
                      args->worker.token);
      if (m.status != 201 && m.status != 200) fail_reply("registering machine " + info.name, m);
      auto body = new_study_request(*evaluator, args->create_study, info.name);
      if (!args->strategy.empty()) body["strategy"] = args->strategy;
      if (args->budget > 0) body["budget"] = args->budget;
      if (args->seed >= 0) body["seed"] = args->seed;
      const auto s = client.post("/v1/studies", body, args->worker.token);
      // Workers started together with one --create-study: the first makes it, the others
      // join it (run_worker checks that it tunes what this worker evaluates).
      const auto existing = [&]() -> std::optional<std::int64_t> {
        if (s.status != 409) return std::nullopt;
        const auto j = nlohmann::json::parse(s.body, nullptr, false);
        const auto id = j.is_object() ? j.value("error", nlohmann::json::object())
                                            .value("existing_study_id", nlohmann::json())
                                      : nlohmann::json();
        if (!id.is_number_integer()) return std::nullopt;
        return id.get<std::int64_t>();
      }();
      if (s.status != 201 && !existing) fail_reply("creating study " + args->create_study, s);
      args->worker.study = existing ? *existing : s.json()["id"].get<std::int64_t>();
      std::cout << (existing ? "joined study " : "created study ") << args->worker.study << " ("
                << args->create_study << (existing ? ", which was made already" : "") << ")\n"
                << std::flush;
      // The server searches the space; the evaluator answers only what its file holds.
      const auto* answered = evaluator->candidates();
      const auto valid = evaluator->space().valid_count();
      if (answered && valid && *valid > answered->size()) {
        std::cerr << "note: the server searches the file's whole space (" << *valid
                  << " configurations), of which the file holds " << answered->size()
                  << "; the others are failed trials here, as in Kernel Tuner's simulation mode "
                     "(tunebase sweep --kernel replay and tunebase benchmark search only the "
                     "file's entries)\n";
      }
    }
    const auto summary = run_worker(*evaluator, client, args->worker);
    std::cout << "worker: " << summary.evaluated << " trials evaluated (" << summary.failed
              << " failed"
              << (summary.refused ? ", " + std::to_string(summary.refused) +
                                        " results refused after their lease expired"
                                  : std::string())
              << "); stopped: " << summary.stop_reason << "\n";
    // As for a sweep: every evaluation failing is a problem with the set-up more often than
    // with the space, and a script must not take it for work done.
    if (summary.evaluated > 0 && summary.failed == summary.evaluated && !summary.interrupted) {
      throw Error("none of the " + std::to_string(summary.evaluated) +
                  " trials this worker evaluated succeeded (the last: " +
                  one_line(summary.last_failure) + "); GET /v1/studies/" +
                  std::to_string(args->worker.study) + "/trials shows every message");
    }
  });
}

}  // namespace tunebase::cli
