// Rotary position embedding in place on [n, n_heads, head_dim] fp32 rows. One thread per
// (row, head, rotation pair). inv_freq comes from the host (cpu::rope_inv_freq: llama3 scaling and
// GGUF's rope_freqs factors folded in, so inv_freq[i] = theta^(-2i/d) / freq_factors[i] is what ggml's
// rope computes per pair), so both devices rotate by the same fp32 angles; sin/cos are taken in double like the
// twin (kernels/cpu/rope_cpu.cpp) because at positions ~1e5 the fp32 intrinsics drift visibly.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

__global__ void rope_kernel(float* x, const int32_t* __restrict__ pos, int64_t n_items, int n_heads,
                            int head_dim, int half, const float* __restrict__ inv_freq, bool interleaved) {
  for (int64_t item = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; item < n_items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(item % half);
    const int64_t row_head = item / half;  // r * n_heads + h
    const int64_t r = row_head / n_heads;
    const float angle = static_cast<float>(pos[r]) * inv_freq[i];
    double s, c;
    sincos(static_cast<double>(angle), &s, &c);
    float* xh = x + row_head * head_dim;
    const int a = interleaved ? 2 * i : i;
    const int b = interleaved ? 2 * i + 1 : i + half;
    const float x0 = xh[a], x1 = xh[b];
    xh[a] = x0 * static_cast<float>(c) - x1 * static_cast<float>(s);
    xh[b] = x1 * static_cast<float>(c) + x0 * static_cast<float>(s);
  }
}

}  // namespace

void rope(float* x, const int32_t* pos, int n, int n_heads, int head_dim, int rotary_dim, const float* inv_freq,
          bool interleaved, cudaStream_t stream) {
  const int half = rotary_dim / 2;
  const int64_t items = static_cast<int64_t>(n) * n_heads * half;
  if (items <= 0) return;
  HG_LAUNCH(blocks_for(items, 256), 256, 0, stream, rope_kernel)
  (x, pos, items, n_heads, head_dim, half, inv_freq, interleaved);
  HG_CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
