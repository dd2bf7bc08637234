// Linear layers on the CPU with weights kept in their stored precision.
//
//   Y[n_tokens, ldy] (columns [row_begin, row_end)) = X[n_tokens, cols] · W[rows, cols]ᵀ
//
// W is row-major in `wt` (f32, f16, bf16, or a GGUF block type: rows are whole blocks), X and Y
// are fp32. Decode (small n_tokens) streams each weight row once for all tokens and dequantizes in
// registers; prefill (large n_tokens) dequantizes tiles of W to fp32 and runs oneDNN's sgemm.
// The ISA (AVX-512 / AVX2 / scalar) is chosen once at run time (see cpu_isa.h; HG_CPU_ISA lowers it).
#pragma once
#include <cstdint>
#include <memory>

#include "hybridgen/dtype.h"

namespace hg {
class ThreadPool;
}

namespace hg::cpu {

// Scratch memory of matmul (per-call activation block sums, per-thread fp32 weight tiles for the
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
void matmul(ThreadPool& pool, MatmulWorkspace& ws, DType wt, const void* W, int64_t rows,
            int64_t cols, const float* X, int64_t n_tokens, float* Y, int64_t ldy);
// Same, with a workspace owned by the calling thread (allocated on its first call).
void matmul(ThreadPool& pool, DType wt, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tokens, float* Y, int64_t ldy);

// Dequantize row `row` of W (cols elements) to fp32 (embedding lookups, tests).
void dequantize_row(DType wt, const void* W, int64_t cols, int64_t row, float* out);

// The ISA chosen at run time: "avx512_bf16", "avx512", "avx2" or "scalar".
const char* cpu_isa_name();

// n_tokens from which matmul() takes the dequantize + sgemm path.
constexpr int64_t kMatmulSgemmMinTokens = 16;

}  // namespace hg::cpu
