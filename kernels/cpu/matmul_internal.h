// Internals of matmul shared by the dispatcher and the per-ISA GEMV files; tests use the *_isa
// entry points to run every ISA the CPU supports.
#pragma once
#include <cstddef>
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/matmul.h"

namespace hg::cpu {

// One GEMV call: Y[t, r] = X[t, :] · W[r, :] for t < n_tokens.
struct GemvArgs {
  DType wt;
  const uint8_t* W;  // row r starts at W + r * row_bytes
  size_t row_bytes;
  int64_t cols;
  const float* X;  // [n_tokens, cols]
  int64_t n_tokens;
  // [n_tokens, cols / 32] sums of X over each 32-block; set for Q4_1 only, whose minimum term
  // m * sum(x) then costs one scalar FMA per block instead of one vector FMA per 8 weights.
  const float* x_block_sums;
  float* Y;  // Y[t * ldy + r]
  int64_t ldy;
};

void gemv_rows_scalar(const GemvArgs& a, int64_t row_begin, int64_t row_end);
void gemv_rows_avx2(const GemvArgs& a, int64_t row_begin, int64_t row_end);
void gemv_rows_avx512(const GemvArgs& a, int64_t row_begin, int64_t row_end);

// Dequantize n elements (whole blocks) from the start of `row` to fp32 (prefill tiles).
void dequantize_span_avx2(DType wt, const uint8_t* row, int64_t n, float* out);
void dequantize_span_avx512(DType wt, const uint8_t* row, int64_t n, float* out);

// Fills sums[t * (cols / 32) + b] = sum of X[t, 32b .. 32b+31].
void x_block_sums(const float* X, int64_t n_tokens, int64_t cols, float* sums);

// matmul_rows / matmul with a given ISA (must be supported by this CPU).
void matmul_rows_isa(CpuIsa isa, MatmulWorkspace& ws, DType wt, const void* W, int64_t cols,
                     const float* X, int64_t n_tokens, float* Y, int64_t ldy, int64_t row_begin,
                     int64_t row_end);
void matmul_isa(CpuIsa isa, ThreadPool& pool, MatmulWorkspace& ws, DType wt, const void* W,
                int64_t rows, int64_t cols, const float* X, int64_t n_tokens, float* Y, int64_t ldy);

}  // namespace hg::cpu
