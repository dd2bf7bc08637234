// Decode attention is a stream over the cache: one pass of dot products (dot_rows), a softmax
// over the scores, one pass of scaled adds (axpy_rows). Both passes are the vectorized, dtype-aware
// kernels in dot.h, so the cache is read at memory speed.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/half.h"

namespace hg::cpu {

void store_kv_row(DType kv_dtype, void* dst, const float* src, int n) {
  switch (kv_dtype) {
    case DType::F32:
      std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
      break;
    case DType::BF16:
      for (int d = 0; d < n; ++d) static_cast<uint16_t*>(dst)[d] = fp32_to_bf16(src[d]);
      break;
    case DType::F16:
      for (int d = 0; d < n; ++d) static_cast<uint16_t*>(dst)[d] = fp32_to_f16(src[d]);
      break;
    default:
      break;  // the engine accepts only f32/f16/bf16 caches
  }
}

void round_kv_row(DType kv_dtype, const float* src, float* dst, int n) {
  switch (kv_dtype) {
    case DType::BF16:
      for (int d = 0; d < n; ++d) dst[d] = bf16_to_fp32(fp32_to_bf16(src[d]));
      break;
    case DType::F16:
      for (int d = 0; d < n; ++d) dst[d] = f16_to_fp32(fp32_to_f16(src[d]));
      break;
    default:
      std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
      break;
  }
}

void kv_store_rows(DType kv_dtype, void* k_cache, void* v_cache, int64_t capacity, int n_kv_heads, int head_dim,
                   const float* k, const float* v, int64_t n, int64_t pos0) {
  const int64_t kv_dim = static_cast<int64_t>(n_kv_heads) * head_dim;
  const size_t elem = dtype_block_bytes(kv_dtype);
  for (int64_t i = 0; i < n; ++i)
    for (int g = 0; g < n_kv_heads; ++g) {
      const size_t dst = static_cast<size_t>((g * capacity + pos0 + i) * head_dim) * elem;
      const int64_t src = i * kv_dim + static_cast<int64_t>(g) * head_dim;
      store_kv_row(kv_dtype, static_cast<std::byte*>(k_cache) + dst, k + src, head_dim);
      store_kv_row(kv_dtype, static_cast<std::byte*>(v_cache) + dst, v + src, head_dim);
    }
}

float softmax_inplace(float* p, int64_t n) {
  const float max_v = max_value(p, n);
  const float sum = exp_shift_sum(p, n, max_v);
  const float inv = 1.0f / sum;
  // A probability below FLT_MIN is 0: as a denormal it would cost a microcode assist in every
  // FMA of the P·V pass that reads it (x86 without FTZ/DAZ). The numerators are >= e^-87 (the
  // exp's clamp) and sum >= 1, so a peaked row of a few thousand tokens is mostly such values:
  // they made hybrid's V pass on Qwen2.5-0.5B at depth 4096 cost 4x per token what full's did.
  const float tiny = std::numeric_limits<float>::min() * sum;
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] < tiny ? 0.0f : p[i] * inv;
  return max_v + std::log(sum);
}

void attention_items(const float* q, int n_heads, int n_kv_heads, int head_dim, DType kv_dtype, const void* k_cache,
                     const void* v_cache, int64_t capacity, int64_t past, float scale, float* out, float* scores,
                     int64_t item_begin, int64_t item_end) {
  const int group = n_heads / n_kv_heads;
  const size_t elem = dtype_block_bytes(kv_dtype);
  for (int64_t item = item_begin; item < item_end;) {
    const int64_t i = item / n_heads;
    const int h = static_cast<int>(item % n_heads);
    const int g = h / group;
    // The run of this range's heads of kv-head g for row i share one pass over g's keys.
    const int n_run = static_cast<int>(std::min<int64_t>(item_end - item, (g + 1) * group - h));
    const int64_t n_ctx = past + i + 1;
    const auto* kh = static_cast<const uint8_t*>(k_cache) + g * capacity * head_dim * elem;
    const auto* vh = static_cast<const uint8_t*>(v_cache) + g * capacity * head_dim * elem;
    dot_rows_heads(kv_dtype, kh, head_dim, n_ctx, q + item * head_dim, n_run, head_dim, head_dim, scale, scores, n_ctx);
    for (int j = 0; j < n_run; ++j) {
      float* p = scores + j * n_ctx;
      float* oh = out + (item + j) * head_dim;
      softmax_inplace(p, n_ctx);
      std::fill(oh, oh + head_dim, 0.0f);
      axpy_rows(kv_dtype, vh, head_dim, n_ctx, p, head_dim, oh);
    }
    item += n_run;
  }
}

