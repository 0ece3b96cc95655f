#include "tuner/bo.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "surrogates/acquisition.h"
#include "surrogates/calibration.h"
#include "surrogates/candidate_posterior.h"
#include "surrogates/feasibility.h"
#include "surrogates/gp.h"
#include "surrogates/transfer.h"
#include "surrogates/transform.h"

namespace tunebase {

namespace {

using surrogates::GaussianProcess;
using surrogates::Matrix;
using surrogates::Prediction;

// Space-filling evaluations before the first model (capped at a quarter of the budget). Five
// rather than eight: on the GPU spaces the model learns more from its own choices than from
// more design points (issue 3 measurements: GEMM A100 and convolution_hub A4000 both better).
constexpr std::size_t kDefaultInitialDesign = 5;
// A GP needs a few successes before its hyperparameters mean anything; with priors, the
// transfer model proposes meanwhile with default target hyperparameters.
constexpr std::size_t kMinObservationsForModel = 3;
// Hyperparameters are refitted at every step up to this many successes, then every
// max(kDefaultRefitEvery, n / kRefitFraction) new successes; in between, the GP is conditioned
// on the new data at fixed hyperparameters.
constexpr std::size_t kAlwaysRefitBelow = 20;
constexpr std::size_t kDefaultRefitEvery = 5;
constexpr std::size_t kRefitFraction = 10;
// Every refit also starts the optimiser from short lengthscales (log l = this, l = 1 on inputs
// in [0,1]) besides the prior's dimension-scaled mode (l = 11 to 13 for 7 to 10 parameters),
// and keeps whichever optimum has the higher log posterior: the likelihood of the rugged GPU
// spaces has a smooth and a rough mode, and the prior mode alone finds only the smooth one.
constexpr double kDefaultShortStart = 0.0;
// Every kDefaultLocalEvery-th proposal is restricted to configurations within
// kDefaultLocalRadius encoded coordinates of the best one seen (a discrete trust region): the
// acquisition over the whole space keeps exploring far corners of the GPU spaces, and the
// near-optimal configurations are mostly one parameter step from a good one.
constexpr std::size_t kDefaultLocalEvery = 2;
constexpr std::size_t kDefaultLocalRadius = 1;
// Spaces without a candidate list: random valid samples scored per proposal, then a local
// search over neighbours from the best few.
constexpr std::size_t kDefaultCandidateSamples = 2048;
constexpr std::size_t kLocalSearchStarts = 5;
// Candidates of the first pool that later proposals of a batch re-score.
constexpr std::size_t kBatchShortlist = 256;
// Rejected draws the candidate pool of one proposal may spend (some tens of milliseconds).
constexpr std::size_t kMaxPoolDraws = 200'000;
// Successes the target GP is conditioned on at most (and observations the feasibility model
// sees): the best half of them and an even random sample of the rest, chosen again at each
// refit and extended by new results in between. A GP costs O(n^3) time and O(n m) memory for
// m candidates: a study given 6,000 outside measurements took 7.6 s and 860 MB per suggestion.
constexpr std::size_t kDefaultMaxModelPoints = 1500;
constexpr std::size_t kLocalSearchSteps = 30;
// Kriging believer fantasies (pending configurations, a batch's earlier picks) count against
// max_model_points: the model holds at most as many as leave it within that, and never more
// than kMaxFantasies, the most recent. Each costs O(n m) over the candidates, every proposal:
// with 1,000 live leases a proposal of one took 15 s, a batch of 1,000 took 59 s. At least
// kMinFantasies all the same, so that a batch still spreads out when the model is full.
constexpr std::size_t kMaxFantasies = 128;
constexpr std::size_t kMinFantasies = 16;
// A configuration that failed on a prior machine probably fails here too (convolution_hub:
// 155 of A4000's 161 failures also fail on A100). P(feasible | failed on a prior) starts at
// kPriorFailureOk / kPriorFailureCount = 0.1 and moves with what the study sees: (ok + 0.5) /
// (n + 5) over the study's observations of such configurations.
constexpr double kPriorFailureOk = 0.5;
// stacked: the largest factor between the study's units and the stack's.
constexpr double kMaxStackScale = 3.0;
constexpr double kPriorFailureCount = 5.0;
// A parameter value that every failure of the priors has (at least kMinFailingValueRuns of
// them, and not every run), and that failed in at least this share of their runs with it,
// probably fails here too: a code path that breaks, as an unsupported instruction. Its
// configurations' P(feasible) is (ok + kPriorFailureOk) / (runs + 1) over the priors' and the
// study's runs with it. Values that only some failures have say little in a small prior (5
// failures with buggy = 1, 4 of them also with block_size_x = 8), and GPU spaces fail by
// size, not by one value: convolution_hub's failures share none.
constexpr double kFailingValueShare = 0.25;
constexpr double kMinFailingValueRuns = 2.0;
// The study's own failures, per value of a categorical parameter: with a handful of
// observations and a one-hot encoding (PETSc's 15 parameters take 41 columns) the feasibility
// model's lengthscales stay near their prior's mode (26 there), where two values of one
// parameter, sqrt 2 apart, correlate 0.99: its P(feasible) came out flat at the base rate
// (bcsstk19 after the priors' inputs: 0.34 for pc_type hypre, failed 10 times in 10, and for
// cg with ILU, which ran), and a sweep kept proposing what failed. A value that failed at
// least kMinFailingValueRuns times, and more often than the study's runs without it, splits
// the study's runs in two: those with such a value and those without. Each configuration's
// P(feasible) is the model's, moved by the ratio of its part's rate, (ok + kPriorFailureOk) /
// (runs + 1) (the lowest of its failing values'), to the base rate the model falls back to:
//   P = min(1, P_model * P_part / P_base)
// prior-best: the priors' best configurations tried before the model takes over.
constexpr std::size_t kDefaultPriorBestCount = 10;
// Zero-shot from one source: one machine says nothing of how machines differ, so the interval
// assumes they differ as the GPUs of the measured tuning spaces do (../shared/data/gpu: gemm,
// convolution, convolution_hub and dedispersion on 3 to 5 GPUs each). There the median
// |log ratio| of two machines' times at the same quantile (0, 0.1 and 0.5) is 0.42 to 1.04,
// about 0.56 overall; for a normal difference that is a standard deviation of 0.56 / 0.674 =
// 0.83 in log units: a factor of 2.3 either way at 68%.
constexpr double kOneSourceLogSpread = 0.83;
// Forecast intervals (interval_half_width): pseudo-observations of a calibrated model in the
// prior of the interval scale, and the probability of the interval a forecast reports.
constexpr double kIntervalPriorPoints = 2.0;
constexpr double kCentral68 = 0.6826894921370859;  // Phi(1) - Phi(-1)
// Below this many target rows, the interval scale comes from kIntervalFolds-fold
// cross-validation with refitted hyperparameters; from it on, from leave-one-out residuals.
constexpr std::size_t kIntervalRefitBelow = 200;
constexpr std::size_t kIntervalFolds = 10;
// From this many target rows on, each fold's refit descends only from the hyperparameters fitted
// on all rows and from short lengthscales, not from the prior mode and two random draws too: from
// scratch the ten refits took 0.4 to 0.8 s at 100 rows and 1.2 to 3.3 s at 199 (GEMM A100, 2-core
// VM), and there the two descents give the same intervals (every "in 68%" of
// bench/calibration.sh within 0.03 at 50, 0.01 at 100 and 200 results). With fewer rows a fold
// may fit another mode than all rows do, which the interval has to show (one descent from the
// whole's optimum for every n: 0.61 inside instead of 0.74 on GEMM A100 at 10 results), and
// refits from scratch cost less.
constexpr std::size_t kIntervalWarmFoldsFrom = 50;
// Configurations a study may measure before its strategy's first proposal: a sweep's default,
// its baseline.
constexpr std::size_t kBaselineMeasurements = 1;
constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

Matrix rows_to_matrix(const std::vector<std::vector<double>>& rows, std::size_t dim) {
  return surrogates::to_matrix(rows, dim);
}

// Encoded columns that can vary: a parameter with one value adds nothing but would inflate
// the dimension the lengthscale prior scales with.
std::vector<std::size_t> active_columns(const SearchSpace& space) {
  std::vector<std::size_t> active;
  std::size_t column = 0;
  for (const auto& p : space.parameters()) {
    const std::size_t width = p.kind == ParamKind::categorical ? p.values.size() : 1;
    const bool varies = !p.is_discrete() || p.values.size() > 1;
    for (std::size_t k = 0; k < width; ++k, ++column) {
      if (varies) active.push_back(column);
    }
  }
  if (active.empty()) active.push_back(0);
  return active;
}

// The parameter each of `columns` (of the encoding) belongs to.
std::vector<std::size_t> parameters_of_columns(const SearchSpace& space,
                                               const std::vector<std::size_t>& columns) {
  std::vector<std::size_t> parameter_of_column;
  for (std::size_t i = 0; i < space.dimension(); ++i) {
    const auto& p = space.parameter(i);
    const std::size_t width = p.kind == ParamKind::categorical ? p.values.size() : 1;
    parameter_of_column.insert(parameter_of_column.end(), width, i);
  }
  std::vector<std::size_t> out;
  for (const std::size_t c : columns) out.push_back(parameter_of_column[c]);
  return out;
}

// Which of `columns` (of the encoding) one-hot encode a categorical parameter, for the GP
// priors (GpPriors::one_hot_columns); empty when none do.
std::vector<bool> one_hot_columns(const SearchSpace& space,
                                  const std::vector<std::size_t>& columns) {
  std::vector<bool> out;
  bool any = false;
  for (const std::size_t parameter : parameters_of_columns(space, columns)) {
    out.push_back(space.parameter(parameter).kind == ParamKind::categorical);
    any = any || out.back();
  }
  if (!any) out.clear();
  return out;
}

// The Kriging believer's fantasies in a GP beyond its first `base` rows: at most `limit` of
// them, the most recent. A GP drops only its latest rows, so when the window is full it is
// emptied and its newer half added again: per fantasy, no more work than adding it.
class FantasyWindow {
 public:
  // limit > 0.
  FantasyWindow(GaussianProcess& gp, std::size_t base, std::size_t limit)
      : gp_(gp), base_(base), limit_(limit) {}

  void add(std::vector<double> x, double y) {
    if (held_.size() == limit_) {
      held_.erase(held_.begin(), held_.end() - static_cast<long>(limit_ / 2));
      gp_.truncate(base_);
      for (const auto& [kept_x, kept_y] : held_) gp_.add_observation(kept_x, kept_y);
    }
    gp_.add_observation(x, y);
    held_.emplace_back(std::move(x), y);
    most_ = std::max(most_, held_.size());
  }
  /// The most fantasies the GP held at once.
  std::size_t most() const { return most_; }

 private:
  GaussianProcess& gp_;
  std::size_t base_;
  std::size_t limit_;
  std::vector<std::pair<std::vector<double>, double>> held_;
  std::size_t most_ = 0;
};

// Model value of an objective: log for positive objectives, negated when maximising, so that
// lower is always better.
double model_value(double objective, bool log, bool minimize) {
  const double g = log ? std::log(objective) : objective;
  return minimize ? g : -g;
}
// Clamped to the finite doubles: a bound of an objective near the largest double would
// otherwise be infinite, which JSON cannot carry.
double objective_value(double g, bool log, bool minimize) {
  const double v = minimize ? g : -g;
  constexpr double kMax = std::numeric_limits<double>::max();
  return std::clamp(log ? std::exp(v) : v, -kMax, kMax);
}

// Inverse of the Gaussian copula of a sample (surrogates::gaussian_copula): z -> the value the
// copula put there. Its knots are the sample's distinct values, each at the mean rank of its
// ties, as the copula placed them: between knots linear in the position Phi(z) (n + 1) - 1,
// past the outer knots linear in z with the slope the sample shows between them (its spread
// per standard deviation). Capped at the outer order statistics instead, a forecast could not
// lie beyond the best value seen, and the interval of one between two tied values had no width.
class InverseCopula {
 public:
  InverseCopula() = default;
  explicit InverseCopula(const std::vector<double>& sorted) : n_(sorted.size()) {
    for (std::size_t i = 0; i < n_;) {
      std::size_t j = i;
      while (j + 1 < n_ && sorted[j + 1] == sorted[i]) ++j;
      positions_.push_back(0.5 * static_cast<double>(i + j));
      values_.push_back(sorted[i]);
      i = j + 1;
    }
    if (values_.size() < 2) return;
    z_first_ = z_at(positions_.front());
    z_last_ = z_at(positions_.back());
    // In long double: values near the largest double would overflow to infinity here.
    slope_ = (static_cast<long double>(values_.back()) - values_.front()) / (z_last_ - z_first_);
  }

