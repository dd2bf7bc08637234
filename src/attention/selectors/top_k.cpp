#include "attention/selectors/top_k.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>

namespace hg {

namespace {
// An unsigned integer that orders like the float (-0 and +0 alike, -inf lowest, +inf highest), so
// that the selection runs over plain integers instead of comparing scores through an index
// permutation.
uint32_t order_key(float score) {
  const float canonical = score + 0.0f;  // -0 becomes +0
  uint32_t bits;
  std::memcpy(&bits, &canonical, sizeof(bits));
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// The key of the `need`-th largest (1-based) among keys[0..n), by radix selection on its bytes, high
// byte first: each pass histograms the byte of the keys that share the bytes chosen so far, and
// walking the histogram from the top picks the byte where the count reaches `need`. The first
// pass reads every key; the survivors (those in the chosen top byte) are compacted into `cand`,
// so the three later passes read only them. Two passes over the row instead of the ~32 counting
// passes of a bisection: a decode step selects once per layer and kv-head. On return `need` is how
// many keys equal to the result are among the `need` largest.
uint32_t kth_largest_key(const uint32_t* keys, int64_t n, int64_t& need, uint32_t* cand) {
  // Four histograms filled in turn, summed before the walk: runs of keys in one bin (most of a
  // row's logits share a few exponents) would otherwise chain every increment on the last one.
  std::array<std::array<uint32_t, 256>, 4> part{};
  std::array<int64_t, 256> hist{};
  const auto count = [&](const uint32_t* k, int64_t m, int shift) {
    for (auto& p : part) p.fill(0);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
      for (int j = 0; j < 4; ++j) ++part[static_cast<size_t>(j)][(k[i + j] >> shift) & 0xffu];
    for (; i < m; ++i) ++part[0][(k[i] >> shift) & 0xffu];
    for (size_t b = 0; b < 256; ++b) hist[b] = int64_t{part[0][b]} + part[1][b] + part[2][b] + part[3][b];
  };
  const auto pick = [&](int64_t& rest) {  // the byte whose bin holds the rest-th largest
    int64_t above = 0;
    for (int b = 255;; --b) {
      if (above + hist[static_cast<size_t>(b)] >= rest || b == 0) {
        rest -= above;
        return static_cast<uint32_t>(b);
      }
      above += hist[static_cast<size_t>(b)];
    }
  };
  // Each pass histograms one byte of the survivors, then keeps those with the chosen byte
  // (compacted into cand; in place from the second pass on). The last byte needs no compaction.
  uint32_t prefix = 0;
  const uint32_t* src = keys;
  int64_t m = n;
  for (int shift = 24; shift >= 0; shift -= 8) {
    count(src, m, shift);
    const uint32_t byte = pick(need);
    prefix |= byte << shift;
    if (shift == 0) break;
    int64_t kept = 0;
    for (int64_t i = 0; i < m; ++i) {
      const uint32_t key = src[i];
      cand[kept] = key;
      kept += ((key >> shift) & 0xffu) == byte;
    }
    src = cand;
    m = kept;
  }
  return prefix;
}
}  // namespace

void group_max_scores(const float* logits, int group, int64_t n, float* scores) {
  std::copy(logits, logits + n, scores);
  for (int h = 1; h < group; ++h) {
    const float* lh = logits + static_cast<int64_t>(h) * n;
    for (int64_t t = 0; t < n; ++t) scores[t] = std::max(scores[t], lh[t]);
  }
}

void top_k_indices(const float* scores, int64_t n, int K, int32_t* out, std::vector<int32_t>& order) {
  if (K <= 0) return;
  if (K >= n) {
    std::iota(out, out + n, 0);
    return;
  }
  // The K-th largest key is the threshold: every score above it is in, and of the scores equal to
  // it the most recent ones fill the rest.
  order.resize(static_cast<size_t>(2 * n));
  auto* keys = reinterpret_cast<uint32_t*>(order.data());
  for (int64_t i = 0; i < n; ++i) keys[i] = order_key(scores[i]);
  int64_t ties = K;  // becomes the number of keys equal to the threshold that are taken
  const uint32_t threshold = kth_largest_key(keys, n, ties, keys + n);
  int64_t ties_from = n;  // ties at indices >= ties_from are taken
  while (ties > 0)
    if (keys[--ties_from] == threshold) --ties;
  // Branch-free: a selected index is written and kept, any other overwritten; the loop ends at
  // the K-th, so no write goes past out[K - 1].
  int k = 0;
  for (int64_t i = 0; k < K; ++i) {
    out[k] = static_cast<int32_t>(i);
    k += static_cast<int>((keys[i] > threshold) | ((keys[i] == threshold) & (i >= ties_from)));
  }
}

}  // namespace hg
