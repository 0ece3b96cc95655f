#include "surrogates/candidate_posterior.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "surrogates/linalg.h"

namespace tunebase::surrogates {

CandidatePosterior::CandidatePosterior(Matrix candidates) : candidates_(std::move(candidates)) {}

void CandidatePosterior::update(const GaussianProcess& gp) {
  const std::size_t d = gp.dimension();
  if (static_cast<std::size_t>(candidates_.nc()) != d) {
    throw InvalidInput("candidate posterior: candidates have " + std::to_string(candidates_.nc()) +
                       " columns, the GP has dimension " + std::to_string(d));
  }
  const std::size_t m = candidate_count();
  const std::size_t n = gp.size();
  if (!initialised_ || !(gp.hyperparameters() == hyperparameters_) || gp.jitter() != jitter_) {
    hyperparameters_ = gp.hyperparameters();
    jitter_ = gp.jitter();
    candidates_scaled_ =
        detail::scale_inputs(candidates_, hyperparameters_.covariance.lengthscales);
    initialised_ = true;
    observed_ = 0;
    v_.clear();
    observed_x_.set_size(0, static_cast<long>(d));
    variance_.assign(m, hyperparameters_.covariance.signal_variance);
    ++full_recomputations_;
    append_rows(gp, 0);
    recompute_mean(gp);
    return;
  }
  // Longest common prefix of observation inputs. V depends on the inputs and hyperparameters
  // only, not on the targets, so rows survive a change of targets (a copula transform moves
  // every target at each new observation); the mean is recomputed from the new beta below.
  std::size_t common = 0;
  const Matrix& x = gp.inputs();
  while (common < std::min(observed_, n)) {
    const long i = static_cast<long>(common);
    bool same = true;
    for (long j = 0; same && j < x.nc(); ++j) same = x(i, j) == observed_x_(i, j);
    if (!same) break;
    ++common;
  }
  if (common < observed_) {
    observed_ = common;
    v_.resize(common * m);
    observed_x_ = Matrix(dlib::subm(observed_x_, 0, 0, static_cast<long>(common), x.nc()));
    recompute_variance();
  }
  if (n > observed_) append_rows(gp, observed_);
  recompute_mean(gp);
}

void CandidatePosterior::recompute_mean(const GaussianProcess& gp) {
  const std::size_t m = candidate_count();
  // mean = m + V^T beta
  mean_.assign(m, hyperparameters_.mean);
  beta_ = gp.whitened_residuals();
  if (observed_ > 0 && m > 0) {
    linalg::gemv(true, observed_, m, 1.0, v_.data(), m, beta_.data(), 1.0, mean_.data());
  }
}

void CandidatePosterior::recompute_variance() {
  const std::size_t m = candidate_count();
  // var = s2 - colsum(V o V)
  variance_.assign(m, hyperparameters_.covariance.signal_variance);
  for (std::size_t i = 0; i < observed_; ++i) {
    const double* row = v_.data() + i * m;
    for (std::size_t c = 0; c < m; ++c) variance_[c] -= row[c] * row[c];
  }
  for (double& v : variance_) v = std::max(v, 0.0);
}

void CandidatePosterior::append_rows(const GaussianProcess& gp, std::size_t from) {
  const std::size_t m = candidate_count();
  const std::size_t n = gp.size();
  const std::size_t added = n - from;
  if (added == 0 || m == 0) {
    observed_ = n;
    return;
  }
  const Covariance& cov = hyperparameters_.covariance;
  const Matrix& chol = gp.cholesky();
  const std::size_t ldl = static_cast<std::size_t>(chol.nc());
  v_.resize(n * m);
  double* fresh = v_.data() + from * m;
  // New rows: V_new = L_nn^-1 (K(X_new, C) - L_no V_old)
  const Matrix x_new = Matrix(dlib::subm(gp.inputs(), static_cast<long>(from), 0,
                                         static_cast<long>(added), gp.inputs().nc()));
  detail::cross_covariance_scaled(cov.kind, cov.signal_variance,
                                  detail::scale_inputs(x_new, cov.lengthscales), candidates_scaled_,
                                  fresh, m);
  if (from > 0) {
    linalg::gemm(false, false, added, m, from, -1.0, &chol(static_cast<long>(from), 0), ldl,
                 v_.data(), m, 1.0, fresh, m);
  }
  linalg::solve_lower(&chol(static_cast<long>(from), static_cast<long>(from)), added, ldl, fresh, m,
                      m, false);
  // var -= colsum(V_new o V_new)
  for (std::size_t i = 0; i < added; ++i) {
    const double* row = fresh + i * m;
    for (std::size_t c = 0; c < m; ++c) variance_[c] -= row[c] * row[c];
  }
  for (double& v : variance_) v = std::max(v, 0.0);

  Matrix grown(static_cast<long>(n), gp.inputs().nc());
  if (from > 0) {
    dlib::set_subm(grown, 0, 0, static_cast<long>(from), grown.nc()) = observed_x_;
  }
  dlib::set_subm(grown, static_cast<long>(from), 0, static_cast<long>(added), grown.nc()) = x_new;
  observed_x_.swap(grown);
  observed_ = n;
}

}  // namespace tunebase::surrogates
