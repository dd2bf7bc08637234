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
float softmax_inplace(float* p, int64_t n);

}  // namespace hg::cpu
