// Priors for transfer learning from the store: what other machines and other inputs measured
// for the same kernel. Lives in apps/ because tuner/ knows nothing of the database.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/space.h"
#include "db/store.h"
#include "tuner/prior.h"

namespace tunebase::cli {

/// Which stored measurements become priors of a study (all defaults: every other study of the
/// kernel version with the same objective and direction).
struct PriorSelection {
  /// Only these machines (names); empty: all.
  std::vector<std::string> machines;
  /// Leave out this machine entirely (e.g. a study that must not see its own machine).
  std::optional<db::MachineId> exclude_machine;
  /// Leave out this study (the one being tuned): its trials are the study's own.
  std::optional<db::StudyId> exclude_study;
  /// Objective name to match ("time"); empty: any.
  std::string objective;
  db::Direction direction = db::Direction::minimize;
  /// At most this many trials per (machine, task), the most recent kept; 0: no limit.
  std::size_t max_per_source = 0;
};

/// Finished trials of `kernel_name` at `version` (Store::trials_for_kernel), one Prior per
/// (machine, task): source = the machine's name (so one machine's tasks are modelled
/// together), task_features = the task's features (or the numbers of its description when it
/// has none), observations = the trials whose configuration is valid in `space`, failures
/// included. Priors with no successful trial are dropped. Sorted by machine name, then task.
std::vector<Prior> priors_from_store(const db::Store& store, const SearchSpace& space,
                                     const std::string& kernel_name, const std::string& version,
                                     const PriorSelection& selection = {});

}  // namespace tunebase::cli
