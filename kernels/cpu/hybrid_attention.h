// Attention of the hybrid policies on the device side: the window's tokens (sinks + ring), merged
// with what the host computed over its tokens, either as logits + V rows (one softmax over the
// union in token order: sinks, host tokens, ring) or as a partial result + log-sum-exp.
#pragma once
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/window_span.h"

namespace hg::cpu {

// Items [item_begin, item_end), item = i * n_heads + h: query row i at position pos0 + i sees
// the window tokens at positions <= pos0 + i. The window cache is [n_kv_heads][capacity][head_dim].
// scores: scratch of sink_slots + ring_slots + host.K floats.
void hybrid_attention_items(const float* q, int n_heads, int n_kv_heads, int head_dim, DType kv_dtype,
                            const void* k_win, const void* v_win, int64_t capacity, const WindowSpan& span,
                            int64_t pos0, const HostPart& host, float scale, float* out, float* scores,
                            int64_t item_begin, int64_t item_end);

// out = merge of two partial attentions by their log-sum-exps (either may be empty: lse = -inf).
void lse_merge(const float* out_a, float lse_a, const float* out_b, float lse_b, int head_dim, float* out);

}  // namespace hg::cpu
