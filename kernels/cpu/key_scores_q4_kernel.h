// q4_key_scores (key_scores_q4.h) written once over a dot-product traits type D, instantiated by
// key_scores_q4_avx2.cpp (vpmaddubsw + vpmaddwd), key_scores_q4_avxvnni.cpp (AVX-VNNI vpdpbusd) and
// key_scores_q4_avx512vnni.cpp (AVX512-VNNI vpdpbusd, EVEX-256). D provides
//   __m256i dot(__m256i acc, __m256i u, __m256i s): acc + lane k's sum of u[4k+i] * s[4k+i] (u8 x s8).
// A tile's 8 tokens are the 8 int32 lanes: per block of 32 dimensions its 4 code vectors are split
// into low and high nibbles once, then each query head takes 8 dots over them (its 4-dimension
// groups broadcast) and two FMAs with the block's scales and minimums; the heads' maximum is the
// score. 256-bit vectors, as the int8 GEMV: Zen 4 runs 512-bit ops as two halves.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/key_scores_q4.h"

namespace hg::cpu {
namespace {

template <class D>
void q4_key_scores_t(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best) {
  const int hd = q.head_dim, nb = hd / 32;
  const size_t tile_bytes = q4_tile_bytes(hd);
  const size_t scales = q4_tile_scales_at(hd), mins = q4_tile_mins_at(hd);
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int64_t i = 0; i < n_tiles; ++i) {
    const uint8_t* tile = tiles + static_cast<size_t>(i) * tile_bytes;
    if (i + 2 < n_tiles) _mm_prefetch(reinterpret_cast<const char*>(tile + 2 * tile_bytes), _MM_HINT_T0);
    __m256 top = _mm256_set1_ps(-INFINITY);
    // Heads outer would decode each block once per head; blocks outer keeps every head's running
    // score in registers for the usual groups (<= 8 heads), the codes of one block in 8 more.
    __m256 score[8];
    for (int h0 = 0; h0 < q.n_q; h0 += 8) {
      const int heads = q.n_q - h0 < 8 ? q.n_q - h0 : 8;
      for (int h = 0; h < heads; ++h) score[h] = _mm256_setzero_ps();
      for (int b = 0; b < nb; ++b) {
        __m256i lo[4], hi[4];
        for (int c = 0; c < 4; ++c) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + (4 * b + c) * 32));
          lo[c] = _mm256_and_si256(v, mask);
          hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + scales + 16 * b)));
        const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + mins + 16 * b)));
        for (int h = 0; h < heads; ++h) {
          const int8_t* qh = q.q.data() + static_cast<size_t>(h0 + h) * hd + 32 * b;
          __m256i acc_lo = _mm256_setzero_si256(), acc_hi = _mm256_setzero_si256();  // two dependency chains
          for (int c = 0; c < 4; ++c) {
            int32_t ql, qhi;
            std::memcpy(&ql, qh + 8 * c, 4);
            std::memcpy(&qhi, qh + 8 * c + 4, 4);
            acc_lo = D::dot(acc_lo, lo[c], _mm256_set1_epi32(ql));
            acc_hi = D::dot(acc_hi, hi[c], _mm256_set1_epi32(qhi));
          }
          const __m256i acc = _mm256_add_epi32(acc_lo, acc_hi);
          const size_t qb = static_cast<size_t>(h0 + h) * nb + b;
          score[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(q.d[qb])), _mm256_cvtepi32_ps(acc), score[h]);
          score[h] = _mm256_fmadd_ps(m, _mm256_set1_ps(q.s[qb]), score[h]);
        }
      }
      for (int h = 0; h < heads; ++h) top = _mm256_max_ps(top, score[h]);
    }
    _mm256_storeu_ps(best + i * kQ4TileTokens, top);
  }
}

}  // namespace
}  // namespace hg::cpu
