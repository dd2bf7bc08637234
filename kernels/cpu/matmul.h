// Linear layers on the CPU with weights kept in their stored precision.
//
//   Y[n_tokens, ldy] (columns [row_begin, row_end)) = X[n_tokens, cols] · W[rows, cols]ᵀ
//
// W is row-major in `wt` (f32, f16, bf16, or a GGUF block type: rows are whole blocks), X and Y
// are fp32. Decode (small n_tokens) streams each weight row once for all tokens: plain types are
// widened in registers; quantized types multiply their codes with X quantized to int8 once per
// call (32-blocks, scale max|x| / 127: each activation is off by at most half its block's step)
// with integer dot products (VNNI where the CPU has it). Prefill (large n_tokens) dequantizes
// tiles of W to fp32 and runs oneDNN's sgemm on the exact activations.
// The ISA (AVX-512 / AVX2 / scalar) is chosen once at run time (see cpu_isa.h; HG_CPU_ISA lowers it).
#pragma once
#include <cstdint>
#include <memory>

#include "hybridgen/dtype.h"

namespace hg {
class ThreadPool;
}

namespace hg::cpu {

class PackedWeight;

// Scratch memory of matmul (the int8 copy of the activations, per-thread fp32 weight tiles for the
// sgemm path). Buffers grow to the largest call and are then reused, so a warmed-up workspace
// makes matmul allocation-free. One workspace per calling thread: it is not safe to share between
// concurrent matmul calls.
class MatmulWorkspace {
 public:
  MatmulWorkspace();
  ~MatmulWorkspace();
  MatmulWorkspace(MatmulWorkspace&&) noexcept;
  MatmulWorkspace& operator=(MatmulWorkspace&&) noexcept;

  struct Impl;
  Impl& impl() { return *impl_; }

  // Whether the prefill GEMM may run in bf16 where the CPU has it (cpu_isa.h: prefill_gemm_for);
  // false: the fp32 sgemm, whatever the CPU (the run's precision, f32 for f32 checkpoints).
  bool bf16 = true;

 private:
  std::unique_ptr<Impl> impl_;
};

// Row-range kernel: computes output columns [row_begin, row_end) for all n_tokens.
void matmul_rows(DType wt, const void* W, int64_t cols, const float* X, int64_t n_tokens, float* Y,
                 int64_t ldy, int64_t row_begin, int64_t row_end);
// Scalar twin (test oracle): dequantize-then-multiply, one element at a time.
void matmul_rows_scalar(DType wt, const void* W, int64_t cols, const float* X, int64_t n_tokens,
                        float* Y, int64_t ldy, int64_t row_begin, int64_t row_end);

// Whole matmul over the pool; picks the GEMV path or the tiled sgemm path.
// accumulate: Y += X · Wᵀ (a residual add fused into the matmul) instead of Y = X · Wᵀ.
void matmul(ThreadPool& pool, MatmulWorkspace& ws, DType wt, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tokens, float* Y, int64_t ldy, bool accumulate = false);

// One output of a matmul group: Y[n_tokens, ldy] (columns [0, rows)) (+)= X · Wᵀ.
struct MatmulTarget {
  DType wt;
  const void* W;  // [rows, cols]
  int64_t rows;
  float* Y;
  int64_t ldy;
  bool accumulate;
  const PackedWeight* packed = nullptr;  // W repacked for the decode GEMV (matmul_packed.h), or null
};
// Several matmuls over the same X[n_tokens, cols] (q/k/v, gate/up) as one pass over the pool:
// X is quantized once and the pool synchronizes once for all of them.
void matmul_group(ThreadPool& pool, MatmulWorkspace& ws, const MatmulTarget* targets, int count, int64_t cols,
                  const float* X, int64_t n_tokens);
// Same, with a workspace owned by the calling thread (allocated on its first call).
void matmul(ThreadPool& pool, DType wt, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tokens, float* Y, int64_t ldy);

// Dequantize row `row` of W (cols elements) to fp32 (embedding lookups, gathered KV rows), with
// the active ISA's kernels; dequantize_row_scalar is its twin (test oracle).
void dequantize_row(DType wt, const void* W, int64_t cols, int64_t row, float* out);
void dequantize_row_scalar(DType wt, const void* W, int64_t cols, int64_t row, float* out);

// The ISA chosen at run time: "avx512_bf16", "avx512", "avx2" or "scalar".
const char* cpu_isa_name();
// The int8 dot-product instructions chosen with it: "avx512_vnni", "avx_vnni", "avx2" or "scalar".
const char* dot_int8_name();

// n_tokens from which matmul() takes the dequantize + sgemm path.
constexpr int64_t kMatmulSgemmMinTokens = 16;

}  // namespace hg::cpu
