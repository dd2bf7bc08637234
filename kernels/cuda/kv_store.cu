// KV cache write: fp32 k and v rows [n, n_kv_heads * head_dim] go to slots pos0 .. pos0+n-1 of
// the [n_kv_heads][capacity][head_dim] cache, rounded to nearest even into f16/bf16 like the twin
// (cpu::kv_store_rows). One thread per element; reads are coalesced, writes are contiguous per
// (token, kv head) run of head_dim elements.
// Ring gather (an eviction's rows of every layer and kv-head into one buffer): one thread per
// 4-byte word of the output, which is contiguous; each row's reads are too.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

template <typename T>
__global__ void kv_store_kernel(T* __restrict__ k_cache, T* __restrict__ v_cache, int64_t capacity,
                                int n_kv_heads, int head_dim, const float* __restrict__ k,
                                const float* __restrict__ v, int64_t count, int64_t pos0) {
  const int64_t kv_dim = static_cast<int64_t>(n_kv_heads) * head_dim;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / kv_dim;
    const int64_t rest = e - i * kv_dim;
    const int64_t g = rest / head_dim;
    const int64_t d = rest - g * head_dim;
    const int64_t dst = (g * capacity + pos0 + i) * head_dim + d;
    k_cache[dst] = from_float<T>(k[e]);
    v_cache[dst] = from_float<T>(v[e]);
  }
}

__global__ void gather_ring_rows_kernel(RingRows g, uint32_t* __restrict__ dst, int64_t words) {
  const int64_t row_words = static_cast<int64_t>(g.row_bytes / 4);
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < words;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = e / row_words, w = e - row * row_words;  // row = (s * blocks + b) * n + j
    const int j = static_cast<int>(row % g.n);
    const int64_t sb = row / g.n;
    const int s = static_cast<int>(sb / g.blocks);
    const int64_t b = sb - s * g.blocks;
    const int slot = g.ring_base + (g.ring_head + j) % g.ring_slots;
    const auto* src = static_cast<const uint32_t*>(g.src[s]);
    dst[e] = src[(b * static_cast<int64_t>(g.block_bytes) + static_cast<int64_t>(slot) * g.row_bytes) / 4 + w];
  }
}

}  // namespace

void gather_ring_rows(const RingRows& g, void* dst, cudaStream_t stream) {
  if (g.row_bytes % 4 != 0 || g.block_bytes % 4 != 0)
    throw Error("cuda gather_ring_rows: rows of " + std::to_string(g.row_bytes) + " bytes are not whole words");
  if (g.n <= 0 || g.blocks <= 0 || g.row_bytes == 0) return;
  const int64_t words = 2 * g.blocks * g.n * static_cast<int64_t>(g.row_bytes / 4);
  HG_LAUNCH(blocks_for(words, 256), 256, 0, stream, gather_ring_rows_kernel)(g, static_cast<uint32_t*>(dst), words);
  HG_CUDA_CHECK_LAUNCH("gather_ring_rows_kernel");
}

void kv_store(DType kv_dtype, void* k_cache, void* v_cache, int64_t capacity, int n_kv_heads, int head_dim,
              const float* k, const float* v, int n, int64_t pos0, cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(n) * n_kv_heads * head_dim;
  if (count <= 0) return;
  dispatch_float_type(kv_dtype, "kv_store", [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(blocks_for(count, 256), 256, 0, stream, kv_store_kernel<T>)
    (static_cast<T*>(k_cache), static_cast<T*>(v_cache), capacity, n_kv_heads, head_dim, k, v, count, pos0);
  });
  HG_CUDA_CHECK_LAUNCH("kv_store_kernel");
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
