// Stored records as the API writes them, shared with the CLI's --json listings so that both
// speak one format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/store.h"
#include "tuner/bo.h"

namespace tunebase::api {

/// The unit of a study's objective values (db::objective_unit) as JSON: null for plain numbers.
nlohmann::json unit_json(const db::StudyRecord& study);

nlohmann::json machine_json(const db::MachineRecord& machine);
/// "the kernels stored are a, b" (each name once, sorted), or "nothing is stored yet": how an
/// unknown kernel's error says what there is.
std::string stored_kernels_text(const db::Store& store);
/// The name of a stored machine that `name` matches but for case and surrounding spaces
/// ("VM" or "vm " for "vm"), empty when there is none or `name` is stored itself: what a
/// misspelt machine, which would be answered as a new one, probably meant.
std::string similar_machine_name(const db::Store& store, const std::string& name);
/// Machines a note names at most: a store of hundreds would bury the note.
inline constexpr std::size_t kListedMachines = 8;
/// The machines stored, for a note on a name the store does not hold: "a, b" (the first
/// kListedMachines, then ", ... (" + `lists_all` + ")"), empty when there is none.
std::string stored_machines_text(const db::Store& store, std::string_view lists_all);
/// The direction every study of `kernel` (of `objective`, when not empty) takes; none when it
/// has no study or they differ: what a question that names no direction means. With `machine`,
/// that machine's studies' direction when it has studies (a kernel measured as a time on one
/// machine and as a rate on another is still asked for the rate where the rate was measured).
/// When that machine's studies differ, the one direction of those that measured something
/// there. With `task`, only that input's studies count, when it has some.
std::optional<db::Direction> studies_direction(const db::Store& store, const std::string& kernel,
                                               const std::string& objective = "",
                                               std::optional<db::MachineId> machine = std::nullopt,
                                               std::optional<db::TaskId> task = std::nullopt);
/// Studies a message on failed evaluations names at most.
inline constexpr std::size_t kListedStudies = 3;
/// Evaluations of `kernel` on `machine` (of `task` and `objective` when given) when every one
/// of them failed: how many, in which studies. None when one succeeded or none has a result.
struct AllFailed {
  std::int64_t evaluations = 0;
  std::vector<db::StudyId> studies;
};
std::optional<AllFailed> all_failed_here(const db::Store& store, const std::string& kernel,
                                         db::MachineId machine,
                                         std::optional<db::TaskId> task = std::nullopt,
                                         const std::string& objective = "");
/// A measured best of fewer configurations than this is said to be one of few: a handful
/// posted by hand, or a sweep stopped early; every search tunebase runs by default measures
/// more (a sweep's budget is 30, bo's space-filling start 5 and its model's first rounds). n
/// configurations drawn at random hold one of the space's best 5% with probability
/// 1 - 0.95^n: 40% for 10 (95% takes 59, Bergstra and Bengio's argument for random search), so
/// a best of fewer may lie far from the machine's best. A search's 30 are no random draw, and
/// saying so after every default sweep would teach users to skip the note.
inline constexpr std::int64_t kFewMeasuredConfigurations = 10;
/// How many configurations succeeded in the studies of `kernel` on `machine` that a measured
/// best is chosen from (of `task` and `objective` when given, in `direction`), and, when fewer
/// than kFewMeasuredConfigurations of a larger space, a note that says so (else empty).
/// `best_study` holds the best: its space is the one counted, its id the one to measure more in.
/// Studies of a kernel version with other parameters (Store::best_trial leaves them out) are
/// not counted, and `other_spaces` says they were left out (else empty); so are studies measured
/// with other settings than `best_study` (db::measurement_of), which `other_measurements` says.
struct MeasuredConfigurations {
  std::int64_t configurations = 0;
  std::string note;
  std::string other_spaces;
  std::string other_measurements;
};
MeasuredConfigurations measured_configurations(const db::Store& store, const std::string& kernel,
                                               const db::MachineRecord& machine,
                                               std::optional<db::TaskId> task,
                                               db::Direction direction,
                                               const std::string& objective,
                                               const db::StudyRecord& best_study);

/// Why a prediction of `kernel` may have too little to learn from: "; predictions learn only
/// from the studies measured as the newest one with a result (rtol 1e-08, ...): 3 studies
/// measured otherwise (the latest: rtol 0.001, ...) are left out"; empty when every study of
/// the kernel with a success was measured alike (db::measurement_of).
std::string measured_otherwise_text(const db::Store& store, const std::string& kernel);
/// "3 evaluations, all failed: `why` shows why" with `why` given each study's id
/// ("GET /v1/studies/7", "tunebase trials --study 7"), those of several studies joined by "or".
std::string all_failed_text(const AllFailed& failed,
                            const std::function<std::string(db::StudyId)>& why);
/// The refusal of a forecast for a study with too few successful results for a model.
Conflict too_few_for_a_model(const db::Store& store, db::StudyId study);
/// What an import tells its user beyond its counts (the file's own notes apart): which input
/// a study keeps, a file that names no input, measurements of another space of the kernel.
/// `kernel_option` and `input_example` spell the options the caller takes ("--kernel",
/// "kernel="; an input given with one).
std::vector<std::string> import_notes(const db::ImportResult& result, bool input_given,
                                      bool file_names_input, std::string_view kernel_option,
                                      std::string_view input_example);
/// "time, GFLOP/s": the objectives the studies of `kernel` measure, each once, sorted.
std::string stored_objectives_text(const db::Store& store, const std::string& kernel);
nlohmann::json counts_json(const db::TrialCounts& counts);
/// A trial, every field always present (null when not set): GET /v1/trials/{id} and
/// tunebase trials --json.
nlohmann::json trial_json(const db::TrialRecord& t);
/// What a forecast whose interval_unknown is set says of its interval.
inline constexpr std::string_view kIntervalUnknownNote =
    "the successful measurements all have one value: their spread, and so the interval, cannot "
    "be estimated from them (lower and upper are that value); measurements of configurations "
    "that differ in it give one";
/// One entry of POST /v1/predict's "predictions" (and tunebase predict --json).
nlohmann::json forecast_json(const nlohmann::json& config, const Forecast& f);
/// A study with its trial counts and task description; with its space when `with_space`.
nlohmann::json study_json(const db::Store& store, const db::StudyRecord& study, bool with_space);

}  // namespace tunebase::api
