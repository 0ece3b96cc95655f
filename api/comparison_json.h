// Machine comparisons and failure breakdowns as the API writes them (GET /v1/compare,
// GET /v1/studies/{id}), shared with tunebase compare --json and tunebase trials --json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/failure_reasons.h"
#include "db/machine_comparison.h"

namespace tunebase::api {

/// {"total", "reasons": [{"status", "reason", "count", "example"}...], "others": {"trials",
/// "reasons"}}.
nlohmann::json failure_reasons_json(const FailureBreakdown& breakdown);
/// The study's failure breakdown, read in one grouped query.
nlohmann::json failure_reasons_json(const db::Store& store, db::StudyId study);

nlohmann::json comparison_json(const db::StoredComparison& c);
/// Why a pair has no rank correlation (fewer common configurations than it needs, or values
/// all equal on one machine); empty when it has one.
std::string no_correlation_reason(const PairComparison& p);

}  // namespace tunebase::api
