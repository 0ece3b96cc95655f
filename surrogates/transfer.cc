#include "surrogates/transfer.h"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>

#include "core/error.h"

namespace tunebase::surrogates {
namespace {

constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;
// Predictions over candidate sets kept per cache; beyond this the oldest half is forgotten.
constexpr std::size_t kMaxCachedPredictions = 256;
// Relative jitter for sampling from a joint posterior whose covariance is near singular.
constexpr double kSamplingJitter = 1e-8;

std::string hex(std::uint64_t v) {
  std::ostringstream out;
  out << std::hex << std::setw(16) << std::setfill('0') << v;
  return out.str();
}

std::uint64_t hash_bytes(const void* data, std::size_t bytes, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

std::uint64_t hash_matrix(const Matrix& x, std::uint64_t h) {
  const long rows = x.nr();
  const long cols = x.nc();
  h = hash_bytes(&rows, sizeof rows, h);
  h = hash_bytes(&cols, sizeof cols, h);
  if (x.size() > 0) h = hash_values(std::span<const double>(&x(0, 0), x.size()), h);
  return h;
}

// The subsample and fit of one source, shared by fit() and condition().
struct Subsampled {
  Matrix x;
  std::vector<double> y;
};

Subsampled subsample(const SourceData& data, const SourceModelOptions& options) {
  if (data.size() == 0) {
    throw InvalidInput("source '" + data.name + "' has no successful measurement to learn from");
  }
  if (static_cast<std::size_t>(data.x.nr()) != data.size()) {
    throw InvalidInput("source '" + data.name + "': " + std::to_string(data.x.nr()) + " rows but " +
                       std::to_string(data.size()) + " objective values");
  }
  Rng rng(options.seed ^ data.content_key());
  const auto keep = subsample_indices(data.x, data.y, options.subsample, rng);
  Subsampled s;
  s.x = select_rows(data.x, keep);
  s.y.reserve(keep.size());
  for (std::size_t i : keep) s.y.push_back(data.y[i]);
  return s;
}

// Percentile-free quantile of a small sample (linear interpolation, as numpy's default).
double sample_quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double h = (static_cast<double>(v.size()) - 1.0) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

double normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0)) {
    throw InvalidInput("normal quantile: probability " + std::to_string(p) + " is outside (0, 1)");
  }
  return boost::math::quantile(boost::math::normal_distribution<double>(), p);
}

std::vector<double> gaussian_copula(std::span<const double> values) {
  const std::size_t n = values.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) {
      throw InvalidInput("copula: value " + std::to_string(i) + " is not finite");
    }
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> z(n);
  const double denominator = static_cast<double>(n) + 1.0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j + 1 < n && values[order[j + 1]] == values[order[i]]) ++j;
    // average rank of the tie group, 1-based
    const double rank = 0.5 * static_cast<double>(i + j) + 1.0;
    const double q = normal_quantile(rank / denominator);
    for (std::size_t k = i; k <= j; ++k) z[order[k]] = q;
    i = j + 1;
  }
  return z;
}

std::uint64_t hash_values(std::span<const double> values, std::uint64_t seed) {
  return hash_bytes(values.data(), values.size_bytes(), seed);
}

std::uint64_t SourceData::content_key() const {
  return hash_values(y, hash_matrix(x, 0xcbf29ce484222325ULL));
}

std::uint64_t SourceData::key() const {
  return hash_bytes(name.data(), name.size(), content_key());
}

