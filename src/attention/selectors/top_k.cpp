#include "attention/selectors/top_k.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace hg {

namespace {
// An integer that orders like the float (-0 and +0 alike), so that the selection runs over a
// contiguous array instead of comparing scores through an index permutation.
int32_t order_key(float score) {
  const float canonical = score + 0.0f;  // -0 becomes +0
  int32_t bits;
  std::memcpy(&bits, &canonical, sizeof(bits));
  return bits >= 0 ? bits : bits ^ 0x7fffffff;
}
}  // namespace

void top_k_indices(const float* scores, int64_t n, int K, int32_t* out, std::vector<int32_t>& order) {
  if (K <= 0) return;
  if (K >= n) {
    std::iota(out, out + n, 0);
    return;
  }
  // The K-th largest key is the threshold: every score above it is in, and of the scores equal to
  // it the most recent ones fill the rest. Two scans then emit the indices already in order.
  order.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = order_key(scores[i]);
  std::nth_element(order.begin(), order.begin() + (n - K), order.end());
  const int32_t threshold = order[static_cast<size_t>(n - K)];
  int64_t ties = K;
  for (int64_t i = 0; i < n; ++i) ties -= order_key(scores[i]) > threshold;
  int64_t ties_from = n;  // ties at indices >= ties_from are taken
  while (ties > 0)
    if (order_key(scores[--ties_from]) == threshold) --ties;
  int k = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t key = order_key(scores[i]);
    if (key > threshold || (key == threshold && i >= ties_from)) out[k++] = static_cast<int32_t>(i);
  }
}

}  // namespace hg
