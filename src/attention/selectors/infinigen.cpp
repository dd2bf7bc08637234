#include "attention/selectors/infinigen.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "attention/host_ops.h"
#include "attention/selectors/top_k.h"
#include "kernels/cpu/matmul.h"

namespace hg {

InfinigenSelector::InfinigenSelector(const SelectorContext& c)
    : spec_(c.spec),
      ctx_(c.ctx),
      n_partial_(partial_channel_count(c.spec.head_dim, c.policy.infinigen.partial_ratio)),
      alpha_(c.policy.infinigen.alpha),
      max_kv_(c.policy.infinigen.max_kv),
      layers_(static_cast<size_t>(c.n_seqs) * c.spec.n_layers) {}

void InfinigenSelector::reset(int seq) {
  for (int l = 0; l < spec_.n_layers; ++l) {
    LayerState& s = state(seq, l);
    s.n_q_rows = 0;
    s.skewed = false;
    s.proj.clear();
    s.keys.clear();
  }
}

bool InfinigenSelector::wants_queries(int seq, int layer) const {
  const LayerState& s = layers_[static_cast<size_t>(seq) * spec_.n_layers + layer];
  return layer >= kExactLayers && !s.skewed && s.n_q_rows < kSkewRows;
}

void InfinigenSelector::on_queries(int seq, int layer, const float* q, int n_rows) {
  if (!wants_queries(seq, layer)) return;
  LayerState& s = state(seq, layer);
  const int take = std::min(n_rows, kSkewRows - s.n_q_rows);
  s.q_rows.insert(s.q_rows.end(), q, q + static_cast<size_t>(take) * spec_.q_dim());
  s.n_q_rows += take;
}

void InfinigenSelector::make_skew(LayerState& s) {
  const int group = spec_.n_heads / spec_.n_kv_heads, hd = spec_.head_dim;
  s.proj.resize(static_cast<size_t>(spec_.n_kv_heads));
  std::vector<float> rows(static_cast<size_t>(s.n_q_rows) * group * hd);  // once per layer and request
  for (int g = 0; g < spec_.n_kv_heads; ++g) {
    PartialProjection& p = s.proj[static_cast<size_t>(g)];
    if (s.n_q_rows == 0) {  // no query seen yet: the unrotated basis, first channels
      p.head_dim = hd;
      p.channels.resize(static_cast<size_t>(n_partial_));
      std::iota(p.channels.begin(), p.channels.end(), 0);
      p.basis.assign(static_cast<size_t>(n_partial_) * hd, 0.0f);
      for (int c = 0; c < n_partial_; ++c) p.basis[static_cast<size_t>(c) * hd + c] = 1.0f;
      continue;
    }
    // the group's query heads over the rows, stacked: [n_q_rows * group][head_dim]
    for (int r = 0; r < s.n_q_rows; ++r)
      std::copy_n(s.q_rows.data() + static_cast<size_t>(r) * spec_.q_dim() + static_cast<size_t>(g) * group * hd,
                  static_cast<size_t>(group) * hd, rows.data() + static_cast<size_t>(r) * group * hd);
    p = make_partial_projection(rows.data(), static_cast<int64_t>(s.n_q_rows) * group, hd, n_partial_);
  }
  std::vector<float>().swap(s.q_rows);
  s.keys.resize(spec_.n_kv_heads, ctx_, n_partial_);
  s.scores.assign(static_cast<size_t>(spec_.n_heads) * ctx_, 0.0f);
  s.skewed = true;
}

void InfinigenSelector::catch_up_keys(LayerState& s, const KvLayout& k, int64_t n_tokens,
                                      SelectorScratch& scratch) {
  scratch.p.resize(static_cast<size_t>(spec_.kv_dim()));
  for (int64_t t = s.keys.n_tokens(); t < n_tokens; ++t) {
    for (int g = 0; g < spec_.n_kv_heads; ++g)
      cpu::dequantize_row(k.dtype, k.row(g, t), k.head_dim, 0, scratch.p.data() + static_cast<size_t>(g) * k.head_dim);
    s.keys.append(scratch.p.data(), s.proj);
  }
}

int InfinigenSelector::planned_k(int layer, int /*K*/, int64_t n_tokens) const {
  return static_cast<int>(layer < kExactLayers ? n_tokens : std::min<int64_t>(max_kv_, n_tokens));
}

int InfinigenSelector::choose_k(const SelectionRequest& r, SelectorScratch& scratch) {
  if (r.layer < kExactLayers || r.n_tokens == 0) return static_cast<int>(r.n_tokens);
  LayerState& s = state(r.seq, r.layer);
  if (!s.skewed) make_skew(s);
  catch_up_keys(s, r.k, r.n_tokens, scratch);
  // partial query of every head: (q̃ A)[channels] of its kv-head's skew
  const int group = r.n_heads / spec_.n_kv_heads;
  scratch.all_logits.resize(static_cast<size_t>(r.n_heads) * n_partial_);
  for (int h = 0; h < r.n_heads; ++h)
    s.proj[static_cast<size_t>(h / group)].project(r.q + static_cast<size_t>(h) * spec_.head_dim,
                                                   scratch.all_logits.data() + static_cast<size_t>(h) * n_partial_);
  partial_scores(s.keys, scratch.all_logits.data(), r.n_heads, r.scale, 0, spec_.n_kv_heads, s.scores.data(), ctx_);
  return fetch_count(s.scores.data(), r.n_heads, r.n_tokens, ctx_, alpha_, max_kv_);
}

void InfinigenSelector::select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out,
                               SelectorScratch& scratch) {
  if (r.K == r.n_tokens) {
    for (int g = g_begin; g < g_end; ++g)
      std::iota(out.idx + static_cast<size_t>(g) * r.K, out.idx + static_cast<size_t>(g + 1) * r.K, 0);
  } else {
    const LayerState& s = state(r.seq, r.layer);
    const int group = r.n_heads / spec_.n_kv_heads;
    scratch.scores.resize(static_cast<size_t>(r.n_tokens));
    for (int g = g_begin; g < g_end; ++g) {  // group score: the max over the group's heads
      const float* first = s.scores.data() + static_cast<size_t>(g) * group * ctx_;
      std::copy(first, first + r.n_tokens, scratch.scores.begin());
      for (int h = 1; h < group; ++h)
        for (int64_t t = 0; t < r.n_tokens; ++t)
          scratch.scores[static_cast<size_t>(t)] =
              std::max(scratch.scores[static_cast<size_t>(t)], first[h * ctx_ + t]);
      top_k_indices(scratch.scores.data(), r.n_tokens, r.K, out.idx + static_cast<size_t>(g) * r.K, scratch.order);
    }
  }
  // The driver fetches K and V rows and the device scores them with the true query; logits with
  // the request's query only where someone asks (an observing selector beside this one).
  if (out.logits) host_logits_selected(r.k, r.q, r.n_heads, r.scale, out.idx, r.K, g_begin, g_end, out.logits);
}

const std::vector<PartialProjection>* InfinigenSelector::projection(int seq, int layer) const {
  const LayerState& s = layers_[static_cast<size_t>(seq) * spec_.n_layers + layer];
  return s.skewed ? &s.proj : nullptr;
}

namespace {
// The policies whose Pre-QKᵀ predictor is InfiniGen's.
bool predicts_with_infinigen(const Policy& p) { return p.splits_kv() && p.predictor == "infinigen"; }
}  // namespace

void register_infinigen_knobs(KnobRegistry& r) {
  r.add(float_knob("partial-ratio", "share of each head's skewed query/key channels used to speculate",
                   {&Policy::infinigen, &Policy::Infinigen::partial_ratio}, 0.015625f, 1.0f, predicts_with_infinigen));
  r.add(float_knob("alpha", "fetch the tokens whose partial score is within alpha of the head's max",
                   {&Policy::infinigen, &Policy::Infinigen::alpha}, 0.0f, 1e9f, predicts_with_infinigen));
  r.add(int_knob("max-kv", "at most this many fetched tokens per kv-head",
                 {&Policy::infinigen, &Policy::Infinigen::max_kv}, 0, INT_MAX, predicts_with_infinigen));
}

}  // namespace hg