  double operator()(double z) const {
    if (values_.empty()) return z;
    if (values_.size() == 1) return values_.front();  // one value everywhere: nothing to scale
    const double position = surrogates::normal_cdf(z) * (static_cast<double>(n_) + 1.0) - 1.0;
    if (position <= positions_.front()) return extrapolate(values_.front(), z - z_first_);
    if (position >= positions_.back()) return extrapolate(values_.back(), z - z_last_);
    const auto hi = static_cast<std::size_t>(
        std::upper_bound(positions_.begin(), positions_.end(), position) - positions_.begin());
    const std::size_t lo = hi - 1;
    return values_[lo] + (position - positions_[lo]) / (positions_[hi] - positions_[lo]) *
                             (values_[hi] - values_[lo]);
  }

 private:
  double z_at(double position) const {
    return surrogates::normal_quantile((position + 1.0) / (static_cast<double>(n_) + 1.0));
  }
  // Past an outer knot, clamped to the finite doubles.
  double extrapolate(double knot, double dz) const {
    constexpr long double kMax = std::numeric_limits<double>::max();
    return static_cast<double>(std::clamp(knot + dz * slope_, -kMax, kMax));
  }

  std::size_t n_ = 0;
  std::vector<double> positions_;  // of the distinct values, 0-based mean ranks
  std::vector<double> values_;
  double z_first_ = 0.0;
  double z_last_ = 0.0;
  long double slope_ = 0.0;
};

// One task of a prior source: its input's scaled features and its sorted model values.
struct TaskValues {
  std::vector<double> features;
  std::vector<double> values;
};

double squared_distance(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0;
  for (std::size_t f = 0; f < a.size(); ++f) d += (a[f] - b[f]) * (a[f] - b[f]);
  return d;
}

// The values zero-shot forecasts of one source are told in: the study's own input's when the
// source measured it, else its tasks' quantile functions averaged with Gaussian weights
// exp(-d^2 / 2 l^2) of their distance d to the study's input, l the median distance between
// neighbouring tasks. Between two inputs that blends their values (on the model's scale: log
// times, a geometric mean); beyond the inputs measured the nearest one's dominate, so nothing
// is extrapolated. Before, an input measured nowhere took the nearest task's values: a size
// between two measured ones was forecast at the smaller one's times.
std::vector<double> units_for_the_study(std::vector<TaskValues> tasks,
                                        const std::vector<double>& study_features) {
  std::erase_if(tasks, [](const TaskValues& t) { return t.values.empty(); });
  if (tasks.empty()) return {};
  std::vector<double> distance;
  for (const auto& t : tasks) distance.push_back(squared_distance(t.features, study_features));
  const auto nearest = static_cast<std::size_t>(std::min_element(distance.begin(), distance.end()) -
                                                distance.begin());
  if (distance[nearest] == 0.0 || tasks.size() == 1) return std::move(tasks[nearest].values);
  // The spacing of the tasks: each one's squared distance to its nearest other (0 for tasks
  // of equal features, which tell nothing of it).
  std::vector<double> spacing;
  for (std::size_t a = 0; a < tasks.size(); ++a) {
    double closest = std::numeric_limits<double>::infinity();
    for (std::size_t b = 0; b < tasks.size(); ++b) {
      if (a != b)
        closest = std::min(closest, squared_distance(tasks[a].features, tasks[b].features));
    }
    if (closest > 0.0) spacing.push_back(closest);
  }
  double scale = 1.0;  // every task at one point: equal weights
  if (!spacing.empty()) {
    std::nth_element(spacing.begin(), spacing.begin() + spacing.size() / 2, spacing.end());
    scale = spacing[spacing.size() / 2];
  }
  std::size_t size = 0;
  for (const auto& t : tasks) size = std::max(size, t.values.size());
  std::vector<double> out(size, 0.0);
  double total = 0.0;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const double w = std::exp(-(distance[t] - distance[nearest]) / (2.0 * scale));
    total += w;
    const auto& values = tasks[t].values;
    const double k = static_cast<double>(values.size());
    for (std::size_t i = 0; i < size; ++i) {
      // The task's empirical quantile at level (i + 0.5) / size, linear between its values.
      const double at = std::clamp((i + 0.5) / static_cast<double>(size) * k - 0.5, 0.0, k - 1);
      const auto below = static_cast<std::size_t>(at);
      const auto above = std::min(below + 1, values.size() - 1);
      const double frac = at - static_cast<double>(below);
      out[i] += w * (values[below] + frac * (values[above] - values[below]));
    }
  }
  for (auto& v : out) v /= total;
  return out;
}

class BayesianOptimization final : public ModelBasedStrategy {
 public:
  BayesianOptimization(const StrategyOptions& options, TransferMode mode, std::string name)
      : name_(std::move(name)), mode_(mode) {
    const OptionReader read(options, name_);
    constexpr std::uint64_t kMaxCount = 1'000'000;
    constexpr double kMaxMagnitude = 1e6;
    seed_ = read.count("seed", 0, 0, std::numeric_limits<std::uint64_t>::max());
    initial_design_ = read.count("initial_design", 0, 0, kMaxCount);
    refit_every_ = read.count("refit_every", kDefaultRefitEvery, 1, kMaxCount);
    refit_below_ = read.count("refit_below", kAlwaysRefitBelow, 0, kMaxCount);
    candidate_samples_ = read.count("candidate_samples", kDefaultCandidateSamples, 1, kMaxCount);
    max_model_points_ =
        read.count("max_model_points", kDefaultMaxModelPoints, kMinObservationsForModel, kMaxCount);
    acquisition_.kind = surrogates::acquisition_from_string(read.text("acquisition", "log_ei"));
    acquisition_.kappa = read.number("kappa", 2.0, 0.0, kMaxMagnitude);
    acquisition_.min_feasible_probability =
        read.number("min_feasible", acquisition_.min_feasible_probability, 0.0, 1.0);
    log_min_feasible_ = std::log(acquisition_.min_feasible_probability);
    fit_options_.kind =
        surrogates::covariance_kind_from_string(read.text("covariance", "matern52"));
    const auto output = read.text("output", "copula");
    if (output != "copula" && output != "log") {
      throw InvalidInput(name_ + " option output must be \"copula\" or \"log\", got \"" + output +
                         "\"");
    }
    copula_ = output == "copula";
    // Absent: the default; null: none (the GP module's dimension-scaled prior mode, no
    // extra optimiser start).
    fit_options_.priors.lengthscale_location =
        read.optional_number("lengthscale_location", {}, -kMaxMagnitude, kMaxMagnitude);
    short_start_ =
        read.optional_number("short_start", kDefaultShortStart, -kMaxMagnitude, kMaxMagnitude);
    rgpe_options_.samples = read.count("rgpe_samples", rgpe_options_.samples, 1, kMaxCount);
    source_options_.subsample.max_points =
        read.count("prior_points", source_options_.subsample.max_points, 1, kMaxCount);
    source_options_.subsample.best_fraction =
        read.number("prior_best_fraction", source_options_.subsample.best_fraction, 0.0, 1.0);
    prior_best_count_ =
        read.count("prior_best", name_ == "prior-best" ? kDefaultPriorBestCount : 0, 0, kMaxCount);
    consensus_first_ =
        read.count("consensus_first", mode_ != TransferMode::none && name_ != "prior-best" ? 1 : 0,
                   0, kMaxCount);
    local_every_ = read.count("local_every", kDefaultLocalEvery, 0, kMaxCount);
    local_radius_ = read.count("local_radius", kDefaultLocalRadius, 1, kMaxCount);
    source_options_.fit.kind = fit_options_.kind;
    source_options_.fit.priors = fit_options_.priors;
  }

  std::string name() const override { return name_; }
  nlohmann::json diagnostics() const override { return diagnostics_; }

  std::vector<Configuration> propose(const TuningState& state, std::size_t n, Rng& rng) override {
    diagnostics_ = {{"strategy", name_}};
    std::vector<Configuration> out;
    std::unordered_set<std::string> chosen;
    auto take_listed = [&](const std::vector<Configuration>& list) {
      for (const auto& c : list) {
        if (out.size() == n) return;
        const auto key = state.space->key(c);
        if (!state.taken.count(key) && !chosen.count(key) && state.is_candidate(c)) {
          chosen.insert(key);
          out.push_back(c);
        }
      }
    };
    // prior-best: the priors' best configurations first.
    if (prior_best_count_ > 0 && state.has_priors()) {
      if (prior_best_list_.empty()) {
        prior_best_list_ =
            best_prior_configurations(*state.priors, *state.space, prior_best_count_);
      }
      const std::size_t before = out.size();
      take_listed(prior_best_list_);
      if (out.size() > before) diagnostics_["phase"] = "prior best";
    }
    // The first proposals of a transfer study whose input priors measured too: what those
    // priors agree ran best (consensus_best), not the model's lowest mean, which is an
    // optimistic interpolation between the sources' subsampled points (convolution_hub A4000
    // from A6000: 0.28 of the optimum, where the consensus gives 0.99).
    // At the study's start, that is: a sweep measures the default configuration first, as its
    // baseline, which is no reason to skip the consensus.
    if (out.size() < n && consensus_first_ > 0 && state.has_priors() &&
        state.taken.size() < consensus_first_ + kBaselineMeasurements) {
      if (consensus_list_.empty()) {
        const auto consensus = consensus_best(
            priors_of_the_input(*state.priors, state.task_features), *state.space, consensus_first_,
            [&](const Configuration& c) { return state.is_candidate(c); });
        for (const auto& e : consensus.best) consensus_list_.push_back(e.config);
      }
      std::size_t taken = 0;  // of the consensus, proposed before
      for (const auto& c : consensus_list_) taken += state.taken.count(state.space->key(c));
      const std::size_t before = out.size();
      for (const auto& c : consensus_list_) {
        if (out.size() == n || taken + out.size() - before >= consensus_first_) break;
        const auto key = state.space->key(c);
        if (!state.taken.count(key) && !chosen.count(key)) {
          chosen.insert(key);
          out.push_back(c);
        }
      }
      if (out.size() > before) diagnostics_["phase"] = "priors' consensus";
      if (out.size() == n) {
        // The model all the same, for what suggestions report (the ensemble weights).
        prepare_transfer(state);
        update_model(state, rng);
        return out;
      }
    }
    if (out.size() == n) return out;

    prepare_transfer(state);
    const bool transfer = transfer_ready();
    const std::size_t initial = initial_design(state);
    // The initial design (or, for a first batch larger than it, a design of the batch's size:
    // the initial design's points went round to their own neighbours), then (everything
    // failed so far, so no model yet) a design over the whole budget: still space-filling,
    // never circling the first few points.
    const std::size_t design_size = state.taken.size() < initial
                                        ? std::max(initial, state.taken.size() + n)
                                        : std::max(state.budget, state.taken.size() + n);
    auto take_design = [&](std::size_t count) {
      // Not what this call picked already (the priors' best or consensus, neighbours of what
      // ran): a design point snapped to one was dropped, and the batch came back short.
      auto more = latin_hypercube_proposals(state, count, seed_, design_size, rng, chosen);
      for (auto& c : more) {
        if (chosen.insert(state.space->key(c)).second) out.push_back(std::move(c));
      }
    };
    const bool design_done = state.observations.size() + state.pending.size() >= initial;
    if (!transfer && design_done && state.ok_count() > 0 &&
        state.ok_count() < kMinObservationsForModel) {
      // Something runs, but too little to model (most of the space fails: a hard matrix that
      // only a direct solver handles). What runs is often next to what ran, as another
      // package of the same factorisation: every other proposal changes one parameter of a
      // configuration that ran; the others keep to the space-filling design.
      const std::size_t want = n - out.size();
      const std::size_t local = (want + (state.observations.size() % 2 == 0 ? 1 : 0)) / 2;
      if (local > 0) {
        diagnostics_["phase"] = "beside what ran";
        take_neighbours_of_successes(state, local, chosen, out, rng);
      }
      if (out.size() < n) {
        diagnostics_["phase"] = "initial design";
        take_design(n - out.size());
      }
      return out;
    }
    if (!transfer && (!design_done || state.ok_count() < kMinObservationsForModel)) {
      diagnostics_["phase"] = "initial design";
      take_design(n - out.size());
      return out;
    }
    if (transfer && state.ok_count() == 0 && !state.observations.empty()) {
      // What the priors recommend failed here, and nothing has succeeded yet: priors that say
      // nothing of feasibility on this machine or input may keep pointing at what fails. Every
      // other proposal comes from the space-filling design until something runs.
      const std::size_t want = n - out.size();
      const std::size_t odd = want % 2 == 1 && state.observations.size() % 2 == 1 ? 1 : 0;
      if (want / 2 + odd > 0) {
        diagnostics_["phase"] = "design beside the priors";
        take_design(want / 2 + odd);
        if (out.size() == n) return out;
      }
    }

    const auto fit_start = std::chrono::steady_clock::now();
    update_model(state, rng);
    diagnostics_["fit_ms"] = elapsed_ms(fit_start);
    const auto acq_start = std::chrono::steady_clock::now();
    auto picked = state.candidates ? maximise_over_candidates(state, n - out.size(), chosen)
                                   : maximise_by_sampling(state, n - out.size(), chosen, rng);
    diagnostics_["scored"] = state.candidates ? "every candidate" : "sampled candidates";
    diagnostics_["acquisition_ms"] = elapsed_ms(acq_start);
    if (!diagnostics_.contains("phase"))
      diagnostics_["phase"] = target_.n_ok == 0 ? "zero-shot" : "model";
    for (auto& c : picked) out.push_back(std::move(c));
    return out;
  }

