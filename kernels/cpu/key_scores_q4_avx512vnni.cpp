// q4_key_scores (key_scores_q4.h) with AVX512-VNNI's vpdpbusd on 256-bit vectors (EVEX-256).
#include "kernels/cpu/key_scores_q4_kernel.h"

namespace hg::cpu {

namespace {
struct DotAvx512Vnni {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
};
}  // namespace

void q4_key_scores_avx512vnni(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best) {
  q4_key_scores_t<DotAvx512Vnni>(tiles, n_tiles, q, best);
}

}  // namespace hg::cpu
