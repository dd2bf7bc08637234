#include "attention/selectors/partial.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "attention/host_ops.h"
#include "attention/selectors/top_k.h"
#include "kernels/cpu/matmul.h"

namespace hg {

void PartialSelector::select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out,
                             SelectorScratch& s) {
  const KvLayout& k = r.k;
  const int group = r.n_heads / k.n_kv_heads;
  const int hd = k.head_dim;
  const int dims = std::min(dims_, hd);
  const float* q = r.q;
  s.scores.resize(static_cast<size_t>(r.n_tokens));
  s.row.resize(static_cast<size_t>(hd));  // one key row in fp32
  std::span<float> row(s.row);
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
    for (int64_t t = 0; t < r.n_tokens; ++t) {
      // The whole row crosses the bus anyway (cache lines); the saving is in arithmetic.
      cpu::dequantize_row(k.dtype, k.row(g, t), hd, 0, row.data());
      float best = -INFINITY;
      for (int h = g * group; h < (g + 1) * group; ++h) {
        float score = 0;
        for (int i = 0; i < dims; ++i) {
          const int d = s.dims[static_cast<size_t>(i)];
          score += q[h * hd + d] * row[static_cast<size_t>(d)];
        }
        best = std::max(best, score);
      }
      s.scores[static_cast<size_t>(t)] = best;
    }
    top_k_indices(s.scores.data(), r.n_tokens, r.K, out.idx + static_cast<int64_t>(g) * r.K, s.order);
  }
  host_logits_selected(k, r.q, r.n_heads, r.scale, out.idx, r.K, g_begin, g_end, out.logits);
}

}  // namespace hg
