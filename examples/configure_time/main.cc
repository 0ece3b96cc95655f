// A blocked, unrolled sum whose block size and unroll factor come from tunebase at configure
// time (generated/blocked_sum_config.h, written by tunebase_best_config).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "blocked_sum_config.h"

static_assert(BLOCKED_SUM_BLOCK_SIZE > 0, "block_size must be positive");
static_assert(BLOCKED_SUM_UNROLL > 0, "unroll must be positive");

double blocked_sum(const std::vector<double>& x) {
  double total = 0.0;
  for (std::size_t start = 0; start < x.size(); start += BLOCKED_SUM_BLOCK_SIZE) {
    const std::size_t end = std::min(x.size(), start + BLOCKED_SUM_BLOCK_SIZE);
    double partial[BLOCKED_SUM_UNROLL] = {};
    std::size_t i = start;
    for (; i + BLOCKED_SUM_UNROLL <= end; i += BLOCKED_SUM_UNROLL) {
      for (int u = 0; u < BLOCKED_SUM_UNROLL; ++u) partial[u] += x[i + u];
    }
    for (; i < end; ++i) partial[0] += x[i];
    for (double p : partial) total += p;
  }
  return total;
}

int main() {
  std::vector<double> x(1 << 20, 0.5);
  std::printf("source=%s block_size=%d unroll=%d sum=%.1f\n", BLOCKED_SUM_TUNEBASE_SOURCE,
              BLOCKED_SUM_BLOCK_SIZE, BLOCKED_SUM_UNROLL, blocked_sum(x));
  return blocked_sum(x) == 0.5 * x.size() ? 0 : 1;
}
