#include "api/study_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <unordered_set>

#include "api/errors.h"
#include "api/records_json.h"
#include "core/error.h"
#include "db/json_text.h"
#include "tuner/session.h"

namespace tunebase::api {

namespace {

// "value 3.5", "failed: out of memory": a result in a conflict's message.
std::string result_text(const Measurement& m) {
  if (m.ok()) {
    std::string text = "value " + db::format_number(m.objective);
    if (!m.raw.empty()) {
      text += ", raw [";
      for (std::size_t i = 0; i < m.raw.size(); ++i) {
        text += (i ? ", " : "") + db::format_number(m.raw[i]);
      }
      text += "]";
    }
    return text;
  }
  return std::string(to_string(m.status)) + (m.message.empty() ? "" : ": " + m.message);
}

using Clock = std::chrono::system_clock;

// "; of them, trials 5, 6 are client "w1"'s own (given back in this answer, ...)": which of the
// live leases that fill a budget are the asking client's.
std::string own_leases_text(const std::vector<db::TrialId>& own, const std::string& client_id) {
  if (own.empty()) return {};
  std::string ids;
  for (const auto trial : own) ids += (ids.empty() ? "" : ", ") + std::to_string(trial.value);
  return "; of them, " + std::string(own.size() == 1 ? "trial " : "trials ") + ids +
         (own.size() == 1 ? " is" : " are") + " client \"" + client_id +
         "\"'s own (given back in this answer, resumed: true)";
}

// The Store stamps a lease with its own clock, a little after ours and truncated to
// milliseconds; counting a lease as ended this much later than the Store does guarantees that
// the Store has expired it before a session proposes its configuration again.
constexpr auto kLeaseSlack = std::chrono::milliseconds(10);
// Leases that ended before this manager started (its server was down, or restarting) stay
// this long after it: their workers' results and renewals, retried meanwhile (a worker retries
// for about half a minute), come in before their configurations are handed out again.
constexpr auto kRestartGrace = std::chrono::seconds(30);

// A GP fit costs O(n^3); predictions for studies with more results than this (imported
// datasets) use a random subset, seeded by the study id.
constexpr std::size_t kMaxModelObservations = 1000;

// How often one suggestion request proposes again when the Store refuses leases (another
// process took the configurations first): a few, since each round reads the Store anew.
constexpr int kMaxLeaseAttempts = 3;

// What a session's strategy did last, for clients: strategy, phase, priors and their weights.
nlohmann::json model_summary(const Session& session) {
  const auto d = session.diagnostics();
  nlohmann::json out{{"strategy", d.value("strategy", session.options().strategy)},
                     {"priors", session.priors().size()}};
  if (d.contains("phase")) out["phase"] = d["phase"];
  if (d.contains("rgpe_weights")) out["weights"] = d["rgpe_weights"];
  return out;
}

// A result's value, or a repeat, below zero.
bool has_negative(const Measurement& m) {
  return (m.ok() && m.objective < 0) ||
         std::any_of(m.raw.begin(), m.raw.end(), [](double t) { return t < 0; });
}

// A study whose values are times takes no negative one: FieldError at `field` + "value" or
// "raw" (`field`: "" for a result, "measurements[i]." for an outside measurement).
void check_time_not_negative(const Measurement& m, const db::StudyRecord& study,
                             const std::string& field) {
  if (!has_negative(m)) return;
  const auto unit = db::objective_unit(study);
  if (!is_time_unit(unit)) return;
  const bool value = m.ok() && m.objective < 0;
  throw FieldError(field + (value ? "value" : "raw"),
                   "a time cannot be negative (study " + std::to_string(study.id.value) +
                       " measures times in " + unit + ")" +
                       (value ? ", got " + db::format_number(m.objective) : std::string()));
}

}  // namespace

struct StudyManager::Entry {
  struct PendingLease {
    std::string key;
    Configuration config;
    std::string client_id;
    Clock::time_point expires;
  };
  /// What the session has not taken in yet: a result, a release (an expired lease), or a
  /// hold (a lease made by another process sharing the database).
  struct Event {
    Configuration config;
    std::optional<Measurement> result;
    bool hold = false;
  };

  db::StudyRecord record;
  std::shared_ptr<const SearchSpace> space;

  // Held while proposing or predicting (seconds for a large study).
  std::mutex session_mutex;
  std::unique_ptr<Session> session;
  std::unique_ptr<SearchStrategy> predictor;

  // Held for bookkeeping only, never while a model is fitted.
  mutable std::mutex state_mutex;
  /// Set when the session's build starts reading the study's trials: from then on what
  /// happens to the study is queued in `inbox` for it. Before, nothing is queued (the build
  /// reads it from the Store), so that a study nobody asks for suggestions does not collect
  /// every result it is sent.
  bool session_starting = false;
  std::unordered_map<std::int64_t, PendingLease> pending;
  /// pending.size() when /metrics last could look (it does not wait for state_mutex).
  std::atomic<std::size_t> pending_seen{0};
  /// config_key -> trial id of every configuration with a stored result.
  std::unordered_map<std::string, std::int64_t> finished;
  std::vector<Event> inbox;
  /// Store::data_version when the entry last read the study; another value means another
  /// process wrote to the database since.
  std::optional<std::int64_t> synced_version;
  /// Bumped whenever `finished` gains a result: what with_model's observations depend on.
  std::uint64_t results_version = 0;

  // Held with the session lock. A study that is not active answers model questions from a
  // subsample of its results, read from the Store (seconds for an import of 300,000): kept
  // while results_version stays, so that repeated questions neither read every trial again
  // nor fit the model again (its fit is kept for the same observations).
  std::optional<std::uint64_t> observed_version;
  std::vector<Observation> observed;

