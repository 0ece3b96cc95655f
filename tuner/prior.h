// Priors: measurements of the same kernel on other machines or other inputs, which transfer
// strategies learn from before (and while) the study measures anything itself.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/measurements.h"
#include "core/space.h"
#include "core/trial.h"

namespace tunebase {

/// One source of prior measurements: a machine (and task) other than the study's.
struct Prior {
  /// Who measured it, as shown to users (a machine or file name). Priors with the same source
  /// are modelled together; when their task_features differ, those features become inputs of
  /// the model, so it can predict for the study's own task.
  std::string source;
  /// Numbers describing the input measured ({"n": 4096, "nnz": 1.2e6}); may be empty.
  nlohmann::json task_features = nlohmann::json::object();
  /// The measurements, failures included, with configurations of the study's space.
  std::vector<Observation> observations;
  /// Whether lower objective values are better (as for the study; times: true).
  bool minimize = true;

  std::size_t ok_count() const;
};

/// A prior from a measured dataset (Kernel Tuner cache or T4 file) for a study on `space`:
/// configurations are matched by parameter name; entries that are not valid in `space` are
/// left out. The task features are the file's problem size ({"problem_size_0": 4096, ...})
/// when it records one. `source` defaults to the file's device name.
Prior prior_from_dataset(const MeasuredDataset& dataset, const SearchSpace& space,
                         std::string source = {});
/// read_measurements(path), then prior_from_dataset; the source is the device name, or the
/// file name when the file names no device. The file's notes (read_measurements) are added to
/// `notes` when given.
Prior load_prior(const std::string& path, const SearchSpace& space,
                 std::vector<std::string>* notes = nullptr);

/// Task features from a task description: every number in it, nested keys joined by '_' and
/// arrays indexed ({"problem_size": [4096, 2048]} -> {"problem_size_0": 4096,
/// "problem_size_1": 2048}).
nlohmann::json numeric_task_features(const nlohmann::json& description);

/// Up to `count` distinct configurations, the best of each prior taken in turn (its best, then
/// the next source's best, ...): the `prior-best` baseline.
std::vector<Configuration> best_prior_configurations(const std::vector<Prior>& priors,
                                                     const SearchSpace& space, std::size_t count);

/// What the priors agree ran best: each configuration gets each prior's quantile of it among
/// that prior's successes (0 its best; a failure there counts as 1), averaged over the priors
/// that ran it. Configurations that at least half of the sources with a success ran rank
/// first; then by mean quantile, the number of sources that ran it, and the key. Sources are
/// counted by Prior::source: two priors of one source (two studies of one machine and input)
/// are one source.
struct Consensus {
  struct Entry {
    Configuration config;
    double mean_quantile = 0.0;
    std::size_t ran_by = 0;  ///< sources with a success that ran it: at most `priors`
  };
  std::vector<Entry> best;  ///< at most the count asked for, best first
  std::size_t priors = 0;   ///< sources with a success (among the allowed configurations)
};
/// The `count` best by consensus among configurations `allowed` accepts (all when empty).
Consensus consensus_best(const std::vector<Prior>& priors, const SearchSpace& space,
                         std::size_t count,
                         const std::function<bool(const Configuration&)>& allowed = {});

/// Whether the priors measured the study's own input: no numeric task feature differs among
/// them and `study_features` (their consensus then speaks for this input; otherwise the model,
/// which takes the features as inputs, must carry it across).
bool priors_share_the_input(const std::vector<Prior>& priors, const nlohmann::json& study_features);
/// The priors that measured the input of `study_features` (they share a numeric feature with
/// it and none differs), so that their consensus speaks for it whatever other inputs' priors
/// say. Features with no number say nothing about the input: then all priors when they share
/// one input, else none.
std::vector<Prior> priors_of_the_input(const std::vector<Prior>& priors,
                                       const nlohmann::json& study_features);

/// Task features as model inputs: the union of the numeric feature names of the priors and
/// the study, each scaled to [0, 1] over the values seen (log first when all are positive and
/// span a factor of more than kLogFeatureRatio: matrix sizes span decades); a feature that an
/// input does not give, or that is the same everywhere, sits at kMissingFeature.
inline constexpr double kLogFeatureRatio = 10.0;
inline constexpr double kMissingFeature = 0.5;
struct TaskFeatureScaling {
  std::vector<std::string> names;
  std::vector<double> low, high;
  std::vector<bool> log;

  std::size_t size() const { return names.size(); }
  std::vector<double> scale(const nlohmann::json& features) const;
};
TaskFeatureScaling task_feature_scaling(const std::vector<Prior>& priors,
                                        const nlohmann::json& study_features);

/// The priors a prediction for the input of `study_features` rests on: of each source, the
/// `per_source` whose inputs lie nearest to it (Euclidean distance in task_feature_scaling
/// coordinates; the earlier of equally near ones), every one of a source with no more. In their
/// order. A source that measured thousands of inputs is then modelled on the neighbourhood of
/// the one asked about, at a cost that does not grow with the inputs stored.
std::vector<Prior> nearest_inputs(std::vector<Prior> priors, const nlohmann::json& study_features,
                                  std::size_t per_source);

/// The strategy a study should use: `bo-transfer` when it has priors, else `bo`.
std::string default_strategy(bool has_priors);

}  // namespace tunebase
