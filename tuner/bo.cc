#include "tuner/bo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "surrogates/acquisition.h"
#include "surrogates/candidate_posterior.h"
#include "surrogates/feasibility.h"
#include "surrogates/gp.h"
#include "surrogates/transform.h"

namespace tunebase {

namespace {

using surrogates::GaussianProcess;
using surrogates::Matrix;

// Space-filling evaluations before the first model (capped at a quarter of the budget).
constexpr std::size_t kDefaultInitialDesign = 8;
// A GP needs a few successes to say anything.
constexpr std::size_t kMinObservationsForModel = 3;
// Hyperparameters are refitted at every step up to this many successes, then every
// max(kDefaultRefitEvery, n / kRefitFraction) new successes; in between, the GP is extended
// with the new observations at fixed hyperparameters (O(n^2) per observation).
constexpr std::size_t kAlwaysRefitBelow = 20;
constexpr std::size_t kDefaultRefitEvery = 5;
constexpr std::size_t kRefitFraction = 10;
// Spaces without a candidate list: random valid samples scored per proposal, then a local
// search over neighbours from the best few.
constexpr std::size_t kDefaultCandidateSamples = 2048;
constexpr std::size_t kLocalSearchStarts = 5;
constexpr std::size_t kLocalSearchSteps = 30;
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

class BayesianOptimization final : public ModelBasedStrategy {
 public:
  explicit BayesianOptimization(const StrategyOptions& options) {
    const auto get = [&](const char* key, auto fallback) {
      return options.is_object() && options.contains(key) ? options[key].get<decltype(fallback)>()
                                                          : fallback;
    };
    seed_ = get("seed", std::uint64_t{0});
    initial_design_ = get("initial_design", std::size_t{0});
    refit_every_ = get("refit_every", kDefaultRefitEvery);
    candidate_samples_ = get("candidate_samples", kDefaultCandidateSamples);
    acquisition_.kind = surrogates::acquisition_from_string(get("acquisition", std::string("log_ei")));
    acquisition_.kappa = get("kappa", 2.0);
    fit_options_.kind =
        surrogates::covariance_kind_from_string(get("covariance", std::string("matern52")));
    copula_ = get("output", std::string("log")) == "copula";
    if (options.is_object() && options.contains("lengthscale_location"))
      fit_options_.priors.lengthscale_location = options["lengthscale_location"].get<double>();
    fit_options_.random_starts = get("random_starts", fit_options_.random_starts);
    refit_below_ = get("refit_below", kAlwaysRefitBelow);
    if (refit_every_ == 0) throw InvalidInput("bo option refit_every must be at least 1");
  }

  std::string name() const override { return "bo"; }
  nlohmann::json diagnostics() const override { return diagnostics_; }

  std::vector<Configuration> propose(const TuningState& state, std::size_t n, Rng& rng) override {
    diagnostics_ = {{"strategy", "bo"}};
    std::vector<Configuration> out;
    std::unordered_set<std::string> chosen;
    // Configurations suggested by priors first (transfer's simplest form).
    for (const auto& c : state.warm_start) {
      if (out.size() == n) return out;
      const auto key = state.space->key(c);
      if (!state.taken.count(key) && !chosen.count(key) && state.is_candidate(c)) {
        chosen.insert(key);
        out.push_back(c);
      }
    }
    if (out.size() == n) return out;

    const std::size_t initial = initial_design(state);
    if (state.observations.size() + state.pending.size() < initial ||
        state.ok_count() < kMinObservationsForModel) {
      diagnostics_["phase"] = "initial design";
      auto more = latin_hypercube_proposals(state, n - out.size(), seed_, initial, rng);
      for (auto& c : more) {
        if (chosen.insert(state.space->key(c)).second) out.push_back(std::move(c));
      }
      return out;
    }

    const auto fit_start = std::chrono::steady_clock::now();
    update_model(state, rng);
    diagnostics_["fit_ms"] = elapsed_ms(fit_start);
    const auto acq_start = std::chrono::steady_clock::now();
    auto picked = state.candidates ? maximise_over_candidates(state, n - out.size(), chosen)
                                   : maximise_by_sampling(state, n - out.size(), chosen, rng);
    diagnostics_["acquisition_ms"] = elapsed_ms(acq_start);
    diagnostics_["phase"] = "model";
    for (auto& c : picked) out.push_back(std::move(c));
    return out;
  }

  // SearchSpace::encode restricted to the active columns.
  std::vector<double> encode(const TuningState& state, const Configuration& c) {
    if (active_.empty()) active_ = active_columns(*state.space);
    const auto full = state.space->encode(c);
    std::vector<double> x(active_.size());
    for (std::size_t k = 0; k < active_.size(); ++k) x[k] = full[active_[k]];
    return x;
  }
  std::size_t model_dimension(const TuningState& state) {
    if (active_.empty()) active_ = active_columns(*state.space);
    return active_.size();
  }

