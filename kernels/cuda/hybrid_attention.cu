// Hybrid attention on the device: the device's tokens (a slot table or a ring,
// kernels/device_tokens.h) merged with the host's part.
//
// Each query row attends over a "union" sequence in token order: its visible lead tokens (the
// sinks), then the host's K selected tokens (Logits: scores and V rows given; KeyValue: K and V rows
// given, scored like window tokens; rows in fp32 or, compact, in the cache's type, H below; logits
// in fp32 or f16 less their head's max), then the rest of its visible device tokens. The row's
// visible count is worked out once per block (a ring's from its parameters, a table's by one
// binary search; the host's from the part's count in device memory where it has one), and each
// tile's union tokens are mapped to cache slots (or host rows) once, into shared memory, for both
// passes over it.
//
// Grid: (split of the union, kv head × query-head subgroup, query row), like attention_decode:
// a block streams the K and V rows of its split once for the sub_heads query heads of its
// subgroup. The launch plan (hybrid_attention_plan) picks splits and subgroups so that a layer
// puts at least two waves of blocks on the GPU from a union of about 1K tokens: token splits first,
// no shorter than kMinChunk, then smaller head subgroups (which re-read K and V from L2). The
// union is cut into equal splits. Within a split a block walks tiles of kTile tokens with an
// online softmax (running max and sum per head, the accumulator rescaled per tile), so shared
// memory does not bound the window or K:
//   phase 1: each warp scores kInFlight tokens at once (their K rows loaded before any sum);
//            lanes over (d, d+1) pairs, dot with every head's query, warp sums; host Logits
//            tokens: the given logits
//   phase 2: per head, the tile's max, the rescale factor and exp(score - max) (a warp per head)
//   phase 3: threads own (token lane, d pair); P·V accumulated in registers over the tiles,
//            summed over token lanes in shared memory at the end
// With one split the block finishes the row itself (normalize, then the log-sum-exp merge with a
// host Partial); otherwise it writes (acc, max, sum) per split and hybrid_combine_kernel merges
// the splits and the host Partial. Prefill (many rows) uses the same kernel: each row's blocks
// re-read the window, which stays in L2; simple rather than fast.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/split_attention.cuh"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

// Block shape (kThreads, kMaxGroup, kMaxPairs, kMaxHeadDim): split_attention.cuh.
constexpr int kTile = 64;     // tokens per online-softmax step (shared memory for the scores)
constexpr int kMinChunk = 8;  // tokens per split at least: two per warp
constexpr int kInFlight = 4;  // tokens a phase-1 warp loads before it sums

// Where union token t of one row comes from.
struct RowUnion {
  int lead;  // visible lead tokens: union [0, lead)
  int host;  // host tokens: union [lead, lead + host)
  int rest;  // the row's other visible device tokens: the rest
  __host__ __device__ int size() const { return lead + host + rest; }
};

// A bound on any row's union, the one the splits cut (a decode row's union is exactly this;
// prefill rows that see fewer tokens leave their last splits short or empty).
__host__ __device__ __forceinline__ int64_t max_union(const HybridAttentionArgs& a) {
  return a.n <= 0 ? 0 : static_cast<int64_t>(a.tokens.count) + host_part_rows(a.host);
}

// Cache slot of union token t, or -1 - j for host token j.
__device__ __forceinline__ int union_slot(const DeviceTokens& tok, int g, const RowUnion& u, int t) {
  if (t < u.lead) return token_slot(tok, g, t);
  if (t < u.lead + u.host) return -1 - (t - u.lead);
  return token_slot(tok, g, t - u.host);
}

// A key row's (d, d+1) pairs owned by this lane (zeros past the row).
template <typename R>
__device__ __forceinline__ void load_key_pairs(const R* row, int lane, int pairs, float2 (&kk)[kMaxPairs]) {
#pragma unroll
  for (int j = 0; j < kMaxPairs; ++j) {
    const int pp = lane + 32 * j;
    kk[j] = pp < pairs ? load2(row + 2 * pp) : make_float2(0.0f, 0.0f);
  }
}

