// Causal softmax attention of fp32 queries over a KV cache laid out
// [n_kv_heads][capacity][head_dim] in f32, f16 or bf16, plus the cache write.
#pragma once
#include <cstdint>

#include "hybridgen/dtype.h"

namespace hg::cpu {

// The largest head_dim the CPU attention kernels take: they keep one fp32 row per head on the
// stack. Every loader rejects a larger head_dim (validate_spec), so no config reaches past it.
constexpr int kMaxHeadDim = 512;

// dst[0:n] = src[0:n] converted to the cache dtype (f32, f16 or bf16; round to nearest even).
void store_kv_row(DType kv_dtype, void* dst, const float* src, int n);

// dst[0:n] = src[0:n] as a cache of that dtype gives it back: rounded as store_kv_row rounds, in fp32.
void round_kv_row(DType kv_dtype, const float* src, float* dst, int n);

// Writes k, v ([n, n_kv_heads * head_dim] fp32) to cache slots pos0 .. pos0+n-1.
void kv_store_rows(DType kv_dtype, void* k_cache, void* v_cache, int64_t capacity, int n_kv_heads,
                   int head_dim, const float* k, const float* v, int64_t n, int64_t pos0);

// Work items [item_begin, item_end), item = i * n_heads + h: query row i (at position past + i)
// and head h attend over slots [0, past + i]; out[i, h, :] = softmax(scale · q·Kᵀ) · V.
// The heads of one GQA group in a row share a pass over their keys (dot_rows_heads).
// scores: scratch of at least (past + n) * (n_heads / n_kv_heads) floats.
void attention_items(const float* q, int n_heads, int n_kv_heads, int head_dim, DType kv_dtype,
                     const void* k_cache, const void* v_cache, int64_t capacity, int64_t past,
                     float scale, float* out, float* scores, int64_t item_begin, int64_t item_end);

// In place: p = softmax(p) over n values; returns the log-sum-exp (used by LSE merges).
// Vectorized (max_value, exp_shift_sum of dot.h: a polynomial exp, relative error < 2e-7).
// Probabilities below FLT_MIN are 0, never denormals (which the P·V kernels would pay for).
float softmax_inplace(float* p, int64_t n);

// Decode attention split along the context (as flash-decoding does), so that a few query rows
// still give every thread work and each item's keys and values stay in L2 between the score pass
// and the P·V pass: item (i, g, c) = row i, kv-head g, slots [c * chunk, (c + 1) * chunk) ∩ [0, past + i].
// It leaves, per query head of g's group, a partial result: m = max score, l = Σ e^(s - m),
// o = Σ e^(s - m) · v; split_attention_combine merges a row's chunks into out. Same result as
// attention_items up to fp32 rounding.
struct SplitAttentionArgs {
  const float* q;  // [n, n_heads, head_dim]
  int n;
  int n_heads;
  int n_kv_heads;
  int head_dim;
  DType kv_dtype;
  const void* k_cache;  // [n_kv_heads][capacity][head_dim]
  const void* v_cache;
  int64_t capacity;
  int64_t past;
  float scale;
  int64_t chunk;   // context slots per item
  float* partial;  // [split_attention_items][n_heads / n_kv_heads][head_dim + 2]: o, m, l
  float* out;      // [n, n_heads, head_dim]
};
int64_t split_attention_chunks(const SplitAttentionArgs& a);  // per row: ceil((past + n) / chunk)
int64_t split_attention_items(const SplitAttentionArgs& a);   // n * n_kv_heads * chunks
// Items [item_begin, item_end); scores: scratch of chunk * (n_heads / n_kv_heads) floats.
void split_attention_partials(const SplitAttentionArgs& a, float* scores, int64_t item_begin, int64_t item_end);
// out for (row, head) pairs [begin, end) of n * n_heads, from the partials of all their chunks.
void split_attention_combine(const SplitAttentionArgs& a, int64_t begin, int64_t end);

}  // namespace hg::cpu
