// Decode attention (few query rows, long cache), flash-decoding style.
//
// Grid: (split of the context, kv head × query-head subgroup, query row). One block reads the K
// and V rows of its split once for all query heads of its GQA group (up to kMaxGroup at a time),
// so the cache is streamed once per kv head rather than once per query head.
//   phase 1: a warp per key row (two rows in flight per warp), lanes over (d, d+1) pairs with
//            4/8-byte loads, so a warp reads whole cache lines; scores -> shared memory
//   phase 2: per head, max and exp-sum over the split (warp reductions)
//   phase 3: threads own (token lane, d pair); P·V accumulated in registers, then summed over the
//            token lanes in shared memory
// With one split the block writes the normalized output; otherwise it writes (acc, max, sum)
// per split and attention_reduce_kernel merges the splits (log-sum-exp rescaling).
// The split count targets ~2 waves of blocks over the SMs; chunks are at most kMaxChunk keys.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/split_attention.cuh"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

// Block shape (kThreads, kMaxGroup, kMaxPairs, kMaxHeadDim): split_attention.cuh.
constexpr int kMaxChunk = 512;   // keys per split (shared memory for the scores)
constexpr int kMinChunk = 64;

struct DecodeGeometry {
  int n_sub;   // query-head subgroups per kv head
  int chunk;   // keys per split
};

DecodeGeometry geometry(const AttentionArgs& a, int splits) {
  const int64_t max_ctx = a.past + a.n;
  int64_t chunk = (max_ctx + splits - 1) / splits;
  chunk = (chunk + 31) / 32 * 32;
  return {head_subgroups(a), static_cast<int>(chunk)};
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attention_decode_kernel(AttentionArgs a, int chunk, int n_sub, float* __restrict__ partial) {
  HG_SHARED(float, s_q, kMaxGroup* kMaxHeadDim);      // scaled queries [gh][D]
  HG_SHARED(float, s_p, kMaxGroup* kMaxChunk);        // scores, then exp(score - max) [gh][chunk]
  HG_SHARED(float, s_red, kMaxGroup * 2 * kThreads);  // P·V partials [lane r][gh][D], R·D <= 2·kThreads
  HG_SHARED(float, s_m, kMaxGroup);
  HG_SHARED(float, s_l, kMaxGroup);

  const int split = blockIdx.x, splits = gridDim.x;
  const int g = blockIdx.y / n_sub, sub = blockIdx.y % n_sub;
  const int i = blockIdx.z;
  const int group = a.n_heads / a.n_kv_heads;
  const int h0 = g * group + sub * kMaxGroup;
  const int gh = min(kMaxGroup, group - sub * kMaxGroup);
  const int D = a.head_dim, pairs = D / 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n_ctx = a.past + i + 1;
  const int64_t t0 = static_cast<int64_t>(split) * chunk;
  const int64_t t1 = min(n_ctx, t0 + chunk);
  const int64_t head_stride = a.capacity * D;
  const T* kbase = static_cast<const T*>(a.k_cache) + g * head_stride;
  const T* vbase = static_cast<const T*>(a.v_cache) + g * head_stride;
  const int64_t row_head0 = static_cast<int64_t>(i) * a.n_heads + h0;

  if (t0 >= t1) {  // this row's context ends before the split: an empty partial
    for (int idx = threadIdx.x; idx < gh * (D + 2); idx += kThreads) {
      const int hh = idx / (D + 2), e = idx % (D + 2);
      partial[((row_head0 + hh) * splits + split) * (D + 2) + e] = e == D ? -INFINITY : 0.0f;
    }
    return;
  }

  for (int idx = threadIdx.x; idx < gh * D; idx += kThreads) s_q[idx] = a.q[row_head0 * D + idx] * a.scale;
  __syncthreads();

  // phase 1: scores
  for (int64_t t = t0 + warp; t < t1; t += 2 * kWarps) {
    const int64_t t_b = t + kWarps;
    const bool has_b = t_b < t1;
    float2 ka[kMaxPairs], kb[kMaxPairs];
#pragma unroll
    for (int j = 0; j < kMaxPairs; ++j) {
      const int p = lane + 32 * j;
      ka[j] = p < pairs ? load2(kbase + t * D + 2 * p) : make_float2(0.0f, 0.0f);
      kb[j] = p < pairs && has_b ? load2(kbase + t_b * D + 2 * p) : make_float2(0.0f, 0.0f);
    }
#pragma unroll
    for (int hh = 0; hh < kMaxGroup; ++hh) {
      if (hh < gh) {
        float sa = 0.0f, sb = 0.0f;
#pragma unroll
        for (int j = 0; j < kMaxPairs; ++j) {
          const int p = lane + 32 * j;
          if (p < pairs) {
            const float2 qq = *reinterpret_cast<const float2*>(&s_q[hh * D + 2 * p]);
            sa += qq.x * ka[j].x + qq.y * ka[j].y;
            sb += qq.x * kb[j].x + qq.y * kb[j].y;
          }
        }
        sa = warp_sum(sa);
        sb = warp_sum(sb);
        if (lane == 0) {
          s_p[hh * chunk + (t - t0)] = sa;
          if (has_b) s_p[hh * chunk + (t_b - t0)] = sb;
        }
      }
    }
  }
  __syncthreads();

  // phase 2: softmax statistics of the split
  const int len = static_cast<int>(t1 - t0);
  for (int hh = warp; hh < gh; hh += kWarps) {
    float m = -INFINITY;
    for (int t = lane; t < len; t += 32) m = fmaxf(m, s_p[hh * chunk + t]);
    m = warp_max(m);
    float l = 0.0f;
    for (int t = lane; t < len; t += 32) {
      const float e = expf(s_p[hh * chunk + t] - m);
      s_p[hh * chunk + t] = e;
      l += e;
    }
    l = warp_sum(l);
    if (lane == 0) {
      s_m[hh] = m;
      s_l[hh] = l;
    }
  }
  __syncthreads();

  // phase 3: acc = Σ_t p_t · V[t]
  const int lanes_r = kThreads / pairs;  // token lanes
  const int p = threadIdx.x % pairs, r = threadIdx.x / pairs;
  float2 acc[kMaxGroup];
#pragma unroll
  for (int hh = 0; hh < kMaxGroup; ++hh) acc[hh] = make_float2(0.0f, 0.0f);
  if (r < lanes_r) {
#pragma unroll 4
    for (int64_t t = t0 + r; t < t1; t += lanes_r) {
      const float2 vv = load2(vbase + t * D + 2 * p);
      const int tt = static_cast<int>(t - t0);
#pragma unroll
      for (int hh = 0; hh < kMaxGroup; ++hh) {
        if (hh < gh) {
          const float w = s_p[hh * chunk + tt];
          acc[hh].x += w * vv.x;
          acc[hh].y += w * vv.y;
        }
      }
    }
#pragma unroll
    for (int hh = 0; hh < kMaxGroup; ++hh) {
      if (hh < gh) *reinterpret_cast<float2*>(&s_red[(r * kMaxGroup + hh) * D + 2 * p]) = acc[hh];
    }
  }
  __syncthreads();

  store_split_result(s_red, lanes_r, gh, D, s_m, s_l, splits, split, row_head0, partial,
                                [&](int64_t row_head, int d, float acc, float, float l) {
                                  a.out[row_head * D + d] = acc / l;
                                });
}

// One block per (row, head): out = Σ_s acc_s·e^(m_s - M) / Σ_s l_s·e^(m_s - M).
__global__ void __launch_bounds__(kThreads)
    attention_reduce_kernel(const float* __restrict__ partial, int splits, int head_dim, float* __restrict__ out) {
  combine_splits(partial, splits, head_dim, blockIdx.x, [&](int64_t row_head, int d, float acc, float, float l) {
    out[row_head * head_dim + d] = acc / l;
  });
}

void check_shape(const AttentionArgs& a) { check_heads(a, "cuda attention"); }

}  // namespace

