// The typed storage API every other part of tunebase uses: machines, kernels, tasks, studies,
// trials and API tokens in one SQLite file. Every write this class acknowledges (returns from)
// is committed and durable; every multi-row write is one transaction (all or nothing).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/failure_reasons.h"
#include "core/machine.h"
#include "core/measurements.h"
#include "core/space.h"
#include "core/trial.h"
#include "db/sqlite.h"

namespace tunebase::db {

// Strong ids: a StudyId cannot be passed where a TrialId is expected.
struct MachineId {
  std::int64_t value = 0;
  friend auto operator<=>(const MachineId&, const MachineId&) = default;
};
struct KernelId {
  std::int64_t value = 0;
  friend auto operator<=>(const KernelId&, const KernelId&) = default;
};
struct TaskId {
  std::int64_t value = 0;
  friend auto operator<=>(const TaskId&, const TaskId&) = default;
};
struct StudyId {
  std::int64_t value = 0;
  friend auto operator<=>(const StudyId&, const StudyId&) = default;
};
struct TrialId {
  std::int64_t value = 0;
  friend auto operator<=>(const TrialId&, const TrialId&) = default;
};
struct TokenId {
  std::int64_t value = 0;
  friend auto operator<=>(const TokenId&, const TokenId&) = default;
};

enum class Direction { minimize, maximize };
std::string_view to_string(Direction d);
/// Parses `minimize` / `maximize`; throws InvalidInput naming the allowed values.
Direction direction_from_string(std::string_view s);

enum class StudyStatus { active, completed, stopped };
std::string_view to_string(StudyStatus s);
/// Parses `active` / `completed` / `stopped`; throws InvalidInput naming the allowed values.
StudyStatus study_status_from_string(std::string_view s);

/// The largest study budget (evaluations) the API and the command line take.
inline constexpr std::int64_t kMaxStudyBudget = 1'000'000'000;

/// The longest name (machine, kernel, study, token, client) the store takes, in bytes.
inline constexpr std::size_t kMaxNameBytes = 200;
/// Throws InvalidInput unless `name` is 1 to kMaxNameBytes bytes with no control character
/// (tab, line break, NUL...) and not only spaces; `what` names it in the message ("a machine
/// name"). Names are printed in tables and one-line messages, so they must be one line.
void check_name(std::string_view name, std::string_view what);
/// check_name for a study, which must also not be digits only (tools read digits as an id).
void check_study_name(std::string_view name);

/// ISO-8601 UTC with milliseconds, "2024-05-01T12:00:00.000Z": the form of every stored
/// timestamp (it sorts as text in time order).
std::string format_timestamp(std::chrono::system_clock::time_point t);
/// Inverse of format_timestamp (milliseconds optional); throws InvalidInput otherwise.
std::chrono::system_clock::time_point parse_timestamp(std::string_view text);

struct MachineRecord {
  MachineId id;
  std::string name;
  nlohmann::json fingerprint;
  std::string fingerprint_hash;
  std::string created_at;
};

struct KernelRecord {
  KernelId id;
  std::string name;
  /// SearchSpace::fingerprint() of `space`: a changed space is a new version.
  std::string version;
  /// SearchSpace::to_json(); rebuild with SearchSpace::from_json.
  nlohmann::json space;
  std::string created_at;
};

struct TaskRecord {
  TaskId id;
  std::string kernel_name;
  /// What the input is, e.g. {"problem_size": [4096, 4096]} or {"matrix": "bcsstk13"}.
  nlohmann::json description;
  /// Numbers that describe the input to a surrogate (rows, nnz, ...); may be empty.
  nlohmann::json features;
  /// stable_json_hash(description): one task per (kernel name, description).
  std::string hash;
  std::string created_at;
};

struct NewStudy {
  /// Unique in the database.
  std::string name;
  KernelId kernel;
  MachineId machine;
  TaskId task;
  std::string objective = "time";
  Direction direction = Direction::minimize;
  std::string strategy = "bo";
  /// Number of evaluations allowed; none means unlimited.
  std::optional<std::int64_t> budget;
  nlohmann::json settings = nlohmann::json::object();
};

struct StudyRecord {
  StudyId id;
  std::string name;
  KernelId kernel_id;
  MachineId machine_id;
  TaskId task_id;
  std::string objective;
  Direction direction = Direction::minimize;
  std::string strategy;
  std::optional<std::int64_t> budget;
  nlohmann::json settings;
  StudyStatus status = StudyStatus::active;
  std::string created_at;
  // Joined from kernels and machines, for display.
  std::string kernel_name;
  std::string kernel_version;
  std::string machine_name;
};

/// The unit of a study's objective values ("ms", "GFLOP/s"), from its settings; empty when none
/// was given. Imports made before imports recorded their unit were in ms.
std::string objective_unit(const StudyRecord& study);
/// How a study's objective was measured: its `settings`' "measurement" (a PETSc solve's rtol,
/// max_it, residual_tolerance and clock: Evaluator::measurement_settings); {} when it keeps
/// none (GPU kernels, replays, imports, studies stored before settings were kept), and such
/// studies count as measured alike. Only studies measured alike are compared (best_trial) and
/// learned from (PriorQuery::measurement): a solve to rtol 1e-3 is faster than one to 1e-8
/// without being better.
nlohmann::json measurement_of(const nlohmann::json& settings);

struct TrialRecord {
  TrialId id;
  StudyId study_id;
  /// {"parameter": value, ...} as SearchSpace::config_to_json writes it.
  nlohmann::json config;
  /// SearchSpace::key(config): the Kernel Tuner cache key.
  std::string config_key;
  /// status pending (and objective NaN) while a client holds the lease.
  Measurement result;
  std::string client_id;
  std::optional<std::string> lease_expires_at;
  std::string created_at;
  /// When the lease was taken (pending trials); none for results added directly.
  std::optional<std::string> started_at;
  /// When the result was stored; none while no result has been reported.
  std::optional<std::string> finished_at;