  // The priors the session was built on, to know when they moved (Store::prior_counts); no
  // query when the study takes none. Read under session_mutex.
  std::optional<db::PriorQuery> prior_query;
  std::vector<db::PriorCount> prior_counts;
  /// When prior_counts were last compared with the Store, and its (data_version,
  /// changes_made) then: nothing written since, nothing to compare.
  Clock::time_point priors_checked_at;
  std::pair<std::int64_t, std::int64_t> priors_checked_version{-1, -1};
  std::uint64_t imports_seen = 0;  ///< StudyManager::imports_ then
};

namespace {

// At most kMaxModelObservations of `observations`, a random subset seeded by the study.
void subsample(std::vector<Observation>& observations, db::StudyId study) {
  if (observations.size() <= kMaxModelObservations) return;
  Rng rng(static_cast<std::uint64_t>(study.value));
  std::shuffle(observations.begin(), observations.end(), rng);
  observations.resize(kMaxModelObservations);
}

}  // namespace

StudyManager::StudyManager(db::Store& store) : store_(store) { load_fitted_models(store_); }
StudyManager::~StudyManager() = default;

std::shared_ptr<StudyManager::Entry> StudyManager::find_loaded(db::StudyId study) const {
  std::lock_guard lock(mutex_);
  auto it = studies_.find(study.value);
  return it == studies_.end() ? nullptr : it->second;
}

// Loading under mutex_ orders it with report(): a result stored before the trials are read is
// among them, one stored after finds the entry and is queued (both at once is harmless:
// sessions ignore a result they already have).
void StudyManager::forget_all_if_a_study_went() {
  const auto version = store_.data_version();
  if (ids_seen_at_ == version) return;
  auto ids = store_.study_ids();
  const bool went = std::any_of(study_ids_.begin(), study_ids_.end(), [&](db::StudyId id) {
    return !std::binary_search(ids.begin(), ids.end(), id,
                               [](db::StudyId a, db::StudyId b) { return a.value < b.value; });
  });
  if (went && !studies_.empty()) {
    spdlog::info("a study was deleted by another process: loaded studies are read again");
    studies_.clear();
  }
  study_ids_ = std::move(ids);
  ids_seen_at_ = version;
}

std::shared_ptr<StudyManager::Entry> StudyManager::load(db::StudyId study) {
  std::lock_guard lock(mutex_);
  forget_all_if_a_study_went();
  if (auto it = studies_.find(study.value); it != studies_.end()) return it->second;
  auto entry = std::make_shared<Entry>();
  entry->record = store_.get_study(study);
  const auto kernel = store_.get_kernel(entry->record.kernel_id);
  entry->space = std::make_shared<const SearchSpace>(SearchSpace::from_json(kernel.space));
  sync_with_store(*entry);
  studies_.emplace(study.value, entry);
  return entry;
}

// The Store is the truth, and other processes (a CLI sweep, a second server) may write to it.
// When they did, the study's status, budget, results, leases and expiries are read again: a
// session not built yet starts from them; a running one is sent what it did not know. Holding
// the state lock while reading orders this with report_all and add_measurements_all (they
// take it after their writes), so nothing is missed; what is seen twice is ignored.
void StudyManager::sync_with_store(Entry& entry) {
  const auto version = store_.data_version();
  if (entry.synced_version == version) return;
  const auto id = entry.record.id;
  const auto record = store_.get_study(id);
  std::lock_guard lock(entry.state_mutex);
  auto trials = store_.trials(id);
  entry.synced_version = version;
  entry.record.status = record.status;
  entry.record.budget = record.budget;
  const bool running = entry.session_starting;
  for (const auto& t : trials) {
    const auto lease = entry.pending.find(t.id.value);
    if (t.finished_at) {
      if (lease != entry.pending.end()) entry.pending.erase(lease);
      if (entry.finished.count(t.config_key)) continue;
      entry.finished[t.config_key] = t.id.value;
      ++entry.results_version;
    } else if (t.result.status == TrialStatus::pending) {
      if (lease != entry.pending.end() || !t.lease_expires_at) continue;
    } else {
      // An expired lease: its configuration may be proposed again.
      if (lease == entry.pending.end()) continue;
      if (running) entry.inbox.push_back({std::move(lease->second.config), std::nullopt});
      entry.pending.erase(lease);
      continue;
    }
    Configuration config;
    try {
      config = entry.space->config_from_json(t.config);
    } catch (const InvalidInput& e) {
      spdlog::warn("study {}: trial {} is not valid in its space, left out: {}", id.value,
                   t.id.value, e.what());
      continue;
    }
    if (t.finished_at) {
      if (running) entry.inbox.push_back({std::move(config), t.result});
      continue;
    }
    if (running) entry.inbox.push_back({config, std::nullopt, /*hold=*/true});
    const auto ends = db::parse_timestamp(*t.lease_expires_at);
    entry.pending[t.id.value] = {t.config_key, std::move(config), t.client_id,
                                 ends < started_
                                     ? std::max(ends + kLeaseSlack, started_ + kRestartGrace)
                                     : ends + kLeaseSlack};
  }
}

void StudyManager::ensure_session(Entry& entry) {
  if (entry.session && priors_moved(entry)) {
    spdlog::info(
        "study {}: other machines or tasks measured more since its priors were read: "
        "its session is built again on them",
        entry.record.id.value);
    // What the old session had not taken in is in the Store, which the new one reads; what
    // is stored from now on is queued for it.
    std::lock_guard lock(entry.state_mutex);
    entry.inbox.clear();
    entry.session.reset();
  }
  if (entry.session) return;
  {
    std::lock_guard lock(entry.state_mutex);
    entry.session_starting = true;
  }
  try {
    build_session(entry);
  } catch (...) {
    std::lock_guard lock(entry.state_mutex);
    entry.session_starting = false;
    entry.inbox.clear();
    throw;
  }
}

// The trials are read after session_starting is set: a result stored before the read is among
// them, one stored after is queued as well (a session ignores what it already has).
void StudyManager::build_session(Entry& entry) {
  const auto& record = entry.record;
  SessionOptions options;
  options.strategy = record.strategy;
  options.seed = static_cast<std::uint64_t>(
      record.settings.value("seed", static_cast<std::int64_t>(record.id.value)));
  if (record.settings.contains("strategy_options")) {
    options.strategy_options = record.settings["strategy_options"];
  }
  options.budget =
      record.budget ? static_cast<std::size_t>(*record.budget) : kUnlimitedBudgetDesign;
  options.minimize = record.direction == db::Direction::minimize;
  // A strategy left to its default follows the priors there are now ("auto").
  if (record.settings.value("strategy_default", false)) options.strategy = "auto";
  // Those of a strategy that ignores them are neither read nor watched.
  entry.prior_query = options.strategy == "auto" || learns_from_priors(options.strategy)
                          ? study_prior_query(record)
                          : std::nullopt;
  if (entry.prior_query) {
    // Counted before the priors are read: a trial stored in between is a change to see later.
    note_priors_checked(entry, store_version());
    entry.prior_counts = store_.prior_counts(*entry.prior_query);
    options.priors = priors_from_store(store_, *entry.space, *entry.prior_query);
  }
  options.task_features = task_features_of(store_.get_task(record.task_id));
  if (!options.priors.empty()) {
    spdlog::info("study {}: {} priors from other machines and tasks", record.id.value,
                 options.priors.size());
  }
  auto session = std::make_unique<Session>(*entry.space, options);
  // Stored, so that the study says what searches it; a reader (tunebase trials) only uses it.
  if (const auto& used = session->options().strategy;
      used != record.strategy && !store_.read_only()) {
    spdlog::info("study {}: strategy {} (was {}): its priors changed", record.id.value, used,
                 record.strategy);
    store_.set_study_strategy(record.id, used);
    entry.record.strategy = used;
  }

  std::vector<Observation> finished;
  std::vector<Configuration> pending;
  for (const auto& t : store_.trials(record.id)) {
    if (!t.finished_at && t.result.status != TrialStatus::pending) continue;  // expired lease
    try {
      auto config = entry.space->config_from_json(t.config);
      if (t.finished_at) {
        finished.push_back({std::move(config), t.result});
      } else {
        pending.push_back(std::move(config));
      }
    } catch (const InvalidInput& e) {
      spdlog::warn("study {}: trial {} is not valid in its space, left out: {}", record.id.value,
                   t.id.value, e.what());
    }
  }
  session->restore(finished, pending);
  entry.session = std::move(session);
}

std::pair<std::int64_t, std::int64_t> StudyManager::store_version() const {
  return {store_.data_version(), store_.changes_made()};
}

void StudyManager::note_priors_checked(Entry& entry,
                                       std::pair<std::int64_t, std::int64_t> version) const {
  entry.priors_checked_at = Clock::now();
  entry.priors_checked_version = version;
  entry.imports_seen = imports_.load();
}

// Whether the session's priors are worth building it again for: a machine or task with a
// success that it did not have, or half as many successes again as it had (so that a study
// whose priors grow while it runs is built again a logarithmic number of times). Asked at
// most once per priors_recheck_ while the database changes, and after an import here.
bool StudyManager::priors_moved(Entry& entry) const {
  if (!entry.prior_query) return false;
  const bool imported = entry.imports_seen != imports_.load();
  if (!imported && Clock::now() - entry.priors_checked_at < priors_recheck_) return false;
  const auto version = store_version();
  if (version == entry.priors_checked_version) return false;
  note_priors_checked(entry, version);
  const auto counts = store_.prior_counts(*entry.prior_query);
  std::size_t before = 0;
  std::size_t after = 0;
  for (const auto& c : entry.prior_counts) before += c.ok;
  for (const auto& c : counts) {
    after += c.ok;
    if (c.ok == 0) continue;
    const bool known = std::any_of(
        entry.prior_counts.begin(), entry.prior_counts.end(), [&](const db::PriorCount& b) {
          return b.ok > 0 && b.machine_name == c.machine_name && b.task.value == c.task.value;
        });
    if (!known) return true;
  }
  return 2 * after >= 3 * before && after > before;
}

void StudyManager::take_in_events(Entry& entry) {
  std::vector<Entry::Event> events;
  {
    std::lock_guard lock(entry.state_mutex);
    events.swap(entry.inbox);
  }
  for (auto& e : events) {
    if (e.hold) {
      entry.session->hold(e.config);
      continue;
    }
    if (!e.result) {
      entry.session->release(e.config);
      continue;
    }
    try {
      entry.session->observe(e.config, *e.result);
    } catch (const Conflict&) {
      // Already known: read from the Store when the entry caught up with it.
    }
  }
}

std::size_t StudyManager::release_expired(Entry& entry, Clock::time_point now) {
  {
    std::lock_guard lock(entry.state_mutex);
    const bool any = std::any_of(entry.pending.begin(), entry.pending.end(),
                                 [&](const auto& p) { return p.second.expires < now; });
    if (!any) return 0;
  }
  // The Store first: a released configuration may be leased again at once, and the Store
  // allows one pending lease per configuration.
  const auto expired = store_.expire_leases(now, spared_before(now));
  std::size_t released = 0;
  std::lock_guard lock(entry.state_mutex);
  for (auto it = entry.pending.begin(); it != entry.pending.end();) {
    if (it->second.expires < now) {
      if (entry.session_starting)
        entry.inbox.push_back({std::move(it->second.config), std::nullopt});
      it = entry.pending.erase(it);
      ++released;
    } else {
      ++it;
    }
  }
  (void)expired;
  return released;
}

StudyManager::Suggestions StudyManager::suggest(db::StudyId study, std::size_t n,
                                                const std::string& client_id, double lease_seconds,
                                                bool resume) {
  auto entry = load(study);
  Suggestions out;
  std::lock_guard session_lock(entry->session_mutex);
  sync_with_store(*entry);
  if (entry->record.status != db::StudyStatus::active) {
    out.done = true;
    out.reason = "study " + std::to_string(study.value) + " is " +
                 std::string(db::to_string(entry->record.status)) +
                 "; it takes no more trials (results of live leases are still taken: GET "
                 "/v1/studies/" +
                 std::to_string(study.value) + "/trials?client_id=" + client_id +
                 "&status=pending lists this client's)";
    return out;
  }
  ensure_session(*entry);
  release_expired(*entry, Clock::now());
  take_in_events(*entry);
  auto& session = *entry->session;

  const auto own = resume ? resume_own_leases(*entry, n, client_id, lease_seconds, out.leases)
                          : std::vector<db::TrialId>{};
  if (out.leases.size() == n) return out;
  const std::size_t wanted = n - out.leases.size();

  // How many more configurations the budget allows: what is not measured or leased.
  const auto room = [&]() -> std::optional<std::size_t> {
    const auto budget = entry->record.budget;
    if (!budget) return std::nullopt;
    const auto limit = static_cast<std::size_t>(*budget);
    const std::size_t taken = session.observations().size() + session.pending_count();
    return taken >= limit ? 0 : limit - taken;
  };
  std::size_t allowed = wanted;
  std::size_t allowed_by_budget = wanted;  // 0: live leases hold the rest of the budget
  if (const auto budget = entry->record.budget) {
    const auto limit = static_cast<std::size_t>(*budget);
    if (session.observations().size() >= limit) {
      // Done once nothing is left to this client: leases given back still take their results.
      out.done = out.leases.empty();
      out.reason = "the budget of " + std::to_string(limit) + " evaluations is spent" +
                   (out.leases.empty() ? std::string()
                                       : "; the live leases given back here still take their "
                                         "results");
      if (session.pending_count() == 0 && store_.complete_if_spent(study)) {
        entry->record.status = db::StudyStatus::completed;
      }
      return out;
    }
    if (const auto left = *room(); left < wanted) {
      allowed = left;
      allowed_by_budget = left;
      out.reason = "the budget of " + std::to_string(limit) + " evaluations has room for " +
                   std::to_string(left) + " more beside " +
                   std::to_string(session.observations().size()) + " results and " +
                   std::to_string(session.pending_count()) + " live leases" +
                   own_leases_text(own, client_id);
    }
  }

  const auto& space = *entry->space;
  std::size_t refused = 0;
  bool over_budget = false;
  for (int attempt = 1; allowed > 0; ++attempt) {
    const auto start = std::chrono::steady_clock::now();
    auto configs = session.propose(allowed);
    out.propose_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    save_fitted_models(store_);
    out.model = model_summary(session);
    if (configs.size() < allowed) {
      if (session.exhausted()) {
        out.done = configs.empty() && session.pending_count() == 0;
        out.reason = "every candidate configuration is measured or leased";
        if (out.done) {
          // Nothing is left to measure: the study is over, as one whose budget is spent.
          store_.set_study_status(study, db::StudyStatus::completed);
          entry->record.status = db::StudyStatus::completed;
          out.reason = "every candidate configuration is measured";
        }
      } else {
        // A space too large to enumerate is sampled: where its constraints allow few points,
        // the draws of one request may find fewer than asked for.
        out.reason = (configs.empty() ? std::string("the strategy found no new configuration")
                                      : "the strategy found " + std::to_string(configs.size()) +
                                            " new configurations of the " +
                                            std::to_string(allowed) + " asked for") +
                     (session.candidate_count()
                          ? std::string()
                          : " in the draws of this request (this space is sampled, and its "
                            "constraints allow few of its points); ask again");
      }
    }

    std::vector<db::Store::LeaseRequest> requests;
    for (const auto& config : configs)
      requests.push_back({space.config_to_json(config), space.key(config)});
    std::vector<db::Store::LeaseOutcome> leased;
    try {
      leased = store_.add_pending_trials(study, requests, client_id, lease_seconds);
    } catch (...) {
      // Nothing was leased: the session may propose them again.
      for (const auto& config : configs) session.release(config);
      throw;
    }
    std::size_t refused_now = 0;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      if (leased[i].over_budget) {
        // Another process filled the budget since `room` counted it: this one is still free.
        session.release(configs[i]);
        over_budget = true;
        continue;
      }
      if (!leased[i].trial) {
        // Taken meanwhile (a measurement added at the same moment, or another process sharing
        // the database): the session keeps it as taken and learns its fate from the Store.
        ++refused_now;
        continue;
      }
      const auto id = *leased[i].trial;
      const auto expires = leased[i].expires;
      {
        std::lock_guard lock(entry->state_mutex);
        entry->pending[id.value] = {requests[i].config_key, configs[i], client_id,
                                    expires + kLeaseSlack};
      }
      out.leases.push_back({id, std::move(requests[i].config), db::format_timestamp(expires)});
    }
    refused += refused_now;
    if (refused_now == 0 || over_budget || attempt == kMaxLeaseAttempts) break;
    // Another process leased or measured what this session did not know of yet (its writes
    // came after the session last read the Store): read it now and propose in their place,
    // so that a client is not sent away empty-handed while configurations are free.
    entry->synced_version.reset();
    sync_with_store(*entry);
    if (entry->record.status != db::StudyStatus::active) break;
    take_in_events(*entry);
    allowed = std::min(refused_now, room().value_or(refused_now));
  }
  if (over_budget) {
    entry->synced_version.reset();
    if (out.leases.size() < n && !out.done) {
      out.reason = "the budget of " + std::to_string(*entry->record.budget) +
                   " evaluations is taken by results and live leases, some of them of another "
                   "process sharing the database; ask again when a lease ends";
    }
  }
  if (refused > 0) {
    entry->synced_version.reset();  // the next request reads what the Store refused for
    if (out.leases.size() < n && !out.done) {
      out.reason = std::to_string(refused) +
                   " configuration(s) proposed were leased or measured meanwhile by another "
                   "process sharing the database" +
                   (out.reason.empty() ? std::string() : "; " + out.reason) + "; ask again";
    }
  }
  if (out.leases.empty() && !out.done &&
      (allowed_by_budget == 0 || over_budget || session.exhausted())) {
    // Only a lease that ends without a result frees a place: the first to end is the time to
    // ask again (results and releases may come sooner). Otherwise (a sampled space whose draws
    // found nothing this time) at once.
    std::lock_guard lock(entry->state_mutex);
    for (const auto& [id, lease] : entry->pending) {
      const double seconds = std::chrono::duration<double>(lease.expires - Clock::now()).count();
      out.retry_after_seconds = std::min(out.retry_after_seconds.value_or(seconds), seconds);
    }
  }
  return out;
}

