// Attention of the hybrid policies on the device side: the device's tokens (a slot table,
// kernels/device_tokens.h) merged with what the host computed over its tokens, either as logits +
// V rows (one softmax over the union in position order: lead tokens, host tokens, the rest) or as
// a partial result + log-sum-exp. CPU twin of cuda::hybrid_attention; the CPU device runs it.
#pragma once
#include <cstdint>

#include "kernels/device_tokens.h"

namespace hg::cpu {

// Items [item_begin, item_end) of a, item = i * n_heads + h: query row i at position a.pos0 + i
// over the device tokens at positions <= a.pos0 + i. scores: a.tokens.count + a.host.K floats.
void hybrid_attention_items(const HybridAttentionArgs& a, float* scores, int64_t item_begin, int64_t item_end);

// out = merge of two partial attentions by their log-sum-exps (either may be empty: lse = -inf).
void lse_merge(const float* out_a, float lse_a, const float* out_b, float lse_b, int head_dim, float* out);

}  // namespace hg::cpu