  std::vector<Forecast> forecast(const TuningState& state,
                                 const std::vector<Configuration>& configs) override {
    if (state.ok_count() < kMinObservationsForModel || configs.empty()) return {};
    Rng rng(seed_ ^ state.observations.size());
    update_model(state, rng);
    std::vector<std::vector<double>> rows;
    for (const auto& c : configs) rows.push_back(encode(state, c));
    const Matrix x = rows_to_matrix(rows, model_dimension(state));
    const auto prediction = gp_.predict(x);
    std::vector<double> log_feasible(configs.size(), 0.0);
    if (feasibility_) log_feasible = feasibility_->log_probability(x);
    std::vector<Forecast> out;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const double g = transform_.inverse(prediction.mean[i]);
      const double sd = transform_.scale() * std::sqrt(std::max(prediction.variance[i], 0.0));
      Forecast f;
      f.mean = to_objective(state, g);
      const double a = to_objective(state, g - sd);
      const double b = to_objective(state, g + sd);
      f.lower = std::min(a, b);
      f.upper = std::max(a, b);
      f.std = sd;
      f.probability_feasible = std::exp(log_feasible[i]);
      out.push_back(f);
    }
    return out;
  }

 private:
  std::size_t initial_design(const TuningState& state) const {
    if (initial_design_ > 0) return initial_design_;
    return std::clamp<std::size_t>(state.budget / 4, kMinObservationsForModel,
                                   kDefaultInitialDesign);
  }

  // The model works on g(y): log y for positive objectives, negated when maximising, so that
  // lower g is always better.
  bool use_log(const TuningState& state) const {
    for (const auto& o : state.observations) {
      if (o.result.ok() && !(o.result.objective > 0)) return false;
    }
    return true;
  }
  double to_model(const TuningState& state, double y) const {
    const double g = log_ ? std::log(y) : y;
    return state.minimize ? g : -g;
  }
  double to_objective(const TuningState& state, double g) const {
    const double v = state.minimize ? g : -g;
    return log_ ? std::exp(v) : v;
  }

  void update_model(const TuningState& state, Rng& rng) {
    const std::size_t dim = model_dimension(state);
    std::vector<std::vector<double>> ok_rows, all_rows;
    std::vector<double> ok_values;
    std::vector<bool> feasible;
    bool any_failed = false;
    const bool log_now = use_log(state);
    for (const auto& o : state.observations) {
      auto x = encode(state, o.config);
      const bool ok = o.result.ok();
      any_failed = any_failed || !ok;
      feasible.push_back(ok);
      all_rows.push_back(x);
      if (ok) {
        ok_rows.push_back(std::move(x));
        ok_values.push_back(o.result.objective);
      }
    }
    const std::size_t n_ok = ok_rows.size();
    const std::size_t refit_step = std::max(refit_every_, n_ok / kRefitFraction);
    const bool refit = !hyperparameters_ || log_now != log_ || n_ok < refit_below_ ||
                       n_ok >= fitted_at_ + refit_step || n_ok < gp_rows_;
    log_ = log_now;
    std::vector<double> g(n_ok);
    for (std::size_t i = 0; i < n_ok; ++i) g[i] = to_model(state, ok_values[i]);
    if (copula_) {
      // Gaussian copula: z = Phi^-1(rank / (n + 1)), ties averaged.
      std::vector<std::size_t> order(n_ok);
      for (std::size_t i = 0; i < n_ok; ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](auto a, auto b) { return g[a] < g[b]; });
      std::vector<double> z(n_ok);
      for (std::size_t i = 0; i < n_ok;) {
        std::size_t j = i;
        while (j + 1 < n_ok && g[order[j + 1]] == g[order[i]]) ++j;
        const double r = 0.5 * static_cast<double>(i + j) + 1.0;
        for (std::size_t k = i; k <= j; ++k) z[order[k]] = normal_quantile(r / static_cast<double>(n_ok + 1));
        i = j + 1;
      }
      g = z;
      if (!refit) {
        gp_ = GaussianProcess::condition(rows_to_matrix(ok_rows, dim), transform_.forward(g), *hyperparameters_);
      }
    }

