// Vector traits for AVX-512F/BW/VL/DQ (16 fp32 lanes), used by the templated kernels in
// matmul_gemv.h and dot_kernels.h. Include only from *_avx512.cpp files (built with those
// flags); the anonymous namespace gives each including file its own copy.
// bf16 weights are widened by a shift and multiplied with fp32 activations rather than with
// vdpbf16ps: the dot-product instruction would need the activations rounded to bf16 (about 3
// significant digits) for no gain, since GEMV is bound by the bytes of weights read, not by FMAs.
#pragma once

#include <cstdint>

#include "kernels/cpu/avx512_intrin.h"
#include "kernels/cpu/exp_poly.h"

namespace hg::cpu {
namespace {

struct Avx512 {
  using F = __m512;
  static constexpr int W = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static float hsum(F v) { return _mm512_reduce_add_ps(v); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static float hmax(F v) { return _mm512_reduce_max_ps(v); }
  // e^x for x <= 0 (the steps of exp_poly.h): 2^k applied with vscalefps.
  static F exp_nonpositive(F x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(kExpMin));
    const F k =
        _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), r);
    F p = _mm512_set1_ps(kExpPoly[0]);
    for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[i]));
    return _mm512_scalef_ps(p, k);
  }
  // out[r] = horizontal sum of v[r], r < 4: halve to 256 bits, then pairwise adds.
  static void hsum4(const F v[4], float out[4]) {
    __m256 h[4];
    for (int r = 0; r < 4; ++r)
      h[r] = _mm256_add_ps(_mm512_castps512_ps256(v[r]),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[r]), 1)));
    const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  static F load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F load_bf16(const uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static float f16_scalar(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }
  static void q8(const int8_t* qs, F out[2]) {
    out[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))));
    out[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16))));
  }
  static void q4(const uint8_t* qs, int offset, F out[2]) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i mask = _mm_set1_epi8(0x0f), off = _mm_set1_epi8(static_cast<char>(offset));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(v, mask), off);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), mask), off);
    out[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
    out[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
  }
};

}  // namespace
}  // namespace hg::cpu
