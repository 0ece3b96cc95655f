// Transfer learning: surrogates that use what other machines and inputs measured (priors).
//
// Every source (one machine, or one machine over several inputs) becomes a SourceData: its
// successful measurements encoded like the target's (SearchSpace::encode on the target's
// space, plus task-feature columns when the source spans several inputs), with its objective
// in model units: lower is better, passed through the Gaussian copula of that source alone, so
// that sources whose times differ by a factor of ten still speak in the same units (quantiles;
// Salinas, Shen and Perrone, "A quantile-based approach for hyperparameter transfer
// learning", ICML 2020).
//
// Two ways to combine sources with the target's own GP:
//   - stacked residual GPs (Golovin et al., "Google Vizier", KDD 2017, section 5.3): each
//     source is a level fitted on the residuals of the levels below it; the target GP sits on
//     top, fitted on what the stack leaves unexplained;
//   - a ranking-weighted ensemble (RGPE: Feurer, Letham and Bakshy, "Scalable meta-learning
//     for Bayesian optimization using ranking-weighted Gaussian process ensembles", AutoML
//     workshop 2018): one GP per source plus the target GP, weighted by how often each ranks
//     the target's observations best; a misleading source's weight falls to zero.
//
// Large sources (17,956 measurements per GPU in the GEMM data) are subsampled to their best
// region plus a space-filling sample, so that one fit costs about a second; fitted models are
// cached by the content of their data (SourceModelCache), so every session of a process that
// sees the same prior reuses one fit, and their hyperparameters can be saved and restored.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/space.h"
#include "surrogates/gp.h"

namespace tunebase::surrogates {

/// Phi^-1(p) for 0 < p < 1 (InvalidInput otherwise).
double normal_quantile(double p);

/// Gaussian copula of a sample: z_i = Phi^-1(r_i / (n + 1)) with r_i the rank of value i
/// (1 = lowest; tied values share their average rank). Keeps the order, maps any sample to
/// standard normal quantiles, and tames heavy tails (a configuration 60 times slower than the
/// optimum is just the last quantile). Values must be finite.
std::vector<double> gaussian_copula(std::span<const double> values);

/// 64-bit FNV-1a over the bytes of `values`, chained from `seed`: cache keys of data.
std::uint64_t hash_values(std::span<const double> values,
                          std::uint64_t seed = 0xcbf29ce484222325ULL);

/// One source of prior knowledge in model coordinates.
struct SourceData {
  /// Shown to users (machine name, file name).
  std::string name;
  /// One row per measurement, in the target model's encoding.
  Matrix x;
  /// Objective in model units (lower is better), e.g. gaussian_copula of log-times.
  std::vector<double> y;

  std::size_t size() const { return y.size(); }
  /// Hash of x and y: seeds the subsample and the fit, so a model depends on its data only.
  std::uint64_t content_key() const;
  /// content_key and the name: what models are cached under. The name is part of it because
  /// a cached model carries its source's name into the ensemble weights users read, and two
  /// machines whose data transform alike (the copula of times that differ by a factor) are
  /// two sources.
  std::uint64_t key() const;
};

struct SubsampleOptions {
  /// A source with more measurements is cut to this many.
  std::size_t max_points = 384;
  /// Share of max_points given to the best measurements (lowest y); the rest is a
  /// space-filling sample of the others.
  double best_fraction = 0.3;
};

/// Rows to keep: all when n <= max_points, else the best ceil(best_fraction * max_points) by y
/// plus a greedy farthest-point (maximin) sample of the rest started from a random row.
/// Ascending order. Deterministic given `rng`.
std::vector<std::size_t> subsample_indices(const Matrix& x, std::span<const double> y,
                                           const SubsampleOptions& options, Rng& rng);

struct SourceModelOptions {
  SubsampleOptions subsample;
  GpFitOptions fit;
  /// Seeds the subsample and the optimiser starts; part of the cache key.
  std::uint64_t seed = 20240601;