    if (refit) {
      transform_ = surrogates::ObjectiveTransform::fit(g, false);
      auto options = fit_options_;
      options.warm_start = hyperparameters_;
      gp_ = GaussianProcess::fit(rows_to_matrix(ok_rows, dim), transform_.forward(g), options, rng);
      hyperparameters_ = gp_.hyperparameters();
      fitted_at_ = n_ok;
    } else if (!copula_ && n_ok > gp_rows_) {
      // Same hyperparameters and transform: extend the Cholesky factor by the new rows.
      std::vector<std::vector<double>> new_rows(ok_rows.begin() + static_cast<long>(gp_rows_),
                                                ok_rows.end());
      std::vector<double> new_z;
      for (std::size_t i = gp_rows_; i < n_ok; ++i) new_z.push_back(transform_.forward(g[i]));
      gp_.add_observations(rows_to_matrix(new_rows, dim), new_z);
    }
    gp_rows_ = n_ok;
    best_z_ = std::numeric_limits<double>::infinity();
    for (double v : g) best_z_ = std::min(best_z_, transform_.forward(v));
    diagnostics_["refit"] = refit;
    diagnostics_["observations"] = state.observations.size();
    diagnostics_["hyperparameters"] = gp_.hyperparameters().to_json();

    feasibility_.reset();
    if (any_failed) {
      const Matrix x_all = rows_to_matrix(all_rows, dim);
      if (refit || !feasibility_covariance_) {
        surrogates::FeasibilityFitOptions options;
        options.warm_start = feasibility_covariance_;
        feasibility_ = surrogates::FeasibilityModel::fit(x_all, feasible, options, rng);
        if (!feasibility_->constant()) feasibility_covariance_ = feasibility_->covariance();
      } else {
        feasibility_ = surrogates::FeasibilityModel::condition(x_all, feasible,
                                                               *feasibility_covariance_);
      }
    }
  }

