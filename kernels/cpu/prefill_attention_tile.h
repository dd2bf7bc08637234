// The tile loop of prefill_attention.h, instantiated per ISA (prefill_attention_{avx2,avx512}.cpp
// and the baseline in prefill_attention_cpu.cpp). The products are oneDNN sgemm calls; what the
// instantiation changes is the dequantizer of the key/value tiles and the code the compiler
// generates for the softmax loops, which are written as 16-lane strips so that they vectorize
// without -ffast-math (an exp by range reduction and a polynomial, max and sum in 16 partials).
// The anonymous namespace gives each including file its own copy (no ODR mixing of ISAs).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "kernels/cpu/prefill_attention.h"
#include "kernels/cpu/prefill_attention_bf16.h"
#include "kernels/cpu/sgemm.h"

namespace hg::cpu {

// The per-ISA instantiations (prefill_attention_{avx2,avx512}.cpp).
void prefill_attention_avx2(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                            PrefillAttentionScratch& scratch);
// bf16: the products in bf16 where the cache's dtype allows (prefill_attention_bf16.h); only on a
// CPU with AVX512_BF16.
void prefill_attention_avx512(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                              PrefillAttentionScratch& scratch, bool bf16);
void attention_mass_avx2(const AttentionMassArgs& a, int64_t item, float* const* mass, AttentionMassScratch& scratch);
void attention_mass_avx512(const AttentionMassArgs& a, int64_t item, float* const* mass, AttentionMassScratch& scratch,
                           bool bf16);

namespace {

using TileDequantFn = void (*)(DType, const uint8_t*, int64_t, float*);

constexpr int kStrip = 16;
constexpr int64_t kKeyTile = 128;  // keys per score tile

// e^x for x <= 0 (scores minus their running max); x below -87 gives ~1e-38, not 0, which is
// harmless next to the row's maximum term 1. Relative error about 2e-7 (degree-6 Taylor on
// |r| <= ln2/2 after x = k·ln2 + r).
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23;
  float two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  return p * two_k;
}

// The widest float vector of the build as one GCC vector: the lane-wise select below is one
// compare and blend (vmaxps-like). Written on a float[16], GCC 12 kept the 16 lanes in 16 scalar
// registers: a scalar max per key, a third of the prompt scores' time (docs/performance.md). A
// 16-float vector in the AVX2 build is lowered through memory: 8 floats there, two per strip.
#if defined(__AVX512F__)
constexpr int kMaxLanes = 16;
#elif defined(__AVX__)
constexpr int kMaxLanes = 8;
#else
constexpr int kMaxLanes = 4;
#endif
using MaxLanes = float __attribute__((vector_size(kMaxLanes * sizeof(float))));

inline float strip_max(const float* x, int64_t n) {
  MaxLanes lanes[kStrip / kMaxLanes];
  for (MaxLanes& l : lanes) l = MaxLanes{} - INFINITY;
  int64_t j = 0;
  for (; j + kStrip <= n; j += kStrip)
    for (int h = 0; h < kStrip / kMaxLanes; ++h) {
      MaxLanes v;
      std::memcpy(&v, x + j + h * kMaxLanes, sizeof v);
      lanes[h] = lanes[h] < v ? v : lanes[h];
    }
  float m = -INFINITY;
  for (; j < n; ++j) m = std::max(m, x[j]);
  for (const MaxLanes& l : lanes)
    for (int u = 0; u < kMaxLanes; ++u) m = std::max(m, l[u]);
  return m;
}

// x[j] = e^(x[j] - shift) for j < n; returns the sum.
inline float strip_exp_sum(float* x, int64_t n, float shift) {
  float lanes[kStrip] = {};
  int64_t j = 0;
  for (; j + kStrip <= n; j += kStrip)
    for (int u = 0; u < kStrip; ++u) {
      const float p = exp_nonpositive(x[j + u] - shift);
      x[j + u] = p;
      lanes[u] += p;
    }
  float s = 0.0f;
  for (; j < n; ++j) s += (x[j] = exp_nonpositive(x[j] - shift));
  for (int u = 0; u < kStrip; ++u) s += lanes[u];
  return s;
}

// strip_exp_sum's values and sum (the same bits) from src into another row dst. A twin, not a
// call with dst = src: without __restrict GCC versions the loop for aliasing and the in-place
// call took the slower copy (the tiled attention 8% slower at 16K keys, measured).
inline float strip_exp_sum_to(const float* __restrict src, float* __restrict dst, int64_t n, float shift) {
  float lanes[kStrip] = {};
  int64_t j = 0;
  for (; j + kStrip <= n; j += kStrip)
    for (int u = 0; u < kStrip; ++u) {
      const float p = exp_nonpositive(src[j + u] - shift);
      dst[j + u] = p;
      lanes[u] += p;
    }
  float s = 0.0f;
  for (; j < n; ++j) s += (dst[j] = exp_nonpositive(src[j] - shift));
  for (int u = 0; u < kStrip; ++u) s += lanes[u];
  return s;
}

inline void scale_row(float* x, int64_t n, float a) {
  for (int64_t j = 0; j < n; ++j) x[j] *= a;
}

// n contiguous rows from token t of kv-head g as fp32 [n][head_dim]: in place for F32 caches,
// else converted into buf.
template <TileDequantFn Dequant>
const float* kv_tile(const KvLayout& c, int g, int64_t t, int64_t n, float* buf) {
  const auto* src = static_cast<const uint8_t*>(c.row(g, t));
  if (c.dtype == DType::F32) return reinterpret_cast<const float*>(src);
  Dequant(c.dtype, src, n * c.head_dim, buf);
  return buf;
}

// The softmaxes of attention_mass (prefill_attention.h) over one item's scores x [m_rows][ld_x]
// (query vector m: row r0 + m / group, head g * group + m % group; its keys [0, n_visible)): per
// query vector each softmax and its column sums, in strips that vectorize (a softmax before the last
// works on a copy of the row, the last in place). mass[v][t] for t < k_end is overwritten. The rows
// are added in order, so the item's sums do not depend on anything but its scores, nor on the
// other softmaxes of the call.
inline void mass_of_scores(std::span<const MassSoftmax> softmax, const int64_t* n_visible, int64_t r0, int group, int g,
                           int64_t m_rows, int64_t k_end, float* x_all, int64_t ld_x, float* const* mass,
                           std::vector<float>& row) {
  const size_t n_softmax = softmax.size();
  for (size_t v = 0; v < n_softmax; ++v) std::fill(mass[v], mass[v] + k_end, 0.0f);
  if (n_softmax > 1) row.resize(static_cast<size_t>(k_end));
  for (int64_t m = 0; m < m_rows; ++m) {
    const int64_t valid = std::min(n_visible[r0 + m / group], k_end);
    if (valid <= 0) continue;
    float* scores = x_all + m * ld_x;
    for (size_t v = 0; v < n_softmax; ++v) {
      const MassSoftmax& sm = softmax[v];
      const bool plain = !sm.noise && sm.inv_tau == 1.0f;
      float* x = scores;
      float sum;
      if (v + 1 < n_softmax && plain) {  // the exponentials into the spare row, the scores kept
        x = row.data();
        sum = strip_exp_sum_to(scores, x, valid, strip_max(scores, valid));
      } else {
        if (v + 1 < n_softmax) {
          x = row.data();
          std::copy_n(scores, valid, x);
        }
        if (sm.noise) sm.noise(sm.noise_ctx, r0 + m / group, g * group + static_cast<int>(m % group), valid, x);
        if (sm.inv_tau != 1.0f) scale_row(x, valid, sm.inv_tau);
        sum = strip_exp_sum(x, valid, strip_max(x, valid));
      }
      const float inv = 1.0f / sum;
      float* out = mass[v];
      for (int64_t t = 0; t < valid; ++t) out[t] += x[t] * inv;
    }
  }
}

// bf16: S = Q·Kᵀ in bf16 where the keys are bf16, P·V where the values are
// (prefill_attention_bf16.h), else oneDNN sgemm on fp32 tiles.
template <TileDequantFn Dequant>
void prefill_attention_tiles(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                             PrefillAttentionScratch& s, bool bf16 = false) {
  const int hd = a.head_dim;
  const bool qk16 = bf16_attention_product(bf16, a.k.dtype, hd);
  const bool pv16 = bf16_attention_product(bf16, a.v.dtype, hd);
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t tile_rows = prefill_query_tile_rows(group);
  const int64_t tile_m = tile_rows * group;
  s.q.resize(static_cast<size_t>(tile_m * hd));
  s.acc.resize(static_cast<size_t>(tile_m * hd));
  s.scores.resize(static_cast<size_t>(tile_m * kKeyTile));
  s.k.resize(static_cast<size_t>(kKeyTile * hd));
  s.v.resize(static_cast<size_t>(kKeyTile * hd));
  s.row_max.resize(static_cast<size_t>(tile_m));
  s.row_sum.resize(static_cast<size_t>(tile_m));
  SingleThreadedOmp omp_guard;
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int g = static_cast<int>(item % a.n_kv_heads);
    const int64_t r0 = item / a.n_kv_heads * tile_rows;
    const int64_t rows = std::min(tile_rows, a.n_rows - r0);
    const int64_t m_rows = rows * group;  // query vectors: m = r * group + j is row r0 + r, head g * group + j
    int64_t k_end = 0;
    for (int64_t r = 0; r < rows; ++r) k_end = std::max(k_end, a.n_visible[r0 + r]);
    // Q tile, pre-scaled
    for (int64_t r = 0; r < rows; ++r)
      for (int j = 0; j < group; ++j) {
        const float* src = a.q + (r0 + r) * a.ld_q + static_cast<int64_t>(g * group + j) * hd;
        float* dst = s.q.data() + (r * group + j) * hd;
        for (int d = 0; d < hd; ++d) dst[d] = src[d] * a.scale;
      }
    const uint16_t* q16 = qk16 ? bf16_attention_query(s.q.data(), m_rows, hd, s.bf16) : nullptr;
    const bool scored = !a.mass_softmax.empty();
    if (scored) s.x.resize(static_cast<size_t>(m_rows * k_end));
    std::fill(s.acc.begin(), s.acc.begin() + m_rows * hd, 0.0f);
    std::fill(s.row_max.begin(), s.row_max.begin() + m_rows, -INFINITY);
    std::fill(s.row_sum.begin(), s.row_sum.begin() + m_rows, 0.0f);
    for (int64_t k0 = 0; k0 < k_end;) {
      // one key tile, never across a token block (its rows are contiguous)
      const int64_t n = std::min(
          {kKeyTile, k_end - k0, a.k.block_tokens - k0 % a.k.block_tokens, a.v.block_tokens - k0 % a.v.block_tokens});
      // S = Q · Kᵀ  [m_rows][n]: with prompt scores straight into the item's row buffer, which
      // keeps it, and P beside it in the tile; else P over S in the tile
      float* const st = scored ? s.x.data() + k0 : s.scores.data();
      const int64_t ld_st = scored ? k_end : n;
      if (qk16)
        bf16_attention_scores(q16, m_rows, hd, static_cast<const uint16_t*>(a.k.row(g, k0)), hd, n, st, ld_st, s.bf16);
      else
        sgemm(m_rows, n, hd, s.q.data(), hd, kv_tile<Dequant>(a.k, g, k0, n, s.k.data()), hd, 0.0f, st, ld_st);
      for (int64_t m = 0; m < m_rows; ++m) {
        const float* sr = st + m * ld_st;
        float* p = s.scores.data() + m * n;
        const int64_t valid = std::clamp<int64_t>(a.n_visible[r0 + m / group] - k0, 0, n);
        if (valid > 0) {
          // online softmax: rescale what was accumulated under the old max
          const float m_old = s.row_max[static_cast<size_t>(m)];
          const float m_new = std::max(m_old, strip_max(sr, valid));
          const float alpha = m_old == -INFINITY ? 0.0f : std::exp(m_old - m_new);
          const float sum = scored ? strip_exp_sum_to(sr, p, valid, m_new) : strip_exp_sum(p, valid, m_new);
          s.row_sum[static_cast<size_t>(m)] = s.row_sum[static_cast<size_t>(m)] * alpha + sum;
          s.row_max[static_cast<size_t>(m)] = m_new;
          if (alpha != 1.0f) scale_row(s.acc.data() + m * hd, hd, alpha);
        }
        std::fill(p + valid, p + n, 0.0f);  // masked keys (this row's causal limit)
      }
      // acc += P · V  [m_rows][head_dim]
      if (pv16)
        bf16_attention_values(s.scores.data(), n, m_rows, n, static_cast<const uint16_t*>(a.v.row(g, k0)), hd, hd,
                              s.acc.data(), hd, s.bf16);
      else
        sgemm_accumulate(m_rows, hd, n, s.scores.data(), n, kv_tile<Dequant>(a.v, g, k0, n, s.v.data()), hd,
                         s.acc.data(), hd);
      k0 += n;
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int j = 0; j < group; ++j) {
        const int64_t m = r * group + j;
        const int h = g * group + j;
        float* o = a.out + (r0 + r) * a.ld_out + static_cast<int64_t>(h) * hd;
        const float l = s.row_sum[static_cast<size_t>(m)];
        if (l > 0.0f) {
          const float inv = 1.0f / l;
          const float* src = s.acc.data() + m * hd;
          for (int d = 0; d < hd; ++d) o[d] = src[d] * inv;
          a.lse[(r0 + r) * a.ld_lse + h] = s.row_max[static_cast<size_t>(m)] + std::log(l);
        } else {
          std::fill(o, o + hd, 0.0f);
          a.lse[(r0 + r) * a.ld_lse + h] = -INFINITY;
        }
      }
    if (scored) {
      std::vector<float*> mass(a.mass_softmax.size());
      for (size_t v = 0; v < mass.size(); ++v) mass[v] = a.mass[v] + item * a.ld_mass;
      mass_of_scores(a.mass_softmax, a.n_visible, r0, group, g, m_rows, k_end, s.x.data(), k_end, mass.data(), s.row);
    }
  }
}