std::vector<std::size_t> subsample_indices(const Matrix& x, std::span<const double> y,
                                           const SubsampleOptions& options, Rng& rng) {
  const std::size_t n = y.size();
  std::vector<std::size_t> all(n);
  std::iota(all.begin(), all.end(), std::size_t{0});
  if (n <= options.max_points || options.max_points == 0) return all;
  const auto best_count = std::min<std::size_t>(
      options.max_points,
      static_cast<std::size_t>(std::ceil(std::clamp(options.best_fraction, 0.0, 1.0) *
                                         static_cast<double>(options.max_points))));
  std::vector<std::size_t> by_value = all;
  std::stable_sort(by_value.begin(), by_value.end(),
                   [&](std::size_t a, std::size_t b) { return y[a] < y[b]; });
  std::vector<char> taken(n, 0);
  std::vector<std::size_t> keep(by_value.begin(), by_value.begin() + static_cast<long>(best_count));
  for (std::size_t i : keep) taken[i] = 1;

  // Greedy maximin over the rest: each step takes the row farthest from everything kept so
  // far (distances to the best region count too, so the sample fills the rest of the space).
  const auto d = static_cast<std::size_t>(x.nc());
  std::vector<double> nearest(n, std::numeric_limits<double>::infinity());
  auto account_for = [&](std::size_t k) {
    const double* pk = &x(static_cast<long>(k), 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      const double* pi = &x(static_cast<long>(i), 0);
      double dist = 0.0;
      for (std::size_t j = 0; j < d; ++j) dist += (pi[j] - pk[j]) * (pi[j] - pk[j]);
      nearest[i] = std::min(nearest[i], dist);
    }
  };
  for (std::size_t k : keep) account_for(k);
  if (keep.empty()) {
    const std::size_t first = std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    keep.push_back(first);
    taken[first] = 1;
    account_for(first);
  }
  while (keep.size() < options.max_points) {
    std::size_t far = n;
    double far_distance = -1.0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!taken[i] && nearest[i] > far_distance) {
        far_distance = nearest[i];
        far = i;
      }
    }
    if (far == n) break;
    keep.push_back(far);
    taken[far] = 1;
    account_for(far);
  }
  std::sort(keep.begin(), keep.end());
  return keep;
}

std::uint64_t SourceModelOptions::key() const {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const double numbers[] = {static_cast<double>(subsample.max_points),
                            subsample.best_fraction,
                            static_cast<double>(fit.kind == CovarianceKind::matern52),
                            static_cast<double>(fit.random_starts),
                            static_cast<double>(fit.max_iterations),
                            fit.priors.lengthscale_location.value_or(-1e300),
                            static_cast<double>(seed)};
  h = hash_values(numbers, h);
  // Spaces without categorical parameters keep the keys they had.
  if (fit.priors.one_hot_columns.empty()) return h;
  std::vector<double> one_hot(fit.priors.one_hot_columns.begin(), fit.priors.one_hot_columns.end());
  one_hot.push_back(fit.priors.categorical_lengthscale_location);
  return hash_values(one_hot, h);
}

SourceModel SourceModel::fit(const SourceData& data, const SourceModelOptions& options) {
  Subsampled s = subsample(data, options);
  Rng rng(options.seed ^ data.content_key() ^ 0x5bd1e995ULL);
  SourceModel m;
  m.name_ = data.name;
  m.key_ = data.key() ^ (options.key() * kFnvPrime);
  m.source_size_ = data.size();
  m.gp_ = GaussianProcess::fit(std::move(s.x), std::move(s.y), options.fit, rng);
  return m;
}

SourceModel SourceModel::condition(const SourceData& data, const SourceModelOptions& options,
                                   const GpHyperparameters& hyperparameters) {
  Subsampled s = subsample(data, options);
  SourceModel m;
  m.name_ = data.name;
  m.key_ = data.key() ^ (options.key() * kFnvPrime);
  m.source_size_ = data.size();
  m.gp_ = GaussianProcess::condition(std::move(s.x), std::move(s.y), hyperparameters);
  return m;
}

nlohmann::json SourceModel::to_json() const {
  return {{"name", name_},
          {"key", hex(key_)},
          {"source_size", source_size_},
          {"points", points()},
          {"hyperparameters", gp_.hyperparameters().to_json()}};
}

// ---------------------------------------------------------------------------------------------
// SourceModelCache