// The row's final value of (row_head, d) from the device side's unnormalized acc, max and sum:
// normalized, then merged with the host's Partial by log-sum-exp (cpu::lse_merge).
__device__ __forceinline__ float finish(const HybridAttentionArgs& a, int64_t row_head, int d, float acc, float m,
                                        float l) {
  const float out_dev = l > 0.0f ? acc / l : 0.0f;
  if (a.host.kind != HostPart::Kind::Partial) return out_dev;
  const float lse_dev = l > 0.0f ? m + logf(l) : -INFINITY;
  const float lse_host = a.host.lse[row_head];
  if (lse_dev == -INFINITY && lse_host == -INFINITY) return 0.0f;
  const float mm = fmaxf(lse_dev, lse_host);
  const float wd = expf(lse_dev - mm), wh = expf(lse_host - mm);
  return (wd * out_dev + wh * a.host.out[row_head * a.head_dim + d]) / (wd + wh);
}

// Head h's logit of host token j.
__device__ __forceinline__ float host_logit(const HostPart& h, int head, int j) {
  const int64_t at = static_cast<int64_t>(head) * h.K + j;
  if (h.logits_dtype == DType::F32) return static_cast<const float*>(h.logits)[at];
  return (h.logit_max ? h.logit_max[head] : 0.0f) + to_float(static_cast<const __half*>(h.logits)[at]);
}