  /// A lease that expired with no result: status timeout, no finished_at. A late result for
  /// it is still accepted once by complete_trial.
  bool lease_expired() const {
    return result.status == TrialStatus::timeout && !finished_at.has_value();
  }
  /// lease_expires_at as the API, listings and exports show it: none once a result is stored,
  /// which ends the lease (a lease that ended with no result keeps the time it ended). The
  /// stored time stays, as the record of when the lease would have ended.
  std::optional<std::string> shown_lease_expires_at() const {
    return finished_at ? std::nullopt : lease_expires_at;
  }
  /// The status as the API, exports and the study's counts name it: "lease_ended" for a lease
  /// that ended with no result (stored as a timeout, but no evaluation timed out).
  std::string_view status_name() const {
    return lease_expired() ? std::string_view("lease_ended") : to_string(result.status);
  }
};

/// A result to add: one evaluated configuration.
struct NewTrial {
  nlohmann::json config;
  std::string config_key;
  Measurement result;
  std::string client_id;
};

/// A finished trial of a kernel seen from elsewhere (another machine, task or study), for
/// transfer learning: only what a prior needs.
struct PriorTrial {
  StudyId study;
  MachineId machine;
  std::string machine_name;
  TaskId task;
  std::string kernel_version;
  std::string objective_name;
  Direction direction = Direction::minimize;
  TrialId trial;
  nlohmann::json config;
  std::string config_key;
  TrialStatus status = TrialStatus::ok;
  /// NaN unless status is ok; in the query's unit when both it and the study's are of time.
  double objective = 0.0;
  /// The unit `objective` is in (objective_unit of its study, or the query's once converted).
  std::string unit;
};

/// How many finished trials a PriorQuery selects on one (machine, task) (Store::prior_counts).
struct PriorCount {
  std::string machine_name;
  TaskId task;
  std::size_t ok = 0;
  std::size_t finished = 0;  ///< ok and failed
};

/// Which finished trials of a kernel are priors (Store::prior_trials); every filter is
/// applied in the query.
struct PriorQuery {
  std::string kernel_name;
  /// Kernel version; empty: any. Versions whose spaces have the same parameters and values
  /// (SearchSpace::parameters_fingerprint), whatever their constraints, are selected with it:
  /// they measure one function (a Kernel Tuner cache records no restrictions).
  std::string version;
  /// Only these machines (names); empty: all.
  std::vector<std::string> machines;
  std::optional<MachineId> exclude_machine;
  /// The (machine, task) being tuned: its own measurements are not priors, the same machine's
  /// other tasks are.
  std::optional<std::pair<MachineId, TaskId>> exclude_target;
  std::optional<StudyId> exclude_study;
  /// Only this task's (input's) trials; none: every task's.
  std::optional<TaskId> task;
  /// Objective name; empty: any.
  std::string objective;
  /// The unit values are wanted in. When it is a unit of time, studies in another unit of
  /// time are converted and studies in other units, or none, are left out. Otherwise (empty
  /// too) values are as stored.
  std::string unit;
  std::optional<Direction> direction;
  /// Only studies measured with these settings (measurement_of; {}: studies that keep none);
  /// none: any.
  std::optional<nlohmann::json> measurement;
  /// Successful trials only.
  bool ok_only = false;
  /// At most this many trials; 0: all.
  std::size_t limit = 0;
};

struct TrialCounts {
  std::int64_t total = 0;
  std::int64_t pending = 0;
  std::int64_t ok = 0;
  std::int64_t failed = 0;
  std::int64_t timeout = 0;  ///< results: evaluations that ran out of time
  std::int64_t invalid = 0;
  /// Leases that ended (expired or released) with no result: not evaluations, and not in the
  /// budget; status "timeout" with no finished_at.
  std::int64_t lease_ended = 0;

