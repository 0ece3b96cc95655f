// The tuning sessions of the studies the service is driving: one Session per active study,
// restored from the Store on first use, with the leases its clients hold.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/priors.h"
#include "core/space.h"
#include "core/trial.h"
#include "db/store.h"
#include "tuner/bo.h"

namespace tunebase::api {

/// Session options a study does not store explicitly.
inline constexpr std::size_t kUnlimitedBudgetDesign = 100;

/// Keeps one tuning Session per study in memory and serialises access to it.
///
/// Two locks per study: the session lock is held while proposing (which fits a model and may
/// take seconds), the state lock only for brief bookkeeping. Results and releases never wait
/// for a proposal: they are stored at once and queued for the session, which takes them in
/// before its next proposal. The Store is the truth; sessions catch up with it.
///
/// suggest() and predict() block while a model is fitted: call them from a compute thread.
class StudyManager {
 public:
  explicit StudyManager(db::Store& store);
  ~StudyManager();
  StudyManager(const StudyManager&) = delete;
  StudyManager& operator=(const StudyManager&) = delete;

  struct Lease {
    db::TrialId trial;
    nlohmann::json config;
    std::string expires_at;
    /// A live lease the client held already, given back (renewed) rather than a new one.
    bool resumed = false;
  };
  struct Suggestions {
    std::vector<Lease> leases;
    /// No more suggestions will come: the budget is spent, or every candidate is measured, or
    /// the study is not active.
    bool done = false;
    /// Why fewer than asked for were given (empty when all were).
    std::string reason;
    double propose_seconds = 0.0;
    /// None given and not done: seconds until the first live lease ends (nullopt: none known).
    std::optional<double> retry_after_seconds;
    /// What proposed them: {"strategy", "phase", "priors" (sources used), "weights" (the
    /// transfer ensemble's, when it has them)}.
    nlohmann::json model = nlohmann::json::object();
  };

  /// Leases up to `n` configurations to `client_id` for `lease_seconds`. Several clients never
  /// receive the same configuration: the session takes each once, and the Store allows one
  /// pending lease per configuration. The live leases `client_id` holds already in an active
  /// study come first (oldest first, renewed to `lease_seconds`, marked resumed), as Vizier's
  /// SuggestTrials gives a client its active trials: a client that restarted with its id is
  /// not locked out of the budget by its own leases.
  /// `resume` false: new leases only (a client that keeps track of its own, as tunebase
  /// worker does, so that a twin started with its id is not handed its leases).
  Suggestions suggest(db::StudyId study, std::size_t n, const std::string& client_id,
                      double lease_seconds, bool resume = true);

