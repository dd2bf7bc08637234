// Attention of the hybrid policies on the device side: the device's tokens (a slot table,
// kernels/device_tokens.h) merged with what the host computed over its tokens, either as logits +
// V rows (one softmax over the union in position order: lead tokens, host tokens, the rest) or as
// a partial result + log-sum-exp. CPU twin of cuda::hybrid_attention; the CPU device runs it.
#pragma once
#include <cstdint>

#include "kernels/device_tokens.h"

namespace hg::cpu {

// Items [item_begin, item_end) of a, item = i * (n_heads / H) + h / H for H = heads_per_item:
// query row i at position a.pos0 + i, heads h .. h + H (of one kv-head: H divides the GQA group,
// H <= kMaxItemHeads), over the device tokens at positions <= a.pos0 + i. The item's heads share
// each pass over the keys and values. scores: H * hybrid_attention_scores_per_head(a) floats.
constexpr int kMaxItemHeads = 8;
void hybrid_attention_items(const HybridAttentionArgs& a, int heads_per_item, float* scores, int64_t item_begin,
                            int64_t item_end);
int64_t hybrid_attention_scores_per_head(const HybridAttentionArgs& a);
// Heads per item for a pool of `threads`: a whole GQA group where that leaves an item per thread.
int hybrid_attention_heads_per_item(const HybridAttentionArgs& a, int threads);

// out = merge of two partial attentions by their log-sum-exps (either may be empty: lse = -inf).
void lse_merge(const float* out_a, float lse_a, const float* out_b, float lse_b, int head_dim, float* out);

}  // namespace hg::cpu
