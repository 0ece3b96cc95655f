// The tunebase HTTP API, independent of the transport: the route table, authorisation, and
// handlers that translate requests to Store and StudyManager calls and back.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/metrics.h"
#include "api/router.h"
#include "api/study_manager.h"
#include "db/store.h"

namespace tunebase::api {

struct ServiceOptions {
  /// Reads need a token too (by default only writes do).
  bool auth_reads = false;
  /// How long a best-known answer may be served from memory. Writes through this server
  /// invalidate it at once; this bounds how stale it can be after another process (a CLI
  /// import) wrote to the same database file.
  std::chrono::milliseconds best_cache_ttl{1000};
};

/// What handling a request produced.
struct Outcome {
  Response response;
  /// Index of the matched route in router().routes(), or routes().size() when none matched.
  std::size_t route = 0;
  /// The request must be handled (again) elsewhere: by handle(request, target, *defer_to) on
  /// the compute pool, or by handle_batch on the writer thread.
  std::optional<Runs> defer_to;
};

class Service {
 public:
  Service(db::Store& store, ServiceOptions options = {});
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  /// Handles one request: matching, query check, authorisation, the handler; every error
  /// becomes its JSON reply. `here` says which thread this is; when the route runs elsewhere
  /// the outcome says where (defer_to) and nothing ran. The first call (here == io) fills
  /// `request.path` and `query` from `target`.
  Outcome handle(Request& request, const std::string& target, Runs here);
  /// Handles requests deferred to the writer thread, those of one route together. Outcomes
  /// are in the order of `requests`.
  std::vector<Outcome> handle_batch(std::vector<Request*>& requests);

  const Router& router() const { return router_; }
  Metrics& metrics() { return *metrics_; }
  StudyManager& studies() { return studies_; }
  db::Store& store() { return store_; }
  const ServiceOptions& options() const { return options_; }
  /// Checks a request's token from its headers alone, before its body is read, so that a
  /// client without a valid token cannot make the server take in a large body. Returns the
  /// token's name ("" when the route needs none or is unknown: handle() answers those);
  /// throws Unauthorized as handle() would.
  std::string authorize_headers(const std::string& method, const std::string& target,
                                const std::string& authorization) const;
  /// The reply to the exception being handled (error_reply's status, body and headers).
  static Response error_response(std::exception_ptr error);

 private:
  void add_routes();
  void authorize(const Route& route, Request& request) const;
  Response dispatch(const Route& route, Request& request, Runs here);

  // Handlers.
  Response create_machine(Request& request);
  Response list_machines(Request& request);
  Response create_study(Request& request);
  Response list_studies(Request& request);
  Response get_study(Request& request);
  Response list_trials(Request& request);
  Response get_trial(Request& request);
  Response suggest(Request& request);
  Response release_trial(Request& request);
  Response extend_lease(Request& request);
  Response resume_study(Request& request);
  Response stop_study(Request& request);
  Response delete_study(Request& request);
  Response relevance(Request& request);
  std::vector<Response> report_results(std::vector<Request*>& requests);
  std::vector<Response> add_measurements(std::vector<Request*>& requests);
  Response best(Request& request);
  Response predict(Request& request);
  Response import_file(Request& request);
  Response export_study(Request& request);

  /// A read-only connection for queries (round robin).
  db::Store& reader() const;

  db::Store& store_;
  std::vector<std::unique_ptr<db::Store>> readers_;
  mutable std::atomic<std::size_t> next_reader_{0};
  ServiceOptions options_;
  Router router_;
  std::unique_ptr<Metrics> metrics_;
  StudyManager studies_;

  /// Bumped by every write through this server; cached answers from before are stale.
  std::atomic<std::uint64_t> generation_{0};
  struct CachedAnswer {
    std::uint64_t generation = 0;
    std::chrono::steady_clock::time_point expires;
    Response response;
    bool predicted = false;        ///< checked against new measurements before it is reused
    std::int64_t trials_here = 0;  ///< the machine's trials of the kernel (predicted)
  };
  struct CachedPrediction {
    std::uint64_t generation = 0;
    std::chrono::steady_clock::time_point expires;
    PredictedBest prediction;
  };
  mutable std::shared_mutex cache_mutex_;
  std::unordered_map<std::string, CachedAnswer> best_cache_;
  /// Predictions for machines the store does not know, by the query without the machine.
  std::unordered_map<std::string, CachedPrediction> unregistered_predictions_;
};

}  // namespace tunebase::api
