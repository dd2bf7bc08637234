// Decode attention is a stream over the cache: one pass of dot products (dot_rows), a softmax
// over the scores, one pass of scaled adds (axpy_rows). Both passes are the vectorized, dtype-aware
// kernels in dot.h, so the cache is read at memory speed.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/half.h"

namespace hg::cpu {

void store_kv_row(DType kv_dtype, void* dst, const float* src, int n) {
  switch (kv_dtype) {
    case DType::F32: std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n)); break;
    case DType::BF16:
      for (int d = 0; d < n; ++d) static_cast<uint16_t*>(dst)[d] = fp32_to_bf16(src[d]);
      break;
    case DType::F16:
      for (int d = 0; d < n; ++d) static_cast<uint16_t*>(dst)[d] = fp32_to_f16(src[d]);
      break;
    default: break;  // the engine accepts only f32/f16/bf16 caches
  }
}

void kv_store_rows(DType kv_dtype, void* k_cache, void* v_cache, int64_t capacity, int n_kv_heads,
                   int head_dim, const float* k, const float* v, int64_t n, int64_t pos0) {
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
  float max_v = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max_v = std::max(max_v, p[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(p[i] - max_v);
    sum += p[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) p[i] *= inv;
  return max_v + static_cast<float>(std::log(sum));
}

void attention_items(const float* q, int n_heads, int n_kv_heads, int head_dim, DType kv_dtype,
                     const void* k_cache, const void* v_cache, int64_t capacity, int64_t past,
                     float scale, float* out, float* scores, int64_t item_begin, int64_t item_end) {
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

}  // namespace hg::cpu