  struct Report {
    db::TrialId trial;
    std::string client_id;
    Measurement result;
  };
  /// What became of one report or measurement batch: the stored record(s), or the error.
  struct ReportOutcome {
    std::optional<db::TrialRecord> record;
    std::exception_ptr error;
    bool already_stored = false;  ///< a retry of the result the trial has: nothing changed
  };
  /// Stores results of leased trials and queues them for their studies' sessions. A result is
  /// accepted once, also late (after the lease expired) while no other trial of its
  /// configuration has a result and the budget has room, withdrawing a newer lease of the
  /// configuration (Store::complete_trials). Each report succeeds or fails alone:
  /// Forbidden when its client_id is not the client the trial was leased to, Conflict when the
  /// trial already has a result, NotFound for an unknown trial.
  std::vector<ReportOutcome> report_all(const std::vector<Report>& reports);
  /// One report; throws its error.
  db::TrialRecord report(db::TrialId trial, const std::string& client_id,
                         const Measurement& result);
  /// Gives a live lease back without a result (its client cannot evaluate it): the
  /// configuration may be proposed again at once, and nothing counts in the budget. NotFound
  /// for an unknown trial, Forbidden for another client's, Conflict when it is not leased (also
  /// when its result or the end of its lease came in meanwhile). A result its client reports
  /// after all is a late result like any other (report_all).
  db::TrialRecord release(db::TrialId trial, const std::string& client_id);
  /// Extends a leased trial's lease to `lease_seconds` from now (its client is still at
  /// work). NotFound, Forbidden and Conflict as release.
  db::TrialRecord extend(db::TrialId trial, const std::string& client_id, double lease_seconds);
  /// Stops an active study: no more suggestions (they answer done, saying why); results of
  /// its live leases are still taken. A stopped study stays stopped; Conflict for a completed
  /// one.
  db::StudyRecord stop(db::StudyId study);
  /// Makes a stopped or completed study active again, with `budget` when given: what
  /// `tunebase sweep` does when it resumes one; an active study's budget may change too.
  /// FieldError for a budget below its results and live leases (and one more for a study
  /// that is not active); Conflict when its budget is spent and none is given. A refused
  /// resume changes nothing.
  db::StudyRecord resume(db::StudyId study, std::optional<std::int64_t> budget);
  /// Deletes a study that is not active, with its trials (Store::delete_study), and forgets its
  /// session. Returns the deleted record and what went with it.
  std::pair<db::StudyRecord, db::Store::DeletedStudy> remove(
      db::StudyId study, db::Store::LiveLeases leases = db::Store::LiveLeases::refuse);

  /// Results measured outside the service for one study: all of a batch or none.
  struct MeasurementBatch {
    db::StudyId study;
    std::vector<nlohmann::json> configs;
    std::vector<Measurement> results;
    std::string client_id;
  };
  struct MeasurementOutcome {
    std::vector<db::TrialId> trials;  ///< one per measurement, in order
    std::size_t already_stored = 0;   ///< of them, results the study held already
    std::exception_ptr error;
  };
  /// Adds measurement batches, those of one study in one transaction (group commit).
  /// Configurations are checked against the study's space (FieldError
  /// "measurements[i].config"); one that already has another result or is leased in the study
  /// (or comes earlier in this call) fails its batch with Conflict. The very result the study
  /// holds already (a client's retry) is not stored again: its trial is answered. Other
  /// batches are unaffected.
  std::vector<MeasurementOutcome> add_measurements_all(
      const std::vector<MeasurementBatch>& batches);
  /// One batch; throws its error.
  std::vector<db::TrialId> add_measurements(db::StudyId study,
                                            const std::vector<nlohmann::json>& configs,
                                            const std::vector<Measurement>& results,
                                            const std::string& client_id);

  /// The study's trials changed without this manager (an import through the same Store): it
  /// reads them again before it next uses the study.
  void reread(db::StudyId study);

  /// The study's space (NotFound for an unknown study).
  std::shared_ptr<const SearchSpace> space(db::StudyId study);

  /// Forecasts of the objective of `configs` from a GP fitted on the study's results. Empty
  /// when the study has too few results for a model.
  std::vector<Forecast> predict(db::StudyId study, const std::vector<Configuration>& configs);
  /// How much each parameter moves the objective, by the same model (most relevant first);
  /// empty when the study has too few results for fitted hyperparameters.
  std::vector<ParameterRelevance> relevance(db::StudyId study);

  /// The best configuration of `kernel` predicted for `machine` (and `task`) by the transfer
  /// model on what other machines and tasks measured (api::predict_best); the fitted prior
  /// models are saved to the store for later processes. `machine` is nullopt for one the
  /// store does not know yet (nothing measured there, by definition). An input measured
  /// nowhere is given by its features and its kernel version instead of `task`.
  std::optional<PredictedBest> predict_best(const std::string& kernel,
                                            std::optional<db::MachineId> machine,
                                            std::optional<db::TaskId> task, db::Direction direction,
                                            const std::string& objective,
                                            const nlohmann::json& input_features = {},
                                            const std::string& input_version = {});

  /// Expires leases that ended (in the Store, and releases them in the sessions, so that their
  /// configurations are proposed again). Returns how many the Store expired.
  std::size_t expire_leases();

