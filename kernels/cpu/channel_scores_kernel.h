// channel_scores (channel_scores.h) written once over a vector-traits type V (vec_avx2.h /
// vec_avx512.h), instantiated by channel_scores_avx2.cpp and channel_scores_avx512.cpp: the tile's
// chosen channels widened to fp32 once into `wide`, then runs of 4 vectors of tokens whose sums
// stay in registers over every channel of a head, and their maximum over the heads.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/cpu/channel_scores.h"

namespace hg::cpu {
namespace {

template <class V>
void channel_scores_t(const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims, const float* q,
                      int n_q, int64_t ld_q, float* best, float* wide) {
  using F = typename V::F;
  constexpr int64_t kRun = 4 * V::W;
  const int64_t n_runs = n / kRun * kRun;
  for (int i = 0; i < n_dims; ++i) {
    const uint16_t* c = cols + dims[i] * ld;
    float* w = wide + static_cast<int64_t>(i) * kChannelTile;
    for (int64_t t = 0; t < n_runs; t += V::W) V::store(w + t, V::load_bf16(c + t));
  }
  for (int64_t t = 0; t < n_runs; t += kRun) {
    F b[4] = {V::set1(-INFINITY), V::set1(-INFINITY), V::set1(-INFINITY), V::set1(-INFINITY)};
    for (int h = 0; h < n_q; ++h) {
      const float* qh = q + h * ld_q;
      F a[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
      for (int i = 0; i < n_dims; ++i) {
        const F qd = V::set1(qh[dims[i]]);
        const float* w = wide + static_cast<int64_t>(i) * kChannelTile + t;
        for (int k = 0; k < 4; ++k) a[k] = V::fmadd(qd, V::load(w + k * V::W), a[k]);
      }
      for (int k = 0; k < 4; ++k) b[k] = V::max(b[k], a[k]);
    }
    for (int k = 0; k < 4; ++k) V::store(best + t + k * V::W, b[k]);
  }
  if (n_runs < n) channel_scores_loop(cols + n_runs, ld, n - n_runs, dims, n_dims, q, n_q, ld_q, best + n_runs);
}

}  // namespace
}  // namespace hg::cpu