  /// Evaluations with a result (of any status).
  std::int64_t results() const { return ok + failed + timeout + invalid; }
};

/// Which studies a count across studies (Store::study_trial_counts,
/// Store::measured_configurations) takes: those of a kernel name (any version), and of the
/// machine, task, direction and objective when given.
struct StudyFilter {
  std::string kernel_name = {};
  std::optional<MachineId> machine = std::nullopt;
  std::optional<TaskId> task = std::nullopt;
  std::optional<Direction> direction = std::nullopt;
  /// Objective name; empty: any.
  std::string objective = {};
  /// A kernel version (KernelRecord::version): its studies and those of every version with the
  /// same parameters and values; empty: any version.
  std::string version = {};
  /// Only studies measured with these settings (measurement_of; {}: studies that keep none);
  /// none: any.
  std::optional<nlohmann::json> measurement = std::nullopt;
};

/// Which trials Store::trials(study, range) reads: ids in (after, up_to], with `status` when
/// given, at most `limit` of them.
struct TrialRange {
  std::int64_t after = 0;
  std::int64_t up_to = std::numeric_limits<std::int64_t>::max();
  /// Only trials of this status, as TrialCounts counts them: a lease that ended with no
  /// result (status timeout, no finished_at) is not a timeout of an evaluation.
  std::optional<TrialStatus> status;
  /// Only leases that ended with no result (TrialCounts::lease_ended).
  bool lease_ended = false;
  /// Only trials of this client (a lease's, or a result's reporter).
  std::optional<std::string> client_id = std::nullopt;
  std::size_t limit = std::numeric_limits<std::size_t>::max();
};

struct ImportOptions {
  /// Name of the machine to file the measurements under; default: the dataset's device_name.
  std::string machine_name;
  /// Name of the kernel; default: the dataset's kernel_name (T4 files have none).
  std::string kernel_name;
  /// Name of the new study; default "import <kernel> on <machine> (task <id>)".
  std::string study_name;
  /// client_id recorded on every imported trial.
  std::string client_id = "import";
  /// The input the measurements are of (a task description, e.g. {"problem_size": [4096,
  /// 4096]}); default: the file's own (a Kernel Tuner cache's problem_size; T4 files name none).
  std::optional<nlohmann::json> input;
  /// Numbers describing the input to a surrogate (matrix rows, nonzeros, ...), stored on its
  /// task; none: the task keeps what it has.
  nlohmann::json task_features = nlohmann::json::object();
  /// The unit of the entries' objectives, recorded on the study (Kernel Tuner and T4 files
  /// are converted to milliseconds).
  std::string unit = "ms";
  /// Whether an earlier import of the same results under another input counts as this file
  /// (a Kernel Tuner cache imported again with --input). Off for files of many inputs, whose
  /// inputs may share results (two matrices on which every format failed).
  bool match_other_inputs = true;
};

struct ImportResult {
  MachineId machine;
  KernelId kernel;
  /// The names the measurements were filed under (given, or the file's own).
  std::string machine_name;
  std::string kernel_name;
  TaskId task;
  StudyId study;
  std::size_t trials = 0;
  /// Entries whose status is not ok (failed compilations and runs).
  std::size_t failed = 0;
  /// Versions (search spaces) of the kernel stored before whose parameters or values differ
  /// from this file's: their measurements and this file's are not priors for one another.
  std::size_t other_kernel_versions = 0;
  /// When the file extends an earlier import of the same input (the same results for every
  /// configuration both hold), or was imported before (all of them): how many of its entries
  /// that study held already. `study` is that study, and `trials` counts only the new entries
  /// added to it (0 for a file imported before).
  std::size_t already_stored = 0;
  /// The file was imported before under an input that was not known then (a T4 file's), and
  /// this one names it: that study is now of this input.
  bool input_added = false;
  /// The file was imported before under another input than the one given or named now: which
  /// (the study keeps its own). Empty otherwise.
  std::string input_kept;

