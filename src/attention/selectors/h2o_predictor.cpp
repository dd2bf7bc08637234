#include "attention/selectors/h2o_predictor.h"

#include <algorithm>

#include "attention/host_ops.h"
#include "attention/selectors/top_k.h"

namespace hg {

H2oPredictor::H2oPredictor(const SelectorContext& c)
    : n_layers_(c.spec.n_layers),
      n_kv_heads_(c.spec.n_kv_heads),
      ctx_(static_cast<size_t>(c.ctx)),
      acc_(static_cast<size_t>(c.n_seqs) * n_layers_ * n_kv_heads_ * ctx_, 0.0f) {}

void H2oPredictor::select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& s) {
  for (int g = g_begin; g < g_end; ++g)
    top_k_indices(scores(r.seq, r.layer, g), r.n_tokens, r.K, out.idx + static_cast<int64_t>(g) * r.K, s.order);
  host_logits_selected(r.k, r.q, r.n_heads, r.scale, out.idx, r.K, g_begin, g_end, out.logits);
}

void H2oPredictor::observe(const ObservedAttention& o, int g_begin, int g_end) {
  if (o.space != TokenSpace::Host) return;  // device tokens are not this predictor's
  const int group = o.n_heads / o.n_kv_heads;
  for (int h = g_begin * group; h < g_end * group; ++h) {
    const int g = h / group;
    float* acc = scores(o.seq, o.layer, g);
    const int32_t* tok = o.tokens + static_cast<int64_t>(g) * o.count;
    const float* p = o.p + static_cast<int64_t>(h) * o.count;
    for (int j = 0; j < o.count; ++j) acc[tok[j]] += p[j];
  }
}

void H2oPredictor::on_host_append(int seq, int64_t before, int64_t after) {
  if (after <= before) return;
  for (int l = 0; l < n_layers_; ++l)
    for (int g = 0; g < n_kv_heads_; ++g) {
      float* a = scores(seq, l, g);
      const float top = before > 0 ? *std::max_element(a, a + before) : 1.0f;
      std::fill(a + before, a + after, top);
    }
}

void H2oPredictor::reset(int seq) {
  const size_t per_seq = static_cast<size_t>(n_layers_) * n_kv_heads_ * ctx_;
  std::fill(acc_.begin() + static_cast<std::ptrdiff_t>(seq * per_seq),
            acc_.begin() + static_cast<std::ptrdiff_t>((seq + 1) * per_seq), 0.0f);
}

}  // namespace hg
