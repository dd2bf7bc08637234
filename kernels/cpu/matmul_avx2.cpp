// AVX2 GEMV and tile dequantization: matmul_gemv.h instantiated with the AVX2 traits.
#include "kernels/cpu/vec_avx2.h"
#include "kernels/cpu/matmul_gemv.h"

namespace hg::cpu {

void gemv_rows_avx2(const GemvArgs& a, int64_t row_begin, int64_t row_end) {
  gemv_rows_dispatch<Avx2>(a, row_begin, row_end);
}

void dequantize_span_avx2(DType wt, const uint8_t* row, int64_t n, float* out) {
  dequantize_span_simd<Avx2>(wt, row, n, out);
}

}  // namespace hg::cpu
