// The partial predictor's scan (src/attention/selectors/partial.h): approximate scores of a tile
// of host tokens from a few key channels, read from a channel-major bf16 copy of the keys, so that
// each chosen channel is one contiguous run of the tile's tokens and the other channels are not
// read at all. For the query heads of one GQA group:
//
//   best[t] = max over heads h of  Σ_i q[h][dims[i]] · col(dims[i])[t]     t < n
//
// summed in the order of dims. The AVX2 and AVX-512 builds (channel_scores_kernel.h) widen the chosen channels of the
// tile to fp32 once (into `wide`), then keep a run of tokens' sums in registers over the channels of each head, which
// takes every load and store of the sums out of the inner loop (20x the compiler's vectorization of
// channel_scores_loop, which the baseline ISA and the tails run). `static` for the same reason as half.h.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/half.h"

namespace hg::cpu {

// Tokens per tile: the accumulator and the best row stay in L1.
inline constexpr int kChannelTile = 256;

// cols: channel c of token t at cols[c * ld + t] (bf16); q: query head h at q[h * ld_q]; n <=
// kChannelTile; best: [n]; wide: scratch of n_dims * kChannelTile floats.
void channel_scores(const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims, const float* q,
                    int n_q, int64_t ld_q, float* best, float* wide);
void channel_scores_isa(CpuIsa isa, const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims,
                        const float* q, int n_q, int64_t ld_q, float* best, float* wide);
void channel_scores_avx2(const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims, const float* q,
                         int n_q, int64_t ld_q, float* best, float* wide);
void channel_scores_avx512(const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims, const float* q,
                           int n_q, int64_t ld_q, float* best, float* wide);

static inline void channel_scores_loop(const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims,
                                       const float* q, int n_q, int64_t ld_q, float* best) {
  float acc[kChannelTile];
  for (int h = 0; h < n_q; ++h) {
    const float* qh = q + h * ld_q;
    for (int64_t t = 0; t < n; ++t) acc[t] = 0.0f;
    for (int i = 0; i < n_dims; ++i) {
      const float w = qh[dims[i]];
      const uint16_t* col = cols + dims[i] * ld;
      for (int64_t t = 0; t < n; ++t) acc[t] += w * bits_float(static_cast<uint32_t>(col[t]) << 16);
    }
    if (h == 0)
      for (int64_t t = 0; t < n; ++t) best[t] = acc[t];
    else
      for (int64_t t = 0; t < n; ++t) best[t] = acc[t] > best[t] ? acc[t] : best[t];
  }
}

}  // namespace hg::cpu