  std::vector<Configuration> maximise_over_candidates(const TuningState& state, std::size_t n,
                                                      std::unordered_set<std::string>& chosen) {
    const auto& cands = *state.candidates;
    const std::size_t dim = model_dimension(state);
    if (candidates_seen_ != state.candidates || candidate_matrix_.nr() != static_cast<long>(cands.size())) {
      candidate_matrix_.set_size(static_cast<long>(cands.size()), static_cast<long>(dim));
      const auto& enc = *state.encoded_candidates;
      const std::size_t full = state.space->encoded_dimension();
      for (std::size_t i = 0; i < cands.size(); ++i) {
        for (std::size_t k = 0; k < dim; ++k) {
          candidate_matrix_(static_cast<long>(i), static_cast<long>(k)) = enc[i * full + active_[k]];
        }
      }
      posterior_ = std::make_unique<surrogates::CandidatePosterior>(candidate_matrix_);
      candidates_seen_ = state.candidates;
    }
    std::vector<char> blocked(cands.size(), 0);
    for (const auto& key : state.taken) {
      if (auto it = state.candidate_index->find(key); it != state.candidate_index->end()) {
        blocked[it->second] = 1;
      }
    }
    for (const auto& key : chosen) {
      if (auto it = state.candidate_index->find(key); it != state.candidate_index->end()) {
        blocked[it->second] = 1;
      }
    }
    std::vector<double> log_feasible;
    if (feasibility_) log_feasible = feasibility_->log_probability(candidate_matrix_);

    // Kriging believer: pending configurations (other workers) and earlier picks of this
    // batch are fantasised at their predicted mean, so the batch spreads out.
    auto fantasise = [&](std::size_t i) {
      const double mean = posterior_->mean()[i];
      std::vector<double> x(dim);
      for (std::size_t k = 0; k < dim; ++k) x[k] = candidate_matrix_(static_cast<long>(i), static_cast<long>(k));
      gp_.add_observation(x, mean);
    };
    posterior_->update(gp_);
    for (const auto& p : state.pending) {
      if (auto it = state.candidate_index->find(state.space->key(p));
          it != state.candidate_index->end()) {
        fantasise(it->second);
      }
    }
    std::vector<Configuration> out;
    for (std::size_t k = 0; k < n; ++k) {
      posterior_->update(gp_);
      const auto scores = surrogates::acquisition_scores(posterior_->prediction(), best_z_,
                                                         acquisition_, log_feasible);
      std::size_t best = cands.size();
      double best_score = kNegativeInfinity;
      for (std::size_t i = 0; i < cands.size(); ++i) {
        if (!blocked[i] && scores[i] > best_score) {
          best_score = scores[i];
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
        diagnostics_["predicted_mean_z"] = posterior_->mean()[best];
      }
      if (k + 1 < n) fantasise(best);
    }
    gp_.truncate(gp_rows_);
    return out;
  }

  std::vector<Configuration> maximise_by_sampling(const TuningState& state, std::size_t n,
                                                  std::unordered_set<std::string>& chosen,
                                                  Rng& rng) {
    const auto& space = *state.space;
    const std::size_t dim = model_dimension(state);
    auto free = [&](const Configuration& c) {
      const auto key = space.key(c);
      return !state.taken.count(key) && !chosen.count(key);
    };
    auto score = [&](const std::vector<Configuration>& configs) {
      std::vector<std::vector<double>> rows;
      for (const auto& c : configs) rows.push_back(encode(state, c));
      const Matrix x = rows_to_matrix(rows, dim);
      std::vector<double> log_feasible;
      if (feasibility_) log_feasible = feasibility_->log_probability(x);
      return surrogates::acquisition_scores(gp_.predict(x), best_z_, acquisition_, log_feasible);
    };
    for (const auto& p : state.pending) {
      std::vector<Configuration> one{p};
      const auto prediction = gp_.predict(rows_to_matrix({encode(state, p)}, dim));
      gp_.add_observation(encode(state, p), prediction.mean[0]);
    }
    std::vector<Configuration> out;
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<Configuration> pool;
      for (std::size_t i = 0; i < candidate_samples_; ++i) {
        auto c = space.sample(rng);
        if (free(c)) pool.push_back(std::move(c));
      }
      // Neighbours of the best observations: where improvement is most likely.
      std::vector<const Observation*> ok;
      for (const auto& o : state.observations) {
        if (o.result.ok()) ok.push_back(&o);
      }
      const double sign = state.minimize ? 1.0 : -1.0;
      std::sort(ok.begin(), ok.end(), [&](auto* a, auto* b) {
        return sign * a->result.objective < sign * b->result.objective;
      });
      for (std::size_t i = 0; i < ok.size() && i < kLocalSearchStarts; ++i) {
        for (auto& nb : space.neighbours(ok[i]->config, rng)) {
          if (free(nb)) pool.push_back(std::move(nb));
        }
      }
      if (pool.empty()) break;
      auto scores = score(pool);
      // Local search from the best few: move to the best neighbour while it improves.
      std::vector<std::size_t> order(pool.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::partial_sort(order.begin(),
                        order.begin() + static_cast<long>(std::min(kLocalSearchStarts, order.size())),
                        order.end(), [&](auto a, auto b) { return scores[a] > scores[b]; });
      Configuration best = pool[order[0]];
      double best_score = scores[order[0]];
      for (std::size_t s = 0; s < std::min(kLocalSearchStarts, order.size()); ++s) {
        Configuration current = pool[order[s]];
        double current_score = scores[order[s]];
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
      if (k == 0) diagnostics_["acquisition"] = best_score;
      if (k + 1 < n) {
        const auto prediction = gp_.predict(rows_to_matrix({encode(state, best)}, dim));
        gp_.add_observation(encode(state, best), prediction.mean[0]);
      }
      out.push_back(std::move(best));
    }
    gp_.truncate(gp_rows_);
    return out;
  }

  static double normal_quantile(double p) {
    // bisection on Phi
    double lo = -10, hi = 10;
    for (int it = 0; it < 80; ++it) {
      const double mid = 0.5 * (lo + hi);
      if (surrogates::normal_cdf(mid) < p) lo = mid; else hi = mid;
    }
    return 0.5 * (lo + hi);
  }
  bool copula_ = false;
  std::size_t refit_below_ = kAlwaysRefitBelow;
  std::uint64_t seed_ = 0;
  std::size_t initial_design_ = 0;
  std::size_t refit_every_ = kDefaultRefitEvery;
  std::size_t candidate_samples_ = kDefaultCandidateSamples;
  surrogates::AcquisitionOptions acquisition_;
  surrogates::GpFitOptions fit_options_;

  // The model, kept between calls: refitted on a schedule, extended in between.
  bool log_ = true;
  surrogates::ObjectiveTransform transform_;
  GaussianProcess gp_;
  std::size_t gp_rows_ = 0;
  std::size_t fitted_at_ = 0;
  std::optional<surrogates::GpHyperparameters> hyperparameters_;
  double best_z_ = 0.0;
  std::optional<surrogates::FeasibilityModel> feasibility_;
  std::optional<surrogates::Covariance> feasibility_covariance_;

  std::vector<std::size_t> active_;  // encoded columns the model sees

  // The candidate set and the posterior over it, updated incrementally.
  const std::vector<Configuration>* candidates_seen_ = nullptr;
  Matrix candidate_matrix_;
  std::unique_ptr<surrogates::CandidatePosterior> posterior_;

  nlohmann::json diagnostics_ = nlohmann::json::object();
};

}  // namespace

std::unique_ptr<SearchStrategy> make_bayesian_optimization(const StrategyOptions& options) {
  return std::make_unique<BayesianOptimization>(options);
}

}  // namespace tunebase
