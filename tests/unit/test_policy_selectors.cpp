// The h2o/keyformer and infinigen selectors (attention/selectors/h2o_prune.h, infinigen.h) on
// small hand-made inputs: what they accumulate from observed probabilities, what retain() keeps,
// and InfiniGen's skew from the observed queries, its fetch count and its per-kv-head choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attention/host_ops.h"
#include "attention/selectors/h2o_prune.h"
#include "attention/selectors/infinigen.h"
#include "attention/selectors/keyformer_scores.h"
#include "attention/selectors/top_k.h"

namespace hg::test {
namespace {

ModelSpec small_spec(int n_heads, int n_kv_heads, int head_dim, int n_layers = 3) {
  ModelSpec s;
  s.n_layers = n_layers;
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  s.d_model = n_heads * head_dim;
  return s;
}

// The device's probabilities over `count` tokens per kv-head.
ObservedAttention device_observation(int n_heads, int n_kv_heads, int count, const int32_t* tokens, const float* p) {
  ObservedAttention o;
  o.space = TokenSpace::Position;
  o.n_heads = n_heads;
  o.n_kv_heads = n_kv_heads;
  o.count = count;
  o.tokens = tokens;
  o.p = p;
  return o;
}

TEST(HeavyHitterPruner, AccumulatesTheGroupsProbabilitiesAndKeepsTheHeaviest) {
  const ModelSpec spec = small_spec(4, 2, 8);
  const Policy p = policy_preset("full");
  const SelectorContext c{spec, p, 16, 1};
  HeavyHitterPruner sel(c, HeavyHitterPruner::Score::Attention);
  // kv-head 0 attends positions {0, 1, 2, 3, 4}, kv-head 1 positions {0, 2, 3, 5, 6}
  const int32_t tokens[2 * 5] = {0, 1, 2, 3, 4, 0, 2, 3, 5, 6};
  const float probs[4 * 5] = {0.1f, 0.5f, 0.1f, 0.2f, 0.1f, 0.3f, 0.3f, 0.1f, 0.2f, 0.1f,   // heads 0, 1
                              0.6f, 0.1f, 0.1f, 0.1f, 0.1f, 0.2f, 0.1f, 0.3f, 0.3f, 0.1f};  // heads 2, 3
  ObservedAttention o = device_observation(4, 2, 5, tokens, probs);
  o.layer = 1;
  sel.observe(o, 0, 2);
  const TokenScores& s = sel.scores(0, 1);
  EXPECT_FLOAT_EQ(s.head(0)[1], 0.5f + 0.3f);
  EXPECT_FLOAT_EQ(s.head(1)[5], 0.1f + 0.3f);
  EXPECT_FLOAT_EQ(s.head(1)[1], 0.0f);
  EXPECT_FLOAT_EQ(sel.scores(0, 0).head(0)[1], 0.0f);  // other layers untouched

  // kv-head 0 keeps 2 of {0, 1, 2, 3}: 1 (0.8), then 0 and 3 tie at 0.4 and the more recent wins
  std::vector<int32_t> kept;
  const int32_t pos0[4] = {0, 1, 2, 3};
  sel.retain(0, 1, 0, pos0, 2, kept);
  EXPECT_EQ(kept, (std::vector<int32_t>{1, 3}));
  EXPECT_FLOAT_EQ(s.head(0)[0], 0.0f);  // dropped: its score is forgotten
  EXPECT_FLOAT_EQ(s.head(0)[2], 0.0f);
  EXPECT_FLOAT_EQ(s.head(0)[4], 0.1f + 0.1f);
  kept.clear();
  const int32_t pos1[4] = {0, 2, 3, 5};  // kv-head 1: 0 (0.8), 3 (0.4) and 5 (0.4) over 2 (0.2)
  sel.retain(0, 1, 1, pos1, 3, kept);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 3, 5}));
  kept.clear();
  sel.retain(0, 1, 1, pos1, 0, kept);
  EXPECT_TRUE(kept.empty());
}

