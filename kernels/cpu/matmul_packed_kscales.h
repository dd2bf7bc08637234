// The scales of a packed K-quant quad (matmul_packed.h) in fp32, shared by the AVX512-VNNI and the
// AVX2-width kernels: 12 bytes, the super-block's D and C as f16 and eight 8-bit scales, become
// d = D sc and c = C m (Super: u8 sc[4], m[4], one per 32-block) or d = D sc and c = C sc (SuperHalf:
// int8 sc[8], the lo halves' then the hi halves'). One conversion each, two multiplies; the
// products are exact in fp32. Include only from translation units built with AVX2.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace hg::cpu {
namespace {

// D and C in lanes 0 and 1.
inline __m128 k_quad_dc(const uint8_t* s) {
  uint32_t dc;
  __builtin_memcpy(&dc, s, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dc)));
}

// Super: d and c of blocks 0..3.
inline void k_scales_super(const uint8_t* s, __m128& d, __m128& c) {
  const __m128 dc = k_quad_dc(s);
  const __m128i sc8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 4));
  d = _mm_mul_ps(_mm_cvtepi32_ps(_mm_cvtepu8_epi32(sc8)), _mm_broadcastss_ps(dc));
  c = _mm_mul_ps(_mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_srli_si128(sc8, 4))), _mm_shuffle_ps(dc, dc, 0x55));
}

// SuperHalf: d and c of the lo halves of blocks 0..3, then of the hi halves.
inline void k_scales_half(const uint8_t* s, __m256& d, __m256& c) {
  const __m128 dc = k_quad_dc(s);
  const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 4))));
  d = _mm256_mul_ps(sc, _mm256_broadcastss_ps(dc));
  c = _mm256_mul_ps(sc, _mm256_broadcastss_ps(_mm_shuffle_ps(dc, dc, 0x55)));
}

}  // namespace
}  // namespace hg::cpu
