#include "attention/selectors/h2o_scores.h"

#include <algorithm>

namespace hg {

void TokenScores::resize(int n_kv_heads, int ctx) {
  n_kv_heads_ = n_kv_heads;
  ctx_ = ctx;
  scores_.assign(static_cast<size_t>(n_kv_heads) * ctx, 0.0f);
}

void TokenScores::clear() { std::fill(scores_.begin(), scores_.end(), 0.0f); }

void TokenScores::add_group(int g, const int32_t* pos, int64_t n, const float* p, int group, int64_t ld) {
  float* s = head(g);
  for (int h = 0; h < group; ++h) {
    const float* ph = p + h * ld;
    for (int64_t j = 0; j < n; ++j) s[pos[j]] += ph[j];
  }
}

void keep_heavy_hitters(const float* score, std::span<const int32_t> candidates, int heavy, std::vector<int32_t>& keep,
                        std::vector<int32_t>& drop, std::vector<int32_t>& order) {
  order.assign(candidates.begin(), candidates.end());
  const size_t n_keep = std::min(order.size(), static_cast<size_t>(std::max(heavy, 0)));
  auto better = [&](int32_t a, int32_t b) { return score[a] > score[b] || (score[a] == score[b] && a > b); };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_keep), order.end(), better);
  keep.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_keep));
  drop.assign(order.begin() + static_cast<std::ptrdiff_t>(n_keep), order.end());
  std::sort(keep.begin(), keep.end());
  std::sort(drop.begin(), drop.end());
}

}  // namespace hg
