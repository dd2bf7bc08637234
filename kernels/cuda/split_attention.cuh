// The two ends of split-K decode attention shared by attention_decode.cu and hybrid_attention.cu.
// A block handles one split of a row's keys for gh query heads of a GQA group and ends with, per
// head, its unnormalized P·V spread over lanes_r partial accumulators (s_red [lane][kMaxGroup][D]),
// its running max m and sum l. With one split it finishes the row itself; otherwise it leaves
// (acc[D], m, l) per (row head, split) in `partial` and a combine block merges the splits by
// log-sum-exp. finish(row_head, d, acc, m, l) gives the output value; the caller stores it.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "hybridgen/error.h"
#include "kernels/cuda/backend.h"
#include "kernels/device_tokens.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

// The block shape both split-K kernels use (included only by attention_decode.cu and
// hybrid_attention.cu). A block owns up to kMaxGroup query heads of one kv head; each lane owns up
// to kMaxPairs (d, d + 1) pairs, hence head_dim <= kMaxHeadDim.
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxGroup = 8;
constexpr int kMaxPairs = 4;
constexpr int kMaxHeadDim = 2 * kMaxPairs * 32;

// ---- host side: the setup both kernels share ----

// hg::Error unless the block shape serves a's heads: head_dim even and <= kMaxHeadDim, n_heads a
// multiple of n_kv_heads. `what` names the kernel in the message.
inline void check_heads(const AttentionRows& a, const char* what) {
  if (a.head_dim <= 0 || a.head_dim > kMaxHeadDim || a.head_dim % 2 != 0)
    throw Error(std::string(what) + ": head_dim " + std::to_string(a.head_dim) + " is not supported (even, <= 256)");
  if (a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    throw Error(std::string(what) + ": n_heads " + std::to_string(a.n_heads) + " is not a multiple of n_kv_heads " +
                std::to_string(a.n_kv_heads));
}

// Query-head subgroups of kMaxGroup heads per kv head.
inline int head_subgroups(const AttentionRows& a) {
  const int group = a.n_heads / a.n_kv_heads;
  return (group + kMaxGroup - 1) / kMaxGroup;
}

// Splits of a row's `keys` that give about two waves of blocks (one per row, kv head, query-head
// subgroup and split) over n_sms SMs, no split shorter than min_chunk keys (at least one).
inline int64_t wave_splits(const AttentionRows& a, int n_sms, int64_t keys, int64_t min_chunk) {
  const int64_t blocks_per_split = std::max<int64_t>(1, static_cast<int64_t>(a.n) * a.n_kv_heads * head_subgroups(a));
  const int64_t splits = (2 * static_cast<int64_t>(std::max(n_sms, 1)) + blocks_per_split - 1) / blocks_per_split;
  return std::max<int64_t>(1, std::min(splits, (keys + min_chunk - 1) / min_chunk));
}

// Floats of the (acc[head_dim], max, sum) partials of every row head and split (0 for one split).
inline size_t split_workspace_floats(const AttentionRows& a, int splits) {
  if (splits <= 1) return 0;
  return static_cast<size_t>(a.n) * a.n_heads * splits * (a.head_dim + 2);
}

template <class Finish>
__device__ __forceinline__ void store_split_result(const float* s_red, int lanes_r, int gh, int D, const float* s_m,
                                                   const float* s_l, int splits, int split, int64_t row_head0,
                                                   float* partial, Finish finish) {
  for (int idx = threadIdx.x; idx < gh * D; idx += kThreads) {
    const int hh = idx / D, d = idx % D;
    float sum = 0.0f;
    for (int rr = 0; rr < lanes_r; ++rr) sum += s_red[(rr * kMaxGroup + hh) * D + d];
    if (splits == 1) {
      finish(row_head0 + hh, d, sum, s_m[hh], s_l[hh]);
    } else {
      float* dst = partial + ((row_head0 + hh) * splits + split) * (D + 2);
      dst[d] = sum;
      if (d == 0) {
        dst[D] = s_m[hh];
        dst[D + 1] = s_l[hh];
      }
    }
  }
}

// One block per row head: out = Σ_s acc_s·e^(m_s - M) / Σ_s l_s·e^(m_s - M), M = max_s m_s,
// handed to finish(row_head, d, acc, M, l). Empty splits (m = -inf, l = 0) weigh 0.
template <class Finish>
__device__ __forceinline__ void combine_splits(const float* partial, int splits, int D, int64_t row_head,
                                               Finish finish) {
  const float* base = partial + row_head * splits * (D + 2);
  float m_max = -INFINITY;
  for (int s = 0; s < splits; ++s) m_max = fmaxf(m_max, base[s * (D + 2) + D]);
  auto weight = [&](int s) {
    const float m = base[s * (D + 2) + D];
    return m == -INFINITY ? 0.0f : expf(m - m_max);
  };
  float l_sum = 0.0f;
  for (int s = 0; s < splits; ++s) l_sum += base[s * (D + 2) + D + 1] * weight(s);
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += base[s * (D + 2) + d] * weight(s);
    finish(row_head, d, sum, m_max, l_sum);
  }
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
