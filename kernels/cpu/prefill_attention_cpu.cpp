// Dispatch of the tiled prefill attention (prefill_attention_tile.h) and its scalar twin.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/prefill_attention.h"
#include "kernels/cpu/prefill_attention_tile.h"
#include "kernels/cpu/quant_blocks.h"

namespace hg::cpu {

namespace {

void dequantize_baseline(DType dtype, const uint8_t* src, int64_t n, float* out) {
  dequantize_span(dtype, src, n, out);
}

float element(const KvLayout& c, const uint8_t* row, int d) {
  switch (c.dtype) {
    case DType::F16:
      return f16_to_fp32(reinterpret_cast<const uint16_t*>(row)[d]);
    case DType::BF16:
      return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[d]);
    default:
      return reinterpret_cast<const float*>(row)[d];
  }
}

}  // namespace

PrefillAttentionArgs dense_prefill_args(const float* q, int64_t n_rows, int n_heads, int n_kv_heads, int head_dim,
                                        float scale, const KvLayout& k, const KvLayout& v, const int64_t* n_visible,
                                        float* out, float* lse) {
  PrefillAttentionArgs a;
  a.q = q;
  a.ld_q = static_cast<int64_t>(n_heads) * head_dim;
  a.n_rows = n_rows;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv_heads;
  a.head_dim = head_dim;
  a.scale = scale;
  a.k = k;
  a.v = v;
  a.n_visible = n_visible;
  a.out = out;
  a.ld_out = a.ld_q;
  a.lse = lse;
  a.ld_lse = n_heads;
  return a;
}

int64_t prefill_query_tile_rows(int group) {
  // about 192 query vectors per tile (64 rows of SmolLM2's 3-head groups): the score tile
  // (192 × 128 fp32) and the accumulator stay in L2 next to one key and value tile.
  return std::clamp<int64_t>(192 / std::max(group, 1), 1, 64);
}

int64_t prefill_attention_items(const PrefillAttentionArgs& a) {
  const int64_t tile = prefill_query_tile_rows(a.n_heads / a.n_kv_heads);
  return (a.n_rows + tile - 1) / tile * a.n_kv_heads;
}

void prefill_attention_isa(CpuIsa isa, const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                           PrefillAttentionScratch& scratch) {
  switch (isa) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512:
      return prefill_attention_avx512(a, item_begin, item_end, scratch, a.bf16 && bf16_attention_on(isa));
    case CpuIsa::Avx2:
      return prefill_attention_avx2(a, item_begin, item_end, scratch);
    case CpuIsa::Scalar:
      break;
  }
  prefill_attention_tiles<dequantize_baseline>(a, item_begin, item_end, scratch);
}

void prefill_attention(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                       PrefillAttentionScratch& scratch) {
  prefill_attention_isa(active_cpu_isa(), a, item_begin, item_end, scratch);
}

void prefill_attention_scalar(const PrefillAttentionArgs& a, int64_t item_begin, int64_t item_end,
                              PrefillAttentionScratch& scratch) {
  const int hd = a.head_dim;
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t tile_rows = prefill_query_tile_rows(group);
  std::vector<float>& p = scratch.scores;
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int g = static_cast<int>(item % a.n_kv_heads);
    const int64_t r0 = item / a.n_kv_heads * tile_rows;
    for (int64_t i = r0; i < std::min(a.n_rows, r0 + tile_rows); ++i)
      for (int h = g * group; h < (g + 1) * group; ++h) {
        const float* q = a.q + i * a.ld_q + static_cast<int64_t>(h) * hd;
        float* o = a.out + i * a.ld_out + static_cast<int64_t>(h) * hd;
        const int64_t n = a.n_visible[i];
        std::fill(o, o + hd, 0.0f);
        if (n <= 0) {
          a.lse[i * a.ld_lse + h] = -INFINITY;
          continue;
        }
        p.resize(static_cast<size_t>(n));
        float max_v = -INFINITY;
        for (int64_t t = 0; t < n; ++t) {
          const auto* k = static_cast<const uint8_t*>(a.k.row(g, t));
          float dot = 0.0f;
          for (int d = 0; d < hd; ++d) dot += q[d] * element(a.k, k, d);
          p[static_cast<size_t>(t)] = dot * a.scale;
          max_v = std::max(max_v, p[static_cast<size_t>(t)]);
        }
        double sum = 0.0;
        for (int64_t t = 0; t < n; ++t)
          sum += (p[static_cast<size_t>(t)] = std::exp(p[static_cast<size_t>(t)] - max_v));
        for (int64_t t = 0; t < n; ++t) {
          const auto* v = static_cast<const uint8_t*>(a.v.row(g, t));
          const float w = static_cast<float>(p[static_cast<size_t>(t)] / sum);
          for (int d = 0; d < hd; ++d) o[d] += w * element(a.v, v, d);
        }
        a.lse[i * a.ld_lse + h] = max_v + static_cast<float>(std::log(sum));
      }
  }
}

