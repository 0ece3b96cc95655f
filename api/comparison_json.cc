#include "api/comparison_json.h"

#include <cmath>

namespace tunebase::api {

namespace {

nlohmann::json number_or_null(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json best_elsewhere_json(const BestElsewhere& b) {
  return {{"from", b.from},
          {"to", b.to},
          {"config_key", b.config_key},
          {"status", b.status ? nlohmann::json(std::string(to_string(*b.status)))
                              : nlohmann::json("not_measured")},
          {"objective", number_or_null(b.value)},
          {"fraction_of_best", number_or_null(b.fraction_of_best)}};
}

}  // namespace

nlohmann::json failure_reasons_json(const FailureBreakdown& breakdown) {
  nlohmann::json reasons = nlohmann::json::array();
  for (const auto& r : breakdown.reasons) {
    reasons.push_back({{"status", std::string(to_string(r.status))},
                       {"reason", r.reason},
                       {"count", r.count},
                       {"example", r.example}});
  }
  nlohmann::json by_status = nlohmann::json::array();
  for (const auto& o : breakdown.others) {
    by_status.push_back({{"status", std::string(to_string(o.status))},
                         {"trials", o.trials},
                         {"reasons", o.reasons}});
  }
  return {{"total", breakdown.total()},
          {"reasons", reasons},
          {"others",
           {{"trials", breakdown.other_trials},
            {"reasons", breakdown.other_reasons},
            {"by_status", by_status}}}};
}

nlohmann::json failure_reasons_json(const db::Store& store, db::StudyId study) {
  return failure_reasons_json(failure_breakdown(store.failure_messages(study)));
}

std::string no_correlation_reason(const PairComparison& p) {
  if (p.spearman) return {};
  if (p.common < kMinCommonForCorrelation) {
    return std::to_string(p.common) + " configuration" + (p.common == 1 ? "" : "s") +
           " ran on both; a rank correlation needs at least " +
           std::to_string(kMinCommonForCorrelation);
  }
  return "the values of one machine are all equal: they have no ranking";
}

nlohmann::json comparison_json(const db::StoredComparison& c) {
  nlohmann::json machines = nlohmann::json::array();
  for (const auto& m : c.comparison.machines) {
    nlohmann::json best = nullptr;
    if (m.best) {
      best = {{"config", m.best->config},
              {"config_key", m.best->config_key},
              {"objective", m.best->value},
              {"trial_id", m.best->trial_id}};
    }
    machines.push_back({{"machine", m.machine},
                        {"configurations", m.configurations},
                        {"ok", m.ok},
                        {"failed", m.failed},
                        {"best", best}});
  }
  nlohmann::json pairs = nlohmann::json::array();
  for (std::size_t i = 0; i < c.comparison.pairs.size(); ++i) {
    const auto& p = c.comparison.pairs[i];
    nlohmann::json examples = nlohmann::json::array();
    for (const auto& e : c.failures[i]) {
      examples.push_back({{"runs_on", e.failure.runs_on},
                          {"fails_on", e.failure.fails_on},
                          {"config", e.failure.config},
                          {"config_key", e.failure.config_key},
                          {"status", std::string(to_string(e.failure.status))},
                          {"trial_id", e.failure.trial_id},
                          {"message", e.message},
                          {"reason", e.reason},
                          {"count", e.count}});
    }
    nlohmann::json pair{
        {"machines", {p.a, p.b}},
        {"measured_on_both", p.measured_on_both},
        {"common", p.common},
        {"spearman", number_or_null(p.spearman)},
        {"top_k", p.top_k},
        {"top_k_overlap", p.top_k_overlap},
        {"best_elsewhere",
         {best_elsewhere_json(p.a_best_on_b), best_elsewhere_json(p.b_best_on_a)}},
        {"runs_on_one_only",
         {{{"runs_on", p.a}, {"fails_on", p.b}, {"count", p.runs_on_a_fails_on_b}},
          {{"runs_on", p.b}, {"fails_on", p.a}, {"count", p.runs_on_b_fails_on_a}}}},
        {"runs_on_one_only_examples", examples}};
    if (const auto why = no_correlation_reason(p); !why.empty()) pair["note"] = why;
    pairs.push_back(std::move(pair));
  }
  return {{"kernel", c.kernel},
          {"task", {{"id", c.task.id.value}, {"description", c.task.description}}},
          {"objective", c.objective},
          {"direction", std::string(db::to_string(c.direction))},
          {"unit", c.unit.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.unit)},
          {"machines", machines},
          {"pairs", pairs}};
}

}  // namespace tunebase::api
