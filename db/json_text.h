// Text forms the store, the export and the API share.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tunebase::db {

/// Compact JSON; invalid UTF-8 in user strings is replaced rather than refused.
std::string json_text(const nlohmann::json& j);
/// Raw measurements as a JSON array, non-finite values as null.
nlohmann::json raw_to_json(const std::vector<double>& raw);
/// The shortest text that reads back to the same double ("2", "0.1", "1e+300").
std::string format_number(double v);
/// "rtol 1e-06, max_it 10000, clock cpu": how a study's objective was measured
/// (Evaluator::measurement_settings, a study's measurement_of) for people; "no settings kept"
/// for none.
std::string measurement_text(const nlohmann::json& settings);

}  // namespace tunebase::db
