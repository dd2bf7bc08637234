#include "attention/selectors/post_top_k.h"

#include "attention/host_ops.h"
#include "attention/selectors/top_k.h"

namespace hg {

void PostTopKSelector::select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out,
                              SelectorScratch& s) {
  const int n_kv = r.k.n_kv_heads, group = r.n_heads / n_kv, K = r.K;
  const int64_t n = r.n_tokens;
  // logits of every host token of the range's heads  [n_heads][n]: the driver's, or computed here
  const float* logits = r.logits;
  if (!logits) {
    s.all_logits.resize(static_cast<size_t>(r.n_heads) * n);
    host_logits(r.k, r.q, r.n_heads, r.scale, g_begin, g_end, 0, n, s.all_logits.data(), n);
    logits = s.all_logits.data();
  }
  s.scores.resize(static_cast<size_t>(n));
  for (int g = g_begin; g < g_end; ++g) {
    int32_t* idx = out.idx + static_cast<int64_t>(g) * K;
    if (K == n) {
      for (int j = 0; j < K; ++j) idx[j] = j;  // every host token: no ranking
    } else {
      group_max_scores(logits + static_cast<int64_t>(g) * group * n, group, n, s.scores.data());
      top_k_indices(s.scores.data(), n, K, idx, s.order);
    }
    for (int h = g * group; h < (g + 1) * group; ++h)
      for (int j = 0; j < K; ++j)
        out.logits[static_cast<int64_t>(h) * K + j] = logits[static_cast<int64_t>(h) * n + idx[j]];
  }
}

}  // namespace hg