int64_t split_attention_chunks(const SplitAttentionArgs& a) { return (a.past + a.n + a.chunk - 1) / a.chunk; }

int64_t split_attention_items(const SplitAttentionArgs& a) {
  return static_cast<int64_t>(a.n) * a.n_kv_heads * split_attention_chunks(a);
}

void split_attention_partials(const SplitAttentionArgs& a, float* scores, int64_t item_begin, int64_t item_end) {
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t n_chunks = split_attention_chunks(a);
  const int64_t stride = a.head_dim + 2;
  const size_t elem = dtype_block_bytes(a.kv_dtype);
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int64_t c = item % n_chunks;
    const int g = static_cast<int>(item / n_chunks % a.n_kv_heads);
    const int64_t i = item / n_chunks / a.n_kv_heads;
    const int64_t begin = c * a.chunk, end = std::min(begin + a.chunk, a.past + i + 1);
    float* part = a.partial + item * group * stride;
    if (begin >= end) {  // a row that sees fewer slots than the longest one
      for (int j = 0; j < group; ++j) {
        std::fill(part + j * stride, part + j * stride + a.head_dim, 0.0f);
        part[j * stride + a.head_dim] = -INFINITY;
        part[j * stride + a.head_dim + 1] = 0.0f;
      }
      continue;
    }
    const int64_t n_slots = end - begin;
    const size_t offset = static_cast<size_t>((g * a.capacity + begin) * a.head_dim) * elem;
    const auto* kh = static_cast<const uint8_t*>(a.k_cache) + offset;
    const auto* vh = static_cast<const uint8_t*>(a.v_cache) + offset;
    const float* qg = a.q + (i * a.n_heads + static_cast<int64_t>(g) * group) * a.head_dim;
    dot_rows_heads(a.kv_dtype, kh, a.head_dim, n_slots, qg, group, a.head_dim, a.head_dim, a.scale, scores, n_slots);
    for (int j = 0; j < group; ++j) {
      float* p = scores + j * n_slots;
      float* o = part + j * stride;
      const float m = max_value(p, n_slots);
      o[a.head_dim] = m;
      o[a.head_dim + 1] = exp_shift_sum(p, n_slots, m);
      std::fill(o, o + a.head_dim, 0.0f);
    }
    axpy_rows_heads(a.kv_dtype, vh, a.head_dim, n_slots, scores, group, n_slots, a.head_dim, part, stride);
  }
}

void split_attention_combine(const SplitAttentionArgs& a, int64_t begin, int64_t end) {
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t n_chunks = split_attention_chunks(a);
  const int64_t stride = a.head_dim + 2;
  for (int64_t rh = begin; rh < end; ++rh) {
    const int64_t i = rh / a.n_heads;
    const int h = static_cast<int>(rh % a.n_heads);
    const int g = h / group, j = h % group;
    const int64_t first = (i * a.n_kv_heads + g) * n_chunks;  // item of chunk 0
    auto part = [&](int64_t c) { return a.partial + ((first + c) * group + j) * stride; };
    float m = -INFINITY;
    for (int64_t c = 0; c < n_chunks; ++c) m = std::max(m, part(c)[a.head_dim]);
    float* o = a.out + rh * a.head_dim;
    std::fill(o, o + a.head_dim, 0.0f);
    float l = 0.0f;
    for (int64_t c = 0; c < n_chunks; ++c) {
      const float* p = part(c);
      if (p[a.head_dim + 1] == 0.0f) continue;
      const float w = std::exp(p[a.head_dim] - m);
      l += w * p[a.head_dim + 1];
      for (int d = 0; d < a.head_dim; ++d) o[d] += w * p[d];
    }
    const float inv = 1.0f / l;
    for (int d = 0; d < a.head_dim; ++d) o[d] *= inv;
  }
}

}  // namespace hg::cpu