TEST(HeavyHitterPruner, KeyformerAddsTheSeededGumbelSoftmax) {
  const ModelSpec spec = small_spec(2, 1, 8, 1);
  Policy p = policy_preset("full");
  p.seed = 42;
  p.heavy_hitters.tau_init = 1.0f;
  p.heavy_hitters.tau_end = 3.0f;
  const int ctx = 11;
  HeavyHitterPruner sel(SelectorContext{spec, p, ctx, 1}, HeavyHitterPruner::Score::Gumbel);
  const int32_t tokens[3] = {0, 2, 4};
  const float probs[2 * 3] = {0.2f, 0.5f, 0.3f, 0.6f, 0.3f, 0.1f};
  ObservedAttention o = device_observation(2, 1, 3, tokens, probs);
  o.prefill = true;
  o.query_pos = 4;  // a prompt of 5 tokens: τ = 1 here
  sel.observe(o, 0, 1);
  o.prefill = false;
  o.query_pos = 7;  // generated: τ = 1 + 2 · (7 - 5) / (11 - 1 - 5) = 1.8
  sel.observe(o, 0, 1);
  std::vector<double> want(5, 0.0);
  for (const auto& [pos, tau] : {std::pair{4, 1.0f}, std::pair{7, 1.8f}}) {
    EXPECT_FLOAT_EQ(keyformer_tau(1.0f, 3.0f, pos, 5, ctx), tau);
    for (int h = 0; h < 2; ++h) {
      double y[3], sum = 0;
      for (int j = 0; j < 3; ++j)
        sum += (y[j] = std::exp((std::log(probs[h * 3 + j]) + gumbel_noise(42, 0, h, pos, tokens[j])) / tau));
      for (int j = 0; j < 3; ++j) want[static_cast<size_t>(tokens[j])] += y[j] / sum;
    }
  }
  for (int t : {0, 2, 4}) EXPECT_NEAR(sel.scores(0, 0).head(0)[t], want[static_cast<size_t>(t)], 1e-5) << t;
  EXPECT_EQ(sel.scores(0, 0).head(0)[1], 0.0f);
}

// fp32 host keys [n_kv_heads][n][head_dim] seen as a one-block host store
KvLayout f32_layout(const std::vector<float>& k, int n_kv_heads, int n, int head_dim) {
  KvLayout l;
  l.dtype = DType::F32;
  l.n_kv_heads = n_kv_heads;
  l.head_dim = head_dim;
  l.block_tokens = n;
  l.block_stride = 0;
  l.base = reinterpret_cast<const std::byte*>(k.data());
  return l;
}

