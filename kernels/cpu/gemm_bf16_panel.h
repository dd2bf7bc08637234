// What the bf16 prefill GEMMs (gemm_bf16.h) and the bf16 prefill attention share inside
// kernels/cpu: the panel of W in the tile unit's order (defined in gemm_bf16_avx512.cpp), the
// transpose and the conversion that build one, and the write of a token's sums. Only for
// translation units compiled with the AVX-512 flags.
#pragma once
#include <cstdint>

#include "kernels/cpu/avx512_intrin.h"
#include "kernels/cpu/gemm_bf16.h"

namespace hg::cpu {

// bf16 in one tile of a panel: a 16-row half of a 32-column chunk (16 rows x 16 column pairs).
constexpr int64_t kBf16TileElems = 512;

// Rows [r0, r0 + n) of W (n <= 32; rows past n are zero) into `panel` in the tile unit's order:
// the tile of chunk c, half h (rows 16h .. 16h + 15) at panel + (2c + h) * kBf16TileElems, its
// row kk holding for each of the 16 rows the pair of columns 32c + 2kk, 32c + 2kk + 1. `rows`:
// scratch for 16 dequantized rows (16 * cols floats).
void bf16_pack_panel(const Bf16GemmArgs& a, int64_t r0, int64_t n, float* rows, uint16_t* panel);

// Rows r[0..15] of 16 32-bit lanes become their columns: r[c][i] = old r[i][c].
inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + j], 128-bit lane L: column 4L + j of rows 4g .. 4g + 3
  __m512i u[16];
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i s0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), s1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i s2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44),
                  s3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[j] = _mm512_shuffle_i32x4(s0, s2, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
  }
}

// A panel's tile from 16 rows of 16 column pairs (v[i]: row i's pairs): transposed in place and
// stored at `tile` (kBf16TileElems bf16, 64-byte aligned), its row kk holding pair kk of each of
// the 16 rows.
inline void store_transposed_tile(__m512i v[16], uint16_t* tile) {
  transpose16(v);
  for (int kk = 0; kk < 16; ++kk) _mm512_store_si512(tile + kk * 32, v[kk]);
}

// 32 floats -> 32 bf16 (round to nearest even) as 16 lanes of (element 2i, element 2i + 1).
inline __m512i to_bf16_pairs(const float* p) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p)));
}

// One token's sums over a panel (lo: its rows 0-15, hi: 16-31) into y (Y + t * ldy + r), the first
// n rows only; added to what y holds where a.accumulate.
inline void bf16_store_sums(const Bf16GemmArgs& a, float* y, __m512 lo, __m512 hi, int64_t n) {
  const __mmask16 mlo = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
  const __mmask16 mhi = static_cast<__mmask16>(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
  if (a.accumulate) {
    lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(mlo, y));
    hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(mhi, y + 16));
  }
  _mm512_mask_storeu_ps(y, mlo, lo);
  _mm512_mask_storeu_ps(y + 16, mhi, hi);
}

}  // namespace hg::cpu
