// q4_key_scores (key_scores_q4.h) with AVX-VNNI's vpdpbusd (VEX: Alder Lake and later, Zen 5).
#include "kernels/cpu/key_scores_q4_kernel.h"

namespace hg::cpu {

namespace {
struct DotAvxVnni {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
};
}  // namespace

void q4_key_scores_avxvnni(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best) {
  q4_key_scores_t<DotAvxVnni>(tiles, n_tiles, q, best);
}

}  // namespace hg::cpu
