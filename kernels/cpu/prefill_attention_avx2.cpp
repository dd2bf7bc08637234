// Tiled prefill attention (prefill_attention_tile.h) built for AVX2: AVX2 tile dequantization,
// and the compiler vectorizes the softmax strips with these flags.
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/prefill_attention_tile.h"

namespace hg::cpu {

void prefill_attention_avx2(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                            PrefillAttentionScratch& scratch) {
  prefill_attention_tiles<dequantize_span_avx2>(a, item_begin, item_end, scratch);
}

void attention_mass_avx2(const AttentionMassArgs& a, int64_t item, float* const* mass, AttentionMassScratch& scratch) {
  attention_mass_tile(a, item, mass, scratch);
}

}  // namespace hg::cpu
