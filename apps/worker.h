// The sweep worker: asks a tunebase server for configurations, evaluates them here, tells the
// results. Several workers on one study never receive the same configuration.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/client.h"
#include "kernels/evaluator.h"

namespace tunebase::cli {

/// A worker's --lease: the server's default for a lease (an hour) would hold a killed worker's
/// configuration that long.
inline constexpr double kDefaultWorkerLeaseSeconds = 300.0;

struct WorkerOptions {
  std::int64_t study = 0;
  std::string token;
  /// Names this worker in the study's trials; default "<host>:<pid>". Unique per worker: the
  /// worker takes up live leases of this name from before it started as its own.
  std::string client_id;
  /// Renewed every third of it while a configuration is evaluated, so it may be short: a
  /// worker that is killed holds its configuration until its lease ends.
  double lease_seconds = kDefaultWorkerLeaseSeconds;
  /// Stop after this many trials (0: until the study has no more suggestions).
  std::size_t max_trials = 0;
  /// Seconds to keep asking while the remaining budget is leased to other workers (their
  /// leases may expire and come back); 0: stop after a few empty answers (the server may
  /// have lost a race with another server sharing the database).
  double patience_seconds = 0.0;
  bool quiet = false;
};

struct WorkerSummary {
  std::size_t evaluated = 0;
  std::size_t failed = 0;
  /// The message of the last failed evaluation; empty when none failed.
  std::string last_failure;
  /// Results the server refused (the lease had expired and the configuration was taken again).
  std::size_t refused = 0;
  bool interrupted = false;
  std::string stop_reason;
};

/// The POST /v1/studies body of `worker --create-study NAME`: a study named `name` on `machine`
/// of `evaluator`'s kernel, space, input, direction, unit and measurement settings
/// (Evaluator::measurement_settings, kept as the study's settings' "measurement").
nlohmann::json new_study_request(const Evaluator& evaluator, const std::string& name,
                                 const std::string& machine);

/// Checks that `evaluator` tunes the study's kernel and space (InvalidInput naming both when
/// not) and measures its objective in its direction and unit and with its measurement settings
/// (Conflict naming the flags to give; an evaluator without a unit takes the study's), then loops
/// ask (n=1), evaluate, tell until the study is done, max_trials, or Ctrl-C (the trial in progress
/// is finished and reported first).
WorkerSummary run_worker(Evaluator& evaluator, api::HttpClient& client,
                         const WorkerOptions& options);

void add_worker_command(CLI::App& app);

}  // namespace tunebase::cli
