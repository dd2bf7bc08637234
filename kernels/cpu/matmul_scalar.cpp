// Scalar twin of the GEMV kernels and the dequantizers. Baseline x86-64: this is both the test
// oracle and the path taken on CPUs without AVX2.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace hg::cpu {

void dequantize_span(DType wt, const void* row, int64_t n, float* out) {
  switch (wt) {
    case DType::F32: std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_fp32(h[i]);
      return;
    }
    case DType::BF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_fp32(h[i]);
      return;
    }
    default: return dequantize_block_row(wt, row, n, out);
  }
}

void dequantize_row_scalar(DType wt, const void* W, int64_t cols, int64_t row, float* out) {
  const auto* base = static_cast<const uint8_t*>(W) + static_cast<size_t>(row) * dtype_row_bytes(wt, cols);
  dequantize_span(wt, base, cols, out);
}

// Each row is dequantized a chunk at a time into a stack buffer (256 values: a multiple of every
// block size), then multiplied element by element; Y itself holds the running sums.
void gemv_rows_scalar(const GemvArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kChunk = 256;
  const int64_t block = dtype_block_elems(a.wt);
  float w[kChunk];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = a.W + static_cast<size_t>(r) * a.row_bytes;
    if (!a.accumulate)
      for (int64_t t = 0; t < a.n_tokens; ++t) a.Y[t * a.ldy + r] = 0.0f;
    for (int64_t c = 0; c < a.cols; c += kChunk) {
      const int64_t n = std::min(kChunk, a.cols - c);
      dequantize_span(a.wt, row + static_cast<size_t>(c / block) * dtype_block_bytes(a.wt), n, w);
      for (int64_t t = 0; t < a.n_tokens; ++t) {
        const float* x = a.X + t * a.cols + c;
        float s = 0.0f;
        for (int64_t i = 0; i < n; ++i) s += w[i] * x[i];
        a.Y[t * a.ldy + r] += s;
      }
    }
  }
}

void matmul_rows_scalar(DType wt, const void* W, int64_t cols, const float* X, int64_t n_tokens,
                        float* Y, int64_t ldy, int64_t row_begin, int64_t row_end) {
  const GemvArgs a{wt, static_cast<const uint8_t*>(W), dtype_row_bytes(wt, cols), cols, X, n_tokens, Y, ldy, false};
  gemv_rows_scalar(a, row_begin, row_end);
}

}  // namespace hg::cpu
