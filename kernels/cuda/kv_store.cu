// KV cache write: fp32 k and v rows [n, n_kv_heads * head_dim] go to slots pos0 .. pos0+n-1 of
// the [n_kv_heads][capacity][head_dim] cache, rounded to nearest even into f16/bf16 like the twin
// (cpu::kv_store_rows). One thread per element; reads are coalesced, writes are contiguous per
// (token, kv head) run of head_dim elements.
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

}  // namespace

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