// attention_mass (prefill_attention.h) for one item: the scores of the tile's query vectors over
// every key they see in one product (the buffer is [m][k_end]: 24 MB at 32K keys, streamed), then
// mass_of_scores.
inline void attention_mass_tile(const AttentionMassArgs& a, int64_t item, float* const* mass, AttentionMassScratch& s,
                                bool bf16 = false) {
  const int hd = a.head_dim;
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t tile_rows = prefill_query_tile_rows(group);
  const int g = static_cast<int>(item % a.n_kv_heads);
  const int64_t r0 = item / a.n_kv_heads * tile_rows;
  const int64_t rows = std::min(tile_rows, a.n_rows - r0);
  const int64_t m_rows = rows * group;
  int64_t k_end = 0;
  for (int64_t r = 0; r < rows; ++r) k_end = std::max(k_end, a.n_visible[r0 + r]);
  if (k_end == 0) return;
  s.q.resize(static_cast<size_t>(m_rows * hd));
  s.x.resize(static_cast<size_t>(m_rows * k_end));
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < group; ++j) {
      const float* src = a.q + (r0 + r) * a.ld_q + static_cast<int64_t>(g * group + j) * hd;
      float* dst = s.q.data() + (r * group + j) * hd;
      for (int d = 0; d < hd; ++d) dst[d] = src[d] * a.scale;
    }
  SingleThreadedOmp omp_guard;
  // X = Q · Kᵀ  [m_rows][k_end]: in bf16 as the tiled kernel computes it over a bf16 cache
  const float* k = a.k + static_cast<int64_t>(g) * hd;
  if (bf16_attention_product(bf16, a.k_dtype, hd))
    bf16_attention_scores(bf16_attention_query(s.q.data(), m_rows, hd, s.bf16), m_rows, hd, k, a.ld_k, k_end,
                          s.x.data(), k_end, s.bf16);
  else
    sgemm(m_rows, k_end, hd, s.q.data(), hd, k, a.ld_k, 0.0f, s.x.data(), k_end);
  mass_of_scores(a.softmax, a.n_visible, r0, group, g, m_rows, k_end, s.x.data(), k_end, mass, s.row);
}

}  // namespace
}  // namespace hg::cpu