std::vector<db::TrialId> StudyManager::resume_own_leases(Entry& entry, std::size_t n,
                                                         const std::string& client_id,
                                                         double lease_seconds,
                                                         std::vector<Lease>& out) {
  std::vector<db::TrialId> own;
  {
    std::lock_guard lock(entry.state_mutex);
    for (const auto& [id, lease] : entry.pending) {
      if (lease.client_id == client_id) own.push_back(db::TrialId{id});
    }
  }
  std::sort(own.begin(), own.end(), [](auto a, auto b) { return a.value < b.value; });
  std::vector<db::TrialId> held;
  for (const auto trial : own) {
    if (out.size() == n) {
      held.push_back(trial);
      continue;
    }
    const auto expires = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(lease_seconds));
    // Its result, or the end of its lease, may have come in meanwhile: then it is not ours.
    if (!store_.extend_lease(trial, expires, spared_before(Clock::now()))) continue;
    const auto t = store_.get_trial(trial);
    {
      std::lock_guard lock(entry.state_mutex);
      if (auto it = entry.pending.find(trial.value); it != entry.pending.end()) {
        it->second.expires = expires + kLeaseSlack;
      }
    }
    held.push_back(trial);
    out.push_back({trial, t.config, t.lease_expires_at.value_or(db::format_timestamp(expires)),
                   /*resumed=*/true});
  }
  return held;
}