  std::uint64_t key() const;
};

/// A GP fitted on one (subsampled) source. Immutable once built; predict is const and
/// re-entrant.
class SourceModel {
 public:
  /// Subsamples and fits hyperparameters (type-II maximum likelihood).
  static SourceModel fit(const SourceData& data, const SourceModelOptions& options);
  /// Subsamples as fit() would and conditions on given hyperparameters (no optimisation):
  /// how saved hyperparameters are restored.
  static SourceModel condition(const SourceData& data, const SourceModelOptions& options,
                               const GpHyperparameters& hyperparameters);

  Prediction predict(const Matrix& x) const { return gp_.predict(x); }
  JointPrediction predict_joint(const Matrix& x) const { return gp_.predict_joint(x); }

  const std::string& name() const { return name_; }
  /// SourceData::key() of the data combined with SourceModelOptions::key().
  std::uint64_t key() const { return key_; }
  const GaussianProcess& gp() const { return gp_; }
  /// Measurements in the source, and how many of them the GP conditions on.
  std::size_t source_size() const { return source_size_; }
  std::size_t points() const { return gp_.size(); }
  /// {"name", "key" (hex), "source_size", "points", "hyperparameters"}.
  nlohmann::json to_json() const;

 private:
  std::string name_;
  std::uint64_t key_ = 0;
  std::size_t source_size_ = 0;
  GaussianProcess gp_;
};

/// Fitted source models by content, shared by every session of a process, so that a prior is
/// fitted once rather than per study or per proposal. Thread-safe. Also keeps each model's
/// predictions over candidate sets (the enumerated space of a kernel), which do not change.
class SourceModelCache {
 public:
  /// Models kept: a server asked about many new inputs fits a small model for each (a
  /// prediction from the nearest inputs), some hundred kilobytes apiece.
  static constexpr std::size_t kMaxCachedModels = 1024;

  explicit SourceModelCache(std::size_t max_models = kMaxCachedModels)
      : max_models_(std::max<std::size_t>(max_models, 1)) {}

  /// The model of `data`: from the cache, else conditioned on saved hyperparameters (see
  /// load), else fitted now (counted by fit_count). Concurrent callers asking for the same
  /// data wait for one fit. Past `max_models` the least recently used model is dropped.
  std::shared_ptr<const SourceModel> model(const SourceData& data,
                                           const SourceModelOptions& options);
  /// model.predict(candidates), computed once per (model, candidate content).
  std::shared_ptr<const Prediction> candidate_prediction(const SourceModel& model,
                                                         const Matrix& candidates,
                                                         std::uint64_t candidates_key);

  /// Hyperparameter optimisations run so far.
  std::size_t fit_count() const;
  /// Models built from saved hyperparameters without optimising.
  std::size_t restore_count() const;
  /// Requests answered from the cache.
  std::size_t hit_count() const;
  std::size_t size() const;

  /// Hyperparameters of every cached model: {"<key hex>": {"name", "hyperparameters"}, ...}.
  nlohmann::json to_json() const;
  /// Remembers saved hyperparameters (as to_json wrote them); models with those keys are then
  /// conditioned instead of fitted. Throws InvalidInput for a malformed document.
  void load(const nlohmann::json& saved);
  void clear();

  /// The cache of this process (what sessions use unless given another).
  static SourceModelCache& process_cache();