int64_t attention_mass_items(const AttentionMassArgs& a) {
  const int64_t tile = prefill_query_tile_rows(a.n_heads / a.n_kv_heads);
  return (a.n_rows + tile - 1) / tile * a.n_kv_heads;
}

int64_t attention_mass_keys(const AttentionMassArgs& a, int64_t item) {
  const int64_t tile = prefill_query_tile_rows(a.n_heads / a.n_kv_heads);
  const int64_t r0 = item / a.n_kv_heads * tile;
  int64_t k_end = 0;
  for (int64_t r = r0; r < std::min(a.n_rows, r0 + tile); ++r) k_end = std::max(k_end, a.n_visible[r]);
  return k_end;
}

void attention_mass_isa(CpuIsa isa, const AttentionMassArgs& a, int64_t item, float* const* mass,
                        AttentionMassScratch& scratch) {
  switch (isa) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512:
      return attention_mass_avx512(a, item, mass, scratch, a.bf16 && bf16_attention_on(isa));
    case CpuIsa::Avx2:
      return attention_mass_avx2(a, item, mass, scratch);
    case CpuIsa::Scalar:
      break;
  }
  attention_mass_tile(a, item, mass, scratch);
}

void attention_mass(const AttentionMassArgs& a, int64_t item, float* const* mass, AttentionMassScratch& scratch) {
  attention_mass_isa(active_cpu_isa(), a, item, mass, scratch);
}

void attention_mass_scalar(const AttentionMassArgs& a, int64_t item, float* const* mass) {
  const int hd = a.head_dim;
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t tile_rows = prefill_query_tile_rows(group);
  const int g = static_cast<int>(item % a.n_kv_heads);
  const int64_t r0 = item / a.n_kv_heads * tile_rows;
  const int64_t k_end = attention_mass_keys(a, item);
  const size_t n_softmax = a.softmax.size();
  std::vector<std::vector<double>> acc(n_softmax, std::vector<double>(static_cast<size_t>(k_end), 0.0));
  std::vector<float> dots(static_cast<size_t>(k_end)), x(static_cast<size_t>(k_end));
  for (int64_t i = r0; i < std::min(a.n_rows, r0 + tile_rows); ++i)
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const int64_t n = a.n_visible[i];
      if (n <= 0) continue;
      const float* q = a.q + i * a.ld_q + static_cast<int64_t>(h) * hd;
      for (int64_t t = 0; t < n; ++t) {
        const float* k = a.k + t * a.ld_k + static_cast<int64_t>(g) * hd;
        float dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot += q[d] * a.scale * k[d];
        dots[static_cast<size_t>(t)] = dot;
      }
      for (size_t v = 0; v < n_softmax; ++v) {
        const MassSoftmax& sm = a.softmax[v];
        std::copy_n(dots.begin(), n, x.begin());
        if (sm.noise) sm.noise(sm.noise_ctx, i, h, n, x.data());
        for (int64_t t = 0; t < n; ++t) x[static_cast<size_t>(t)] *= sm.inv_tau;
        const float max_v = *std::max_element(x.begin(), x.begin() + n);
        double sum = 0.0;
        for (int64_t t = 0; t < n; ++t) sum += std::exp(static_cast<double>(x[static_cast<size_t>(t)]) - max_v);
        for (int64_t t = 0; t < n; ++t)
          acc[v][static_cast<size_t>(t)] += std::exp(static_cast<double>(x[static_cast<size_t>(t)]) - max_v) / sum;
      }
    }
  for (size_t v = 0; v < n_softmax; ++v)
    for (int64_t t = 0; t < k_end; ++t) mass[v][t] = static_cast<float>(acc[v][static_cast<size_t>(t)]);
}

}  // namespace hg::cpu
