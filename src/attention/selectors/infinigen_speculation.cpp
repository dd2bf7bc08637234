#include "attention/selectors/infinigen_speculation.h"

#include <algorithm>
#include <cmath>

namespace hg {

void PartialKeys::resize(int n_kv_heads, int64_t capacity, int n_partial) {
  n_kv_heads_ = n_kv_heads;
  capacity_ = capacity;
  n_partial_ = n_partial;
  n_tokens_ = 0;
  data_.assign(static_cast<size_t>(n_kv_heads) * capacity * n_partial, 0.0f);
}

void PartialKeys::append(const float* k, const std::vector<PartialProjection>& proj) {
  for (int g = 0; g < n_kv_heads_; ++g) {
    const PartialProjection& p = proj[static_cast<size_t>(g)];
    p.project(k + static_cast<size_t>(g) * p.head_dim,
              data_.data() + (static_cast<size_t>(g) * capacity_ + n_tokens_) * n_partial_);
  }
  ++n_tokens_;
}

void partial_scores(const PartialKeys& keys, const float* pq, int n_heads, float scale, int g_begin, int g_end,
                    float* scores, int64_t ld) {
  const int group = n_heads / keys.n_kv_heads(), r = keys.n_partial();
  for (int g = g_begin; g < g_end; ++g)
    for (int64_t t = 0; t < keys.n_tokens(); ++t) {
      const float* k = keys.row(g, t);
      for (int h = g * group; h < (g + 1) * group; ++h) {
        const float* q = pq + static_cast<size_t>(h) * r;
        float s = 0;
        for (int c = 0; c < r; ++c) s += q[c] * k[c];
        scores[h * ld + t] = scale * s;
      }
    }
}

int fetch_count(const float* scores, int n_heads, int64_t n_tokens, int64_t ld, float alpha, int max_kv) {
  if (n_tokens == 0 || n_heads == 0) return 0;
  int64_t total = 0;
  for (int h = 0; h < n_heads; ++h) {
    const float* s = scores + h * ld;
    const float threshold = *std::max_element(s, s + n_tokens) - alpha;
    total += std::count_if(s, s + n_tokens, [&](float x) { return x > threshold; });
  }
  const int64_t mean = total / n_heads;  // ⌊mean⌋, as the reference's int(mean)
  return static_cast<int>(std::min<int64_t>(mean, max_kv));
}

}  // namespace hg