// check_time_not_negative for a result. Only a negative value costs a lookup of the trial's
// study: results are the hottest write.
std::exception_ptr StudyManager::negative_time(const Report& r) const {
  if (!has_negative(r.result)) return nullptr;
  try {
    check_time_not_negative(r.result, store_.get_study(store_.get_trial(r.trial).study_id), "");
    return nullptr;
  } catch (const NotFound&) {
    return nullptr;  // the store says so, for the whole report
  } catch (...) {
    return std::current_exception();
  }
}

std::vector<StudyManager::ReportOutcome> StudyManager::report_all(
    const std::vector<Report>& reports) {
  std::vector<ReportOutcome> out(reports.size());
  std::vector<db::Store::Completion> batch;
  std::vector<std::size_t> sent;  // the reports in `batch`, in order
  batch.reserve(reports.size());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const auto& r = reports[i];
    if ((out[i].error = negative_time(r))) continue;
    batch.push_back({r.trial, r.client_id, r.result});
    sent.push_back(i);
  }
  // One commit for the whole batch (group commit); each result is accepted or refused alone.
  auto stored_all = store_.complete_trials(batch);
  for (std::size_t k = 0; k < sent.size(); ++k) {
    const std::size_t i = sent[k];
    const auto& r = reports[i];
    out[i].record = std::move(stored_all[k].record);
    out[i].error = stored_all[k].error;
    out[i].already_stored = stored_all[k].already_stored;
    if (out[i].error || out[i].already_stored) continue;
    const auto& stored = *out[i].record;
    auto entry = find_loaded(stored.study_id);
    if (!entry) continue;
    std::lock_guard lock(entry->state_mutex);
    Configuration config;
    if (auto it = entry->pending.find(r.trial.value); it != entry->pending.end()) {
      config = std::move(it->second.config);
      entry->pending.erase(it);
    } else {
      try {
        config = entry->space->config_from_json(stored.config);
      } catch (const InvalidInput& e) {
        spdlog::warn("trial {} is not valid in its study's space: {}", r.trial.value, e.what());
        continue;
      }
    }
    // A late result withdrew the newer lease of its configuration, if any (Store::
    // complete_trials): it no longer holds the configuration.
    std::erase_if(entry->pending,
                  [&](const auto& lease) { return lease.second.key == stored.config_key; });
    entry->finished[stored.config_key] = r.trial.value;
    ++entry->results_version;
    if (entry->session_starting) entry->inbox.push_back({std::move(config), r.result});
  }
  std::set<std::int64_t> studies;
  for (const auto& o : out) {
    if (o.record) studies.insert(o.record->study_id.value);
  }
  for (auto id : studies) complete_if_spent(db::StudyId{id});
  return out;
}

