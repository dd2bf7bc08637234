// gumbel_noise_span (gumbel_noise.h) built for AVX2: 8 keys' hashes at once, then one gather from
// the quantile table (integer arithmetic and a load: the scalar loop's bits).
#include <immintrin.h>

#include "kernels/cpu/gumbel_noise.h"

namespace hg::cpu {
namespace {

template <bool kAdd>
void span(const float* table, uint32_t row32, const int32_t* key_pos, int64_t n, float* out) {
  const __m256i row = _mm256_set1_epi32(static_cast<int32_t>(row32));
  const __m256i golden = _mm256_set1_epi32(static_cast<int32_t>(0x9E3779B9u));
  const __m256i c1 = _mm256_set1_epi32(static_cast<int32_t>(0x85EBCA6Bu));
  const __m256i c2 = _mm256_set1_epi32(static_cast<int32_t>(0xC2B2AE35u));
  // every lane gathered; the masked form with a zero source, as in the AVX-512 build
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i keys = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key_pos + i));
    __m256i h = _mm256_add_epi32(_mm256_mullo_epi32(keys, golden), row);
    h = _mm256_mullo_epi32(_mm256_xor_si256(h, _mm256_srli_epi32(h, 16)), c1);
    h = _mm256_mullo_epi32(_mm256_xor_si256(h, _mm256_srli_epi32(h, 13)), c2);
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    const __m256i index = _mm256_srli_epi32(h, 32 - kGumbelTableBits);
    const __m256 g = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), table, index, all, 4);
    _mm256_storeu_ps(out + i, kAdd ? _mm256_add_ps(_mm256_loadu_ps(out + i), g) : g);
  }
  gumbel_noise_loop<kAdd>(table, row32, key_pos + i, n - i, out + i);
}

}  // namespace

void gumbel_noise_span_avx2(bool add, const float* table, uint32_t row32, const int32_t* key_pos, int64_t n,
                            float* out) {
  add ? span<true>(table, row32, key_pos, n, out) : span<false>(table, row32, key_pos, n, out);
}

}  // namespace hg::cpu
