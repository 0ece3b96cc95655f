// Machine against machine from a store: what the machines named measured of a kernel on one
// input, compared by core/comparison.h (tunebase compare, GET /v1/compare).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/comparison.h"
#include "db/store.h"

namespace tunebase::db {

struct ComparisonQuery {
  std::string kernel;
  /// Two or more machine names.
  std::vector<std::string> machines;
  /// The input; none: the one input every machine measured (refused when there are several).
  std::optional<TaskId> task;
  /// Objective name; empty: the one the machines' studies of that input measure.
  std::string objective;
};

/// A failed configuration of FailsOnOne with its stored message.
struct FailureExample {
  FailsOnOne failure;
  std::string message;
};

struct StoredComparison {
  std::string kernel;
  TaskRecord task;
  std::string objective;
  Direction direction = Direction::minimize;
  /// The unit every value is in (the first machine's studies' when they are times; times of
  /// other machines are converted to it); empty for plain numbers.
  std::string unit;
  MachineComparison comparison;
  /// The comparison's fails_on_one, pair by pair, with their messages.
  std::vector<std::vector<FailureExample>> failures;
};

/// Reads every finished trial of the kernel on each machine (all studies of the input, any
/// kernel version; configurations matched by their key) and compares them. NotFound for an
/// unknown kernel, machine or task, or a machine that measured nothing of the kernel (naming
/// what is stored); InvalidInput for fewer than two machines, a machine named twice, machines
/// that measured different inputs and no --task, or studies of several objectives; Conflict
/// when no two of the machines share kMinCommonForCorrelation successful configurations.
StoredComparison compare_stored_machines(const Store& store, const ComparisonQuery& query);

}  // namespace tunebase::db