TEST(InfinigenSelector, SkewsFromObservedQueriesAndFetchesEachKvHeadsBest) {
  const int n_heads = 4, n_kv = 2, hd = 8, n = 40, group = n_heads / n_kv;
  const ModelSpec spec = small_spec(n_heads, n_kv, hd, 4);
  Policy p = policy_preset("full");
  p.infinigen.partial_ratio = 0.5f;  // 4 channels of 8
  p.infinigen.alpha = 1.5f;
  p.infinigen.max_kv = 100;
  InfinigenSelector sel(SelectorContext{spec, p, 64, 2});
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q_rows(static_cast<size_t>(30) * n_heads * hd), keys(static_cast<size_t>(n_kv) * n * hd),
      q(static_cast<size_t>(n_heads) * hd);
  for (size_t i = 0; i < q_rows.size(); ++i) q_rows[i] = normal(rng) * (i % hd < 3 ? 3.0f : 0.3f);
  for (float& x : keys) x = normal(rng);
  for (float& x : q) x = normal(rng) * 2.0f;
  EXPECT_FALSE(sel.wants_queries(1, 1));  // layers 0 and 1 fetch everything: no skew
  ASSERT_TRUE(sel.wants_queries(1, 2));
  sel.on_queries(1, 2, q_rows.data(), 10);
  sel.on_queries(1, 2, q_rows.data() + static_cast<size_t>(10) * n_heads * hd, 20);

  SelectionRequest r;
  r.seq = 1;
  r.layer = 2;
  r.k = f32_layout(keys, n_kv, n, hd);
  r.q = q.data();
  r.n_heads = n_heads;
  r.scale = 0.25f;
  r.n_tokens = n;
  SelectorScratch scratch;
  const int K = sel.choose_k(r, scratch);
  ASSERT_NE(sel.projection(1, 2), nullptr);
  EXPECT_FALSE(sel.wants_queries(1, 2));  // skewed once

  // the same computation from the public pieces
  std::vector<PartialProjection> proj;
  std::vector<float> stacked(static_cast<size_t>(30) * group * hd);
  for (int g = 0; g < n_kv; ++g) {
    for (int row = 0; row < 30; ++row)
      std::copy_n(q_rows.data() + (static_cast<size_t>(row) * n_heads + g * group) * hd, group * hd,
                  stacked.data() + static_cast<size_t>(row) * group * hd);
    proj.push_back(make_partial_projection(stacked.data(), 30 * group, hd, 4));
    EXPECT_EQ(proj.back().channels, (*sel.projection(1, 2))[static_cast<size_t>(g)].channels);
  }
  std::vector<float> scores(static_cast<size_t>(n_heads) * n);
  for (int h = 0; h < n_heads; ++h) {
    float pq[4];
    proj[static_cast<size_t>(h / group)].project(q.data() + h * hd, pq);
    for (int t = 0; t < n; ++t) {
      float pk[4];
      proj[static_cast<size_t>(h / group)].project(keys.data() + (static_cast<size_t>(h / group) * n + t) * hd, pk);
      scores[static_cast<size_t>(h) * n + t] = 0.25f * (pq[0] * pk[0] + pq[1] * pk[1] + pq[2] * pk[2] + pq[3] * pk[3]);
    }
  }
  int64_t count = 0;
  for (int h = 0; h < n_heads; ++h) {
    const float* s = scores.data() + static_cast<size_t>(h) * n;
    const float m = *std::max_element(s, s + n);
    count += std::count_if(s, s + n, [&](float x) { return x > m - 1.5f; });
  }
  EXPECT_EQ(K, static_cast<int>(count / n_heads));
  ASSERT_GT(K, 0);
  ASSERT_LT(K, n);
  r.K = K;
  std::vector<int32_t> idx(static_cast<size_t>(n_kv) * K), want(idx.size());
  std::vector<float> logits(static_cast<size_t>(n_heads) * K);
  sel.select(r, 0, n_kv, SelectedTokens{idx.data(), logits.data()}, scratch);
  std::vector<int32_t> order;
  for (int g = 0; g < n_kv; ++g) {  // per kv-head the K best by the max over its heads
    std::vector<float> best(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t)
      best[static_cast<size_t>(t)] =
          std::max(scores[static_cast<size_t>(g * group) * n + t], scores[static_cast<size_t>(g * group + 1) * n + t]);
    top_k_indices(best.data(), n, K, want.data() + static_cast<size_t>(g) * K, order);
  }
  EXPECT_EQ(idx, want);
  for (int h = 0; h < n_heads; ++h)  // logits of the chosen tokens with the request's query
    for (int j = 0; j < K; ++j) {
      const int t = idx[static_cast<size_t>(h / group) * K + j];
      float dot = 0;
      for (int d = 0; d < hd; ++d)
        dot += q[static_cast<size_t>(h) * hd + d] * keys[(static_cast<size_t>(h / group) * n + t) * hd + d];
      EXPECT_NEAR(logits[static_cast<size_t>(h) * K + j], 0.25f * dot, 1e-5);
    }

  // max_kv caps; layers 0 and 1 take every host token; sequence 0 is untouched
  Policy capped = p;
  capped.infinigen.max_kv = 3;
  InfinigenSelector sel3(SelectorContext{spec, capped, 64, 2});
  sel3.on_queries(1, 2, q_rows.data(), 30);
  EXPECT_EQ(sel3.choose_k(r, scratch), std::min(3, K));
  r.layer = 1;
  EXPECT_EQ(sel.choose_k(r, scratch), n);
  EXPECT_EQ(sel.projection(0, 2), nullptr);
  sel.reset(1);
  EXPECT_EQ(sel.projection(1, 2), nullptr);
}

}  // namespace
}  // namespace hg::test
