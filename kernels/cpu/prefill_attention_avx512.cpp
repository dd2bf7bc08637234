// Tiled prefill attention (prefill_attention_tile.h) built for AVX512: AVX512 tile dequantization,
// the products in bf16 where the CPU has AVX512_BF16 and the prefill GEMM runs in bf16, and the
// compiler vectorizes the softmax strips with these flags.
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/prefill_attention_tile.h"

namespace hg::cpu {

void prefill_attention_avx512(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                              PrefillAttentionScratch& scratch, bool bf16) {
  prefill_attention_tiles<dequantize_span_avx512>(a, item_begin, item_end, scratch, bf16);
}

void attention_mass_avx512(const AttentionMassArgs& a, int64_t item, float* const* mass, AttentionMassScratch& scratch,
                           bool bf16) {
  attention_mass_tile(a, item, mass, scratch, bf16);
}

}  // namespace hg::cpu