  /// The whole file was imported before: nothing was added.
  bool imported_before() const { return trials == 0 && already_stored > 0; }
};

struct TokenRecord {
  TokenId id;
  std::string name;
  std::string created_at;
  std::optional<std::string> revoked_at;
};

struct StoreOptions {
  /// Never creates, migrates or writes the file; every write throws StorageError.
  bool read_only = false;
  /// How long a write waits for another process's write transaction.
  std::chrono::milliseconds busy_timeout{5000};
};

/// One tunebase database. Thread-safe: one connection, calls serialised by a mutex. Several
/// processes may open the same file (WAL mode; writers wait up to busy_timeout for each other).
///
/// Errors: StorageError (file unusable: not SQLite, read-only, locked, too new), NotFound (an
/// id or name that does not exist), Conflict (a duplicate name, a trial already completed, a
/// configuration already leased), InvalidInput (a malformed argument).
class Store {
 public:
  /// Opens (and, unless read-only, creates and migrates) the database at `path`.
  explicit Store(const std::string& path, StoreOptions options = {});
  static Store open(const std::string& path, bool read_only = false);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::string& path() const;
  bool read_only() const;
  /// SQLite's quick_check of the file: empty when sound, else what it found (Database::
  /// quick_check; remembered as corruption_seen(path())).
  std::string quick_check();
  /// Writes a consistent copy of the whole database (what every committed transaction wrote,
  /// also what is still in the -wal file) to `destination`, a new file, while other processes
  /// go on reading and writing (SQLite's online backup, in one read transaction). Copying the .db
  /// file instead can miss the last commits, which live in the -wal file until a checkpoint.
  /// The copy is written beside `destination` and renamed onto it when complete; an existing
  /// `destination` is refused.
  void backup(const std::string& destination);

  // --- machines
  /// Inserts the machine, or updates the fingerprint of the machine with that name.
  MachineRecord upsert_machine(const MachineInfo& info);
  std::optional<MachineRecord> find_machine(std::string_view name) const;
  MachineRecord get_machine(MachineId id) const;
  std::vector<MachineRecord> list_machines() const;

  // --- kernels
  /// The kernel (name, space.fingerprint()), inserted if new.
  KernelRecord upsert_kernel(std::string_view name, const SearchSpace& space);
  KernelRecord get_kernel(KernelId id) const;
  /// Empty `version`: the most recently added version of that name.
  std::optional<KernelRecord> find_kernel(std::string_view name,
                                          std::string_view version = {}) const;
  std::vector<KernelRecord> list_kernels() const;

  // --- tasks
  /// The task (kernel_name, stable_json_hash(description)), inserted if new. Non-empty
  /// `features` replace the stored ones (features may be computed after the first insert).
  TaskRecord upsert_task(std::string_view kernel_name, const nlohmann::json& description,
                         const nlohmann::json& features = nlohmann::json::object());
  TaskRecord get_task(TaskId id) const;
  std::vector<TaskRecord> list_tasks(std::string_view kernel_name = {}) const;