// T: the cache's element type; H: the host rows' (float, or T in a compact shipment).
template <typename T, typename H>
__global__ void __launch_bounds__(kThreads)
    hybrid_attention_kernel(HybridAttentionArgs a, int sub_heads, int n_sub, float* __restrict__ partial) {
  HG_SHARED(float, s_q, kMaxGroup* kMaxHeadDim);      // scaled queries [gh][D]
  HG_SHARED(float, s_p, kMaxGroup* kTile);            // scores, then exp(score - max) [gh][kTile]
  HG_SHARED(float, s_red, kMaxGroup * 2 * kThreads);  // P·V partials [r][gh][D]
  HG_SHARED(int, s_slot, kTile);                      // the tile's union_slot()s
  HG_SHARED(int, s_union, 3);                         // the row's RowUnion
  HG_SHARED(float, s_m, kMaxGroup);
  HG_SHARED(float, s_l, kMaxGroup);
  HG_SHARED(float, s_alpha, kMaxGroup);

  const int split = blockIdx.x, splits = gridDim.x;
  const int g = blockIdx.y / n_sub, sub = blockIdx.y % n_sub;
  const int i = blockIdx.z;
  const int group = a.n_heads / a.n_kv_heads;
  const int h0 = g * group + sub * sub_heads;
  const int gh = min(sub_heads, group - sub * sub_heads);
  const int D = a.head_dim, pairs = D / 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int host_k = host_part_rows(a.host);
  const bool fetched = a.host.kind == HostPart::Kind::KeyValue;
  const int64_t head_stride = a.capacity * D;
  const T* kbase = static_cast<const T*>(a.k_cache) + g * head_stride;
  const T* vbase = static_cast<const T*>(a.v_cache) + g * head_stride;
  const H* host_v = static_cast<const H*>(a.host.v) + static_cast<int64_t>(g) * host_k * D;  // [K][D] of kv head g
  const H* host_keys = fetched ? static_cast<const H*>(a.host.k) + static_cast<int64_t>(g) * host_k * D : nullptr;
  const int64_t row_head0 = static_cast<int64_t>(i) * a.n_heads + h0;

  for (int idx = threadIdx.x; idx < gh * D; idx += kThreads) s_q[idx] = a.q[row_head0 * D + idx] * a.scale;
  if (threadIdx.x < kMaxGroup) {
    s_m[threadIdx.x] = -INFINITY;
    s_l[threadIdx.x] = 0.0f;
  }
  if (threadIdx.x == 0) {
    const int visible = visible_tokens(a.tokens, g, a.pos0 + i);
    const int lead = min(a.tokens.n_lead, visible);
    s_union[0] = lead;
    s_union[1] = host_part_tokens(a.host);
    s_union[2] = visible - lead;
  }
  __syncthreads();
  const RowUnion u{s_union[0], s_union[1], s_union[2]};
  // Equal splits of the bound; this row's union may end sooner.
  const int64_t bound = max_union(a);
  const int t0 = static_cast<int>(bound * split / splits);
  const int t1 = min(u.size(), static_cast<int>(bound * (split + 1) / splits));

  const int lanes_r = kThreads / pairs;  // token lanes of phase 3
  const int p = threadIdx.x % pairs, r = threadIdx.x / pairs;
  float2 acc[kMaxGroup];
#pragma unroll
  for (int hh = 0; hh < kMaxGroup; ++hh) acc[hh] = make_float2(0.0f, 0.0f);

  for (int tile = t0; tile < t1; tile += kTile) {
    const int len = min(kTile, t1 - tile);
    for (int tt = threadIdx.x; tt < len; tt += kThreads) s_slot[tt] = union_slot(a.tokens, g, u, tile + tt);
    __syncthreads();

    // phase 1: scores, kInFlight tokens a warp at a time (warp-uniform branches)
    for (int base = warp * kInFlight; base < len; base += kWarps * kInFlight) {
      float2 kk[kInFlight][kMaxPairs];
#pragma unroll
      for (int f = 0; f < kInFlight; ++f) {
        const int tt = base + f;
        const int slot = tt < len ? s_slot[tt] : 0;
        if (tt < len && slot >= 0)
          load_key_pairs(kbase + static_cast<int64_t>(slot) * D, lane, pairs, kk[f]);
        else if (tt < len && fetched)
          load_key_pairs(host_keys + static_cast<int64_t>(-1 - slot) * D, lane, pairs, kk[f]);
        else
          for (float2& x : kk[f]) x = make_float2(0.0f, 0.0f);  // no key: a host logit, or past the tile
      }
#pragma unroll
      for (int f = 0; f < kInFlight; ++f) {
        const int tt = base + f;
        if (tt >= len) break;
        const int slot = s_slot[tt];
        if (slot < 0 && !fetched) {
          if (lane < gh) s_p[lane * kTile + tt] = host_logit(a.host, h0 + lane, -1 - slot);
          continue;
        }
#pragma unroll
        for (int hh = 0; hh < kMaxGroup; ++hh) {
          if (hh < gh) {
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < kMaxPairs; ++j) {
              const int pp = lane + 32 * j;
              if (pp < pairs) {
                const float2 qq = *reinterpret_cast<const float2*>(&s_q[hh * D + 2 * pp]);
                s += qq.x * kk[f][j].x + qq.y * kk[f][j].y;
              }
            }
            s = warp_sum(s);
            if (lane == 0) s_p[hh * kTile + tt] = s;
          }
        }
      }
    }
    __syncthreads();

    // phase 2: online softmax update
    for (int hh = warp; hh < gh; hh += kWarps) {
      float m_tile = -INFINITY;
      for (int tt = lane; tt < len; tt += 32) m_tile = fmaxf(m_tile, s_p[hh * kTile + tt]);
      m_tile = warp_max(m_tile);
      const float m_old = s_m[hh];
      const float m_new = fmaxf(m_old, m_tile);
      float l = 0.0f;
      for (int tt = lane; tt < len; tt += 32) {
        const float s = s_p[hh * kTile + tt];
        const float e = s == -INFINITY ? 0.0f : expf(s - m_new);  // a masked logit adds nothing
        s_p[hh * kTile + tt] = e;
        l += e;
      }
      l = warp_sum(l);
      __syncwarp();
      if (lane == 0) {
        const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        s_alpha[hh] = alpha;
        s_l[hh] = s_l[hh] * alpha + l;
        s_m[hh] = m_new;
      }
    }
    __syncthreads();

    // phase 3: acc = acc · alpha + Σ_t p_t · V[t]
    if (r < lanes_r) {
#pragma unroll
      for (int hh = 0; hh < kMaxGroup; ++hh) {
        if (hh < gh) {
          acc[hh].x *= s_alpha[hh];
          acc[hh].y *= s_alpha[hh];
        }
      }
#pragma unroll 4
      for (int tt = r; tt < len; tt += lanes_r) {
        const int slot = s_slot[tt];
        const float2 vv = slot < 0 ? load2(host_v + static_cast<int64_t>(-1 - slot) * D + 2 * p)
                                   : load2(vbase + static_cast<int64_t>(slot) * D + 2 * p);
#pragma unroll
        for (int hh = 0; hh < kMaxGroup; ++hh) {
          if (hh < gh) {
            const float w = s_p[hh * kTile + tt];
            acc[hh].x += w * vv.x;
            acc[hh].y += w * vv.y;
          }
        }
      }
    }
    __syncthreads();  // s_slot, s_p and s_alpha are rewritten by the next tile
  }

  if (r < lanes_r) {
#pragma unroll
    for (int hh = 0; hh < kMaxGroup; ++hh) {
      if (hh < gh) *reinterpret_cast<float2*>(&s_red[(r * kMaxGroup + hh) * D + 2 * p]) = acc[hh];
    }
  }
  __syncthreads();

  // An empty split (t0 >= t1) wrote no partial sums: it contributes zeros.
  store_split_result(s_red, t0 < t1 ? lanes_r : 0, gh, D, s_m, s_l, splits, split, row_head0, partial,
                     [&](int64_t row_head, int d, float acc, float m, float l) {
                       a.out[row_head * D + d] = finish(a, row_head, d, acc, m, l);
                     });
}

