// The prefill GEMM on Intel AMX (Sapphire Rapids and later): Y[t, r] (+)= X[t, :] · W[r, :] with
// X and W rounded to bf16 and the products summed in fp32 by the tile unit (tdpbf16ps), where the
// other CPUs dequantize W to fp32 and call oneDNN's sgemm (matmul.cpp). One tdpbf16ps multiplies a
// 16 x 32 tile of X by a 32 x 16 tile of W: 8192 multiply-adds, 16 times what one AVX-512 FMA does.
//
// Layout. X is converted once per call to bf16 rows padded with zeros to a multiple of 32 tokens
// (amx_pack_x). Each thread dequantizes 32 rows of W at a time (a panel) with the ISA's
// dequantizer and stores them in the order the tile unit reads its second operand: per 32-column
// chunk, two 16-row halves, each 16 tile rows of 16 column pairs (a 16 x 16 transpose of the
// dequantized pairs). It then runs every 32-token block of X against the panel over all of
// `cols`, in four accumulator tiles (32 x 32 outputs), and writes them out.
//
// Accuracy: each product carries the two bf16 roundings, |w x| 2^-8 at most; llama.cpp's CPU
// matmuls round X to 8 bits in blocks of 32 (Q8), which moves small elements more.
#pragma once
#include <cstddef>
#include <cstdint>

#include "hybridgen/dtype.h"

namespace hg::cpu {

using DequantSpanFn = void (*)(DType, const uint8_t*, int64_t, float*);

constexpr int64_t kAmxTokens = 32;  // tokens per block of X (two tile rows of 16)
constexpr int64_t kAmxCols = 32;    // cols must be a multiple: one tile row holds 32 bf16

// Tokens of the packed X: n_tokens rounded up to kAmxTokens.
inline int64_t amx_padded_tokens(int64_t n_tokens) { return (n_tokens + kAmxTokens - 1) / kAmxTokens * kAmxTokens; }
// X [n_tokens, cols] -> bf16 [amx_padded_tokens(n_tokens), cols], round to nearest even, the padding
// rows zero. cols % kAmxCols == 0.
void amx_pack_x(const float* X, int64_t n_tokens, int64_t cols, uint16_t* out);

struct AmxGemmArgs {
  DType wt;
  const uint8_t* W;  // row r starts at W + r * row_bytes
  size_t row_bytes;
  int64_t cols;           // a multiple of kAmxCols
  DequantSpanFn dequant;  // W's rows to fp32 (the ISA's dequantize_span)
  const uint16_t* x;      // amx_pack_x's output
  int64_t n_tokens;
  float* Y;  // Y[t * ldy + r]
  int64_t ldy;
  bool accumulate;  // Y += W·x instead of Y = W·x
};

// Bytes of the per-thread scratch amx_gemm_rows needs for `cols` (64-byte aligned).
size_t amx_work_bytes(int64_t cols);
// Rows [row_begin, row_end) of Y. Only on a CPU where amx_bf16_supported() (cpu_isa.h); the
// calling thread's tile configuration is set and released inside.
void amx_gemm_rows(const AmxGemmArgs& a, void* work, int64_t row_begin, int64_t row_end);

}  // namespace hg::cpu