  // --- studies
  /// An empty name becomes "<kernel>@<machine> <time>", with " (2)", " (3)", ... appended
  /// when a study of that name exists. Conflict for a duplicate given name; NotFound for an
  /// unknown kernel, machine or task; InvalidInput when the task belongs to another kernel
  /// name or the budget is negative.
  StudyRecord create_study(const NewStudy& study);
  StudyRecord get_study(StudyId id) const;
  std::optional<StudyRecord> find_study(std::string_view name) const;
  /// Every study, or those of one kernel name; in id order.
  std::vector<StudyRecord> list_studies(std::string_view kernel_name = {}) const;
  /// The ids of every study, ascending: cheaper than list_studies when only which exist matters.
  std::vector<StudyId> study_ids() const;
  void set_study_status(StudyId id, StudyStatus status);
  /// The strategy a study left to its default now uses (it follows what there is to learn from).
  void set_study_strategy(StudyId id, std::string_view strategy);
  /// Deletes a study and every trial of it (a mistaken import, a test run): gone from best
  /// answers and from other studies' priors. An active study is refused (a sweep or workers
  /// may be tuning it): stop it first. Returns the number of trials deleted.
  std::size_t delete_study(StudyId id);
  /// What to do with a stopped study's live leases when it is deleted: refuse (Conflict naming
  /// them and their clients), or end them with the study (their results are refused then).
  enum class LiveLeases { refuse, end };
  struct DeletedStudy {
    std::size_t trials = 0;
    std::size_t leases_ended = 0;  ///< of them, live leases (LiveLeases::end)
  };
  DeletedStudy delete_study(StudyId id, LiveLeases leases);
  /// Sets the number of evaluations the study allows (none: unlimited). InvalidInput when
  /// negative or above kMaxStudyBudget; NotFound for an unknown study.
  void set_study_budget(StudyId id, std::optional<std::int64_t> budget);
  /// Marks the study completed unless a client holds a live lease in it (its result may still
  /// come, and a completed study gives no more suggestions); true when it did. Leases past
  /// their end count as live until expire_leases has run. A stopped study stays stopped.
  bool complete_unless_leased(StudyId id);
  /// Marks an active study completed when its results have reached its budget, or the number
  /// of its `candidates` when given (every configuration measured), and no lease is live; true
  /// when it did.
  bool complete_if_spent(StudyId id, std::optional<std::int64_t> candidates = std::nullopt);

  // --- trials
  /// Stores an evaluated configuration (status not pending). One transaction. Conflict when
  /// the configuration already has a result or a live lease in the study (a configuration is
  /// measured once per study; imports are not held to this).
  TrialId add_trial(StudyId study, const nlohmann::json& config, std::string_view config_key,
                    const Measurement& result, std::string_view client_id = {});
  /// Stores many results in one transaction: all or none (Conflict as add_trial).
  std::vector<TrialId> add_trials(StudyId study, const std::vector<NewTrial>& trials);
  /// Leases a configuration to a client until now + lease_seconds. Conflict when the
  /// configuration already has a live lease or a result in this study.
  TrialId add_pending_trial(StudyId study, const nlohmann::json& config,
                            std::string_view config_key, std::string_view client_id,
                            double lease_seconds);
  struct LeaseRequest {
    nlohmann::json config;
    std::string config_key;
  };
  struct LeaseOutcome {
    std::optional<TrialId> trial;
    std::exception_ptr error;  ///< Conflict: the configuration is taken (add_pending_trial)
    /// The refusal was the budget's, not the configuration's: results and live leases, also
    /// of other processes sharing the database, fill it. The configuration is still free.
    bool over_budget = false;
    /// When the lease ends, as stored (lease_expires_at): clients are told this one.
    std::chrono::system_clock::time_point expires{};
  };
  /// Leases several configurations to one client in ONE transaction. A taken configuration
  /// gets its Conflict and the others are leased; so does one past the study's budget
  /// (over_budget); any other error leases none and is thrown.
  std::vector<LeaseOutcome> add_pending_trials(StudyId study,
                                               const std::vector<LeaseRequest>& batch,
                                               std::string_view client_id, double lease_seconds);
  /// Stores the result of a pending trial, or the late result of one whose lease expired
  /// (accepted once, and only while no other trial of its configuration has a result and the
  /// budget has room: results plus live leases below it). A live lease of the configuration
  /// given meanwhile is withdrawn (status timeout, with a message saying why): its result is
  /// then refused. Conflict when a result was already stored, the configuration has one from
  /// another trial (a withdrawn lease's) or the budget is full; NotFound for an unknown id;
  /// InvalidInput for a pending result.
  TrialRecord complete_trial(TrialId trial, const Measurement& result);