// One block per (row, head): merges the splits' (acc, max, sum), then finishes like the kernel.
__global__ void __launch_bounds__(kThreads)
    hybrid_combine_kernel(HybridAttentionArgs a, const float* __restrict__ partial, int splits) {
  // Splits past the row's union are empty (max -inf, sum 0) and weigh 0.
  combine_splits(partial, splits, a.head_dim, blockIdx.x, [&](int64_t row_head, int d, float acc, float m, float l) {
    a.out[row_head * a.head_dim + d] = finish(a, row_head, d, acc, m, l);
  });
}

void check_args(const HybridAttentionArgs& a) {
  check_heads(a, "cuda hybrid_attention");
  if (a.host.rows_dtype != DType::F32 && a.host.rows_dtype != a.kv_dtype)
    throw Error("cuda hybrid_attention: host rows must be fp32 or the cache's dtype");
  if (a.host.logits_dtype != DType::F32 && a.host.logits_dtype != DType::F16)
    throw Error("cuda hybrid_attention: host logits must be fp32 or f16");
  if (a.n > 65535) throw Error("cuda hybrid_attention: " + std::to_string(a.n) + " rows > 65535");
  if (max_union(a) > (int64_t{1} << 30)) throw Error("cuda hybrid_attention: the token union exceeds 2^30");
}

}  // namespace

HybridLaunch hybrid_attention_plan(const HybridAttentionArgs& a, int n_sms) {
  check_args(a);
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t target = 2 * static_cast<int64_t>(std::max(n_sms, 1));
  const int64_t most_splits = std::clamp<int64_t>(max_union(a) / kMinChunk, 1, 65535);
  HybridLaunch plan;
  // From the largest head subgroup down: the first that reaches two waves with splits of at
  // least kMinChunk tokens, else the smallest.
  for (int n_sub = (group + kMaxGroup - 1) / kMaxGroup; n_sub <= group; ++n_sub) {
    const int sub_heads = (group + n_sub - 1) / n_sub;
    if ((group + sub_heads - 1) / sub_heads != n_sub) continue;  // the same subgroups as a smaller n_sub
    const int64_t per_split = std::max<int64_t>(1, static_cast<int64_t>(a.n) * a.n_kv_heads * n_sub);
    plan.sub_heads = sub_heads;
    plan.splits = static_cast<int>(std::min((target + per_split - 1) / per_split, most_splits));
    if (plan.splits * per_split >= target) break;
  }
  plan.splits = std::max(plan.splits, 1);
  return plan;
}

size_t hybrid_attention_workspace_floats(const HybridAttentionArgs& a, const HybridLaunch& plan) {
  return split_workspace_floats(a, plan.splits);
}

void hybrid_attention(const HybridAttentionArgs& a, const HybridLaunch& plan, float* workspace, cudaStream_t stream) {
  check_args(a);
  if (a.n <= 0) return;
  if (plan.splits < 1 || plan.sub_heads < 1 || plan.sub_heads > kMaxGroup)
    throw Error("cuda hybrid_attention: a launch plan that does not fit the heads");
  if (plan.splits > 1 && !workspace) throw Error("cuda hybrid_attention: several splits need a workspace");
  const int n_sub = plan.n_sub(a);
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(a.n_kv_heads * n_sub),
                  static_cast<unsigned>(a.n));
  const bool compact = a.host.rows_dtype != DType::F32;
  dispatch_float_type(a.kv_dtype, "hybrid_attention", [&](auto tag) {
    using T = decltype(tag);
    if (compact)
      HG_LAUNCH(grid, kThreads, 0, stream, hybrid_attention_kernel<T, T>)(a, plan.sub_heads, n_sub, workspace);
    else
      HG_LAUNCH(grid, kThreads, 0, stream, hybrid_attention_kernel<T, float>)(a, plan.sub_heads, n_sub, workspace);
  });
  HG_CUDA_CHECK_LAUNCH("hybrid_attention_kernel");
  if (plan.splits > 1) {
    HG_LAUNCH(static_cast<unsigned>(a.n * a.n_heads), kThreads, 0, stream, hybrid_combine_kernel)(a, workspace,
                                                                                                  plan.splits);
    HG_CUDA_CHECK_LAUNCH("hybrid_combine_kernel");
  }
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