  std::vector<Forecast> forecast(const TuningState& state,
                                 const std::vector<Configuration>& configs) override {
    if (configs.empty()) return {};
    prepare_transfer(state);
    if (!transfer_ready() && state.ok_count() < kMinObservationsForModel) return {};
    model_for_answers(state);
    if (!forecast_half_width_) forecast_half_width_ = interval_half_width();
    std::vector<std::vector<double>> rows;
    for (const auto& c : configs) rows.push_back(encode(state, c));
    const Matrix x = rows_to_matrix(rows, model_dimension(state));
    const Prediction prediction = predict_combined(x);
    std::vector<double> log_feasible = model_log_feasible(state, x, configs);
    if (log_feasible.empty()) log_feasible.assign(configs.size(), 0.0);
    log_feasible = with_prior_failures(std::move(log_feasible), prior_log_feasible(state, configs));
    // What a measurement would give: the latent function's uncertainty and the noise the
    // target's measurements showed (zero-shot, the spread between machines stands for both).
    const double noise = target_.sorted_g.empty() ? 0.0 : gp_.hyperparameters().noise_variance;
    // One level measured here (one success, or several alike): the study's own values would map
    // every forecast to it, with no interval. The priors' values, as for a machine with nothing
    // measured, moved to pass through what was measured, say more.
    const bool one_level = transfer_ready() && !target_.sorted_g.empty() &&
                           target_.sorted_g.front() == target_.sorted_g.back() &&
                           !source_inverse_.empty() && log_ == zero_shot_log_;
    double shift = 0.0;
    if (one_level) {
      const Prediction at_measured = predict_combined(target_.x);
      for (std::size_t i = 0; i < target_.g.size(); ++i)
        shift += target_.g[i] - sources_log_units(at_measured.mean[i]);
      shift /= static_cast<double>(target_.g.size());
    }
    const auto log_units = [&](double z) {
      return one_level ? sources_log_units(z) + shift : to_log_units(z);
    };
    const bool from_sources = target_.sorted_g.empty() || one_level;
    std::vector<Forecast> out;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const double sd =
          *forecast_half_width_ * std::sqrt(std::max(prediction.variance[i], 0.0) + noise);
      const double z = prediction.mean[i];
      const double g = log_units(z);
      // Values that come from the priors are on their scale (log_units): how far this
      // machine's level may lie from theirs widens the interval on both sides.
      const double spread = from_sources ? between_sources_sd(z) : 0.0;
      const double g_lo = g - std::hypot(g - log_units(z - sd), spread);
      const double g_hi = g + std::hypot(log_units(z + sd) - g, spread);
      const bool log = from_sources ? zero_shot_log_ : log_;
      Forecast f;
      f.mean = objective_value(g, log, state.minimize);
      const double a = objective_value(g_lo, log, state.minimize);
      const double b = objective_value(g_hi, log, state.minimize);
      f.lower = std::min(a, b);
      f.upper = std::max(a, b);
      f.std = 0.5 * g_hi - 0.5 * g_lo;  // halves first: g near the largest double
      f.log_scale = log;
      f.probability_feasible = std::exp(log_feasible[i]);
      f.from_priors = target_.n_ok == 0;
      f.interval_unknown = !from_sources && target_.sorted_g.front() == target_.sorted_g.back();
      out.push_back(f);
    }
    return out;
  }

  static bool all_successes_equal(const TuningState& state) {
    const Observation* first = nullptr;
    for (const auto& o : state.observations) {
      if (!o.result.ok()) continue;
      if (!first) {
        first = &o;
      } else if (o.result.objective != first->result.objective) {
        return false;
      }
    }
    return true;
  }

  // Of each categorical parameter, the values whose one-hot column the model's successes vary
  // in (some ran with the value, some without): the lengthscale of any other column is its
  // prior's, short for one-hot columns (GpPriors::categorical_lengthscale_location), and says
  // nothing of how much the parameter matters.
  static std::vector<std::vector<bool>> telling_values(const TuningState& state) {
    const auto& space = *state.space;
    std::vector<std::vector<std::size_t>> runs(space.dimension());
    for (std::size_t i = 0; i < space.dimension(); ++i)
      runs[i].assign(space.parameter(i).size(), 0);
    std::size_t successes = 0;
    const auto count = [&](const std::vector<Observation>& observations) {
      for (const auto& o : observations) {
        if (!o.result.ok() || o.config.size() != space.dimension()) continue;
        ++successes;
        for (std::size_t i = 0; i < space.dimension(); ++i) {
          if (space.parameter(i).kind != ParamKind::categorical) continue;
          if (const auto at = space.parameter(i).index_of(o.config[i])) ++runs[i][*at];
        }
      }
    };
    count(state.observations);
    if (state.has_priors()) {
      for (const auto& prior : *state.priors) count(prior.observations);
    }
    std::vector<std::vector<bool>> out(space.dimension());
    for (std::size_t i = 0; i < space.dimension(); ++i) {
      for (const auto n : runs[i]) out[i].push_back(n > 0 && n < successes);
    }
    return out;
  }

