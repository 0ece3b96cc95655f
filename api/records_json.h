// Stored records as the API writes them, shared with the CLI's --json listings so that both
// speak one format.
#pragma once

#include <nlohmann/json.hpp>

#include "db/store.h"

namespace tunebase::api {

nlohmann::json machine_json(const db::MachineRecord& machine);
nlohmann::json counts_json(const db::TrialCounts& counts);
/// A study with its trial counts; with its space and task description when `with_space`.
nlohmann::json study_json(const db::Store& store, const db::StudyRecord& study, bool with_space);

}  // namespace tunebase::api