std::shared_ptr<const SourceModel> SourceModelCache::model(const SourceData& data,
                                                           const SourceModelOptions& options) {
  const std::uint64_t key = data.key() ^ (options.key() * kFnvPrime);
  // One lock for lookup and fit: a second session asking for the same prior waits for the
  // first fit instead of repeating it. Fits take about a second and happen once per prior.
  std::lock_guard lock(mutex_);
  if (auto it = models_.find(key); it != models_.end()) {
    ++hits_;
    it->second.last_use = ++use_clock_;
    return it->second.model;
  }
  std::shared_ptr<const SourceModel> built;
  if (auto it = saved_.find(key); it != saved_.end()) {
    built = std::make_shared<SourceModel>(SourceModel::condition(data, options, it->second));
    ++restores_;
  } else {
    built = std::make_shared<SourceModel>(SourceModel::fit(data, options));
    ++fits_;
  }
  if (models_.size() >= max_models_) {
    models_.erase(std::min_element(
        models_.begin(), models_.end(),
        [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; }));
  }
  models_.emplace(key, Cached{built, ++use_clock_});
  return built;
}

std::shared_ptr<const Prediction> SourceModelCache::candidate_prediction(
    const SourceModel& model, const Matrix& candidates, std::uint64_t candidates_key) {
  const std::uint64_t key = model.key() ^ (candidates_key * kFnvPrime + 0x9e3779b97f4a7c15ULL);
  {
    std::lock_guard lock(mutex_);
    if (auto it = predictions_.find(key); it != predictions_.end()) return it->second;
  }
  // Predicting 17,956 candidates takes tens of milliseconds: done outside the lock (two
  // sessions may both compute it once; the results are identical).
  auto prediction = std::make_shared<const Prediction>(model.predict(candidates));
  std::lock_guard lock(mutex_);
  if (predictions_.size() >= kMaxCachedPredictions) predictions_.clear();
  predictions_.emplace(key, prediction);
  return prediction;
}

std::size_t SourceModelCache::fit_count() const {
  std::lock_guard lock(mutex_);
  return fits_;
}

std::size_t SourceModelCache::restore_count() const {
  std::lock_guard lock(mutex_);
  return restores_;
}

std::size_t SourceModelCache::hit_count() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

std::size_t SourceModelCache::size() const {
  std::lock_guard lock(mutex_);
  return models_.size();
}

nlohmann::json SourceModelCache::to_json() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, cached] : models_) {
    out[hex(key)] = {{"name", cached.model->name()},
                     {"hyperparameters", cached.model->gp().hyperparameters().to_json()}};
  }
  return out;
}

void SourceModelCache::load(const nlohmann::json& saved) {
  if (!saved.is_object()) {
    throw InvalidInput(
        "saved source models: expected {\"<16 hex digits>\": {\"hyperparameters\": {...}}}");
  }
  std::unordered_map<std::uint64_t, GpHyperparameters> parsed;
  for (const auto& [text, entry] : saved.items()) {
    std::uint64_t key = 0;
    std::size_t used = 0;
    try {
      key = std::stoull(text, &used, 16);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || text.empty()) {
      throw InvalidInput("saved source models: key '" + text + "' is not a hexadecimal number");
    }
    if (!entry.is_object() || !entry.contains("hyperparameters")) {
      throw InvalidInput("saved source models: entry '" + text + "' has no \"hyperparameters\"");
    }
    parsed.emplace(key, GpHyperparameters::from_json(entry["hyperparameters"]));
  }
  std::lock_guard lock(mutex_);
  for (auto& [key, h] : parsed) saved_.insert_or_assign(key, std::move(h));
}

void SourceModelCache::clear() {
  std::lock_guard lock(mutex_);
  models_.clear();
  saved_.clear();
  predictions_.clear();
  fits_ = restores_ = hits_ = 0;
}

SourceModelCache& SourceModelCache::process_cache() {
  static SourceModelCache cache;
  return cache;
}

// ---------------------------------------------------------------------------------------------
// Stacked residual GPs

StackedPrior StackedPrior::build(const std::vector<SourceData>& sources,
                                 const SourceModelOptions& options, SourceModelCache& cache) {
  StackedPrior stack;
  for (const auto& source : sources) {
    SourceData residual = source;
    if (!stack.empty()) {
      const Prediction below = stack.predict(source.x);
      for (std::size_t i = 0; i < residual.y.size(); ++i) residual.y[i] -= below.mean[i];
    }
    stack.levels_.push_back(cache.model(residual, options));
  }
  return stack;
}

