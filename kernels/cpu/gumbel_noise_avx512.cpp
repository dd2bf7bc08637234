// gumbel_noise_span (gumbel_noise.h) built for AVX-512: 16 keys' hashes at once, then one gather
// from the quantile table (integer arithmetic and a load: the scalar loop's bits).
#include <immintrin.h>

#include "kernels/cpu/gumbel_noise.h"

namespace hg::cpu {
namespace {

// x >> n per lane. The zero-masked form: GCC 12's plain _mm512_srli_epi32 starts from an undefined
// register and then warns of it (-Wmaybe-uninitialized inside its own header); so does its gather.
inline __m512i shift_right(__m512i x, unsigned n) { return _mm512_maskz_srli_epi32(0xFFFF, x, n); }

template <bool kAdd>
void span(const float* table, uint32_t row32, const int32_t* key_pos, int64_t n, float* out) {
  const __m512i row = _mm512_set1_epi32(static_cast<int32_t>(row32));
  const __m512i golden = _mm512_set1_epi32(static_cast<int32_t>(0x9E3779B9u));
  const __m512i c1 = _mm512_set1_epi32(static_cast<int32_t>(0x85EBCA6Bu));
  const __m512i c2 = _mm512_set1_epi32(static_cast<int32_t>(0xC2B2AE35u));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i h = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_loadu_si512(key_pos + i), golden), row);
    h = _mm512_mullo_epi32(_mm512_xor_si512(h, shift_right(h, 16)), c1);
    h = _mm512_mullo_epi32(_mm512_xor_si512(h, shift_right(h, 13)), c2);
    h = _mm512_xor_si512(h, shift_right(h, 16));
    const __m512i index = shift_right(h, 32 - kGumbelTableBits);
    const __m512 g = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xFFFF, index, table, 4);
    _mm512_storeu_ps(out + i, kAdd ? _mm512_add_ps(_mm512_loadu_ps(out + i), g) : g);
  }
  gumbel_noise_loop<kAdd>(table, row32, key_pos + i, n - i, out + i);
}

}  // namespace

void gumbel_noise_span_avx512(bool add, const float* table, uint32_t row32, const int32_t* key_pos, int64_t n,
                              float* out) {
  add ? span<true>(table, row32, key_pos, n, out) : span<false>(table, row32, key_pos, n, out);
}

}  // namespace hg::cpu
