// Prefill attention (many query rows), tiled and causal, flash-attention style on fp32 CUDA cores.
//
// Grid: (tile of kRows query rows, query head). 128 threads; four threads share a query row, each
// owning every 4th key column of a score tile and every 4th dimension of the output. Per 32-key
// tile of the cache (converted to fp32 in shared memory):
//   S = Q·Kᵀ (8 scores per thread) -> causal mask -> online softmax (running max and sum, quad
//   shuffles) -> P to shared memory -> O = O·e^(m_old - m_new) + P·V (head_dim / 4 accumulators)
// Shared rows of Q and K are padded by one float so the quad's column reads hit distinct banks.
// Keys past the last row's position are never loaded. Tensor-core (mma/wgmma) tiles are the next
// step for long prompts; this version is exact fp32 and a small share of prefill next to the GEMMs.
// Templated on the cache type and on an upper bound of head_dim (64, 128, 256), which sizes the
// per-thread accumulator array at compile time.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

constexpr int kThreads = 128;
constexpr int kRows = 32;   // query rows per block
constexpr int kKeys = 32;   // keys per tile
constexpr int kColsPerThread = kKeys / 4;

size_t prefill_smem_bytes(int D) {
  return sizeof(float) * (static_cast<size_t>(kRows) * (D + 1) + static_cast<size_t>(kKeys) * (D + 1) +
                          static_cast<size_t>(kKeys) * D + static_cast<size_t>(kRows) * (kKeys + 1));
}

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads) attention_prefill_kernel(AttentionArgs a) {
  HG_DYNAMIC_SHARED(float, smem);
  const int D = a.head_dim;
  float* s_q = smem;                        // [kRows][D + 1], pre-scaled
  float* s_k = s_q + kRows * (D + 1);       // [kKeys][D + 1]
  float* s_v = s_k + kKeys * (D + 1);       // [kKeys][D]
  float* s_p = s_v + kKeys * D;             // [kRows][kKeys + 1]

  const int q0 = blockIdx.x * kRows;
  const int h = blockIdx.y;
  const int g = h / (a.n_heads / a.n_kv_heads);
  const int rows = min(kRows, a.n - q0);
  const int r = threadIdx.x >> 2, c4 = threadIdx.x & 3;
  const int64_t my_pos = a.past + q0 + min(r, rows - 1);
  const int64_t last_key = a.past + q0 + rows - 1;
  const T* kc = static_cast<const T*>(a.k_cache) + g * a.capacity * D;
  const T* vc = static_cast<const T*>(a.v_cache) + g * a.capacity * D;

  for (int idx = threadIdx.x; idx < kRows * D; idx += kThreads) {
    const int rr = idx / D, d = idx % D;
    s_q[rr * (D + 1) + d] = rr < rows ? a.q[((static_cast<int64_t>(q0) + rr) * a.n_heads + h) * D + d] * a.scale : 0.0f;
  }

  constexpr int kAcc = kMaxD / 4;
  float acc[kAcc];
#pragma unroll
  for (int k = 0; k < kAcc; ++k) acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  for (int64_t k0 = 0; k0 <= last_key; k0 += kKeys) {
    __syncthreads();  // the previous tile is consumed (and s_q is written, first time round)
    for (int idx = threadIdx.x; idx < kKeys * D; idx += kThreads) {
      const int kk = idx / D, d = idx % D;
      const int64_t t = k0 + kk;
      const bool valid = t <= last_key;
      s_k[kk * (D + 1) + d] = valid ? to_float(kc[t * D + d]) : 0.0f;
      s_v[kk * D + d] = valid ? to_float(vc[t * D + d]) : 0.0f;
    }
    __syncthreads();

    // S = Q·Kᵀ for this thread's row and columns c4 + 4j
    float s[kColsPerThread];
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) s[j] = 0.0f;
    const float* qr = s_q + r * (D + 1);
    for (int d = 0; d < D; ++d) {
      const float qd = qr[d];
#pragma unroll
      for (int j = 0; j < kColsPerThread; ++j) s[j] += qd * s_k[(c4 + 4 * j) * (D + 1) + d];
    }

    // causal mask and online softmax (the quad of threads sharing the row reduces by shuffles)
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) {
      if (k0 + c4 + 4 * j > my_pos) s[j] = -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m, tile_max);  // finite: key 0 is in every row's first tile
    const float corr = expf(m - m_new);
    float p_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) {
      const float p = expf(s[j] - m_new);
      s_p[r * (kKeys + 1) + c4 + 4 * j] = p;
      p_sum += p;
    }
    p_sum += __shfl_xor_sync(0xffffffffu, p_sum, 1);
    p_sum += __shfl_xor_sync(0xffffffffu, p_sum, 2);
    l = l * corr + p_sum;
    m = m_new;
    __syncwarp();  // the quad's P entries are visible to each other

    // O = O·corr + P·V for dims c4 + 4k
    const float* pr = s_p + r * (kKeys + 1);
#pragma unroll
    for (int k = 0; k < kAcc; ++k) acc[k] *= corr;
    for (int c = 0; c < kKeys; ++c) {
      const float p = pr[c];
      const float* vr = s_v + c * D + c4;
#pragma unroll
      for (int k = 0; k < kAcc; ++k)
        if (c4 + 4 * k < D) acc[k] += p * vr[4 * k];
    }
  }

  if (r < rows) {
    float* o = a.out + ((static_cast<int64_t>(q0) + r) * a.n_heads + h) * D;
    const float inv = 1.0f / l;
#pragma unroll
    for (int k = 0; k < kAcc; ++k)
      if (c4 + 4 * k < D) o[c4 + 4 * k] = acc[k] * inv;
  }
}

template <typename T, int kMaxD>
void launch_prefill(const AttentionArgs& a, cudaStream_t stream) {
  const size_t smem = prefill_smem_bytes(a.head_dim);
  if (smem > 48 * 1024)
    HG_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<T, kMaxD>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((a.n + kRows - 1) / kRows), static_cast<unsigned>(a.n_heads));
  HG_LAUNCH(grid, kThreads, smem, stream, attention_prefill_kernel<T, kMaxD>)(a);
  HG_CUDA_CHECK_LAUNCH("attention_prefill_kernel");
}

}  // namespace

void attention_prefill(const AttentionArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return;
  if (a.head_dim <= 0 || a.head_dim > 256)
    throw Error("cuda attention_prefill: head_dim " + std::to_string(a.head_dim) + " is not supported (<= 256)");
  if (a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    throw Error("cuda attention_prefill: n_heads " + std::to_string(a.n_heads) + " is not a multiple of n_kv_heads " +
                std::to_string(a.n_kv_heads));
  if (a.n_heads > 65535) throw Error("cuda attention_prefill: too many heads");
  dispatch_float_type(a.kv_dtype, "attention_prefill", [&](auto tag) {
    using T = decltype(tag);
    if (a.head_dim <= 64)
      launch_prefill<T, 64>(a, stream);
    else if (a.head_dim <= 128)
      launch_prefill<T, 128>(a, stream);
    else
      launch_prefill<T, 256>(a, stream);
  });
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