Prediction StackedPrior::predict(const Matrix& x) const {
  Prediction out;
  const auto m = static_cast<std::size_t>(x.nr());
  out.mean.assign(m, 0.0);
  out.variance.assign(m, 1.0);
  for (const auto& level : levels_) {
    Prediction p = level->predict(x);
    for (std::size_t i = 0; i < m; ++i) out.mean[i] += p.mean[i];
    out.variance = std::move(p.variance);
  }
  return out;
}

std::size_t StackedPrior::points() const {
  std::size_t n = 0;
  for (const auto& level : levels_) n += level->points();
  return n;
}

Prediction stack_predictions(const Prediction& prior, const Prediction& residual,
                             std::size_t target_points) {
  const std::size_t m = prior.mean.size();
  if (residual.mean.size() != m || prior.variance.size() != m || residual.variance.size() != m) {
    throw InvalidInput("stack_predictions: prior and residual predictions differ in size");
  }
  const double n = static_cast<double>(target_points);
  const double beta = n / (n + kStackPriorPoints);
  Prediction out;
  out.mean.resize(m);
  out.variance.resize(m);
  for (std::size_t i = 0; i < m; ++i) {
    out.mean[i] = prior.mean[i] + residual.mean[i];
    // sd = sd_r^beta sd_p^(1-beta)  <=>  var = var_r^beta var_p^(1-beta)
    const double vr = std::max(residual.variance[i], 0.0);
    const double vp = std::max(prior.variance[i], 0.0);
    out.variance[i] =
        (vr > 0.0 && vp > 0.0) ? std::exp(beta * std::log(vr) + (1.0 - beta) * std::log(vp)) : 0.0;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// RGPE

std::size_t ranking_loss(std::span<const double> f, std::span<const double> y) {
  std::size_t loss = 0;
  const std::size_t n = std::min(f.size(), y.size());
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t k = j + 1; k < n; ++k) {
      if (y[j] == y[k]) continue;
      if ((f[j] < f[k]) != (y[j] < y[k])) ++loss;
    }
  }
  return loss;
}

