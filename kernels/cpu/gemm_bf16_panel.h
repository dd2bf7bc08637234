// What the two bf16 prefill GEMMs (gemm_bf16.h) share inside kernels/cpu: the panel of W in the
// tile unit's order (defined in gemm_bf16_avx512.cpp), and the write of a token's sums. Only for
// translation units compiled with the AVX-512 flags.
#pragma once
#include <cstdint>

#include "kernels/cpu/avx512_intrin.h"
#include "kernels/cpu/gemm_bf16.h"

namespace hg::cpu {

// Rows [r0, r0 + n) of W (n <= 32; rows past n are zero) into `panel` in the tile unit's order:
// the tile of chunk c, half h (rows 16h .. 16h + 15) at panel + (2c + h) * 512, its row kk holding
// for each of the 16 rows the pair of columns 32c + 2kk, 32c + 2kk + 1. `rows`: scratch for 16
// dequantized rows (16 * cols floats).
void bf16_pack_panel(const Bf16GemmArgs& a, int64_t r0, int64_t n, float* rows, uint16_t* panel);

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