  std::vector<ParameterRelevance> relevance(const TuningState& state) override {
    prepare_transfer(state);
    // One lengthscale per input column says little before there are about two successful
    // results per column: until then the shares would mostly be the priors' (the transfer
    // model has its sources' results from the start).
    const std::size_t needed = std::max(kMinObservationsForModel, 2 * model_dimension(state));
    if (!transfer_ready() && state.ok_count() < needed) return {};
    // Results that all have one value tell the parameters apart no more than none do.
    if (!transfer_ready() && all_successes_equal(state)) return {};
    model_for_answers(state);
    if (fitted_at_ == 0 || !hyperparameters_) return {};
    const auto& lengthscales = hyperparameters_->covariance.lengthscales;
    const auto telling = telling_values(state);
    std::vector<ParameterRelevance> out;
    double total = 0.0;
    std::size_t column = 0;  // of the full encoding
    std::size_t k = 0;       // of the active columns, which lengthscales follow
    for (std::size_t i = 0; i < state.space->dimension(); ++i) {
      const auto& p = state.space->parameter(i);
      const bool categorical = p.kind == ParamKind::categorical;
      const std::size_t width = categorical ? p.values.size() : 1;
      double shortest = std::numeric_limits<double>::infinity();
      for (std::size_t end = column + width, j = 0; column < end; ++column, ++j) {
        if (k < active_.size() && active_[k] == column && k < lengthscales.size()) {
          const double l = lengthscales[k++];
          if (!categorical || telling[i][j]) shortest = std::min(shortest, l);
        }
      }
      if (!std::isfinite(shortest) || !(shortest > 0.0)) continue;  // one value: not tuned
      total += 1.0 / shortest;
      out.push_back({p.name, 1.0 / shortest});
    }
    if (!(total > 0.0)) return {};
    for (auto& r : out) r.share /= total;
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.share > b.share; });
    return out;
  }

 private:
  // A parameter's value (its position among the values), its runs and how many failed.
  struct FailingValue {
    std::size_t parameter = 0;
    std::size_t position = 0;
    double runs = 0.0;
    double failed = 0.0;
  };

  // The study's failing values (failures_of_study), its runs and its runs without any of them.
  struct StudyFailures {
    std::vector<FailingValue> values;
    double runs = 0.0;
    double failed = 0.0;
    double clean_runs = 0.0;
    double clean_failed = 0.0;
  };

  // ---- encoding

  // SearchSpace::encode restricted to the active columns.
  std::vector<double> encode(const TuningState& state, const Configuration& c) {
    choose_columns(state);
    const auto full = state.space->encode(c);
    std::vector<double> x(active_.size());
    for (std::size_t k = 0; k < active_.size(); ++k) x[k] = full[active_[k]];
    return x;
  }
  std::size_t model_dimension(const TuningState& state) {
    choose_columns(state);
    return active_.size();
  }
  // The active columns, once, and which of them the GP priors treat as one-hot.
  void choose_columns(const TuningState& state) {
    if (!active_.empty()) return;
    active_ = active_columns(*state.space);
    fit_options_.priors.one_hot_columns = one_hot_columns(*state.space, active_);
    source_options_.fit.priors.one_hot_columns = fit_options_.priors.one_hot_columns;
  }
  // Target rows as source models see them: the study's task features appended.
  Matrix with_task_features(const Matrix& x) const {
    if (features_.size() == 0) return x;
    const long d = x.nc();
    Matrix out(x.nr(), d + static_cast<long>(features_.size()));
    for (long i = 0; i < x.nr(); ++i) {
      for (long j = 0; j < d; ++j) out(i, j) = x(i, j);
      for (std::size_t f = 0; f < features_.size(); ++f) {
        out(i, d + static_cast<long>(f)) = study_features_[f];
      }
    }
    return out;
  }

  // Up to `count` configurations one parameter away from those that ran, neither taken nor
  // chosen, appended to `out`: the likeliest to run by the feasibility model (what failed
  // teaches it which changes fail), in random order where it cannot tell.
  void take_neighbours_of_successes(const TuningState& state, std::size_t count,
                                    std::unordered_set<std::string>& chosen,
                                    std::vector<Configuration>& out, Rng& rng) {
    const auto& space = *state.space;
    std::vector<Configuration> pool;
    std::unordered_set<std::string> pooled;
    for (const auto& o : state.observations) {
      if (!o.result.ok()) continue;
      for (auto& c : space.neighbours(o.config, rng)) {
        const auto key = space.key(c);
        if (state.taken.count(key) || chosen.count(key) || !pooled.insert(key).second) continue;
        if (state.candidate_index && !state.candidate_index->count(key)) continue;
        pool.push_back(std::move(c));
      }
    }
    if (pool.empty()) return;
    std::shuffle(pool.begin(), pool.end(), rng);
    update_model(state, rng);
    if (feasibility_) {
      std::vector<std::vector<double>> rows;
      for (const auto& c : pool) rows.push_back(encode(state, c));
      const auto log_p =
          model_log_feasible(state, rows_to_matrix(rows, model_dimension(state)), pool);
      std::vector<std::size_t> order(pool.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](auto a, auto b) { return log_p[a] > log_p[b]; });
      std::vector<Configuration> ranked;
      for (auto i : order) ranked.push_back(std::move(pool[i]));
      pool = std::move(ranked);
    }
    for (std::size_t i = 0; i < pool.size() && i < count; ++i) {
      chosen.insert(space.key(pool[i]));
      out.push_back(std::move(pool[i]));
    }
  }

  std::size_t initial_design(const TuningState& state) const {
    if (initial_design_ > 0) return initial_design_;
    return std::clamp<std::size_t>(state.budget / 4, kMinObservationsForModel,
                                   kDefaultInitialDesign);
  }

  // ---- priors

  bool transfer_ready() const { return mode_ != TransferMode::none && !sources_.empty(); }

  // Encodes the priors once per strategy object (a session keeps its priors) and fetches their
  // fitted models from the process-wide cache.
  void prepare_transfer(const TuningState& state) {
    if (mode_ == TransferMode::none || !state.has_priors()) return;
    std::size_t total = 0;
    for (const auto& p : *state.priors) total += p.observations.size();
    if (state.priors == prepared_from_ && total == prepared_size_) return;
    prepared_from_ = state.priors;
    prepared_size_ = total;
    modelled_state_.clear();  // other priors: the model is to be made again
    sources_.clear();
    prior_failed_.clear();
    failing_values_.clear();
    source_inverse_.clear();
    source_models_.clear();
    candidate_sources_.clear();
    stack_ = {};

    features_ = task_feature_scaling(*state.priors, state.task_features);
    study_features_ = features_.scale(state.task_features);
    const std::size_t dim = model_dimension(state);
    // Priors with the same source are one model: one machine over several tasks.
    std::vector<std::string> order;
    std::map<std::string, std::vector<const Prior*>> groups;
    for (const auto& p : *state.priors) {
      if (!groups.count(p.source)) order.push_back(p.source);
      groups[p.source].push_back(&p);
    }
    mark_prior_failures(state);
    mark_failing_values(state);
    // Zero-shot forecasts are told in the priors' units, all on one scale: log when every
    // prior value is positive (as the target's would be), else linear.
    zero_shot_log_ = true;
    for (const auto& p : *state.priors) {
      for (const auto& o : p.observations) {
        if (o.result.ok() && !(o.result.objective > 0)) zero_shot_log_ = false;
      }
    }
    for (const auto& source : order) {
      std::vector<std::vector<double>> rows;
      std::vector<TaskValues> task_values;  // for the units of zero-shot forecasts
      std::vector<double> y;                // copula values, each prior (task) on its own
      for (const Prior* p : groups[source]) {
        const auto scaled = features_.scale(p->task_features);
        // On the zero-shot scale; the copula below only reads their ranks.
        std::vector<double> g_task;
        std::vector<std::vector<double>> task_rows;
        for (const auto& o : p->observations) {
          if (!o.result.ok()) continue;
          std::vector<double> x;
          try {
            x = encode(state, o.config);
          } catch (const InvalidInput&) {
            continue;  // a value outside this space
          }
          x.insert(x.end(), scaled.begin(), scaled.end());
          task_rows.push_back(std::move(x));
          g_task.push_back(model_value(o.result.objective, zero_shot_log_, p->minimize));
        }
        // A task where every configuration measured the same ranks nothing: its flat
        // quantiles would pull every forecast to one value with no width.
        if (std::adjacent_find(g_task.begin(), g_task.end(), std::not_equal_to<>()) ==
            g_task.end()) {
          continue;
        }
        rows.insert(rows.end(), std::make_move_iterator(task_rows.begin()),
                    std::make_move_iterator(task_rows.end()));
        // The copula per task: on another input the same configuration may take ten times
        // as long; what carries over is how configurations rank, so each task's values become
        // its own quantiles before the tasks are modelled together.
        if (!g_task.empty()) {
          const auto z = surrogates::gaussian_copula(g_task);
          y.insert(y.end(), z.begin(), z.end());
          std::sort(g_task.begin(), g_task.end());
          task_values.push_back({scaled, std::move(g_task)});
        }
      }
      if (y.size() < kMinObservationsForModel) continue;
      surrogates::SourceData data;
      data.name = source;
      data.x = rows_to_matrix(rows, dim + features_.size());
      data.y = std::move(y);
      source_inverse_.emplace_back(units_for_the_study(std::move(task_values), study_features_));
      sources_.push_back(std::move(data));
    }
    if (sources_.empty()) return;
    auto& cache = surrogates::SourceModelCache::process_cache();
    if (mode_ == TransferMode::rgpe) {
      for (const auto& s : sources_) source_models_.push_back(cache.model(s, source_options_));
    } else {
      stack_ = surrogates::StackedPrior::build(sources_, source_options_, cache);
    }
    nlohmann::json models = nlohmann::json::array();
    for (const auto& m : mode_ == TransferMode::rgpe ? source_models_ : stack_.levels()) {
      models.push_back(m->to_json());
    }
    prior_models_json_ = models;
  }

  // A configuration that failed on most of the priors that ran it probably fails here too;
  // one that failed on one input but ran on others is not marked. Keys are computed for
  // failures, and for successes only when some prior failed.
  void mark_prior_failures(const TuningState& state) {
    std::unordered_map<std::string, std::pair<int, int>> failed_ok;  // key -> (failed, ok)
    for (const auto& p : *state.priors) {
      for (const auto& o : p.observations) {
        if (!o.result.ok() && state.is_candidate(o.config)) {
          ++failed_ok[state.space->key(o.config)].first;
        }
      }
    }
    if (failed_ok.empty()) return;
    for (const auto& p : *state.priors) {
      for (const auto& o : p.observations) {
        if (!o.result.ok()) continue;
        if (auto it = failed_ok.find(state.space->key(o.config)); it != failed_ok.end()) {
          ++it->second.second;
        }
      }
    }
    for (const auto& [key, counts] : failed_ok) {
      if (counts.first > counts.second) prior_failed_.insert(key);
    }
  }

  // The parameter values that every failure of the priors has and that failed in at least
  // kFailingValueShare of their runs with them (failing_values_), with those runs.
  void mark_failing_values(const TuningState& state) {
    const auto& space = *state.space;
    std::map<std::pair<std::size_t, std::size_t>, FailingValue> runs;  // (parameter, value)
    double all_runs = 0.0;
    double all_failed = 0.0;
    for (const auto& p : *state.priors) {
      for (const auto& o : p.observations) {
        all_runs += 1.0;
        all_failed += o.result.ok() ? 0.0 : 1.0;
        for (std::size_t k = 0; k < space.dimension(); ++k) {
          const auto position = space.parameter(k).index_of(o.config[k]);
          if (!position) continue;  // a real parameter
          auto& v = runs[{k, *position}];
          v.parameter = k;
          v.position = *position;
          v.runs += 1.0;
          v.failed += o.result.ok() ? 0.0 : 1.0;
        }
      }
    }
    for (const auto& [at, v] : runs) {
      if (v.failed >= kMinFailingValueRuns && v.failed == all_failed && v.runs < all_runs &&
          v.failed >= kFailingValueShare * v.runs) {
        failing_values_.push_back(v);
      }
    }
  }

  // Predictions of every source model (RGPE) or of the stack (one entry) at target rows x.
  std::vector<Prediction> transfer_predictions(const Matrix& x) const {
    const Matrix xs = with_task_features(x);
    std::vector<Prediction> out;
    if (mode_ == TransferMode::rgpe) {
      for (const auto& m : source_models_) out.push_back(m->predict(xs));
    } else {
      out.push_back(stack_.predict(xs));
    }
    return out;
  }

  // Same over the candidate set, from the cache (the sources never change).
  void prepare_candidate_sources() {
    if (!transfer_ready() || !candidate_sources_.empty()) return;
    const Matrix xs = with_task_features(candidate_matrix_);
    const std::uint64_t key = surrogates::hash_values(
        std::span<const double>(xs.size() > 0 ? &xs(0, 0) : nullptr, xs.size()));
    auto& cache = surrogates::SourceModelCache::process_cache();
    if (mode_ == TransferMode::rgpe) {
      for (const auto& m : source_models_) {
        candidate_sources_.push_back(cache.candidate_prediction(*m, xs, key));
      }
    } else {
      auto sum = std::make_shared<Prediction>();
      for (const auto& level : stack_.levels()) {
        const auto p = cache.candidate_prediction(*level, xs, key);
        if (sum->mean.empty()) sum->mean.assign(p->mean.size(), 0.0);
        for (std::size_t i = 0; i < p->mean.size(); ++i) sum->mean[i] += p->mean[i];
        sum->variance = p->variance;
      }
      candidate_sources_.push_back(std::move(sum));
    }
  }

  // The model's prediction from the target GP's prediction at the same points and the
  // transfer part there.
  Prediction combine(const Prediction& target,
                     const std::vector<const Prediction*>& transfer) const {
    if (!transfer_ready()) return target;
    if (mode_ == TransferMode::stacked) {
      return surrogates::stack_predictions(scaled_stack(*transfer.front()), target, target_.n_ok);
    }
    std::vector<const Prediction*> members = transfer;
    members.push_back(&target);
    return surrogates::weighted_ensemble(members, weights_);
  }

  Prediction predict_combined(const Matrix& x) const {
    const Prediction target = gp_.predict(x);
    if (!transfer_ready()) return target;
    const auto transfer = transfer_predictions(x);
    std::vector<const Prediction*> parts;
    for (const auto& p : transfer) parts.push_back(&p);
    return combine(target, parts);
  }

  // How much source s counts in zero-shot values: its RGPE weight, else all alike.
  double source_weight(std::size_t s) const {
    return mode_ == TransferMode::rgpe && s < weights_.size() ? weights_[s] : 1.0;
  }

  // Model units -> log units of the objective (for forecasts).
  double to_log_units(double z) const {
    if (!target_.sorted_g.empty()) {
      return copula_ ? target_.inverse(z) : transform_.inverse(z);
    }
    return sources_log_units(z);
  }

  // Zero-shot: the sources' own quantiles (their times), weighted as the model weighs them
  // (alike when the study's own model holds every weight).
  double sources_log_units(double z) const {
    double g = 0.0;
    double total = 0.0;
    for (std::size_t s = 0; s < source_inverse_.size(); ++s) {
      const double w = source_weight(s);
      g += w * source_inverse_[s](z);
      total += w;
    }
    if (total > 0.0) return g / total;
    if (source_inverse_.empty()) return z;
    g = 0.0;
    for (const auto& inverse : source_inverse_) g += inverse(z);
    return g / static_cast<double>(source_inverse_.size());
  }

  // Zero-shot: the standard deviation of a new machine's value at quantile z around the
  // sources' weighted mean (to_log_units), from how far apart the sources are at z, as the
  // prediction of one more draw from their population: s * sqrt(1 + 1/n), with s the weighted
  // sample deviation and n the effective number of sources. With one source (or one that holds
  // all the weight), kOneSourceLogSpread on a log scale, else nothing to go on: 0.
  double between_sources_sd(double z) const {
    const double one_source = zero_shot_log_ ? kOneSourceLogSpread : 0.0;
    if (source_inverse_.size() < 2) return one_source;
    std::vector<double> g;
    std::vector<double> w;
    for (std::size_t s = 0; s < source_inverse_.size(); ++s) {
      g.push_back(source_inverse_[s](z));
      w.push_back(source_weight(s));
    }
    double total = 0.0;
    double total_sq = 0.0;
    double mean = 0.0;
    for (std::size_t s = 0; s < g.size(); ++s) {
      total += w[s];
      total_sq += w[s] * w[s];
      mean += w[s] * g[s];
    }
    if (!(total > 0.0) || !(total_sq > 0.0)) return one_source;
    mean /= total;
    const double n = total * total / total_sq;
    if (!(n > 1.0 + 1e-9)) return one_source;
    double ss = 0.0;
    for (std::size_t s = 0; s < g.size(); ++s) ss += w[s] * (g[s] - mean) * (g[s] - mean);
    const double variance = ss / total * n / (n - 1.0);  // weighted, unbiased for equal weights
    return std::sqrt(variance * (1.0 + 1.0 / n));
  }

  // ---- the target model

  struct TargetData {
    std::size_t n_ok = 0;
    Matrix x;               // successful rows
    std::vector<double> g;  // their model values (log units, lower is better)
    std::vector<double> z;  // after the output transform
    std::vector<double> sorted_g;
    InverseCopula inverse;  // of sorted_g
    Matrix x_all;           // every observation, for the feasibility model
    std::vector<bool> feasible;
    bool any_failed = false;
  };

  static bool use_log(const TuningState& state) {
    for (const auto& o : state.observations) {
      if (o.result.ok() && !(o.result.objective > 0)) return false;
    }
    return true;
  }

  enum class FitStarts { usual, warm_start_only };

  // Type-II maximum likelihood from the usual starts (or from `warm_start` alone), and once more
  // from short lengthscales; the higher log posterior wins.
  GaussianProcess fit_gp(const Matrix& x, const std::vector<double>& y, Rng& rng,
                         const std::optional<surrogates::GpHyperparameters>& warm_start,
                         FitStarts starts = FitStarts::usual) const {
    const auto dim = static_cast<std::size_t>(x.nc());
    auto options = fit_options_;
    options.warm_start = warm_start;
    if (starts == FitStarts::warm_start_only) {
      options.start_at_prior_mode = false;
      options.random_starts = 0;
    }
    GaussianProcess gp = GaussianProcess::fit(x, y, options, rng);
    if (!short_start_) return gp;
    auto log_posterior = [&](const GaussianProcess& m) {
      return m.log_marginal_likelihood() +
             surrogates::detail::log_prior(options.priors, dim, m.hyperparameters().to_vector(),
                                           {});
    };
    auto rough = options;
    surrogates::GpHyperparameters start = gp.hyperparameters();
    for (auto& l : start.covariance.lengthscales) l = std::exp(*short_start_);
    start.covariance.signal_variance = 1.0;
    rough.warm_start = start;
    rough.start_at_prior_mode = false;
    rough.random_starts = 0;
    GaussianProcess alternative = GaussianProcess::fit(x, y, rough, rng);
    return log_posterior(alternative) > log_posterior(gp) ? std::move(alternative) : std::move(gp);
  }

  // The stack predicts in the priors' quantile units, the study's values are quantiles of far
  // fewer observations (the best of 10 sits at Phi^-1(1/11) = -1.3, a prior's best near -4):
  // the target GP models z - (a + b m(x)) with a, b fitted by least squares (b in
  // [0, kMaxStackScale]; b = 0 when the priors rank the study's points wrongly), so that the
  // residual is not a systematic tilt against the priors' best region.
  void fit_stack_scale(const Matrix& x, const std::vector<double>& z, std::vector<double>& y) {
    stack_offset_ = 0.0;
    stack_scale_ = 1.0;
    const std::size_t n = z.size();
    if (n == 0) return;
    const std::vector<double> m = transfer_predictions(x).front().mean;
    const double mean_m = std::accumulate(m.begin(), m.end(), 0.0) / static_cast<double>(n);
    const double mean_z = std::accumulate(z.begin(), z.end(), 0.0) / static_cast<double>(n);
    if (n >= kMinObservationsForModel) {
      double cov = 0.0;
      double var = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        cov += (m[i] - mean_m) * (z[i] - mean_z);
        var += (m[i] - mean_m) * (m[i] - mean_m);
      }
      // b = cov(m, z) / var(m)
      if (var > 0.0) stack_scale_ = std::clamp(cov / var, 0.0, kMaxStackScale);
    }
    stack_offset_ = mean_z - stack_scale_ * mean_m;
    for (std::size_t i = 0; i < n; ++i) y[i] = z[i] - stack_offset_ - stack_scale_ * m[i];
    diagnostics_["stack_scale"] = stack_scale_;
  }

  // The stack's prediction in the study's units: a + b m, variance b^2 var.
  Prediction scaled_stack(const Prediction& prior) const {
    Prediction out = prior;
    for (std::size_t i = 0; i < out.mean.size(); ++i) {
      out.mean[i] = stack_offset_ + stack_scale_ * prior.mean[i];
      out.variance[i] = stack_scale_ * stack_scale_ * prior.variance[i];
    }
    return out;
  }

  // The best half of `cap` successes (lowest g) and an even random sample of the others, in
  // their order of success.
  std::vector<std::size_t> model_subset(const std::vector<double>& g, std::size_t cap) const {
    std::vector<std::size_t> order(g.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const std::size_t best = cap / 2;
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(best), order.end(),
                      [&](std::size_t a, std::size_t b) { return g[a] < g[b]; });
    Rng pick(seed_ ^ g.size());
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(best), order.end(), pick);
    order.resize(cap);
    std::sort(order.begin(), order.end());
    return order;
  }

  // The feasibility model's data past the cap: every failure (a random sample past half the
  // cap) and an even sample of the successes, in their order.
  void cap_feasibility_data(std::vector<std::vector<double>>& rows,
                            std::vector<bool>& feasible) const {
    std::vector<std::size_t> failed;
    std::vector<std::size_t> succeeded;
    for (std::size_t i = 0; i < feasible.size(); ++i) {
      (feasible[i] ? succeeded : failed).push_back(i);
    }
    Rng pick(seed_ ^ rows.size());
    std::shuffle(failed.begin(), failed.end(), pick);
    std::shuffle(succeeded.begin(), succeeded.end(), pick);
    failed.resize(std::min(failed.size(), max_model_points_ / 2));
    succeeded.resize(std::min(succeeded.size(), max_model_points_ - failed.size()));
    std::vector<std::size_t> keep = failed;
    keep.insert(keep.end(), succeeded.begin(), succeeded.end());
    std::sort(keep.begin(), keep.end());
    std::vector<std::vector<double>> kept_rows;
    std::vector<bool> kept_feasible;
    for (std::size_t i : keep) {
      kept_rows.push_back(std::move(rows[i]));
      kept_feasible.push_back(feasible[i]);
    }
    rows = std::move(kept_rows);
    feasible = std::move(kept_feasible);
  }

  // What update_model saw of `state`: the direction and every observation (configuration,
  // status, objective).
  static std::string observations_fingerprint(const TuningState& state) {
    std::string out = state.minimize ? "minimize" : "maximize";
    for (const auto& o : state.observations) {
      out += '\n';
      out += state.space->key(o.config);
      out += ' ';
      out += to_string(o.result.status);
      if (!o.result.ok()) continue;
      char digits[32];  // the shortest text that reads back as the same double
      const auto end = std::to_chars(digits, digits + sizeof digits, o.result.objective).ptr;
      out += ' ';
      out.append(digits, end);
    }
    return out;
  }

  // The model forecasts and relevance answer from: brought up to date unless it already is for
  // these observations. Refitted again, from its own optimum, its hyperparameters (and every
  // answer) would move a little at each call.
  void model_for_answers(const TuningState& state) {
    auto fingerprint = observations_fingerprint(state);
    if (fingerprint == modelled_state_) return;
    Rng rng(seed_ ^ state.observations.size());
    update_model(state, rng);
    modelled_state_ = std::move(fingerprint);
    forecast_half_width_.reset();  // forecast() learns it when asked: relevance needs none
  }

  // Standardised residuals (z_i - mu(x_i)) / sd(x_i) of the study's own successes (model
  // units), each forecast as forecasts are (the transfer part included) by a target GP fitted,
  // hyperparameters included (fold_model), on the other folds. With fixed hyperparameters,
  // as leave_one_out is, the residuals look calibrated (mean r^2 0.9 to 1.2 on GEMM A100 with
  // 10 and 50 random measurements) while held-out times are not: maximum likelihood picks
  // lengthscales that suit exactly these points, and only a refit without them shows how far
  // that carries. The transfer part (stack scale, ensemble weights) stays as fitted on all.
  std::vector<double> cross_validated_residuals() const {
    const std::size_t n = gp_.size();
    const std::size_t folds = std::min(kIntervalFolds, n);  // leave-one-out below it
    const Matrix& x = gp_.inputs();
    const std::vector<double>& y = gp_.targets();
    const auto transfer = transfer_ready() ? transfer_predictions(x) : std::vector<Prediction>{};
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    Rng rng(seed_ ^ (n * folds));
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<double> residuals;
    for (std::size_t fold = 0; fold < folds; ++fold) {
      std::vector<std::size_t> train;
      std::vector<std::size_t> test;
      for (std::size_t k = 0; k < n; ++k) (k % folds == fold ? test : train).push_back(order[k]);
      std::vector<double> train_y;
      for (std::size_t i : train) train_y.push_back(y[i]);
      const GaussianProcess gp = fold_model(surrogates::select_rows(x, train), train_y, rng);
      Prediction p = gp.predict(surrogates::select_rows(x, test));
      if (transfer_ready()) {
        std::vector<Prediction> at_test(transfer.size());
        std::vector<const Prediction*> parts;
        for (std::size_t s = 0; s < transfer.size(); ++s) {
          for (std::size_t i : test) {
            at_test[s].mean.push_back(transfer[s].mean[i]);
            at_test[s].variance.push_back(transfer[s].variance[i]);
          }
          parts.push_back(&at_test[s]);
        }
        p = combine(p, parts);
      }
      const double noise = gp.hyperparameters().noise_variance;
      for (std::size_t k = 0; k < test.size(); ++k) {
        residuals.push_back((target_.z[test[k]] - p.mean[k]) / std::sqrt(p.variance[k] + noise));
      }
    }
    return residuals;
  }

  // The target GP on (x, y) as update_model would fit it: from no earlier optimum while gp_ holds
  // fewer than kIntervalWarmFoldsFrom rows, from gp_'s optimum (and short lengthscales) from then
  // on; default hyperparameters with the mean of y below kMinObservationsForModel rows.
  GaussianProcess fold_model(const Matrix& x, const std::vector<double>& y, Rng& rng) const {
    if (y.size() >= kMinObservationsForModel) {
      if (gp_.size() < kIntervalWarmFoldsFrom) return fit_gp(x, y, rng, std::nullopt);
      return fit_gp(x, y, rng, gp_.hyperparameters(), FitStarts::warm_start_only);
    }
    Matrix empty(0, x.nc());
    auto h = GaussianProcess::fit(empty, {}, fit_options_, rng).hyperparameters();
    if (!y.empty())
      h.mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
    return GaussianProcess::condition(x, y, h);
  }

  // Half-width of the forecasts' 68% interval in units of the model's predictive standard
  // deviation: a Student-t scale (surrogates/calibration.h) learned from how far the model's
  // forecasts of the study's own successes missed them when they were left out. The GP's own
  // variance was overconfident on every measured GPU space (docs/benchmarks.md, "Calibration of
  // predictions": 26-37% of held-out times inside with 10 random observations, 28-36% with 5
  // and another machine's as priors). Below kIntervalRefitBelow rows by cross-validation with
  // refitted hyperparameters (cross_validated_residuals); from it on (10 refits of 180 and more
  // rows would cost seconds) by leave-one-out at fixed hyperparameters, through the transfer
  // part as forecasts combine it. Searches never read this, only what forecasts report.
  // Zero-shot no residual says anything: 1, the priors' spread (between_sources_sd) stands for it.
  double interval_half_width() const {
    if (target_.n_ok == 0 || gp_.size() == 0) return 1.0;
    if (gp_.size() >= 2 && gp_.size() < kIntervalRefitBelow) {
      return surrogates::interval_scale(cross_validated_residuals(), kIntervalPriorPoints)
          .half_width(kCentral68);
    }
    const double noise = gp_.hyperparameters().noise_variance;
    // mu_-i and var_-i of the target GP (noise included), then with the transfer part as
    // predict_combined combines them, with the noise added after as forecasts add it.
    Prediction loo = gp_.leave_one_out();
    for (auto& v : loo.variance) v = std::max(v - noise, 0.0);
    if (transfer_ready()) {
      const auto transfer = transfer_predictions(target_.x);
      std::vector<const Prediction*> parts;
      for (const auto& p : transfer) parts.push_back(&p);
      loo = combine(loo, parts);
    }
    std::vector<double> residuals;
    for (std::size_t i = 0; i < target_.z.size() && i < loo.mean.size(); ++i) {
      residuals.push_back((target_.z[i] - loo.mean[i]) / std::sqrt(loo.variance[i] + noise));
    }
    return surrogates::interval_scale(residuals, kIntervalPriorPoints).half_width(kCentral68);
  }

  void update_model(const TuningState& state, Rng& rng) {
    modelled_state_.clear();  // a proposal's refit moves the model: answers fit it again
    const std::size_t dim = model_dimension(state);
    std::vector<std::vector<double>> ok_rows;
    std::vector<std::vector<double>> all_rows;
    std::vector<double> all_g;
    TargetData t;
    const bool log_now = use_log(state);
    for (const auto& o : state.observations) {
      auto x = encode(state, o.config);
      const bool ok = o.result.ok();
      t.any_failed = t.any_failed || !ok;
      t.feasible.push_back(ok);
      all_rows.push_back(x);
      if (ok) {
        ok_rows.push_back(std::move(x));
        all_g.push_back(model_value(o.result.objective, log_now, state.minimize));
      }
    }
    const bool log_changed = log_now != log_;
    log_ = log_now;

    const std::size_t n_ok = ok_rows.size();
    const std::size_t refit_step = std::max(refit_every_, n_ok / kRefitFraction);
    const bool enough = n_ok >= kMinObservationsForModel;
    const bool refit = enough && (!hyperparameters_ || log_changed || n_ok < refit_below_ ||
                                  n_ok >= fitted_at_ + refit_step || n_ok < model_rows_seen_);
    // Which successes the GP sees: all, or past the cap a subset chosen at each refit and
    // extended by the successes since (fantasies of a batch come and go at the end).
    bool reselected = false;
    if (n_ok <= max_model_points_) {
      model_rows_.clear();
    } else if (refit || model_rows_.empty()) {
      model_rows_ = model_subset(all_g, max_model_points_);
      reselected = true;
    } else {
      for (std::size_t i = model_rows_seen_; i < n_ok; ++i) model_rows_.push_back(i);
    }
    model_rows_seen_ = n_ok;
    if (model_rows_.empty()) {
      t.x = rows_to_matrix(ok_rows, dim);
      t.g = std::move(all_g);
    } else {
      std::vector<std::vector<double>> rows;
      rows.reserve(model_rows_.size());
      for (std::size_t i : model_rows_) {
        rows.push_back(ok_rows[i]);
        t.g.push_back(all_g[i]);
      }
      t.x = rows_to_matrix(rows, dim);
    }
    if (all_rows.size() > max_model_points_) cap_feasibility_data(all_rows, t.feasible);
    t.n_ok = n_ok;
    t.x_all = rows_to_matrix(all_rows, dim);
    t.sorted_g = t.g;
    std::sort(t.sorted_g.begin(), t.sorted_g.end());
    t.inverse = InverseCopula(t.sorted_g);
    const std::size_t rows = t.g.size();
    if (copula_) {
      t.z = surrogates::gaussian_copula(t.g);
    } else {
      if (refit || !enough) transform_ = surrogates::ObjectiveTransform::fit(t.g, false);
      t.z = transform_.forward(t.g);
    }
    // The target GP models what the stack leaves unexplained (stacked), or the target values.
    std::vector<double> y = t.z;
    const bool stacked = transfer_ready() && mode_ == TransferMode::stacked;
    if (stacked) fit_stack_scale(t.x, t.z, y);
    if (!enough) {
      // Transfer with almost no target data: default hyperparameters (the priors' mode).
      if (!default_hyperparameters_) {
        Matrix empty(0, static_cast<long>(dim));
        default_hyperparameters_ =
            GaussianProcess::fit(empty, {}, fit_options_, rng).hyperparameters();
      }
      // The constant mean is the average target (residual): with one observation the model
      // then keeps the priors' ranking instead of bending around that point.
      auto h = *default_hyperparameters_;
      if (!y.empty())
        h.mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
      gp_ = GaussianProcess::condition(t.x, y, h);
    } else if (refit) {
      gp_ = fit_gp(t.x, y, rng, hyperparameters_);
      hyperparameters_ = gp_.hyperparameters();
      fitted_at_ = n_ok;
    } else if (copula_ || stacked || reselected || rows < gp_rows_) {
      // Same hyperparameters, but every target may have moved (copula ranks, residuals).
      gp_ = GaussianProcess::condition(t.x, y, *hyperparameters_);
    } else if (rows > gp_rows_) {
      // Same hyperparameters and transform: extend the Cholesky factor by the new rows.
      const Matrix fresh(dlib::subm(t.x, static_cast<long>(gp_rows_), 0,
                                    static_cast<long>(rows - gp_rows_), t.x.nc()));
      gp_.add_observations(fresh, std::span<const double>(y).subspan(gp_rows_));
    }
    gp_rows_ = rows;
    target_ = std::move(t);

    diagnostics_["refit"] = refit;
    diagnostics_["observations"] = state.observations.size();
    diagnostics_["model_points"] = rows;
    diagnostics_["feasibility_points"] = target_.x_all.nr();
    diagnostics_["hyperparameters"] = gp_.hyperparameters().to_json();
    if (transfer_ready()) update_weights(rng);

    feasibility_.reset();
    study_failures_ = target_.any_failed ? failures_of_study(state) : StudyFailures{};
    if (target_.any_failed) {
      if (refit || !feasibility_covariance_) {
        surrogates::FeasibilityFitOptions options;
        options.priors.one_hot_columns = fit_options_.priors.one_hot_columns;
        options.warm_start = feasibility_covariance_;
        feasibility_ =
            surrogates::FeasibilityModel::fit(target_.x_all, target_.feasible, options, rng);
        if (!feasibility_->constant()) feasibility_covariance_ = feasibility_->covariance();
      } else {
        feasibility_ = surrogates::FeasibilityModel::condition(target_.x_all, target_.feasible,
                                                               *feasibility_covariance_);
      }
    }
  }

  void update_weights(Rng& rng) {
    if (mode_ == TransferMode::stacked) {
      diagnostics_["transfer"] = {{"model", "stacked"}, {"levels", prior_models_json_}};
      return;
    }
    std::vector<const surrogates::SourceModel*> sources;
    for (const auto& m : source_models_) sources.push_back(m.get());
    const surrogates::GpHyperparameters* target =
        target_.n_ok >= kMinObservationsForModel && hyperparameters_ ? &*hyperparameters_ : nullptr;
    const auto w = surrogates::rgpe_weights(sources, with_task_features(target_.x), target,
                                            target_.x, target_.z, rgpe_options_, rng);
    weights_ = w.weights;
    nlohmann::json named = nlohmann::json::object();
    nlohmann::json dropped = nlohmann::json::array();
    for (std::size_t i = 0; i < sources.size(); ++i) {
      named[sources[i]->name()] = weights_[i];
      if (w.dropped[i]) dropped.push_back(sources[i]->name());
    }
    named["target"] = weights_.back();
    diagnostics_["rgpe_weights"] = named;
    diagnostics_["transfer"] = {
        {"model", "rgpe"}, {"sources", prior_models_json_}, {"dropped", dropped}};
  }

  // The values of categorical parameters that failed in the study at least
  // kMinFailingValueRuns times and more often than its runs without them, with their runs.
  // Not a parameter's default: a conditional space pins a parameter that a method does not
  // read to it (PETSc's hypre_coarsen_type is Falgout for every other preconditioner), so
  // its runs are mostly of configurations the parameter does nothing in.
  static StudyFailures failures_of_study(const TuningState& state) {
    const auto& space = *state.space;
    StudyFailures out;
    std::map<std::pair<std::size_t, std::size_t>, FailingValue> runs;  // (parameter, value)
    for (const auto& o : state.observations) {
      const double failed = o.result.ok() ? 0.0 : 1.0;
      out.runs += 1.0;
      out.failed += failed;
      for (std::size_t k = 0; k < space.dimension(); ++k) {
        const auto& p = space.parameter(k);
        if (p.kind != ParamKind::categorical || p.values.size() < 2) continue;
        const auto position = p.index_of(o.config[k]);
        if (!position || position == p.index_of(p.default_value)) continue;
        auto& v = runs[{k, *position}];
        v.parameter = k;
        v.position = *position;
        v.runs += 1.0;
        v.failed += failed;
      }
    }
    for (const auto& [at, v] : runs) {
      const double rest_runs = out.runs - v.runs;
      const double rest_failed = out.failed - v.failed;
      if (v.failed >= kMinFailingValueRuns && rest_runs > 0.0 &&
          smoothed_feasible(v.runs, v.failed) < smoothed_feasible(rest_runs, rest_failed)) {
        out.values.push_back(v);
      }
    }
    if (out.values.empty()) return out;
    for (const auto& o : state.observations) {
      if (failing_value_of(space, out.values, o.config)) continue;
      out.clean_runs += 1.0;
      out.clean_failed += o.result.ok() ? 0.0 : 1.0;
    }
    return out;
  }

  // P(feasible) of runs of which `failed` failed: (ok + 0.5) / (runs + 1)
  static double smoothed_feasible(double runs, double failed) {
    return (runs - failed + kPriorFailureOk) / (runs + 1.0);
  }

  // The lowest smoothed_feasible of the `values` that `c` has; none when it has none of them.
  static std::optional<double> failing_value_of(const SearchSpace& space,
                                                const std::vector<FailingValue>& values,
                                                const Configuration& c) {
    std::optional<double> lowest;
    for (const auto& v : values) {
      if (space.parameter(v.parameter).index_of(c[v.parameter]) != v.position) continue;
      const double p = smoothed_feasible(v.runs, v.failed);
      lowest = std::min(lowest.value_or(p), p);
    }
    return lowest;
  }

  // log P(feasible) of the feasibility model at `x` (the encoded `configs`), moved to the
  // rate of the study's runs with and without its failing values (failures_of_study); empty
  // without a feasibility model.
  std::vector<double> model_log_feasible(const TuningState& state, const Matrix& x,
                                         const std::vector<Configuration>& configs) const {
    if (!feasibility_) return {};
    std::vector<double> out = feasibility_->log_probability(x);
    const auto& f = study_failures_;
    if (f.values.empty()) return out;
    // the model's base rate, of the outcomes it was given, as it smooths it: (ok + 1) / (n + 2)
    const auto n = static_cast<double>(target_.feasible.size());
    const auto ok =
        static_cast<double>(std::count(target_.feasible.begin(), target_.feasible.end(), true));
    const double log_base = std::log((ok + 1.0) / (n + 2.0));
    const double log_clean = std::log(smoothed_feasible(f.clean_runs, f.clean_failed));
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const auto failing = failing_value_of(*state.space, f.values, configs[i]);
      const double log_part = failing ? std::log(*failing) : log_clean;
      // P = min(1, P_model P_part / P_base)
      out[i] = std::min(0.0, out[i] + log_part - log_base);
    }
    return out;
  }

  // log P(feasible) of each of `configs` from the priors' failures, from how such
  // configurations fared in this study so far: one that failed on a prior machine, and one
  // with a value that failed in many of the priors' runs (failing_values_). Empty when the
  // priors' failures say nothing of any configuration. `index` (the candidates' keys, when
  // `configs` are the candidates) finds the prior-failed ones without a key per candidate.
  std::vector<double> prior_log_feasible(
      const TuningState& state, const std::vector<Configuration>& configs,
      const std::unordered_map<std::string, std::size_t>* index = nullptr) const {
    if (!transfer_ready() || (prior_failed_.empty() && failing_values_.empty())) return {};
    const auto& space = *state.space;
    const auto has = [&](const Configuration& c, const FailingValue& v) {
      return space.parameter(v.parameter).index_of(c[v.parameter]) == v.position;
    };
    double seen = 0.0;
    double ok = 0.0;
    std::vector<double> value_ok;
    std::vector<double> value_runs;
    for (const auto& v : failing_values_) {
      value_ok.push_back(v.runs - v.failed);
      value_runs.push_back(v.runs);
    }
    for (const auto& o : state.observations) {
      const double success = o.result.ok() ? 1.0 : 0.0;
      if (prior_failed_.count(space.key(o.config))) {
        seen += 1.0;
        ok += success;
      }
      for (std::size_t j = 0; j < failing_values_.size(); ++j) {
        if (!has(o.config, failing_values_[j])) continue;
        value_runs[j] += 1.0;
        value_ok[j] += success;
      }
    }
    // P(feasible | failed on a prior) = (ok + 0.5) / (seen + 5); per failing value
    // P = (ok + 0.5) / (runs + 1); a configuration takes the product.
    const double failed_before = std::log((ok + kPriorFailureOk) / (seen + kPriorFailureCount));
    std::vector<double> out(configs.size(), 0.0);
    if (index) {
      for (const auto& key : prior_failed_) {
        if (const auto it = index->find(key); it != index->end()) out[it->second] += failed_before;
      }
    }
    for (std::size_t i = 0; i < configs.size(); ++i) {
      if (!index && !prior_failed_.empty() && prior_failed_.count(space.key(configs[i]))) {
        out[i] += failed_before;
      }
      for (std::size_t j = 0; j < failing_values_.size(); ++j) {
        if (has(configs[i], failing_values_[j])) {
          out[i] += std::log((value_ok[j] + kPriorFailureOk) / (value_runs[j] + 1.0));
        }
      }
    }
    return out;
  }

  // log P(feasible) of the feasibility model plus the priors' (prior_log_feasible); empty
  // when neither says anything.
  static std::vector<double> with_prior_failures(std::vector<double> model_log_feasible,
                                                 const std::vector<double>& prior_log) {
    if (prior_log.empty()) return model_log_feasible;
    if (model_log_feasible.empty()) return prior_log;
    for (std::size_t i = 0; i < prior_log.size(); ++i) model_log_feasible[i] += prior_log[i];
    return model_log_feasible;
  }

  // Whether the feasibility model (`model_log_feasible`: its log P, empty without one) and
  // the priors' failures (`prior_log`: prior_log_feasible) each give candidate i at least
  // min_feasible of succeeding. Candidates below rank after every other (a probabilistic
  // constraint, as in constrained Bayesian optimisation): an unexplored corner beyond the
  // failures has the objective model's largest variance and so, once the optimum is near, the
  // largest expected improvement, which a small P(feasible) factor does not outweigh (a
  // prior's failed configuration, whose failing twin the study has not run, had the priors'
  // best values and was proposed among the first). What the study sees of such
  // configurations moves the priors' probability.
  bool likely_feasible(std::span<const double> model_log_feasible,
                       std::span<const double> prior_log, std::size_t i) const {
    return (model_log_feasible.empty() || model_log_feasible[i] >= log_min_feasible_) &&
           (prior_log.empty() || prior_log[i] >= log_min_feasible_);
  }

  // The lowest value the model believes the study has reached, in the units of its
  // predictions: the best target value, or for RGPE (whose predictions mix units of several
  // sources) the lowest ensemble mean at the observed points.
  double incumbent(const std::vector<double>& mean_at_observed) const {
    if (!transfer_ready() || mode_ == TransferMode::stacked || mean_at_observed.empty()) {
      double best = std::numeric_limits<double>::infinity();
      for (double v : target_.z) best = std::min(best, v);
      return best;
    }
    return *std::min_element(mean_at_observed.begin(), mean_at_observed.end());
  }

  // Acquisition scores of a combined prediction; with no successful observation (zero-shot)
  // the lowest predicted mean wins.
  std::vector<double> scores(const Prediction& prediction, double best,
                             std::span<const double> log_feasible) const {
    if (target_.n_ok == 0) {
      std::vector<double> s(prediction.mean.size());
      for (std::size_t i = 0; i < s.size(); ++i) {
        s[i] = -prediction.mean[i] + (log_feasible.empty() ? 0.0 : log_feasible[i]);
      }
      return s;
    }
    return surrogates::acquisition_scores(prediction, best, acquisition_, log_feasible);
  }

  // ---- acquisition over an explicit candidate set

  // Drops a batch's fantasies from the GP when the batch ends, also by an exception: with
  // copula off and no refit, the next proposal appends to the GP it finds.
  struct DropFantasies {
    GaussianProcess& gp;
    std::size_t rows;
    DropFantasies(GaussianProcess& g, std::size_t r) : gp(g), rows(r) {}
    DropFantasies(const DropFantasies&) = delete;
    DropFantasies& operator=(const DropFantasies&) = delete;
    ~DropFantasies() {
      try {
        if (gp.size() > rows) gp.truncate(rows);
      } catch (...) {
        // Only an allocation, smaller than the one it replaces, can fail here.
      }
    }
  };

  std::vector<Configuration> maximise_over_candidates(const TuningState& state, std::size_t n,
                                                      std::unordered_set<std::string>& chosen) {
    const DropFantasies drop{gp_, gp_rows_};
    const auto& cands = *state.candidates;
    const std::size_t dim = model_dimension(state);
    if (candidates_seen_ != state.candidates ||
        candidate_matrix_.nr() != static_cast<long>(cands.size())) {
      candidate_matrix_.set_size(static_cast<long>(cands.size()), static_cast<long>(dim));
      const auto& enc = *state.encoded_candidates;
      const std::size_t full = state.space->encoded_dimension();
      for (std::size_t i = 0; i < cands.size(); ++i) {
        for (std::size_t k = 0; k < dim; ++k) {
          candidate_matrix_(static_cast<long>(i), static_cast<long>(k)) =
              enc[i * full + active_[k]];
        }
      }
      posterior_ = std::make_unique<surrogates::CandidatePosterior>(candidate_matrix_);
      candidates_seen_ = state.candidates;
      candidate_sources_.clear();
    }
    prepare_candidate_sources();
    std::vector<const Prediction*> transfer;
    for (const auto& p : candidate_sources_) transfer.push_back(p.get());

    std::vector<char> blocked(cands.size(), 0);
    auto index_of = [&](const std::string& key) -> std::optional<std::size_t> {
      if (auto it = state.candidate_index->find(key); it != state.candidate_index->end()) {
        return it->second;
      }
      return std::nullopt;
    };
    for (const auto& key : state.taken) {
      if (auto i = index_of(key)) blocked[*i] = 1;
    }
    for (const auto& key : chosen) {
      if (auto i = index_of(key)) blocked[*i] = 1;
    }
    std::vector<std::size_t> observed;
    for (const auto& o : state.observations) {
      if (!o.result.ok()) continue;
      if (auto i = index_of(state.space->key(o.config))) observed.push_back(*i);
    }
    const std::vector<double> model_log_feasible =
        this->model_log_feasible(state, candidate_matrix_, cands);
    const std::vector<double> prior_log = prior_log_feasible(state, cands, state.candidate_index);
    const std::vector<double> log_feasible = with_prior_failures(model_log_feasible, prior_log);

    // Kriging believer: pending configurations (other workers) and earlier picks of this
    // batch are fantasised at the target GP's predicted mean, so the batch spreads out.
    FantasyWindow fantasies(gp_, gp_rows_, fantasy_limit());
    auto fantasise = [&](std::size_t i) {
      std::vector<double> x(dim);
      for (std::size_t k = 0; k < dim; ++k) {
        x[k] = candidate_matrix_(static_cast<long>(i), static_cast<long>(k));
      }
      fantasies.add(std::move(x), posterior_->mean()[i]);
    };
    posterior_->update(gp_);
    for (const auto& p : recent_pending(state)) {
      if (auto i = index_of(state.space->key(p))) fantasise(*i);
    }
    std::vector<Configuration> out;
    for (std::size_t k = 0; k < n; ++k) {
      posterior_->update(gp_);
      const Prediction combined = combine(posterior_->prediction(), transfer);
      std::vector<double> at_observed;
      for (std::size_t i : observed) at_observed.push_back(combined.mean[i]);
      const auto s = scores(combined, incumbent(at_observed), log_feasible);
      std::size_t best = cands.size();
      double best_score = kNegativeInfinity;
      // Local step: only candidates near the incumbent (a trust region in parameter steps).
      std::vector<char> outside;
      if (local_every_ > 0 && k == 0 && target_.n_ok > 0 && target_.n_ok % local_every_ == 0) {
        std::size_t inc = 0;
        for (std::size_t i = 1; i < target_.z.size(); ++i) {
          if (target_.z[i] < target_.z[inc]) inc = i;
        }
        // Steps are counted in parameters, not encoded columns: another value of a
        // categorical parameter changes two of its one-hot columns, and is one step.
        const auto parameter_of = parameters_of_columns(*state.space, active_);
        outside.assign(cands.size(), 0);
        bool any = false;
        for (std::size_t i = 0; i < cands.size(); ++i) {
          std::size_t differ = 0;
          std::optional<std::size_t> counted;  // the parameter last counted as changed
          for (std::size_t c = 0; c < dim; ++c) {
            if (counted != parameter_of[c] &&
                std::abs(candidate_matrix_(static_cast<long>(i), static_cast<long>(c)) -
                         target_.x(static_cast<long>(inc), static_cast<long>(c))) > 1e-12) {
              ++differ;
              counted = parameter_of[c];
            }
          }
          outside[i] = differ > local_radius_;
          any = any || (!outside[i] && !blocked[i]);
        }
        if (!any) outside.clear();
        diagnostics_["local"] = any;
      }
      // The best candidate the feasibility model believes more likely to succeed than
      // min_feasible, or when there is none, the best of all.
      bool best_likely = false;
      for (std::size_t i = 0; i < cands.size(); ++i) {
        if (blocked[i] || (!outside.empty() && outside[i])) continue;
        const bool likely = likely_feasible(model_log_feasible, prior_log, i);
        if (std::tie(likely, s[i]) > std::tie(best_likely, best_score)) {
          best_likely = likely;
          best_score = s[i];
          best = i;
        }
      }
      if (best == cands.size()) {
        // Every score is -inf (e.g. LCB with nothing feasible enough): any free candidate.
        for (std::size_t i = 0; i < cands.size() && best == cands.size(); ++i) {
          if (!blocked[i]) best = i;
        }
        if (best == cands.size()) break;  // exhausted
      }
      blocked[best] = 1;
      chosen.insert(state.space->key(cands[best]));
      out.push_back(cands[best]);
      if (k == 0) {
        diagnostics_["acquisition"] = best_score;
        diagnostics_["predicted_mean_z"] = combined.mean[best];
      }
      if (k + 1 < n) fantasise(best);
    }
    diagnostics_["fantasies"] = fantasies.most();
    return out;
  }

  // Fantasies a proposal may add to the target GP (see kMaxFantasies).
  std::size_t fantasy_limit() const {
    const std::size_t room = max_model_points_ > gp_rows_ ? max_model_points_ - gp_rows_ : 0;
    return std::clamp(room, kMinFantasies, kMaxFantasies);
  }
  // The pending configurations a proposal fantasises: the most recent that fit the limit.
  std::span<const Configuration> recent_pending(const TuningState& state) const {
    const std::size_t count = std::min(state.pending.size(), fantasy_limit());
    return std::span<const Configuration>(state.pending).last(count);
  }

  // ---- acquisition by sampling plus local search (spaces that are not enumerated)

  std::vector<Configuration> maximise_by_sampling(const TuningState& state, std::size_t n,
                                                  std::unordered_set<std::string>& chosen,
                                                  Rng& rng) {
    const DropFantasies drop{gp_, gp_rows_};
    const auto& space = *state.space;
    const std::size_t dim = model_dimension(state);
    auto free = [&](const Configuration& c) {
      const auto key = space.key(c);
      return !state.taken.count(key) && !chosen.count(key);
    };
    std::vector<double> at_observed;
    if (transfer_ready() && mode_ == TransferMode::rgpe && target_.n_ok > 0) {
      at_observed = predict_combined(target_.x).mean;
    }
    const double best_z = incumbent(at_observed);
    auto score = [&](const std::vector<Configuration>& configs) {
      std::vector<std::vector<double>> rows;
      for (const auto& c : configs) rows.push_back(encode(state, c));
      const Matrix x = rows_to_matrix(rows, dim);
      const std::vector<double> model_log_feasible = this->model_log_feasible(state, x, configs);
      const std::vector<double> prior_log = prior_log_feasible(state, configs);
      const std::vector<double> log_feasible = with_prior_failures(model_log_feasible, prior_log);
      // (likely feasible, acquisition score): compared in that order.
      const auto s = scores(predict_combined(x), best_z, log_feasible);
      std::vector<std::pair<bool, double>> ranked(s.size());
      for (std::size_t i = 0; i < s.size(); ++i)
        ranked[i] = {likely_feasible(model_log_feasible, prior_log, i), s[i]};
      return ranked;
    };
    FantasyWindow fantasies(gp_, gp_rows_, fantasy_limit());
    auto fantasise = [&](const Configuration& c) {
      auto x = encode(state, c);
      const auto prediction = gp_.predict(rows_to_matrix({x}, dim));
      fantasies.add(std::move(x), prediction.mean[0]);
    };
    for (const auto& p : recent_pending(state)) fantasise(p);
    // Neighbours of the best observations: where improvement is most likely.
    std::vector<const Observation*> ok;
    for (const auto& o : state.observations) {
      if (o.result.ok()) ok.push_back(&o);
    }
    const double sign = state.minimize ? 1.0 : -1.0;
    std::sort(ok.begin(), ok.end(), [&](auto* a, auto* b) {
      return sign * a->result.objective < sign * b->result.objective;
    });
    // Random candidates, drawn once for the batch. Where valid configurations are rare the
    // draws are bounded and the pool smaller: the neighbours of the best observations (valid
    // by construction) still give the acquisition somewhere to go.
    std::vector<Configuration> sampled;
    std::size_t draws = kMaxPoolDraws;
    for (std::size_t i = 0; i < candidate_samples_; ++i) {
      auto c = space.try_sample(rng, draws);
      if (!c) break;
      sampled.push_back(std::move(*c));
    }
    // Later proposals of a batch re-score only the best of the first pool (and the neighbours
    // of the best results): a fantasy moves the scores near it, not the ranking of thousands
    // of candidates far away, and re-scoring them all made n = 400 take 15 s.
    std::vector<Configuration> shortlist;
    std::vector<Configuration> out;
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<Configuration> pool;
      for (const auto& c : k == 0 ? sampled : shortlist) {
        if (free(c)) pool.push_back(c);
      }
      for (std::size_t i = 0; i < ok.size() && i < kLocalSearchStarts; ++i) {
        for (auto& nb : space.neighbours(ok[i]->config, rng)) {
          if (free(nb)) pool.push_back(std::move(nb));
        }
      }
      if (pool.empty()) break;
      const auto pool_scores = score(pool);
      if (k == 0 && n > 1) {
        std::vector<std::size_t> ranked(pool.size());
        std::iota(ranked.begin(), ranked.end(), std::size_t{0});
        const std::size_t keep = std::min(kBatchShortlist, ranked.size());
        std::partial_sort(ranked.begin(), ranked.begin() + static_cast<long>(keep), ranked.end(),
                          [&](auto a, auto b) { return pool_scores[a] > pool_scores[b]; });
        for (std::size_t i = 0; i < keep; ++i) shortlist.push_back(pool[ranked[i]]);
      }
      // Local search from the best few: move to the best neighbour while it improves.
      std::vector<std::size_t> order(pool.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      const std::size_t starts = std::min(kLocalSearchStarts, order.size());
      std::partial_sort(order.begin(), order.begin() + static_cast<long>(starts), order.end(),
                        [&](auto a, auto b) { return pool_scores[a] > pool_scores[b]; });
      Configuration best = pool[order[0]];
      auto best_score = pool_scores[order[0]];
      for (std::size_t s = 0; s < starts; ++s) {
        Configuration current = pool[order[s]];
        auto current_score = pool_scores[order[s]];
        for (std::size_t step = 0; step < kLocalSearchSteps; ++step) {
          std::vector<Configuration> neighbours;
          for (auto& nb : space.neighbours(current, rng)) {
            if (free(nb)) neighbours.push_back(std::move(nb));
          }
          if (neighbours.empty()) break;
          const auto nb_scores = score(neighbours);
          const auto it = std::max_element(nb_scores.begin(), nb_scores.end());
          if (*it <= current_score) break;
          current_score = *it;
          current = neighbours[static_cast<std::size_t>(it - nb_scores.begin())];
        }
        if (current_score > best_score) {
          best_score = current_score;
          best = current;
        }
      }
      chosen.insert(space.key(best));
      if (k == 0) diagnostics_["acquisition"] = best_score.second;
      if (k + 1 < n) fantasise(best);
      out.push_back(std::move(best));
    }
    if (out.size() < n) {
      // Valid configurations so rare that the pool's draws found none free, and no neighbour
      // of a result is valid (constraints that tie parameters together): draw harder, as
      // random search does, rather than propose nothing while some are left.
      for (auto& c : random_untaken(state, n - out.size(), rng, chosen)) {
        chosen.insert(space.key(c));
        out.push_back(std::move(c));
      }
    }
    diagnostics_["fantasies"] = fantasies.most();
    return out;
  }

  // ---- configuration
  std::string name_;
  TransferMode mode_;
  std::uint64_t seed_ = 0;
  std::size_t initial_design_ = 0;
  std::size_t refit_every_ = kDefaultRefitEvery;
  std::size_t refit_below_ = kAlwaysRefitBelow;
  std::size_t candidate_samples_ = kDefaultCandidateSamples;
  std::size_t max_model_points_ = kDefaultMaxModelPoints;
  // Past max_model_points_ successes: the indices (in order of success) the GP is conditioned
  // on, and how many successes there were when they were last brought up to date.
  std::vector<std::size_t> model_rows_;
  std::size_t model_rows_seen_ = 0;
  std::size_t prior_best_count_ = 0;
  std::size_t consensus_first_ = 0;
  std::size_t local_every_ = kDefaultLocalEvery;
  std::size_t local_radius_ = kDefaultLocalRadius;
  bool copula_ = true;
  double log_min_feasible_ = 0.0;  // log of acquisition_.min_feasible_probability
  std::optional<double> short_start_;
  surrogates::AcquisitionOptions acquisition_;
  surrogates::GpFitOptions fit_options_;
  surrogates::RgpeOptions rgpe_options_;
  surrogates::SourceModelOptions source_options_;

  // ---- the target model, kept between calls: refitted on a schedule, conditioned in between
  bool log_ = true;
  /// Whether source_inverse_ gives log values (every prior value positive).
  bool zero_shot_log_ = true;
  surrogates::ObjectiveTransform transform_;
  TargetData target_;
  GaussianProcess gp_;
  std::size_t gp_rows_ = 0;
  std::size_t fitted_at_ = 0;
  std::optional<surrogates::GpHyperparameters> hyperparameters_;
  std::optional<surrogates::GpHyperparameters> default_hyperparameters_;
  std::optional<surrogates::FeasibilityModel> feasibility_;
  std::optional<surrogates::Covariance> feasibility_covariance_;
  std::vector<std::size_t> active_;  // encoded columns the model sees
  // observations_fingerprint of the state model_for_answers last brought the model up to date
  // with (empty once anything else has updated it).
  std::string modelled_state_;
  // Of forecasts for the model of modelled_state_ (interval_half_width), once a forecast asked:
  // below kIntervalRefitBelow rows it takes kIntervalFolds refits.
  std::optional<double> forecast_half_width_;

  // ---- transfer: the priors as model data, their fitted models (shared through the cache)
  const std::vector<Prior>* prepared_from_ = nullptr;
  std::size_t prepared_size_ = 0;
  TaskFeatureScaling features_;
  std::vector<double> study_features_;
  std::vector<surrogates::SourceData> sources_;
  // Per source: the inverse copula of the model values of its task nearest the study's.
  std::vector<InverseCopula> source_inverse_;
  std::unordered_set<std::string> prior_failed_;  // keys that failed on most priors that ran them
  // A parameter value (its position) and the priors' runs with it, failed and all.
  std::vector<FailingValue> failing_values_;  // mark_failing_values
  StudyFailures study_failures_;              // failures_of_study, at the last fit
  std::vector<std::shared_ptr<const surrogates::SourceModel>> source_models_;  // rgpe
  surrogates::StackedPrior stack_;                                             // stacked
  std::vector<double> weights_;  // rgpe: sources..., target
  double stack_offset_ = 0.0;    // stacked: the study's values ~ offset + scale * stack mean
  double stack_scale_ = 1.0;
  nlohmann::json prior_models_json_ = nlohmann::json::array();
  std::vector<Configuration> prior_best_list_;
  std::vector<Configuration> consensus_list_;

  // ---- the candidate set, the target posterior over it, and the sources' predictions there
  const std::vector<Configuration>* candidates_seen_ = nullptr;
  Matrix candidate_matrix_;
  std::unique_ptr<surrogates::CandidatePosterior> posterior_;
  std::vector<std::shared_ptr<const Prediction>> candidate_sources_;

  nlohmann::json diagnostics_ = nlohmann::json::object();
};

}  // namespace

std::unique_ptr<SearchStrategy> make_bayesian_optimization(const StrategyOptions& options,
                                                           TransferMode mode, std::string name) {
  return std::make_unique<BayesianOptimization>(options, mode, std::move(name));
}

}  // namespace tunebase
