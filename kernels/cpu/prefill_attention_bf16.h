// The prefill attention's two products in bf16 with vdpbf16ps, on CPUs with AVX512_BF16 where
// the prefill GEMM runs in bf16 (cpu_isa.h: prefill_gemm_for is not Sgemm) and the cache holds
// bf16 keys and values. The tiled kernel (prefill_attention_tile.h) calls them in place of its
// oneDNN sgemm calls on tiles dequantized to fp32, and attention_mass for its Q·Kᵀ. Both products
// are the vector kernel of gemm_bf16.h (avx512_bf16_gemm_panel: 12 query vectors x 32 outputs in
// 24 zmm sums) over panels built here:
//  - S = Q·Kᵀ: X is the query tile (pre-scaled by the softmax scale, a power of two for head_dim
//    64 and 256) rounded to bf16 once per tile; a panel is 32 keys, the cache's bf16 rows
//    transposed in 32-bit pairs of head dims (no conversion). A score is the sum over head_dim in
//    one order whatever tile, panel or register block it falls in, so attention_mass, fed the
//    same keys as fp32 rows, gives the tiled kernel's score bits (h2o's and keyformer's prompt
//    scores are the same with and without a shared prefill).
//  - acc += P·V: X is P rounded to bf16 (FlashAttention's convention on GPUs; the row sums of the
//    online softmax stay fp32 over the unrounded P); a panel is 32 head dims of V with key pairs
//    interleaved, keys past the tile's end zero.
// Accuracy: Q and P carry one bf16 rounding each (2^-9 relative), K and V none (the cache's).
// Head dims must be multiples of 32 (bf16_attention_head_dim); other shapes keep the sgemm path.
#pragma once
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/cpu_isa.h"

namespace hg::cpu {

// Per-thread workspace of the bf16 products: the query tile, P, and one panel.
struct Bf16AttentionScratch {
  AlignedBuffer<uint16_t> q, p, panel;
};

inline bool bf16_attention_head_dim(int head_dim) { return head_dim > 0 && head_dim % 32 == 0; }

// Whether `isa` runs the prefill attention's products in bf16 where they apply: with a bf16
// prefill GEMM.
inline bool bf16_attention_on(CpuIsa isa) { return prefill_gemm_for(isa) != PrefillGemm::Sgemm; }

// Whether a product over cache rows of `dtype` runs in bf16 (`on`: bf16_attention_on). The one rule
// for the tiled kernel's Q·Kᵀ and P·V and attention_mass's Q·Kᵀ: the prompt scores keep the tiled
// kernel's bits only while the two choose alike.
inline bool bf16_attention_product(bool on, DType dtype, int head_dim) {
  return on && dtype == DType::BF16 && bf16_attention_head_dim(head_dim);
}

// Q [m_rows][hd] fp32 (the rows the products below multiply) rounded to bf16 into the scratch.
const uint16_t* bf16_attention_query(const float* q, int64_t m_rows, int hd, Bf16AttentionScratch& s);

// s[i * ld_s + j] = q_i · k_j for i < m_rows, j < n, with q from bf16_attention_query and key j's
// bf16 row at k + j * ld_k.
void bf16_attention_scores(const uint16_t* q, int64_t m_rows, int hd, const uint16_t* k, int64_t ld_k, int64_t n,
                           float* s, int64_t ld_s, Bf16AttentionScratch& scratch);
// The same with key j as an fp32 row at k + j * ld_k that holds bf16 values (a bf16 cache's keys
// as the forward pass rounded them): the same bits.
void bf16_attention_scores(const uint16_t* q, int64_t m_rows, int hd, const float* k, int64_t ld_k, int64_t n, float* s,
                           int64_t ld_s, Bf16AttentionScratch& scratch);

// acc[i * ld_acc + d] += Σ_{j < n} p[i * ld_p + j] · v_j[d] for i < m_rows, d < hd, with value j's
// bf16 row at v + j * ld_v; p is rounded to bf16.
void bf16_attention_values(const float* p, int64_t ld_p, int64_t m_rows, int64_t n, const uint16_t* v, int64_t ld_v,
                           int hd, float* acc, int64_t ld_acc, Bf16AttentionScratch& scratch);

}  // namespace hg::cpu