  /// One result of a batch: for `trial`, reported by `client_id` (checked against the client
  /// the trial was leased to unless empty).
  struct Completion {
    TrialId trial;
    std::string client_id;
    Measurement result;
  };
  struct CompletionOutcome {
    std::optional<TrialRecord> record;
    std::exception_ptr error;
    /// The trial already held this very result (a client's retry): nothing was stored.
    bool already_stored = false;
  };
  /// Results of several trials in ONE transaction (one commit for the batch: group commit),
  /// each accepted or refused alone, as complete_trial would, plus Forbidden when the client
  /// is not the one the trial was leased to. The result a trial already has
  /// (same_result) is a retry: its record, already_stored, and no Conflict. When the
  /// commit itself fails every outcome carries that error and nothing is stored.
  std::vector<CompletionOutcome> complete_trials(const std::vector<Completion>& batch);
  /// Pending trials whose lease ended before `now` become timeout (no finished_at). Returns
  /// how many.
  /// Leases that ended before `spare_ended_before` are left alone (a server that just
  /// started gives the workers of leases that ended while it was down time to report).
  std::size_t expire_leases(
      std::chrono::system_clock::time_point now,
      std::optional<std::chrono::system_clock::time_point> spare_ended_before = std::nullopt);
  /// Ends a live lease without a result, as if it expired now (nothing when not pending).
  /// The trial's message says the client released it, or, given `reason`, why it was taken
  /// back from the client. Returns whether it was pending (and is released now).
  bool release_lease(TrialId trial, std::string_view reason = {});
  /// Moves a live lease's end to `expires` (a client whose evaluation takes longer says it is
  /// still at work). Returns whether it was pending and not past its end, or spared as
  /// expire_leases spares it (nothing changes otherwise).
  bool extend_lease(
      TrialId trial, std::chrono::system_clock::time_point expires,
      std::optional<std::chrono::system_clock::time_point> spare_ended_before = std::nullopt);
  TrialRecord get_trial(TrialId id) const;
  /// Every trial of the study, in id (creation) order.
  std::vector<TrialRecord> trials(StudyId study) const;
  /// The trials of the study in `range`, in id order.
  std::vector<TrialRecord> trials(StudyId study, const TrialRange& range) const;
  /// Id of the study's newest trial; 0 when it has none.
  std::int64_t last_trial_id(StudyId study) const;
  /// Parameter names of the configurations of the study's trials with ids up to `up_to`, in
  /// order of first appearance.
  std::vector<std::string> config_names(StudyId study, std::int64_t up_to) const;
  /// config_key of every pending trial of the study.
  std::vector<std::string> pending_keys(StudyId study) const;
  TrialCounts trial_counts(StudyId study) const;
  /// trial_counts of every study `filter` selects that has trials, by study id, in ONE query
  /// (a kernel imported as thousands of studies, one per input, is not read study by study).
  /// A selected study with no trials is absent.
  std::map<StudyId, TrialCounts> study_trial_counts(const StudyFilter& filter) const;
  /// How many distinct configurations (config_key) have an ok trial in the studies `filter`
  /// selects: one measured in two studies (two inputs, or a sweep and an import) counts once.
  std::int64_t measured_configurations(const StudyFilter& filter) const;
  /// The messages of the study's evaluations that failed, timed out or were invalid (leases
  /// that ended with no result left out): each (status, message) once, with how many trials
  /// hold it, a message longer than 2 `edge_chars` characters as its first and its last
  /// `edge_chars` joined by a newline (what failure_reason reads: the first line, and the last
  /// of a program's stderr or a traceback). Grouped by SQLite in one query, so that a study of
  /// 100,000 failures is read as the few messages they share (failure_breakdown).
  std::vector<FailureMessages> failure_messages(StudyId study, std::size_t edge_chars = 1000) const;
  /// What the study's budget counts: trials with a result plus live leases.
  std::int64_t budget_used(StudyId study) const;
  /// SQLite's data_version of this connection: it changes when another connection (another
  /// process sharing the file) commits, and only then.
  std::int64_t data_version() const;
  /// Rows this connection changed since it opened (sqlite3_total_changes64), those of
  /// save_fitted_models aside (a cache of models, saved after predictions): with data_version,
  /// whether the data changed at all.
  std::int64_t changes_made() const;