int attention_decode_splits(const AttentionArgs& a, int n_sms) {
  check_shape(a);
  const int64_t max_ctx = a.past + a.n;
  const int64_t splits = std::max(wave_splits(a, n_sms, max_ctx, kMinChunk), (max_ctx + kMaxChunk - 1) / kMaxChunk);
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

size_t attention_decode_workspace_floats(const AttentionArgs& a, int splits) {
  return split_workspace_floats(a, splits);
}

void attention_decode(const AttentionArgs& a, int splits, float* workspace, cudaStream_t stream) {
  check_shape(a);
  if (a.n <= 0) return;
  if (a.n > 65535) throw Error("cuda attention_decode: " + std::to_string(a.n) + " rows > 65535 (use prefill)");
  const DecodeGeometry geo = geometry(a, splits);
  if (geo.chunk > kMaxChunk) throw Error("cuda attention_decode: too few splits for the context");
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(a.n_kv_heads * geo.n_sub),
                  static_cast<unsigned>(a.n));
  dispatch_float_type(a.kv_dtype, "attention_decode", [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(grid, kThreads, 0, stream, attention_decode_kernel<T>)(a, geo.chunk, geo.n_sub, workspace);
  });
  HG_CUDA_CHECK_LAUNCH("attention_decode_kernel");
  if (splits > 1) {
    HG_LAUNCH(static_cast<unsigned>(a.n * a.n_heads), kThreads, 0, stream, attention_reduce_kernel)
    (workspace, splits, a.head_dim, a.out);
    HG_CUDA_CHECK_LAUNCH("attention_reduce_kernel");
  }
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
