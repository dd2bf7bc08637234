// AVX2 int8 GEMV (vpmaddubsw + vpmaddwd stand in for vpdpbusd) and the activation quantizer that
// every int8 path uses (all CPUs with VNNI have AVX2).
#include "kernels/cpu/matmul_int8.h"

namespace hg::cpu {

namespace {
struct DotMaddubs {
  static constexpr int kSuperBlockRows = 1;  // see one_token_rows
  static __m256i dot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
};
}  // namespace

void gemv_int8_rows_avx2(const GemvInt8Args& a, int64_t row_begin, int64_t row_end) {
  gemv_int8_dispatch<DotMaddubs>(a, row_begin, row_end);
}

// Same arithmetic as quantize_act_scalar: max |x|, inv = 127 / max, q = round(x * inv) with
// vcvtps2dq (round to nearest even, the default MXCSR mode, like nearbyint).
void quantize_act_avx2(const float* X, int64_t n_tokens, int64_t cols, int8_t* q, float* d, float* s) {
  const int64_t n_blocks = cols / 32;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_tokens * n_blocks; ++b) {
    const float* x = X + 32 * b;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float max = _mm_cvtss_f32(m);
    const float scale = max / 127.0f;
    const __m256 inv = _mm256_set1_ps(max > 0.0f ? 127.0f / max : 0.0f);
    __m256i i[4];
    for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], inv));
    const __m256i sum32 = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sum32), _mm256_extracti128_si256(sum32, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
    // packs work per 128-bit lane: undo the lane interleave with one dword permute.
    const __m256i p16a = _mm256_packs_epi32(i[0], i[1]), p16b = _mm256_packs_epi32(i[2], i[3]);
    const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    const __m256i ordered = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), ordered);
    d[b] = scale;
    s[b] = scale * static_cast<float>(_mm_cvtsi128_si32(t));
  }
}

}  // namespace hg::cpu