// A study whose budget its results have spent, with no lease left out, is completed now, not
// only when a client next asks for a suggestion. The stored results stand either way.
void StudyManager::complete_if_spent(db::StudyId study) {
  try {
    // Every configuration measured ends a study too, when they can be counted.
    std::optional<std::int64_t> candidates;
    if (const auto entry = find_loaded(study); entry && entry->space->enumerable()) {
      candidates = static_cast<std::int64_t>(entry->space->valid_count().value_or(0));
    }
    store_.complete_if_spent(study, candidates);
  } catch (const std::exception& e) {
    spdlog::warn("study {}: checking whether its budget is spent failed: {}", study.value,
                 e.what());
  }
}

namespace {

Conflict not_leased(const db::TrialRecord& now) {
  // Still pending in the Store: its lease is past its end, not yet marked so.
  const std::string ended = now.result.status == TrialStatus::pending && now.lease_expires_at
                                ? "lease expired at " + *now.lease_expires_at
                                : now.result.message;
  return Conflict("trial " + std::to_string(now.id.value) + " is not leased: " +
                  (now.finished_at ? std::string("it has a result")
                                   : "its lease ended (" + ended +
                                         "); its result is still taken while no other trial "
                                         "of its configuration has one and the budget has "
                                         "room"));
}

// The trial `client_id` holds a live lease of: Forbidden for another client's, Conflict when
// it is not leased (any more).
db::TrialRecord leased_trial(const db::Store& store, db::TrialId trial,
                             const std::string& client_id) {
  auto t = store.get_trial(trial);
  if (t.client_id != client_id) {
    throw Forbidden("trial " + std::to_string(trial.value) + " belongs to client \"" + t.client_id +
                    "\", not \"" + client_id + "\"");
  }
  if (t.result.status != TrialStatus::pending) throw not_leased(t);
  return t;
}

}  // namespace

