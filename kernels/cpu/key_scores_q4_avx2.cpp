// q4_key_scores (key_scores_q4.h) for AVX2: vpmaddubsw + vpmaddwd stand in for vpdpbusd (the
// codes are 0..15 and the query's -127..127, so the 16-bit pair sums never saturate).
#include "kernels/cpu/key_scores_q4_kernel.h"

namespace hg::cpu {

namespace {
struct DotMaddubs {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
};
}  // namespace

void q4_key_scores_avx2(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best) {
  q4_key_scores_t<DotMaddubs>(tiles, n_tiles, q, best);
}

}  // namespace hg::cpu