  // --- queries across studies
  /// The best ok trial of any study of `kernel_name` on `machine` (and `task` when given)
  /// whose direction is `direction` (and objective name `objective` when given), among the
  /// studies of kernel versions with the parameters of the newest of those studies
  /// (SearchSpace::parameters_fingerprint: constraints and defaults aside), each answering with
  /// its best configuration that the constraints of the newest study of those parameters allow
  /// (with results or not), and of those, the studies measured as the newest of them was
  /// (measurement_of).
  /// Times in different units are compared as times; when some studies measure time, studies
  /// in other units or none are left out (they cannot be placed among times).
  std::optional<TrialRecord> best_trial(std::string_view kernel_name, MachineId machine,
                                        std::optional<TaskId> task, Direction direction,
                                        std::string_view objective = {}) const;
  /// The best ok trial of one study, in the study's direction.
  std::optional<TrialRecord> best_trial(StudyId study) const;
  /// Finished trials of every study of the query's kernel that pass its filters (see
  /// PriorQuery), in id order: priors for transfer learning.
  std::vector<PriorTrial> prior_trials(const PriorQuery& query) const;
  /// How many trials prior_trials(query) would read (limit and ok_only aside), per (machine,
  /// task) in name and id order, without reading them: whether the priors moved.
  std::vector<PriorCount> prior_counts(const PriorQuery& query) const;

  // --- import (study_export.h exports)
  /// Files a measured dataset: machine (found by name, else created with a fingerprint from
  /// the file), kernel (dataset kernel_name + space), task {"problem_size": ...}, a study with
  /// strategy "import" and status completed, and one trial per entry: all in ONE transaction.
  /// Conflict when the study name is taken (the dataset was imported already).
  ImportResult import_dataset(const MeasuredDataset& dataset, const ImportOptions& options = {});
  /// import_dataset for each (dataset, options), all in ONE transaction (a file of thousands
  /// of inputs is one commit; on an error nothing of it is stored). One result per dataset.
  std::vector<ImportResult> import_datasets(
      const std::vector<std::pair<MeasuredDataset, ImportOptions>>& datasets);

  // --- fitted models
  /// Stores fitted model parameters by key, replacing those with the same key, all in one
  /// transaction: `models` is {"<key>": {"name": "...", ...}, ...} (the whole value is kept as
  /// JSON). InvalidInput when it is not an object of objects.
  void save_fitted_models(const nlohmann::json& models);
  /// Everything save_fitted_models stored, in the same form.
  nlohmann::json fitted_models() const;

  // --- API tokens
  /// A new token (64 hex digits from 32 random bytes); only its SHA-256 is stored, so this
  /// is the only time it can be read. Conflict when an active token has that name.
  std::string create_token(std::string_view name);
  /// The active (not revoked) token matching `token`, if any.
  std::optional<TokenRecord> verify_token(std::string_view token) const;
  std::vector<TokenRecord> list_tokens() const;
  /// NotFound when no active token has that name.
  void revoke_token(std::string_view name);

 private:
  /// One dataset of an import, inside the caller's transaction; `keep` is set false when what
  /// it wrote must be undone (the file was imported before).
  ImportResult import_one(const MeasuredDataset& dataset, const ImportOptions& options, bool& keep);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tunebase::db
