#include "attention/selectors/h2o_prune.h"

#include <algorithm>
#include <climits>

#include "attention/selectors/keyformer_scores.h"
#include "hybridgen/error.h"

namespace hg {

HeavyHitterPruner::HeavyHitterPruner(const SelectorContext& c, Score score)
    : score_(score),
      n_layers_(c.spec.n_layers),
      ctx_(c.ctx),
      tau_init_(c.policy.heavy_hitters.tau_init),
      tau_end_(c.policy.heavy_hitters.tau_end),
      seed_(c.policy.seed),
      scores_(static_cast<size_t>(c.n_seqs) * c.spec.n_layers, TokenScores(c.spec.n_kv_heads, c.ctx)),
      prompt_len_(static_cast<size_t>(c.n_seqs), 0),
      scratch_(static_cast<size_t>(c.spec.n_kv_heads)) {
  const int group = c.spec.n_heads / c.spec.n_kv_heads;
  for (auto& s : scratch_) {
    s.noise.resize(static_cast<size_t>(c.ctx));
    s.y.resize(static_cast<size_t>(group) * c.ctx);
    s.keep.reserve(static_cast<size_t>(c.ctx));
    s.drop.reserve(static_cast<size_t>(c.ctx));
    s.order.reserve(static_cast<size_t>(c.ctx));
  }
}

void HeavyHitterPruner::reset(int seq) {
  for (int l = 0; l < n_layers_; ++l) mutable_scores(seq, l).clear();
  prompt_len_[static_cast<size_t>(seq)] = 0;
}

PromptScoreSpec HeavyHitterPruner::prompt_score_spec() const {
  PromptScoreSpec s;
  if (score_ == Score::Gumbel) {
    s.kind = PromptScoreSpec::Kind::Gumbel;
    s.seed = seed_;
    s.tau = tau_init_;
  }
  return s;
}

void HeavyHitterPruner::learn_prompt_scores(int seq, int layer, const float* scores, int n_tokens) {
  TokenScores& acc = mutable_scores(seq, layer);
  const int n_kv = acc.n_kv_heads();
  for (int g = 0; g < n_kv; ++g) {
    float* dst = acc.head(g);
    for (int t = 0; t < n_tokens; ++t) dst[t] = scores[static_cast<size_t>(t) * n_kv + g];
  }
  prompt_len_[static_cast<size_t>(seq)] = std::max(prompt_len_[static_cast<size_t>(seq)], n_tokens);
}

void HeavyHitterPruner::observe(const ObservedAttention& o, int g_begin, int g_end) {
  if (o.space != TokenSpace::Position) return;  // the device's own tokens only
  if (o.prefill && o.layer == 0)
    prompt_len_[static_cast<size_t>(o.seq)] = std::max(prompt_len_[static_cast<size_t>(o.seq)], o.query_pos + 1);
  TokenScores& acc = mutable_scores(o.seq, o.layer);
  const int group = o.n_heads / o.n_kv_heads;
  for (int g = g_begin; g < g_end; ++g) {
    const int32_t* pos = o.tokens + static_cast<size_t>(g) * o.count;
    const float* p = o.p + static_cast<size_t>(g) * group * o.count;
    if (score_ == Score::Attention) {
      acc.add_group(g, pos, o.count, p, group, o.count);
      continue;
    }
    HeadScratch& s = scratch_[static_cast<size_t>(g)];
    const float tau = keyformer_tau(tau_init_, tau_end_, o.query_pos, prompt_len_[static_cast<size_t>(o.seq)], ctx_);
    for (int j = 0; j < group; ++j) {
      const int h = g * group + j;
      gumbel_noise_row(seed_, o.layer, h, o.query_pos, pos, o.count, s.noise.data());
      gumbel_softmax(p + static_cast<size_t>(j) * o.count, s.noise.data(), o.count, tau,
                     s.y.data() + static_cast<size_t>(j) * o.count);
    }
    acc.add_group(g, pos, o.count, s.y.data(), group, o.count);
  }
}

void HeavyHitterPruner::retain(int seq, int layer, int g, std::span<const int32_t> positions, int keep,
                               std::vector<int32_t>& kept) {
  // positions: the current heavy hitters and the tokens leaving the recent window
  TokenScores& acc = mutable_scores(seq, layer);
  HeadScratch& s = scratch_[static_cast<size_t>(g)];
  keep_heavy_hitters(acc.head(g), positions, keep, s.keep, s.drop, s.order);
  for (const int32_t p : s.drop) acc.forget(g, p);
  kept.insert(kept.end(), s.keep.begin(), s.keep.end());
}

}  // namespace hg
