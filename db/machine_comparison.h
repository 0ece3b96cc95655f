// Machine against machine from a store: what the machines named measured of a kernel on one
// input, compared by core/comparison.h (tunebase compare, GET /v1/compare).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/comparison.h"
#include "core/failure_reasons.h"
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

/// Configurations that run on one machine of a pair and fail on the other for one reason
/// (core/failure_reasons.h): how many, and one of them with its stored message.
struct FailureExample {
  FailsOnOne failure;
  std::string message;
  std::string reason;
  std::size_t count = 0;
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
  /// The compared studies' search space (its parameters' order), of the first machine's.
  nlohmann::json space;
  /// The comparison's fails_on_one, pair by pair, by reason: of each direction the
  /// kListedFailures most frequent reasons, most frequent first.
  std::vector<std::vector<FailureExample>> failures;
};

/// Reads every finished trial of the kernel on each machine (all studies of the input, any
/// kernel version; configurations matched by their key) and compares them. NotFound for an
/// unknown kernel, machine or task, or a machine that measured nothing of the kernel (naming
/// what is stored); InvalidInput for fewer than two machines, a machine named twice, machines
/// that measured different inputs and no --task, or studies of several objectives. Machines
/// that share too few successful configurations are compared all the same (no rank
/// correlation: api::no_correlation_reason says why). An unknown machine that differs from one
/// that measured the kernel only in case, spaces, dashes or underscores is named ("did you
/// mean").
StoredComparison compare_stored_machines(const Store& store, const ComparisonQuery& query);

}  // namespace tunebase::db