db::TrialRecord StudyManager::extend(db::TrialId trial, const std::string& client_id,
                                     double lease_seconds) {
  const auto t = leased_trial(store_, trial, client_id);
  const auto expires =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(lease_seconds));
  // Its result, or the end of its lease, may have come in meanwhile.
  if (!store_.extend_lease(trial, expires, spared_before(Clock::now()))) {
    throw not_leased(store_.get_trial(trial));
  }
  if (auto entry = find_loaded(t.study_id)) {
    std::lock_guard lock(entry->state_mutex);
    if (auto it = entry->pending.find(trial.value); it != entry->pending.end()) {
      it->second.expires = expires + kLeaseSlack;
    }
  }
  return store_.get_trial(trial);
}

db::TrialRecord StudyManager::release(db::TrialId trial, const std::string& client_id) {
  const auto t = leased_trial(store_, trial, client_id);
  // Its result, or the end of its lease, may have come in meanwhile.
  if (!store_.release_lease(trial)) throw not_leased(store_.get_trial(trial));
  if (auto entry = find_loaded(t.study_id)) {
    std::lock_guard lock(entry->state_mutex);
    if (auto it = entry->pending.find(trial.value); it != entry->pending.end()) {
      if (entry->session_starting) {
        entry->inbox.push_back({std::move(it->second.config), std::nullopt});
      }
      entry->pending.erase(it);
    }
  }
  return store_.get_trial(trial);
}

db::TrialRecord StudyManager::report(db::TrialId trial, const std::string& client_id,
                                     const Measurement& result) {
  auto outcome = report_all({{trial, client_id, result}}).front();
  if (outcome.error) std::rethrow_exception(outcome.error);
  return *outcome.record;
}

std::vector<StudyManager::MeasurementOutcome> StudyManager::add_measurements_all(
    const std::vector<MeasurementBatch>& batches) {
  std::vector<MeasurementOutcome> out(batches.size());
  std::map<std::int64_t, std::vector<std::size_t>> by_study;
  for (std::size_t b = 0; b < batches.size(); ++b) by_study[batches[b].study.value].push_back(b);

  for (const auto& [study_id, members] : by_study) {
    std::shared_ptr<Entry> entry;
    try {
      entry = load(db::StudyId{study_id});
    } catch (...) {
      for (auto b : members) out[b].error = std::current_exception();
      continue;
    }
    const auto& space = *entry->space;
    // Parse each batch on its own: a bad one fails alone.
    std::vector<std::vector<db::NewTrial>> trials(batches.size());
    std::vector<std::vector<Configuration>> parsed(batches.size());
    std::vector<std::size_t> valid;
    for (auto b : members) {
      try {
        std::unordered_set<std::string> keys;
        const auto& batch = batches[b];
        for (std::size_t i = 0; i < batch.configs.size(); ++i) {
          const std::string field = "measurements[" + std::to_string(i) + "].config";
          auto config = in_field(field, [&] { return space.config_from_json(batch.configs[i]); });
          auto key = space.key(config);
          if (!keys.insert(key).second) {
            throw FieldError(field, "configuration " + batch.configs[i].dump() +
                                        " appears twice in this request; send each once");
          }
          const auto& result = batch.results[i];
          check_time_not_negative(result, entry->record,
                                  "measurements[" + std::to_string(i) + "].");
          trials[b].push_back({space.config_to_json(config), key, result, batch.client_id});
          parsed[b].push_back(std::move(config));
        }
        valid.push_back(b);
      } catch (...) {
        out[b].error = std::current_exception();
      }
    }
    // The state lock spans the checks and the insert, so that two requests cannot both add
    // one configuration.
    std::lock_guard lock(entry->state_mutex);
    std::unordered_map<std::string, std::size_t> in_this_call;
    std::vector<db::NewTrial> combined;
    std::vector<std::size_t> accepted;
    // Per batch, per measurement: the trial that holds this very result already (a retry).
    std::vector<std::vector<std::optional<db::TrialId>>> stored(batches.size());
    for (auto b : valid) {
      try {
        stored[b].assign(trials[b].size(), std::nullopt);
        for (std::size_t i = 0; i < trials[b].size(); ++i) {
          const auto& t = trials[b][i];
          const std::string field = "measurements[" + std::to_string(i) + "].config";
          if (auto it = entry->finished.find(t.config_key); it != entry->finished.end()) {
            const auto held = store_.get_trial(db::TrialId{it->second});
            const auto differing = differing_fields(held.result, t.result);
            if (differing.empty()) {
              stored[b][i] = held.id;
              continue;
            }
            std::string differs;
            for (const auto& f : differing) differs += (differs.empty() ? "" : ", ") + f;
            throw Conflict("configuration " + t.config.dump() + " (" + field +
                           ") already has another result in study " + std::to_string(study_id) +
                           " (trial " + std::to_string(it->second) + ": " +
                           result_text(held.result) + "; this one: " + result_text(t.result) +
                           ", differing in " + differs +
                           "); a configuration is measured once per study (sending the same "
                           "result again is answered with its trial)");
          }
          if (in_this_call.count(t.config_key)) {
            throw Conflict("configuration " + t.config.dump() + " (" + field +
                           ") is being added by another request to study " +
                           std::to_string(study_id));
          }
          for (const auto& [id, lease] : entry->pending) {
            if (lease.key == t.config_key) {
              throw Conflict("configuration " + t.config.dump() + " (" + field +
                             ") is leased to client \"" + lease.client_id + "\" as trial " +
                             std::to_string(id) + "; that client reports it with POST /v1/trials/" +
                             std::to_string(id) + "/result");
            }
          }
        }
      } catch (...) {
        out[b].error = std::current_exception();
        continue;
      }
      for (std::size_t i = 0; i < trials[b].size(); ++i) {
        if (stored[b][i]) continue;
        in_this_call.emplace(trials[b][i].config_key, b);
        combined.push_back(trials[b][i]);
      }
      accepted.push_back(b);
    }
    std::vector<db::TrialId> ids;
    try {
      if (!combined.empty()) ids = store_.add_trials(db::StudyId{study_id}, combined);
    } catch (...) {
      for (auto b : accepted) out[b].error = std::current_exception();
      continue;
    }
    std::size_t next = 0;
    for (auto b : accepted) {
      for (std::size_t i = 0; i < trials[b].size(); ++i) {
        if (stored[b][i]) {
          out[b].trials.push_back(*stored[b][i]);
          ++out[b].already_stored;
          continue;
        }
        out[b].trials.push_back(ids[next]);
        entry->finished[trials[b][i].config_key] = ids[next].value;
        ++entry->results_version;
        if (entry->session_starting) {
          entry->inbox.push_back({std::move(parsed[b][i]), trials[b][i].result});
        }
        ++next;
      }
    }
    if (combined.empty()) continue;
    complete_if_spent(db::StudyId{study_id});
  }
  return out;
}

