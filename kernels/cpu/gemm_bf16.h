// The bf16 prefill GEMMs: Y[t, r] (+)= X[t, :] · W[r, :] with X and W rounded to bf16 and the
// products summed in fp32, where the other CPUs dequantize W to fp32 and call oneDNN's sgemm
// (matmul.cpp). Two kernels share one layout:
//  - amx_gemm_rows, on Intel AMX (Sapphire Rapids and later): one tdpbf16ps multiplies a 16 x 32
//    tile of X by a 32 x 16 tile of W, 8192 multiply-adds, 16 times what one AVX-512 FMA does;
//  - avx512_bf16_gemm_rows, on CPUs with AVX512_BF16 and no tile unit (AMD Zen 4 and later):
//    vdpbf16ps multiplies 16 pairs of bf16 and adds them to 16 fp32 sums, twice the multiply-adds
//    of an fp32 FMA on the same vector, and half the bytes of W and X to move.
//
// Layout. X is converted once per call to bf16 rows padded with zeros to a multiple of 32 tokens
// (bf16_pack_x). Each thread dequantizes 32 rows of W at a time (a panel) with the ISA's
// dequantizer and stores them in the order the tile unit reads its second operand: per 32-column
// chunk, two 16-row halves, each 16 tile rows of 16 column pairs (a 16 x 16 transpose of the
// dequantized pairs). One tile row is also one vdpbf16ps operand: the 16 rows' pair of columns
// 2k, 2k + 1, to multiply by token t's pair broadcast to every lane. Each kernel runs every block
// of tokens of X against the panel over all of `cols` (AMX: 32 tokens in four accumulator tiles;
// AVX-512: 12 tokens x 32 rows in 24 zmm sums) and writes the block out.
//
// Accuracy: each product carries the two bf16 roundings, |w x| 2^-8 at most; llama.cpp's CPU
// matmuls round X to 8 bits in blocks of 32 (Q8), which moves small elements more. The two
// kernels sum in different orders, so their results differ in the last bits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "hybridgen/dtype.h"

namespace hg::cpu {

using DequantSpanFn = void (*)(DType, const uint8_t*, int64_t, float*);

constexpr int64_t kBf16Tokens = 32;  // tokens per block of the packed X (two tile rows of 16)
constexpr int64_t kBf16Cols = 32;    // cols must be a multiple: one tile row holds 32 bf16

// Tokens of the packed X: n_tokens rounded up to kBf16Tokens.
inline int64_t bf16_padded_tokens(int64_t n_tokens) { return (n_tokens + kBf16Tokens - 1) / kBf16Tokens * kBf16Tokens; }
// X [n_tokens, cols] -> bf16 [bf16_padded_tokens(n_tokens), cols], round to nearest even, the
// padding rows zero. cols % kBf16Cols == 0. Needs AVX512_BF16.
void bf16_pack_x(const float* X, int64_t n_tokens, int64_t cols, uint16_t* out);

struct Bf16GemmArgs {
  DType wt;
  const uint8_t* W;  // row r starts at W + r * row_bytes
  size_t row_bytes;
  int64_t cols;           // a multiple of kBf16Cols
  DequantSpanFn dequant;  // W's rows to fp32 (the ISA's dequantize_span)
  const uint16_t* x;      // bf16_pack_x's output
  int64_t n_tokens;
  float* Y;  // Y[t * ldy + r]
  int64_t ldy;
  bool accumulate;  // Y += W·x instead of Y = W·x
};

// Bytes of the per-thread scratch either kernel needs for `cols` (64-byte aligned).
size_t bf16_gemm_work_bytes(int64_t cols);
// Rows [row_begin, row_end) of Y. Only on a CPU where amx_bf16_supported() (cpu_isa.h); the
// calling thread's tile configuration is set and released inside.
void amx_gemm_rows(const Bf16GemmArgs& a, void* work, int64_t row_begin, int64_t row_end);
// Rows [row_begin, row_end) of Y, on a CPU with AVX512_BF16 (CpuIsa::Avx512Bf16).
void avx512_bf16_gemm_rows(const Bf16GemmArgs& a, void* work, int64_t row_begin, int64_t row_end);
// The vector kernel's inner part, for callers that build panels of their own (the bf16 prefill
// attention, prefill_attention_bf16.h): every token of a.x against one 32-row panel in
// bf16_pack_panel's layout (64-byte aligned, a.cols / kBf16Cols chunks), into Y's rows [r, r + n),
// n <= 32. a.W and a.dequant are not read.
void avx512_bf16_gemm_panel(const Bf16GemmArgs& a, const uint16_t* panel, int64_t r, int64_t n);

}  // namespace hg::cpu
