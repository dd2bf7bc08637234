#include "attention/selectors/recent.h"

#include "attention/host_ops.h"

namespace hg {

void RecentSelector::select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch&) {
  for (int g = g_begin; g < g_end; ++g)
    for (int j = 0; j < r.K; ++j) out.idx[static_cast<int64_t>(g) * r.K + j] = static_cast<int32_t>(r.n_tokens - r.K + j);
  host_logits_selected(r.k, r.q, r.n_heads, r.scale, out.idx, r.K, g_begin, g_end, out.logits);
}

}  // namespace hg
