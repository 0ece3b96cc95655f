// The GP posterior over a fixed candidate set, kept up to date as observations arrive.
//
// Batched prediction costs a triangular solve of n x n by n x m per call: 18 GFLOP for the
// 17,956 GEMM configurations at 1,000 observations. But with the candidates fixed and the
// hyperparameters unchanged, V = L^-1 K(X, C) only grows by rows as observations are added
// (the leading block of a Cholesky factor does not change), and
//   mean = m + V^T beta,   var = s2 - colsum(V o V),   beta = L^-1 (y - m),
// so one new observation costs O(n m) (a matrix-vector product over V), not O(n^2 m).
// A change of hyperparameters (a refit) recomputes V in full, once.
//
// Exact, not an approximation; the price is memory: n x m doubles (144 MB at n = 1,000,
// m = 17,956). Not thread-safe for update(); the accessors are const.
#pragma once

#include <cstddef>
#include <vector>

#include "surrogates/gp.h"

namespace tunebase::surrogates {

class CandidatePosterior {
 public:
  explicit CandidatePosterior(Matrix candidates);

  /// Brings mean() and variance() in line with `gp`. Keeps the rows of V for the longest
  /// common prefix of observation inputs (same hyperparameters and jitter; V does not depend
  /// on the targets, so new targets for old inputs cost only the O(n m) mean), drops the rest
  /// (e.g. fantasies that `gp` no longer has), appends rows for gp's further observations;
  /// recomputes everything when the hyperparameters changed.
  void update(const GaussianProcess& gp);

  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& variance() const { return variance_; }
  Prediction prediction() const { return {mean_, variance_}; }
  const Matrix& candidates() const { return candidates_; }
  std::size_t candidate_count() const { return static_cast<std::size_t>(candidates_.nr()); }
  /// Observations V currently has rows for.
  std::size_t observation_count() const { return observed_; }
  /// Number of full recomputations so far (for tests and metrics).
  std::size_t full_recomputations() const { return full_recomputations_; }
  std::size_t memory_bytes() const { return v_.capacity() * sizeof(double); }

 private:
  void recompute_mean(const GaussianProcess& gp);
  void recompute_variance();
  void append_rows(const GaussianProcess& gp, std::size_t from);

  Matrix candidates_;
  Matrix candidates_scaled_;
  GpHyperparameters hyperparameters_;
  double jitter_ = 0.0;
  bool initialised_ = false;
  std::size_t observed_ = 0;
  Matrix observed_x_;         // inputs V's rows belong to (prefix check)
  std::vector<double> beta_;  // gp's whitened residuals the mean was computed with
  std::vector<double> v_;     // observed_ x m, row-major
  std::vector<double> mean_;
  std::vector<double> variance_;
  std::size_t full_recomputations_ = 0;
};

}  // namespace tunebase::surrogates
