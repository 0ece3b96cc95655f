#include "api/metrics.h"

#include <cmath>
#include <sstream>

namespace tunebase::api {

namespace {

constexpr double kMicrosPerSecond = 1e6;
constexpr std::size_t kOtherStatus = Metrics::kStatusCodes.size() - 1;

std::size_t status_slot(int status) {
  for (std::size_t i = 0; i < kOtherStatus; ++i) {
    if (Metrics::kStatusCodes[i] == status) return i;
  }
  return kOtherStatus;
}

// Label values are route patterns; escape what the exposition format requires anyway.
std::string escape_label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string format_double(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

void Metrics::Histogram::observe(double seconds) {
  std::size_t slot = 0;
  while (slot < kLatencyBuckets.size() && seconds > kLatencyBuckets[slot]) ++slot;
  buckets[slot].fetch_add(1, std::memory_order_relaxed);
  count.fetch_add(1, std::memory_order_relaxed);
  sum_micros.fetch_add(static_cast<std::uint64_t>(std::llround(seconds * kMicrosPerSecond)),
                       std::memory_order_relaxed);
}

Metrics::Metrics(const std::vector<std::string>& route_labels) : labels_(route_labels) {
  labels_.push_back("unmatched");
  for (std::size_t i = 0; i < labels_.size(); ++i)
    routes_.push_back(std::make_unique<RouteStats>());
}

Metrics::~Metrics() = default;

void Metrics::record_request(std::size_t route, int status, double seconds) {
  auto& stats = *routes_[std::min(route, routes_.size() - 1)];
  stats.by_status[status_slot(status)].fetch_add(1, std::memory_order_relaxed);
  stats.latency.observe(seconds);
}

void Metrics::record_suggestions(double seconds, std::size_t count) {
  suggestion_time_.observe(seconds);
  suggestions_.fetch_add(count, std::memory_order_relaxed);
}

void Metrics::record_result(TrialStatus status) {
  results_[static_cast<std::size_t>(status)].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::record_lease_expired(std::size_t count) {
  leases_expired_.fetch_add(count, std::memory_order_relaxed);
}

void Metrics::record_model_questions(std::int64_t change) {
  model_questions_.fetch_add(change, std::memory_order_relaxed);
}

void Metrics::record_model_question_refused() {
  model_questions_refused_.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::record_model_question_skipped() {
  model_questions_skipped_.fetch_add(1, std::memory_order_relaxed);
}

std::string Metrics::render(std::size_t active_studies, std::size_t pending_leases) const {
  std::ostringstream os;
  os << "# HELP tunebase_http_requests_total HTTP requests served, by route and status code.\n"
     << "# TYPE tunebase_http_requests_total counter\n";
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    for (std::size_t s = 0; s < kStatusCodes.size(); ++s) {
      const auto n = routes_[r]->by_status[s].load(std::memory_order_relaxed);
      if (n == 0) continue;
      os << "tunebase_http_requests_total{route=\"" << escape_label(labels_[r]) << "\",code=\""
         << (s == kOtherStatus ? std::string("other") : std::to_string(kStatusCodes[s])) << "\"} "
         << n << "\n";
    }
  }
  auto histogram = [&](const std::string& name, const std::string& labels, const Histogram& h) {
    std::uint64_t cumulative = 0;
    const std::string sep = labels.empty() ? "" : ",";
    for (std::size_t b = 0; b <= kLatencyBuckets.size(); ++b) {
      cumulative += h.buckets[b].load(std::memory_order_relaxed);
      os << name << "_bucket{" << labels << sep << "le=\""
         << (b == kLatencyBuckets.size() ? std::string("+Inf") : format_double(kLatencyBuckets[b]))
         << "\"} " << cumulative << "\n";
    }
    const std::string braces = labels.empty() ? "" : "{" + labels + "}";
    os << name << "_sum" << braces << " "
       << format_double(static_cast<double>(h.sum_micros.load(std::memory_order_relaxed)) /
                        kMicrosPerSecond)
       << "\n";
    os << name << "_count" << braces << " " << h.count.load(std::memory_order_relaxed) << "\n";
  };
  os << "# HELP tunebase_http_request_duration_seconds Time from a complete request to its "
        "response, by route.\n"
     << "# TYPE tunebase_http_request_duration_seconds histogram\n";
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    if (routes_[r]->latency.count.load(std::memory_order_relaxed) == 0) continue;
    histogram("tunebase_http_request_duration_seconds",
              "route=\"" + escape_label(labels_[r]) + "\"", routes_[r]->latency);
  }
  os << "# HELP tunebase_suggestion_duration_seconds Time to propose one batch of suggestions "
        "(model fit and acquisition).\n"
     << "# TYPE tunebase_suggestion_duration_seconds histogram\n";
  histogram("tunebase_suggestion_duration_seconds", "", suggestion_time_);
  os << "# HELP tunebase_suggestions_total Configurations leased to clients.\n"
     << "# TYPE tunebase_suggestions_total counter\n"
     << "tunebase_suggestions_total " << suggestions_.load(std::memory_order_relaxed) << "\n";
  os << "# HELP tunebase_trials_reported_total Trial results stored through this server, by "
        "status.\n"
     << "# TYPE tunebase_trials_reported_total counter\n";
  for (auto status :
       {TrialStatus::ok, TrialStatus::failed, TrialStatus::timeout, TrialStatus::invalid}) {
    os << "tunebase_trials_reported_total{status=\"" << to_string(status) << "\"} "
       << results_[static_cast<std::size_t>(status)].load(std::memory_order_relaxed) << "\n";
  }
  os << "# HELP tunebase_leases_expired_total Pending trials whose lease ended without a "
        "result.\n"
     << "# TYPE tunebase_leases_expired_total counter\n"
     << "tunebase_leases_expired_total " << leases_expired_.load(std::memory_order_relaxed) << "\n";
  os << "# HELP tunebase_pending_leases Trials leased to clients and not yet reported.\n"
     << "# TYPE tunebase_pending_leases gauge\n"
     << "tunebase_pending_leases " << pending_leases << "\n";
  os << "# HELP tunebase_model_questions Questions to models (predictions, relevance, "
        "predicted best answers) waiting or being answered.\n"
     << "# TYPE tunebase_model_questions gauge\n"
     << "tunebase_model_questions " << model_questions_.load(std::memory_order_relaxed) << "\n";
  os << "# HELP tunebase_model_questions_refused_total Questions to models answered 503: too "
        "many were waiting.\n"
     << "# TYPE tunebase_model_questions_refused_total counter\n"
     << "tunebase_model_questions_refused_total "
     << model_questions_refused_.load(std::memory_order_relaxed) << "\n";
  os << "# HELP tunebase_model_questions_skipped_total Questions to models not answered: their "
        "client had closed the connection before their turn.\n"
     << "# TYPE tunebase_model_questions_skipped_total counter\n"
     << "tunebase_model_questions_skipped_total "
     << model_questions_skipped_.load(std::memory_order_relaxed) << "\n";
  os << "# HELP tunebase_active_studies Studies with a tuning session in memory.\n"
     << "# TYPE tunebase_active_studies gauge\n"
     << "tunebase_active_studies " << active_studies << "\n";
  return os.str();
}

}  // namespace tunebase::api