std::vector<db::TrialId> StudyManager::add_measurements(db::StudyId study,
                                                        const std::vector<nlohmann::json>& configs,
                                                        const std::vector<Measurement>& results,
                                                        const std::string& client_id) {
  auto outcome = add_measurements_all({{study, configs, results, client_id}}).front();
  if (outcome.error) std::rethrow_exception(outcome.error);
  return outcome.trials;
}

std::pair<db::StudyRecord, db::Store::DeletedStudy> StudyManager::remove(
    db::StudyId study, db::Store::LiveLeases leases) {
  const auto record = store_.get_study(study);
  const auto trials = store_.delete_study(study, leases);
  // Every loaded study is read again from the Store when next used: its sessions' priors may
  // hold the deleted trials (as a restart would).
  std::lock_guard lock(mutex_);
  studies_.clear();
  std::erase(study_ids_, study);
  return {record, trials};
}

db::StudyRecord StudyManager::stop(db::StudyId study) {
  auto entry = load(study);
  std::lock_guard session_lock(entry->session_mutex);
  // The Store's status: the result that spent the budget completed the study there.
  auto record = store_.get_study(study);
  if (record.status == db::StudyStatus::completed) {
    throw Conflict("study " + std::to_string(study.value) +
                   " is completed (its budget is spent); there is nothing to stop");
  }
  if (record.status == db::StudyStatus::active) {
    store_.set_study_status(study, db::StudyStatus::stopped);
    record.status = db::StudyStatus::stopped;
  }
  entry->record.status = record.status;
  return record;
}

db::StudyRecord StudyManager::resume(db::StudyId study, std::optional<std::int64_t> budget) {
  auto entry = load(study);
  std::lock_guard session_lock(entry->session_mutex);
  auto record = store_.get_study(study);
  const std::int64_t results = store_.trial_counts(study).results();
  const std::string name = "study " + std::to_string(study.value);
  const bool active = record.status == db::StudyStatus::active;
  // Everything is checked before anything is written: a refused resume changes nothing.
  if (budget) {
    // Results and live leases hold places in the budget; a study taken up needs one more.
    const std::int64_t held = store_.budget_used(study);
    const std::int64_t least = std::max(held, active ? results : results + 1);
    if (*budget < least) {
      throw FieldError(
          "budget", "\"budget\" " + std::to_string(*budget) + " is below what " + name +
                        " needs: " + std::to_string(results) + " results" +
                        (held > results ? " and " + std::to_string(held - results) + " live leases"
                                        : std::string()) +
                        (active ? "" : " and one more to resume") + "; give at least " +
                        std::to_string(least));
    }
  } else if (!active && record.budget && results >= *record.budget) {
    throw Conflict(name + " has spent its budget of " + std::to_string(*record.budget) +
                   " evaluations; resume it with a larger one, e.g. {\"budget\": " +
                   std::to_string(results + 10) + "}");
  }
  if (budget) {
    store_.set_study_budget(study, *budget);
    record.budget = budget;
  }
  if (!active) {
    store_.set_study_status(study, db::StudyStatus::active);
    record.status = db::StudyStatus::active;
  }
  std::lock_guard lock(entry->state_mutex);
  entry->record.status = record.status;
  entry->record.budget = record.budget;
  return record;
}

