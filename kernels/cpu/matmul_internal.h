// Internals of matmul shared by the dispatcher and the per-ISA GEMV files; tests use the *_isa
// entry points to run every ISA the CPU supports (the int8 dot instructions follow the ISA level,
// see dot_int8_for).
#pragma once
#include <cstddef>
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/matmul.h"

namespace hg::cpu {

// One GEMV call over a plain type (F32, F16, BF16): Y[t, r] (+)= X[t, :] · W[r, :] for t < n_tokens.
struct GemvArgs {
  DType wt;
  const uint8_t* W;  // row r starts at W + r * row_bytes
  size_t row_bytes;
  int64_t cols;
  const float* X;  // [n_tokens, cols]
  int64_t n_tokens;
  float* Y;  // Y[t * ldy + r]
  int64_t ldy;
  bool accumulate;  // Y += W·x instead of Y = W·x
};

// Activations quantized to int8 for the integer GEMV, in blocks of 32 along cols: q = round(x / d)
// with d = max|x| / 127 (ties to even, as vcvtps2dq), so |x - d q| <= d / 2 element by element.
// s = d * sum(q) is the block's sum as the kernels see it (for the offsets and minimums of Q4_0,
// Q4_1 and Q4_K).
struct ActQ8 {
  const int8_t* q;  // [n_tokens, cols]
  const float* d;   // [n_tokens, cols / 32]
  const float* s;   // [n_tokens, cols / 32]
};

// One int8 GEMV call over a quantized weight type (any GGUF block type):
// Y[t, r] (+)= W[r, :] · dequant(x[t]) for t < n_tokens, with integer dot products per 32-block.
struct GemvInt8Args {
  DType wt;
  const uint8_t* W;  // row r starts at W + r * row_bytes
  size_t row_bytes;
  int64_t cols;
  ActQ8 x;
  int64_t n_tokens;
  float* Y;  // Y[t * ldy + r]
  int64_t ldy;
  bool accumulate;  // Y += W·x instead of Y = W·x
};

void gemv_rows_scalar(const GemvArgs& a, int64_t row_begin, int64_t row_end);
void gemv_rows_avx2(const GemvArgs& a, int64_t row_begin, int64_t row_end);
void gemv_rows_avx512(const GemvArgs& a, int64_t row_begin, int64_t row_end);

// Fills q, d, s of ActQ8 for X[n_tokens, cols] (cols a multiple of 32); the two agree bit for bit.
void quantize_act_scalar(const float* X, int64_t n_tokens, int64_t cols, int8_t* q, float* d, float* s);
void quantize_act_avx2(const float* X, int64_t n_tokens, int64_t cols, int8_t* q, float* d, float* s);
// The quantizer the int8 dot level runs with (the AVX2 one wherever the CPU has a vector dot).
using QuantizeActFn = void (*)(const float*, int64_t, int64_t, int8_t*, float*, float*);
QuantizeActFn quantize_act_fn(DotInt8 dot);

// Int8 GEMV per dot-product instruction set (see DotInt8 in cpu_isa.h); the scalar one is the twin.
void gemv_int8_rows_scalar(const GemvInt8Args& a, int64_t row_begin, int64_t row_end);
void gemv_int8_rows_avx2(const GemvInt8Args& a, int64_t row_begin, int64_t row_end);
void gemv_int8_rows_avxvnni(const GemvInt8Args& a, int64_t row_begin, int64_t row_end);
void gemv_int8_rows_avx512vnni(const GemvInt8Args& a, int64_t row_begin, int64_t row_end);

// Dequantize n elements (whole blocks) from the start of `row` to fp32 (prefill tiles).
void dequantize_span_avx2(DType wt, const uint8_t* row, int64_t n, float* out);
void dequantize_span_avx512(DType wt, const uint8_t* row, int64_t n, float* out);

// matmul_rows / matmul with a given ISA (must be supported by this CPU).
void matmul_rows_isa(CpuIsa isa, MatmulWorkspace& ws, DType wt, const void* W, int64_t cols,
                     const float* X, int64_t n_tokens, float* Y, int64_t ldy, int64_t row_begin,
                     int64_t row_end);
void matmul_isa(CpuIsa isa, ThreadPool& pool, MatmulWorkspace& ws, DType wt, const void* W, int64_t rows, int64_t cols,
                const float* X, int64_t n_tokens, float* Y, int64_t ldy, bool accumulate = false);
void matmul_group_isa(CpuIsa isa, ThreadPool& pool, MatmulWorkspace& ws, const MatmulTarget* targets, int count,
                      int64_t cols, const float* X, int64_t n_tokens);

}  // namespace hg::cpu