 private:
  struct Cached {
    std::shared_ptr<const SourceModel> model;
    std::uint64_t last_use = 0;  ///< use_clock_ when last asked for
  };
  mutable std::mutex mutex_;
  std::size_t max_models_;
  /// At most max_models_; the least recently used goes first.
  std::unordered_map<std::uint64_t, Cached> models_;
  std::uint64_t use_clock_ = 0;
  std::unordered_map<std::uint64_t, GpHyperparameters> saved_;
  std::unordered_map<std::uint64_t, std::shared_ptr<const Prediction>> predictions_;
  std::size_t fits_ = 0;
  std::size_t restores_ = 0;
  std::size_t hits_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Stacked residual GPs

/// The prior part of a Vizier stack: level k is a GP on source k's y minus the mean of levels
/// 0..k-1 at its points. Built through a cache: a level's data include the residuals, so a
/// level is refitted only when a source below it changed.
class StackedPrior {
 public:
  StackedPrior() = default;
  /// Sources bottom-up (put the most relevant last: it corrects the others).
  static StackedPrior build(const std::vector<SourceData>& sources,
                            const SourceModelOptions& options, SourceModelCache& cache);

  /// mean = sum of the levels' means; variance = the top level's variance.
  Prediction predict(const Matrix& x) const;
  bool empty() const { return levels_.empty(); }
  const std::vector<std::shared_ptr<const SourceModel>>& levels() const { return levels_; }
  /// Points the levels condition on, summed.
  std::size_t points() const;

 private:
  std::vector<std::shared_ptr<const SourceModel>> levels_;
};

/// Weight of the target's own uncertainty in a stack: beta = n / (n + kStackPriorPoints).
inline constexpr double kStackPriorPoints = 10.0;

/// Combines the stack's prior with the target GP fitted on residuals (y - prior mean):
///   mean = prior mean + residual mean,
///   sd   = sd_residual^beta * sd_prior^(1 - beta),  beta = n / (n + kStackPriorPoints),
/// the weighted geometric mean of the Vizier paper: with few target points the prior's
/// certainty carries over, with many the target's own.
Prediction stack_predictions(const Prediction& prior, const Prediction& residual,
                             std::size_t target_points);

// ---------------------------------------------------------------------------------------------
// RGPE

struct RgpeOptions {
  /// Posterior samples drawn to estimate the weights.
  std::size_t samples = 256;
  /// Ranking losses use at most this many target observations (the most recent), so that the
  /// cost stays bounded (pairs grow as n^2).
  std::size_t max_points = 128;
  /// Drop a source whose median loss exceeds this quantile of the target's losses (the
  /// paper's guard against weight dilution by many mediocre sources).
  double dilution_quantile = 0.95;
  bool prevent_dilution = true;
  /// Below this many target observations nothing can be ranked: sources share the weight.
  std::size_t min_points = 3;
};

struct RgpeWeights {
  /// One per source, in order, then the target's (sums to 1).
  std::vector<double> weights;
  /// Median ranking loss of each source's samples, then the target's (NaN when not ranked).
  std::vector<double> median_loss;
  /// Sources dropped by the dilution guard.
  std::vector<bool> dropped;
};

/// Number of misranked pairs: sum over j < k of [(f_j < f_k) xor (y_j < y_k)] (pairs with
/// equal y are skipped).
std::size_t ranking_loss(std::span<const double> f, std::span<const double> y);

/// Ranking-loss weights. Sources are sampled jointly at the target points (`source_x`: the
/// target rows as the sources see them, e.g. with task features appended); the target from
/// the leave-one-out predictive distribution of a GP with `target` hyperparameters on (x, y),
/// so that it is judged on points it did not see. w_i is the share of samples in which model
/// i has the lowest loss (ties split at random). With `target` null (no target model yet) or
/// fewer than min_points observations, the sources share the weight equally.
RgpeWeights rgpe_weights(const std::vector<const SourceModel*>& sources, const Matrix& source_x,
                         const GpHyperparameters* target, const Matrix& x,
                         std::span<const double> y, const RgpeOptions& options, Rng& rng);

/// mean = sum_i w_i mu_i, variance = sum_i w_i^2 var_i over members with w_i > 0.
Prediction weighted_ensemble(const std::vector<const Prediction*>& members,
                             std::span<const double> weights);

}  // namespace tunebase::surrogates