void StudyManager::reread(db::StudyId study) {
  if (const auto entry = find_loaded(study)) {
    std::lock_guard lock(entry->state_mutex);
    entry->synced_version.reset();
  }
}

std::shared_ptr<const SearchSpace> StudyManager::space(db::StudyId study) {
  return load(study)->space;
}

std::vector<Forecast> StudyManager::predict(db::StudyId study,
                                            const std::vector<Configuration>& configs) {
  return with_model(study, [&](ModelBasedStrategy& model, const TuningState& state) {
    return model.forecast(state, configs);
  });
}

std::vector<ParameterRelevance> StudyManager::relevance(db::StudyId study) {
  return with_model(study, [](ModelBasedStrategy& model, const TuningState& state) {
    return model.relevance(state);
  });
}

// The study's own session while it is active (its model as the study fitted it; with priors
// it answers before any observation); else, or when the session has nothing to say yet, a bo
// model on the study's finished trials (a random subset of the imported ones beyond
// kMaxModelObservations). `use(model, state)` answers; a non-empty answer is returned.
template <typename Use>
auto StudyManager::with_model(db::StudyId study, Use use)
    -> decltype(use(std::declval<ModelBasedStrategy&>(), std::declval<const TuningState&>())) {
  auto entry = load(study);
  std::lock_guard session_lock(entry->session_mutex);
  sync_with_store(*entry);
  std::vector<Observation> observations;
  if (entry->record.status == db::StudyStatus::active) {
    ensure_session(*entry);
    take_in_events(*entry);
    if (auto* model = entry->session->model()) {
      if (auto answer = use(*model, entry->session->state()); !answer.empty()) {
        save_fitted_models(store_);
        return answer;
      }
    }
    observations = entry->session->observations();
    subsample(observations, study);
  } else {
    std::uint64_t version = 0;
    {
      std::lock_guard lock(entry->state_mutex);
      version = entry->results_version;
    }
    if (entry->observed_version != version) {
      std::vector<Observation> all;
      for (const auto& t : store_.trials(study)) {
        if (!t.finished_at) continue;
        try {
          all.push_back({entry->space->config_from_json(t.config), t.result});
        } catch (const InvalidInput&) {
          // Not in the space (cannot happen for trials stored through the service).
        }
      }
      subsample(all, study);
      entry->observed = std::move(all);
      entry->observed_version = version;
      ++model_reads_;
    }
    observations = entry->observed;
  }
  if (!entry->predictor) {
    entry->predictor =
        make_strategy("bo", {{"seed", entry->record.settings.value("seed", std::int64_t{0})}});
  }
  auto* model = dynamic_cast<ModelBasedStrategy*>(entry->predictor.get());
  if (!model) throw Error("the bo strategy carries no model to predict with");
  TuningState state;
  state.space = entry->space.get();
  state.observations = std::move(observations);
  state.minimize = entry->record.direction == db::Direction::minimize;
  return use(*model, state);
}

// Too few results to fit a model to (every study has one: a study whose strategy carries none
// is modelled as bo would), or nothing that tells the parameters apart.
std::string no_relevance_reason(const db::Store& store, db::StudyId study) {
  std::optional<double> first;
  bool one_value = true;
  std::int64_t ok = 0;
  for (const auto& t : store.trials(study)) {
    if (!t.result.ok()) continue;
    ++ok;
    if (!first) first = t.result.objective;
    one_value = one_value && t.result.objective == *first;
  }
  return one_value && ok > 1
             ? "every successful result has the same value: nothing tells the parameters apart"
             : "the GP's lengthscales say something once the study has about two successful "
               "results per encoded input (one per numeric parameter, one per value of a "
               "categorical one); it has " +
                   std::to_string(ok) + " successful result" + (ok == 1 ? "" : "s");
}

std::optional<PredictedBest> StudyManager::predict_best(
    const std::string& kernel, std::optional<db::MachineId> machine, std::optional<db::TaskId> task,
    db::Direction direction, const std::string& objective, const nlohmann::json& input_features,
    const std::string& input_version) {
  auto predicted = api::predict_best(store_, kernel, machine, task, direction, objective,
                                     input_features, input_version, &prior_cache_);
  save_fitted_models(store_);
  return predicted;
}

std::optional<Clock::time_point> StudyManager::spared_before(Clock::time_point now) const {
  if (now < started_ + kRestartGrace) return started_;
  return std::nullopt;
}

std::size_t StudyManager::expire_leases() {
  const auto now = Clock::now();
  const auto expired = store_.expire_leases(now, spared_before(now));
  std::vector<std::shared_ptr<Entry>> entries;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, e] : studies_) entries.push_back(e);
  }
  for (const auto& e : entries) {
    std::lock_guard lock(e->state_mutex);
    for (auto it = e->pending.begin(); it != e->pending.end();) {
      if (it->second.expires < now) {
        if (e->session_starting) e->inbox.push_back({std::move(it->second.config), std::nullopt});
        it = e->pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  return expired;
}

std::size_t StudyManager::queued_events(db::StudyId study) const {
  const auto entry = find_loaded(study);
  if (!entry) return 0;
  std::lock_guard lock(entry->state_mutex);
  return entry->inbox.size();
}

std::size_t StudyManager::active_studies() const {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (lock) studies_seen_ = studies_.size();
  return studies_seen_;
}

std::size_t StudyManager::pending_leases() const {
  std::vector<std::shared_ptr<Entry>> entries;
  {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock) return leases_seen_;
    for (const auto& [id, e] : studies_) entries.push_back(e);
  }
  std::size_t n = 0;
  for (const auto& e : entries) {
    std::unique_lock lock(e->state_mutex, std::try_to_lock);
    if (lock) e->pending_seen = e->pending.size();
    n += e->pending_seen;
  }
  leases_seen_ = n;
  return n;
}

}  // namespace tunebase::api
