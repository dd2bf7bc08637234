#include "attention/selectors/top_k.h"

#include <algorithm>
#include <cstdint>
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
  // it the most recent ones fill the rest. It is found by bisection over the key range, each step
  // one count of keys >= t: a branch-free scan the compiler vectorizes, ~32 of them over a few
  // thousand keys cost less than one nth_element (a decode step selects per layer and kv-head).
  order.resize(static_cast<size_t>(n));
  int32_t* keys = order.data();
  int32_t lo = INT32_MAX, hi = INT32_MIN;
  for (int64_t i = 0; i < n; ++i) {
    keys[i] = order_key(scores[i]);
    lo = std::min(lo, keys[i]);
    hi = std::max(hi, keys[i]);
  }
  const auto count_at_least = [&](int32_t t) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) c += keys[i] >= t;
    return c;
  };
  while (lo < hi) {  // invariant: count(>= lo) >= K, count(>= hi + 1) < K
    const int32_t mid = static_cast<int32_t>(lo + (static_cast<int64_t>(hi) - lo + 1) / 2);
    if (count_at_least(mid) >= K)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int32_t threshold = lo;
  int64_t ties = K;
  for (int64_t i = 0; i < n; ++i) ties -= keys[i] > threshold;
  int64_t ties_from = n;  // ties at indices >= ties_from are taken
  while (ties > 0)
    if (keys[--ties_from] == threshold) --ties;
  int k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (keys[i] > threshold || (keys[i] == threshold && i >= ties_from)) out[k++] = static_cast<int32_t>(i);
}

}  // namespace hg
