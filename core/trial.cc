#include "core/trial.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace tunebase {

std::vector<std::string> differing_fields(const Measurement& stored, const Measurement& sent) {
  const auto same_number = [](double x, double y) {
    return x == y || (std::isnan(x) && std::isnan(y));
  };
  std::vector<std::string> fields;
  if (stored.status != sent.status) fields.emplace_back("status");
  if (!same_number(stored.objective, sent.objective)) fields.emplace_back("value");
  if (!std::equal(stored.raw.begin(), stored.raw.end(), sent.raw.begin(), sent.raw.end(),
                  same_number)) {
    fields.emplace_back("raw");
  }
  if (!same_number(stored.cost_seconds, sent.cost_seconds)) fields.emplace_back("cost_seconds");
  if (stored.message != sent.message) fields.emplace_back("message");
  // No metrics and an empty object are both none.
  const auto metrics = [](const nlohmann::json& m) {
    return m.is_null() ? nlohmann::json::object() : m;
  };
  if (metrics(stored.metrics) != metrics(sent.metrics)) fields.emplace_back("metrics");
  return fields;
}

bool same_result(const Measurement& a, const Measurement& b) {
  const auto differing = differing_fields(a, b);
  return std::all_of(differing.begin(), differing.end(), [&](const std::string& field) {
    return field == "cost_seconds" || field == "metrics" || (field == "message" && a.ok());
  });
}

std::string_view utf8_prefix(std::string_view s, std::size_t n) {
  if (n >= s.size()) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

namespace {

// The last `n` bytes of `s`, or fewer, from the start of a UTF-8 character.
std::string_view utf8_suffix(std::string_view s, std::size_t n) {
  if (n >= s.size()) return s;
  std::size_t at = s.size() - n;
  while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) ++at;
  return s.substr(at);
}

// Of a message over the limit, a quarter from its start (what failed) and the rest from its end
// (a program's last words say why).
std::string shortened_message(const std::string& message) {
  constexpr std::size_t kHead = kMaxMessageBytes / 4;
  constexpr std::size_t kNoteRoom = 64;
  const auto head = utf8_prefix(message, kHead);
  const auto tail = utf8_suffix(message, kMaxMessageBytes - kHead - kNoteRoom);
  return std::string(head) + "\n[... " +
         std::to_string(message.size() - head.size() - tail.size()) + " bytes cut ...]\n" +
         std::string(tail);
}

}  // namespace

Measurement storable(Measurement m) {
  if (m.status == TrialStatus::ok && !std::isfinite(m.objective)) {
    std::ostringstream value;
    value << m.objective;
    m.status = TrialStatus::failed;
    m.message = "the evaluation gave no finite objective (" + value.str() + ")" +
                (m.message.empty() ? "" : ": " + m.message);
    m.objective = std::numeric_limits<double>::quiet_NaN();
  }
  if (!std::isfinite(m.cost_seconds) || m.cost_seconds < 0) m.cost_seconds = 0.0;
  std::erase_if(m.raw, [](double r) { return !std::isfinite(r); });
  if (const auto taken = m.raw.size(); taken > kMaxRawValues) {
    std::vector<double> kept(kMaxRawValues);
    for (std::size_t i = 0; i < kMaxRawValues; ++i) kept[i] = m.raw[i * taken / kMaxRawValues];
    m.raw = std::move(kept);
    m.message += std::string(m.message.empty() ? "" : "; ") + "raw holds " +
                 std::to_string(kMaxRawValues) + " of its " + std::to_string(taken) +
                 " measurements, evenly spaced (at most " + std::to_string(kMaxRawValues) +
                 " are stored)";
  }
  if (const auto size =
          m.metrics.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
      size > kMaxMetricsBytes) {
    m.metrics = nlohmann::json::object();
    m.message += std::string(m.message.empty() ? "" : "; ") + "its metrics (" +
                 std::to_string(size) + " bytes as JSON) were left out: more than the " +
                 std::to_string(kMaxMetricsBytes) + " stored";
  }
  // Cut as the API reads it: a byte that is not UTF-8 arrives as U+FFFD, three bytes.
  m.message = nlohmann::json::parse(nlohmann::json(m.message).dump(
                                        -1, ' ', false, nlohmann::json::error_handler_t::replace))
                  .get<std::string>();
  if (m.message.size() > kMaxMessageBytes) m.message = shortened_message(m.message);
  return m;
}

std::string_view to_string(TrialStatus s) {
  switch (s) {
    case TrialStatus::pending:
      return "pending";
    case TrialStatus::ok:
      return "ok";
    case TrialStatus::failed:
      return "failed";
    case TrialStatus::timeout:
      return "timeout";
    case TrialStatus::invalid:
      return "invalid";
  }
  return "unknown";
}

TrialStatus trial_status_from_string(std::string_view s) {
  for (auto status : {TrialStatus::pending, TrialStatus::ok, TrialStatus::failed,
                      TrialStatus::timeout, TrialStatus::invalid}) {
    if (s == to_string(status)) return status;
  }
  throw InvalidInput("unknown trial status \"" + std::string(s) +
                     "\"; allowed: pending, ok, failed, timeout, invalid");
}

Measurement Measurement::success(double objective, std::vector<double> raw, double cost_seconds) {
  Measurement m;
  m.status = TrialStatus::ok;
  m.objective = objective;
  m.raw = std::move(raw);
  m.cost_seconds = cost_seconds;
  return m;
}

Measurement Measurement::failure(TrialStatus status, std::string message, double cost_seconds) {
  Measurement m;
  m.status = status;
  m.message = std::move(message);
  m.cost_seconds = cost_seconds;
  return m;
}

double median(std::vector<double> values) {
  if (values.empty()) throw InvalidInput("median of an empty list");
  const auto mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  // Halves first: the sum of two values near the largest double is infinite.
  return 0.5 * lower + 0.5 * upper;
}

}  // namespace tunebase
