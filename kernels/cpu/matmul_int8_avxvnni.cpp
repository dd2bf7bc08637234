// AVX-VNNI int8 GEMV (VEX vpdpbusd: Alder Lake and later, Zen 5).
#include "kernels/cpu/matmul_int8.h"

namespace hg::cpu {

namespace {
struct DotAvxVnni {
  static __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s); }
};
}  // namespace

void gemv_int8_rows_avxvnni(const GemvInt8Args& a, int64_t row_begin, int64_t row_end) {
  gemv_int8_dispatch<DotAvxVnni>(a, row_begin, row_end);
}

}  // namespace hg::cpu