RgpeWeights rgpe_weights(const std::vector<const SourceModel*>& sources, const Matrix& source_x,
                         const GpHyperparameters* target, const Matrix& x,
                         std::span<const double> y, const RgpeOptions& options, Rng& rng) {
  const std::size_t k = sources.size();
  const std::size_t models = k + 1;
  RgpeWeights out;
  out.weights.assign(models, 0.0);
  out.median_loss.assign(models, std::numeric_limits<double>::quiet_NaN());
  out.dropped.assign(k, false);
  if (static_cast<std::size_t>(x.nr()) != y.size() || source_x.nr() != x.nr()) {
    throw InvalidInput("rgpe_weights: " + std::to_string(x.nr()) + " target rows, " +
                       std::to_string(source_x.nr()) + " source rows and " +
                       std::to_string(y.size()) + " values");
  }
  const std::size_t n_all = y.size();
  if (k == 0) {
    out.weights[0] = 1.0;
    return out;
  }
  if (n_all < std::max<std::size_t>(options.min_points, 2) || target == nullptr) {
    for (std::size_t i = 0; i < k; ++i) out.weights[i] = 1.0 / static_cast<double>(k);
    return out;
  }
  // The most recent points: where the search is now, and a bounded O(n^2) loss.
  const std::size_t n = std::min(n_all, std::max<std::size_t>(options.max_points, 2));
  const std::size_t first = n_all - n;
  std::vector<std::size_t> rows(n);
  std::iota(rows.begin(), rows.end(), first);
  const Matrix xs = select_rows(source_x, rows);
  const std::vector<double> ys(y.begin() + static_cast<long>(first), y.end());

  const std::size_t s_count = std::max<std::size_t>(options.samples, 1);
  // losses[i][s]: ranking loss of model i in sample s.
  std::vector<std::vector<double>> losses(models, std::vector<double>(s_count, 0.0));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> f(n);
  std::vector<double> u(n);
  for (std::size_t i = 0; i < k; ++i) {
    JointPrediction joint = sources[i]->predict_joint(xs);
    Matrix chol = joint.covariance;
    double mean_diag = 0.0;
    for (std::size_t a = 0; a < n; ++a)
      mean_diag += chol(static_cast<long>(a), static_cast<long>(a));
    for (std::size_t a = 0; a < n; ++a) {
      chol(static_cast<long>(a), static_cast<long>(a)) +=
          kSamplingJitter * std::max(mean_diag / static_cast<double>(n), 1e-12);
    }
    detail::cholesky_with_jitter(chol);
    for (std::size_t s = 0; s < s_count; ++s) {
      for (double& v : u) v = normal(rng);
      // f = mu + L u
      for (std::size_t a = 0; a < n; ++a) {
        double acc = joint.mean[a];
        for (std::size_t b = 0; b <= a; ++b)
          acc += chol(static_cast<long>(a), static_cast<long>(b)) * u[b];
        f[a] = acc;
      }
      losses[i][s] = static_cast<double>(ranking_loss(f, ys));
    }
  }
  // The target is judged by leave-one-out predictions: each point predicted without itself.
  const Prediction loo =
      GaussianProcess::condition(select_rows(x, rows), ys, *target).leave_one_out();
  for (std::size_t s = 0; s < s_count; ++s) {
    for (std::size_t a = 0; a < n; ++a) {
      f[a] = loo.mean[a] + std::sqrt(std::max(loo.variance[a], 0.0)) * normal(rng);
    }
    losses[k][s] = static_cast<double>(ranking_loss(f, ys));
  }
  for (std::size_t i = 0; i < models; ++i) out.median_loss[i] = sample_quantile(losses[i], 0.5);

  std::vector<bool> eligible(models, true);
  if (options.prevent_dilution) {
    const double limit = sample_quantile(losses[k], options.dilution_quantile);
    for (std::size_t i = 0; i < k; ++i) {
      if (out.median_loss[i] > limit) {
        eligible[i] = false;
        out.dropped[i] = true;
      }
    }
  }
  // w_i = share of samples in which model i has the lowest loss; ties split at random.
  std::vector<std::size_t> winners;
  for (std::size_t s = 0; s < s_count; ++s) {
    double best = std::numeric_limits<double>::infinity();
    winners.clear();
    for (std::size_t i = 0; i < models; ++i) {
      if (!eligible[i]) continue;
      if (losses[i][s] < best) {
        best = losses[i][s];
        winners.assign(1, i);
      } else if (losses[i][s] == best) {
        winners.push_back(i);
      }
    }
    const std::size_t w =
        winners[std::uniform_int_distribution<std::size_t>(0, winners.size() - 1)(rng)];
    out.weights[w] += 1.0 / static_cast<double>(s_count);
  }
  return out;
}

Prediction weighted_ensemble(const std::vector<const Prediction*>& members,
                             std::span<const double> weights) {
  if (members.size() != weights.size()) {
    throw InvalidInput("weighted_ensemble: " + std::to_string(members.size()) + " members but " +
                       std::to_string(weights.size()) + " weights");
  }
  Prediction out;
  std::size_t m = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (weights[i] > 0.0 && members[i]) {
      m = members[i]->mean.size();
      break;
    }
  }
  out.mean.assign(m, 0.0);
  out.variance.assign(m, 0.0);
  for (std::size_t i = 0; i < members.size(); ++i) {
    const double w = weights[i];
    if (!(w > 0.0)) continue;
    if (!members[i] || members[i]->mean.size() != m || members[i]->variance.size() != m) {
      throw InvalidInput("weighted_ensemble: member " + std::to_string(i) +
                         " is missing or has a different number of points");
    }
    // mean = sum w_i mu_i;  var = sum w_i^2 var_i
    for (std::size_t c = 0; c < m; ++c) {
      out.mean[c] += w * members[i]->mean[c];
      out.variance[c] += w * w * members[i]->variance[c];
    }
  }
  return out;
}

}  // namespace tunebase::surrogates
