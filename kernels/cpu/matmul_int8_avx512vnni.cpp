// AVX512-VNNI int8 GEMV (EVEX vpdpbusd on ymm registers, AVX512VL: Cascade Lake and later, Zen 4).
#include "kernels/cpu/matmul_int8.h"

namespace hg::cpu {

namespace {
struct DotAvx512Vnni {
  static __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};
}  // namespace

void gemv_int8_rows_avx512vnni(const GemvInt8Args& a, int64_t row_begin, int64_t row_end) {
  gemv_int8_dispatch<DotAvx512Vnni>(a, row_begin, row_end);
}

}  // namespace hg::cpu