  /// For /metrics, never waiting: a lock held across database work (a load, a large batch of
  /// measurements) gives the count last seen instead.
  std::size_t active_studies() const;
  std::size_t pending_leases() const;
  /// Events (results, ends of leases) queued for a loaded study's session (tests).
  std::size_t queued_events(db::StudyId study) const;
  /// How often predict() and relevance() read a study's results from the Store (tests).
  std::size_t model_reads() const { return model_reads_; }

  /// How often, at most, a study's session asks the Store whether its priors moved (other
  /// machines or tasks measured more, an import by another process) while the database
  /// changes: 5 s by default (counting 300,000 prior trials takes 0.1 s); tests ask every time.
  void set_priors_recheck(std::chrono::milliseconds interval) { priors_recheck_ = interval; }
  /// An import through this process: every session asks at its next use, not up to 5 s later.
  void note_import() { imports_.fetch_add(1); }

 private:
  struct Entry;
  template <typename Use>
  auto with_model(db::StudyId study, Use use)
      -> decltype(use(std::declval<ModelBasedStrategy&>(), std::declval<const TuningState&>()));
  std::shared_ptr<Entry> load(db::StudyId study);
  std::shared_ptr<Entry> find_loaded(db::StudyId study) const;
  void sync_with_store(Entry& entry);
  void complete_if_spent(db::StudyId study);
  void ensure_session(Entry& entry);
  void build_session(Entry& entry);
  bool priors_moved(Entry& entry) const;
  /// (Store::data_version, Store::changes_made): another value, the database changed.
  std::pair<std::int64_t, std::int64_t> store_version() const;
  void note_priors_checked(Entry& entry, std::pair<std::int64_t, std::int64_t> version) const;
  void take_in_events(Entry& entry);
  /// Renews up to `n` - out.size() of the live leases `client_id` holds in the study and adds
  /// them to `out` (resumed). Returns the trials of those it holds still, oldest first.
  std::vector<db::TrialId> resume_own_leases(Entry& entry, std::size_t n,
                                             const std::string& client_id, double lease_seconds,
                                             std::vector<Lease>& out);
  /// FieldError for a negative time reported to a study whose unit is a time; null otherwise.
  std::exception_ptr negative_time(const Report& r) const;
  std::size_t release_expired(Entry& entry, std::chrono::system_clock::time_point now);
  /// Store::expire_leases's spare_ended_before: this manager's start during the grace period
  /// after it (leases that ended while no server ran), else none.
  std::optional<std::chrono::system_clock::time_point> spared_before(
      std::chrono::system_clock::time_point now) const;

  /// Forgets every loaded study when another process deleted one (tunebase delete beside a
  /// server): their sessions' priors may hold its trials. Called with mutex_ held.
  void forget_all_if_a_study_went();

  db::Store& store_;
  std::chrono::milliseconds priors_recheck_{5000};
  std::atomic<std::uint64_t> imports_{0};
  mutable std::mutex mutex_;
  std::unordered_map<std::int64_t, std::shared_ptr<Entry>> studies_;
  mutable std::atomic<std::size_t> studies_seen_{0};  // the last counts /metrics read
  /// When this manager started: leases that ended before are spared for a grace period.
  const std::chrono::system_clock::time_point started_ = std::chrono::system_clock::now();
  mutable std::atomic<std::size_t> leases_seen_{0};
  std::atomic<std::size_t> model_reads_{0};
  std::optional<std::int64_t> ids_seen_at_;  // data_version when study_ids_ was read
  std::vector<db::StudyId> study_ids_;
  /// What predict_best read of the store, while it is unchanged.
  PriorCache prior_cache_;
};

/// Why StudyManager::relevance has nothing to say about `study` (for a reply that says so).
std::string no_relevance_reason(const db::Store& store, db::StudyId study);

}  // namespace tunebase::api
