// Prometheus metrics of the service: requests by route and status, latency histograms, trials
// by status, suggestion time. Lock-free counters: recording costs a few atomic increments.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/trial.h"

namespace tunebase::api {

class Metrics {
 public:
  /// Upper bounds (seconds) of the latency histogram buckets, +Inf implied.
  static constexpr std::array<double, 14> kLatencyBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};
  /// Status codes counted one by one; others are counted as "other".
  static constexpr std::array<int, 14> kStatusCodes = {200, 201, 204, 400, 401, 403, 404,
                                                       405, 408, 409, 413, 500, 503, 0};

  /// One label per route (its pattern); requests that match none count as "unmatched".
  explicit Metrics(const std::vector<std::string>& route_labels);
  ~Metrics();

  /// `route` is an index into the labels, or labels.size() for unmatched requests.
  void record_request(std::size_t route, int status, double seconds);
  void record_suggestions(double seconds, std::size_t count);
  void record_result(TrialStatus status);
  void record_lease_expired(std::size_t count);
  /// Questions to models waiting or running: +1 when one is queued, -1 when it ends.
  void record_model_questions(std::int64_t change);
  /// A question to a model refused (too many waiting) or skipped (its client had gone).
  void record_model_question_refused();
  void record_model_question_skipped();

  /// The text exposition format (version 0.0.4). Gauges are passed in by the caller.
  std::string render(std::size_t active_studies, std::size_t pending_leases) const;

 private:
  struct Histogram {
    std::array<std::atomic<std::uint64_t>, kLatencyBuckets.size() + 1> buckets{};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> sum_micros{0};
    void observe(double seconds);
  };
  struct RouteStats {
    std::array<std::atomic<std::uint64_t>, kStatusCodes.size()> by_status{};
    Histogram latency;
  };
  std::vector<std::string> labels_;
  std::vector<std::unique_ptr<RouteStats>> routes_;
  Histogram suggestion_time_;
  std::atomic<std::uint64_t> suggestions_{0};
  std::array<std::atomic<std::uint64_t>, 5> results_{};
  std::atomic<std::uint64_t> leases_expired_{0};
  std::atomic<std::int64_t> model_questions_{0};
  std::atomic<std::uint64_t> model_questions_refused_{0};
  std::atomic<std::uint64_t> model_questions_skipped_{0};
};

}  // namespace tunebase::api
