#include "attention/selectors/partial.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attention/host_ops.h"
#include "attention/selectors/top_k.h"
#include "kernels/cpu/channel_scores.h"
#include "kernels/cpu/matmul.h"

namespace hg {

using cpu::kChannelTile;

PartialSelector::PartialSelector(const SelectorContext& c)
    : dims_(c.policy.partial_dims), columns_(c.n_seqs, c.spec.n_layers, c.spec.n_kv_heads) {}

void PartialSelector::reset(int seq) { columns_.reset(seq); }

void PartialSelector::catch_up(Columns& c, const KvLayout& k, int g, int64_t n_tokens, SelectorScratch& s) const {
  const int hd = k.head_dim;
  if (n_tokens < c.n_tokens) c.n_tokens = 0;  // a new request on the store: fold it again
  const size_t tile_elems = static_cast<size_t>(hd) * kChannelTile;
  const size_t need = static_cast<size_t>((n_tokens + kChannelTile - 1) / kChannelTile) * tile_elems;
  if (c.bf16.size() < need) c.bf16.resize(std::max(need, c.bf16.size() * 3 / 2 / tile_elems * tile_elems));
  s.row.resize(static_cast<size_t>(hd));
  for (int64_t t = c.n_tokens; t < n_tokens; ++t) {
    cpu::dequantize_row(k.dtype, k.row(g, t), hd, 0, s.row.data());
    uint16_t* col = c.bf16.data() + static_cast<size_t>(t / kChannelTile) * tile_elems + t % kChannelTile;
    for (int d = 0; d < hd; ++d)
      col[static_cast<size_t>(d) * kChannelTile] = cpu::fp32_to_bf16(s.row[static_cast<size_t>(d)]);
  }
  c.n_tokens = n_tokens;
}

void PartialSelector::select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out,
                             SelectorScratch& s) {
  const KvLayout& k = r.k;
  const int group = r.n_heads / k.n_kv_heads;
  const int hd = k.head_dim;
  const int dims = std::min(dims_, hd);
  const float* q = r.q;
  s.scores.resize(static_cast<size_t>(r.n_tokens));
  for (int g = g_begin; g < g_end; ++g) {
    // dims with the largest |q| summed over the group's heads
    s.dims.resize(static_cast<size_t>(hd));
    std::iota(s.dims.begin(), s.dims.end(), 0);
    auto weight = [&](int d) {
      float w = 0;
      for (int h = g * group; h < (g + 1) * group; ++h) w += std::fabs(q[h * hd + d]);
      return w;
    };
    std::partial_sort(s.dims.begin(), s.dims.begin() + dims, s.dims.end(),
                      [&](int a, int b) { return weight(a) > weight(b); });
    Columns& c = columns_.at(r.seq, r.layer, g);
    catch_up(c, k, g, r.n_tokens, s);
    const float* qg = q + static_cast<size_t>(g) * group * hd;
    s.wide.resize(static_cast<size_t>(dims) * kChannelTile);
    for (int64_t t0 = 0; t0 < r.n_tokens; t0 += kChannelTile) {
      const uint16_t* tile = c.bf16.data() + static_cast<size_t>(t0 / kChannelTile) * hd * kChannelTile;
      cpu::channel_scores(tile, kChannelTile, std::min<int64_t>(kChannelTile, r.n_tokens - t0), s.dims.data(), dims, qg,
                          group, hd, s.scores.data() + t0, s.wide.data());
    }
    top_k_indices(s.scores.data(), r.n_tokens, r.K, out.idx + static_cast<int64_t>(g) * r.K, s.order);
  }
  host_logits_selected(k, r.q, r.n_heads, r.scale, out.idx, r.K, g_begin, g_end, out.logits);
}

}  // namespace hg
