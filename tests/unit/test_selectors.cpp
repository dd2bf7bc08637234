// The selectors against a direct reference on small hand-made inputs: Post-QKᵀ top-K (ties go to
// the more recent token, K = 0, K = every token), Recent, Partial (all dimensions = exact
// scores; a few dimensions = the reference's partial scores), q4 (keys its 4-bit copy holds
// exactly rank as the reference; its recall of Post's top-K on Gaussian keys), Quest's pages (against its rule
// written out) and the H2O predictor's accumulator, for GQA groups of 1 to 8 query heads per kv-head.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attention/host_selection.h"
#include "attention/selectors/h2o_predictor.h"
#include "attention/selectors/partial.h"
#include "attention/selectors/post_top_k.h"
#include "attention/selectors/predictors.h"
#include "attention/selectors/quant_keys.h"
#include "attention/selectors/recent.h"
#include "attention/selectors/top_k.h"
#include "kv/host_store.h"
#include "mem/topology.h"
#include "test_expect.h"
#include "util/thread_pool.h"

namespace hg::test {
namespace {

// Host keys [n_kv_heads][n][head_dim] fp32 in one token block, and queries [n_heads][head_dim].
struct Inputs {
  int n_kv = 2, group = 1, hd = 8;
  int64_t n = 0;
  std::vector<float> keys, q;

  int n_heads() const { return n_kv * group; }
  KvLayout layout() const {
    KvLayout l;
    l.dtype = DType::F32;
    l.n_kv_heads = n_kv;
    l.head_dim = hd;
    l.block_tokens = static_cast<int>(std::max<int64_t>(n, 1));
    l.block_stride = keys.size() * sizeof(float);
    l.base = reinterpret_cast<const std::byte*>(keys.data());
    return l;
  }
  float key(int g, int64_t t, int d) const { return keys[(static_cast<size_t>(g) * n + t) * hd + d]; }
  float dot(int h, int64_t t, const std::vector<int>* dims = nullptr) const {
    const int g = h / group;
    float s = 0;
    if (dims)
      for (int d : *dims) s += q[static_cast<size_t>(h * hd + d)] * key(g, t, d);
    else
      for (int d = 0; d < hd; ++d) s += q[static_cast<size_t>(h * hd + d)] * key(g, t, d);
    return s;
  }
};

// Small integers so that dot products are exact and ties are real ties.
Inputs make_inputs(int group, int64_t n, uint32_t seed, bool with_ties) {
  Inputs in;
  in.group = group;
  in.n = n;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-3, 3);
  in.keys.resize(static_cast<size_t>(in.n_kv) * n * in.hd);
  for (auto& x : in.keys) x = static_cast<float>(v(rng));
  if (with_ties && n >= 6)
    for (int g = 0; g < in.n_kv; ++g)  // tokens 1, 3 and 5 share one key: equal scores
      for (int t : {3, 5})
        for (int d = 0; d < in.hd; ++d) in.keys[(static_cast<size_t>(g) * n + t) * in.hd + d] = in.key(g, 1, d);
  in.q.resize(static_cast<size_t>(in.n_heads()) * in.hd);
  for (auto& x : in.q) x = static_cast<float>(v(rng));
  return in;
}

// The K largest of scores, ties to the larger index, returned increasing.
std::vector<int32_t> reference_top_k(const std::vector<float>& scores, int K) {
  std::vector<int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return scores[static_cast<size_t>(a)] > scores[static_cast<size_t>(b)] ||
           (scores[static_cast<size_t>(a)] == scores[static_cast<size_t>(b)] && a > b);
  });
  order.resize(static_cast<size_t>(K));
  std::sort(order.begin(), order.end());
  return order;
}

struct Result {
  std::vector<int32_t> idx;
  std::vector<float> logits;
};

// The first n_tokens (default: every one) of the inputs on the host.
Result run(Selector& s, const Inputs& in, int K, int seq = 0, int layer = 0, int64_t n_tokens = -1) {
  SelectionRequest r;
  r.seq = seq;
  r.layer = layer;
  r.k = in.layout();
  r.q = in.q.data();
  r.n_heads = in.n_heads();
  r.scale = 0.5f;
  r.n_tokens = n_tokens < 0 ? in.n : n_tokens;
  r.K = K;
  Result out;
  out.idx.assign(static_cast<size_t>(in.n_kv) * K, -7);
  out.logits.assign(static_cast<size_t>(in.n_heads()) * K, NAN);
  SelectorScratch scratch;
  // kv-heads in two calls, as two host workers would
  s.select(r, 0, 1, {out.idx.data(), out.logits.data()}, scratch);
  s.select(r, 1, in.n_kv, {out.idx.data(), out.logits.data()}, scratch);
  return out;
}

// Logits of the selection equal 0.5 · q·k of the chosen tokens.
void expect_logits(const Inputs& in, const Result& r, int K) {
  for (int h = 0; h < in.n_heads(); ++h)
    for (int j = 0; j < K; ++j) {
      const int32_t t = r.idx[static_cast<size_t>((h / in.group) * K + j)];
      EXPECT_FLOAT_EQ(r.logits[static_cast<size_t>(h * K + j)], 0.5f * in.dot(h, t)) << "head " << h << " j " << j;
    }
}

// A model shape for the selectors: only the attention's dimensions matter.
ModelSpec attention_spec(int n_layers, int n_heads, int n_kv_heads, int head_dim) {
  ModelSpec spec;
  spec.n_layers = n_layers;
  spec.n_heads = n_heads;
  spec.n_kv_heads = n_kv_heads;
  spec.head_dim = head_dim;
  return spec;
}

class SelectorGroups : public ::testing::TestWithParam<int> {};

TEST_P(SelectorGroups, PostTopKEqualsReference) {
  const int group = GetParam();
  for (const int64_t n : {1, 6, 23}) {
    const Inputs in = make_inputs(group, n, 7u + static_cast<uint32_t>(group * 31 + n), true);
    for (int K : {0, 1, 3, static_cast<int>(n) - 1, static_cast<int>(n)}) {
      if (K < 0 || K > n) continue;
      PostTopKSelector sel;
      const Result r = run(sel, in, K);
      for (int g = 0; g < in.n_kv; ++g) {
        std::vector<float> score(static_cast<size_t>(n), -INFINITY);
        for (int h = g * group; h < (g + 1) * group; ++h)
          for (int64_t t = 0; t < n; ++t)
            score[static_cast<size_t>(t)] = std::max(score[static_cast<size_t>(t)], in.dot(h, t));
        const auto want = reference_top_k(score, K);
        EXPECT_EQ(std::vector<int32_t>(r.idx.begin() + g * K, r.idx.begin() + (g + 1) * K), want)
            << "group " << group << " n " << n << " K " << K << " kv-head " << g;
      }
      expect_logits(in, r, K);
    }
  }
}

TEST_P(SelectorGroups, RecentTakesTheLastTokens) {
  const Inputs in = make_inputs(GetParam(), 9, 3, false);
  for (int K : {0, 4, 9}) {
    RecentSelector sel;
    const Result r = run(sel, in, K);
    for (int g = 0; g < in.n_kv; ++g)
      for (int j = 0; j < K; ++j) EXPECT_EQ(r.idx[static_cast<size_t>(g * K + j)], 9 - K + j);
    expect_logits(in, r, K);
  }
}

// The partial predictor of --partial-dims `dims` for inputs of this shape (one layer).
PartialSelector make_partial(const Inputs& in, int dims) {
  const ModelSpec spec = attention_spec(1, in.n_heads(), in.n_kv, in.hd);
  Policy policy = policy_preset("hybrid");
  policy.partial_dims = dims;
  return PartialSelector(SelectorContext{spec, policy, static_cast<int>(std::max<int64_t>(in.n, 1)), 1});
}

// The scores of `dims` for the first n tokens, each token's best over the group's heads.
std::vector<float> reference_partial_scores(const Inputs& in, int g, int64_t n, const std::vector<int>& dims) {
  std::vector<float> score(static_cast<size_t>(n), -INFINITY);
  for (int h = g * in.group; h < (g + 1) * in.group; ++h)
    for (int64_t t = 0; t < n; ++t)
      score[static_cast<size_t>(t)] = std::max(score[static_cast<size_t>(t)], in.dot(h, t, &dims));
  return score;
}

TEST_P(SelectorGroups, PartialWithEveryDimensionIsPostTopK) {
  const Inputs in = make_inputs(GetParam(), 17, 11, true);
  for (int K : {0, 5, 17}) {
    PartialSelector partial = make_partial(in, in.hd);
    PostTopKSelector post;
    const Result a = run(partial, in, K), b = run(post, in, K);
    EXPECT_EQ(a.idx, b.idx) << "K " << K;
    expect_logits(in, a, K);
  }
}

TEST_P(SelectorGroups, PartialUsesTheDimensionsOfLargestGroupQuery) {
  const int group = GetParam();
  Inputs in = make_inputs(group, 12, 5, false);
  // query magnitude concentrated in dims 2 and 6 for every head
  for (int h = 0; h < in.n_heads(); ++h)
    for (int d = 0; d < in.hd; ++d)
      in.q[static_cast<size_t>(h * in.hd + d)] = (d == 2 ? 9.0f : d == 6 ? -8.0f : 0.25f * (d % 3));
  const std::vector<int> dims = {2, 6};
  PartialSelector sel = make_partial(in, 2);
  const int K = 4;
  const Result r = run(sel, in, K);
  for (int g = 0; g < in.n_kv; ++g)
    EXPECT_EQ(std::vector<int32_t>(r.idx.begin() + g * K, r.idx.begin() + (g + 1) * K),
              reference_top_k(reference_partial_scores(in, g, in.n, dims), K));
  expect_logits(in, r, K);
}

// The selector's key copy follows the host store: it grows over several tiles of tokens between
// steps (folding only the new ones), and a new request (reset, or a shorter store) starts over.
TEST_P(SelectorGroups, PartialFollowsAGrowingStoreAcrossTiles) {
  const int group = GetParam();
  Inputs all = make_inputs(group, 700, 23, false);
  for (int h = 0; h < all.n_heads(); ++h)  // dims 1 and 4 carry the group's query
    for (int d = 0; d < all.hd; ++d)
      all.q[static_cast<size_t>(h * all.hd + d)] = d == 1 ? 5.0f + h : d == 4 ? -6.0f : 0.5f * (d % 2);
  const std::vector<int> dims = {1, 4};
  PartialSelector sel = make_partial(all, 2);
  const int K = 9;
  auto check = [&](int64_t n, const Inputs& in, const char* what) {
    const Result r = run(sel, in, K, 0, 0, n);
    for (int g = 0; g < in.n_kv; ++g)
      EXPECT_EQ(std::vector<int32_t>(r.idx.begin() + g * K, r.idx.begin() + (g + 1) * K),
                reference_top_k(reference_partial_scores(in, g, n, dims), K))
          << what << ": n " << n << ", kv-head " << g;
    expect_logits(in, r, K);
  };
  for (const int64_t n : {10, 255, 256, 257, 600, 700}) check(n, all, "growing");
  // a new request on other keys: after reset, and when the store is shorter than the copy
  Inputs other = make_inputs(group, 700, 29, false);
  other.q = all.q;
  sel.reset(0);
  check(300, other, "after reset");
  check(650, other, "grown");
  check(100, all, "shorter store");
}

// q4's key copy and scan: head_dim 64 (two Q4_1 blocks). exact: keys of 0..15 with a 0 and a 15
// in every block (Q4_1 holds them exactly: scale 1, minimum 0) and queries of -1, 0, 1 (the
// scan's int8 query holds them exactly), so its scores are the reference's, ties included.
// Otherwise Gaussian keys with a few loud channels, as real keys have.
Inputs make_q4_inputs(int group, int64_t n, uint32_t seed, bool exact) {
  Inputs in;
  in.group = group;
  in.hd = 64;
  in.n = n;
  std::mt19937 rng(seed);
  in.keys.resize(static_cast<size_t>(in.n_kv) * n * in.hd);
  in.q.resize(static_cast<size_t>(in.n_heads()) * in.hd);
  if (exact) {
    std::uniform_int_distribution<int> code(0, 15), sign(-1, 1);
    for (size_t i = 0; i < in.keys.size(); ++i)
      in.keys[i] = i % 32 == 0 ? 0.0f : i % 32 == 1 ? 15.0f : static_cast<float>(code(rng));
    for (auto& x : in.q) x = static_cast<float>(sign(rng));
    return in;
  }
  std::normal_distribution<float> z(0.0f, 1.0f);
  for (size_t i = 0; i < in.keys.size(); ++i) in.keys[i] = z(rng) * (i % 64 < 4 ? 6.0f : 1.0f);
  for (auto& x : in.q) x = z(rng);
  return in;
}

QuantKeySelector make_q4(const Inputs& in) {
  const ModelSpec spec = attention_spec(1, in.n_heads(), in.n_kv, in.hd);
  return QuantKeySelector(SelectorContext{spec, policy_preset("hybrid"), static_cast<int>(std::max<int64_t>(in.n, 1)), 1});
}

std::vector<float> reference_scores(const Inputs& in, int g, int64_t n) {
  std::vector<float> score(static_cast<size_t>(n), -INFINITY);
  for (int h = g * in.group; h < (g + 1) * in.group; ++h)
    for (int64_t t = 0; t < n; ++t) score[static_cast<size_t>(t)] = std::max(score[static_cast<size_t>(t)], in.dot(h, t));
  return score;
}

TEST_P(SelectorGroups, Q4RanksExactlyWhereItsCopyIsExact) {
  const Inputs in = make_q4_inputs(GetParam(), 300, 41, true);
  QuantKeySelector sel = make_q4(in);
  for (int K : {0, 1, 37, 300}) {
    const Result r = run(sel, in, K);
    for (int g = 0; g < in.n_kv; ++g)
      EXPECT_EQ(std::vector<int32_t>(r.idx.begin() + g * K, r.idx.begin() + (g + 1) * K),
                reference_top_k(reference_scores(in, g, in.n), K))
          << "K " << K << " kv-head " << g;
    expect_logits(in, r, K);  // the chosen tokens' logits are the cache's, exact
  }
}

// On keys it rounds, it finds most of Post-QKᵀ's top-K (the scheduler's recall rule measures this
// in a run); `partial` with 16 of 64 dimensions finds fewer on the same keys.
TEST_P(SelectorGroups, Q4FindsMostOfPostsTopK) {
  const Inputs in = make_q4_inputs(GetParam(), 2000, 43, false);
  QuantKeySelector q4 = make_q4(in);
  PostTopKSelector post;
  PartialSelector partial = make_partial(in, 16);
  const int K = 100;
  const Result a = run(q4, in, K), b = run(post, in, K), c = run(partial, in, K);
  auto recall = [&](const Result& x) {
    int64_t hits = 0;
    for (int g = 0; g < in.n_kv; ++g) {
      const auto* p = b.idx.data() + g * K;
      for (int j = 0; j < K; ++j) hits += std::binary_search(p, p + K, x.idx[static_cast<size_t>(g * K + j)]);
    }
    return static_cast<double>(hits) / (in.n_kv * K);
  };
  EXPECT_GE(recall(a), 0.85);
  EXPECT_GT(recall(a), recall(c));
  for (int h = 0; h < in.n_heads(); ++h)  // the chosen tokens' logits come from the cache (fp32 here)
    for (int j = 0; j < K; ++j) {
      const int32_t t = a.idx[static_cast<size_t>((h / in.group) * K + j)];
      EXPECT_NEAR(a.logits[static_cast<size_t>(h * K + j)], 0.5f * in.dot(h, t), 1e-4f) << "head " << h;
    }
}

// The copy follows the host store: it grows between steps (folding only the new tokens) and a new
// request (reset, or a shorter store) starts over; each answer equals a fresh selector's.
TEST_P(SelectorGroups, Q4FollowsAGrowingStore) {
  const Inputs all = make_q4_inputs(GetParam(), 700, 47, false);
  Inputs other = make_q4_inputs(GetParam(), 700, 53, false);
  other.q = all.q;
  QuantKeySelector sel = make_q4(all);
  const int K = 9;
  auto check = [&](int64_t n, const Inputs& in, const char* what) {
    QuantKeySelector fresh = make_q4(in);
    EXPECT_EQ(run(sel, in, K, 0, 0, n).idx, run(fresh, in, K, 0, 0, n).idx) << what << ": n " << n;
  };
  for (const int64_t n : {10, 33, 256, 600, 700}) check(n, all, "growing");
  sel.reset(0);
  check(300, other, "after reset");
  check(650, other, "grown");
  check(100, all, "shorter store");
}

TEST(Selectors, Q4NeedsWholeBlocksOfHeadDim) {
  const ModelSpec spec = attention_spec(1, 4, 2, 48);
  test::expect_error([&] { QuantKeySelector(SelectorContext{spec, policy_preset("hybrid"), 16, 1}); },
                     {"--predictor q4", "head_dim 48", "multiple of 32"});
}

INSTANTIATE_TEST_SUITE_P(Heads, SelectorGroups, ::testing::Values(1, 2, 3, 4, 8));

// Quest's rule written out independently: pages of 16 host tokens; a page's bound per head is
// Σ_d max(q_d·min_d, q_d·max_d) over its keys, the largest over the kv-head's query heads; whole
// pages by bound (ties to the newer page) until the budget, the last page cut to its newest tokens.
std::vector<int32_t> reference_quest(const Inputs& in, int g, int K) {
  const int64_t pages = (in.n + 15) / 16;
  std::vector<float> bound(static_cast<size_t>(pages), -INFINITY);
  for (int64_t p = 0; p < pages; ++p)
    for (int h = g * in.group; h < (g + 1) * in.group; ++h) {
      float head_bound = 0;
      for (int d = 0; d < in.hd; ++d) {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t t = p * 16; t < std::min<int64_t>(in.n, p * 16 + 16); ++t) {
          lo = std::min(lo, in.key(g, t, d));
          hi = std::max(hi, in.key(g, t, d));
        }
        const float qd = in.q[static_cast<size_t>(h * in.hd + d)];
        head_bound += std::max(qd * lo, qd * hi);
      }
      bound[static_cast<size_t>(p)] = std::max(bound[static_cast<size_t>(p)], head_bound);
    }
  std::vector<int32_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bound[static_cast<size_t>(a)] > bound[static_cast<size_t>(b)] ||
           (bound[static_cast<size_t>(a)] == bound[static_cast<size_t>(b)] && a > b);
  });
  std::vector<int32_t> idx;
  for (int32_t p : order) {
    const int64_t end = std::min<int64_t>(in.n, p * 16 + 16);
    for (int64_t t = std::max<int64_t>(p * 16, end - (K - static_cast<int64_t>(idx.size()))); t < end; ++t)
      idx.push_back(static_cast<int32_t>(t));
    if (static_cast<int>(idx.size()) == K) break;
  }
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST_P(SelectorGroups, QuestPicksThePagesOfLargestLogitBound) {
  const ModelSpec spec = attention_spec(4, 2 * GetParam(), 2, 8);
  const Policy policy = policy_preset("quest");
  const SelectorContext c{spec, policy, 256, 1};
  auto quest = make_selector(Selection::Pre, "quest", c);
  EXPECT_EQ(quest->ships(), Shipment::KeyValue);
  SelectorScratch scratch;
  const Inputs all = make_inputs(GetParam(), 135, 11, false);
  for (const int64_t n : {20, 100, 135}) {  // the host store grows; the last page is partial
    Inputs in = all;  // the first n tokens of `all`
    in.n = n;
    in.keys.clear();
    for (int g = 0; g < in.n_kv; ++g)
      for (int64_t t = 0; t < n; ++t)
        for (int d = 0; d < in.hd; ++d) in.keys.push_back(all.key(g, t, d));
    SelectionRequest r;
    r.layer = 2;
    r.k = in.layout();
    r.q = in.q.data();
    r.n_heads = in.n_heads();
    r.n_tokens = n;
    // the budget in whole pages, at least one; layers 0 and 1 take every host token
    r.K = 40;
    EXPECT_EQ(quest->choose_k(r, scratch), std::min<int64_t>(n, 32)) << n;
    r.K = 3;
    EXPECT_EQ(quest->choose_k(r, scratch), 16) << n;
    r.layer = 1;
    EXPECT_EQ(quest->choose_k(r, scratch), n);
    r.layer = 2;
    for (const int K : {16, 48}) {
      if (K > n) continue;
      const Result got = run(*quest, in, K, 0, 2);
      for (int g = 0; g < in.n_kv; ++g) {
        const std::vector<int32_t> want = reference_quest(in, g, K);
        EXPECT_EQ(std::vector<int32_t>(got.idx.begin() + g * K, got.idx.begin() + (g + 1) * K), want)
            << "kv-head " << g << ", n " << n << ", K " << K;
      }
      expect_logits(in, got, K);  // an observer asked for the logits
    }
    // The bound is an upper bound: no token's q·k exceeds its page's bound (per head).
    for (int h = 0; h < in.n_heads(); ++h)
      for (int64_t t = 0; t < n; ++t) {
        float bound = 0;
        for (int d = 0; d < in.hd; ++d) {
          float lo = INFINITY, hi = -INFINITY;
          for (int64_t u = t / 16 * 16; u < std::min<int64_t>(n, t / 16 * 16 + 16); ++u) {
            lo = std::min(lo, in.key(h / in.group, u, d));
            hi = std::max(hi, in.key(h / in.group, u, d));
          }
          const float qd = in.q[static_cast<size_t>(h * in.hd + d)];
          bound += std::max(qd * lo, qd * hi);
        }
        EXPECT_LE(in.dot(h, t), bound + 1e-4f);
      }
  }
}

TEST(H2oPredictor, AccumulatesObservedProbabilitiesPerKvHead) {
  const ModelSpec spec = attention_spec(2, 4, 2, 8);
  Policy policy = policy_preset("hybrid");
  const SelectorContext c{spec, policy, 16, 2};
  H2oPredictor h2o(c);
  std::vector<float> ref(static_cast<size_t>(2) * 16, 0.0f);  // seq 1, layer 1: [kv-head][ctx]

  // Prefill put 5 tokens on the host: they start at 1 (no score yet).
  h2o.on_host_append(1, 0, 5);
  for (int g = 0; g < 2; ++g)
    for (int t = 0; t < 5; ++t) ref[static_cast<size_t>(g * 16 + t)] = 1.0f;
  // Two steps observing 2 tokens per kv-head; heads 0,1 belong to kv-head 0, heads 2,3 to 1.
  const std::vector<std::vector<int32_t>> tokens = {{0, 3, 1, 4}, {2, 3, 0, 1}};
  const std::vector<std::vector<float>> probs = {{0.5f, 0.25f, 0.125f, 0.75f, 0.25f, 0.5f, 0.5f, 0.5f},
                                                 {0.375f, 0.125f, 0.5f, 0.25f, 0.0f, 0.75f, 1.0f, 0.0f}};
  for (size_t step = 0; step < 2; ++step) {
    ObservedAttention o;
    o.seq = 1;
    o.layer = 1;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.count = 2;
    o.tokens = tokens[step].data();
    o.p = probs[step].data();
    h2o.observe(o, 0, 1);
    h2o.observe(o, 1, 2);
    for (int h = 0; h < 4; ++h)
      for (int j = 0; j < 2; ++j) {
        const int g = h / 2;
        ref[static_cast<size_t>(g * 16 + tokens[step][static_cast<size_t>(g * 2 + j)])] +=
            probs[step][static_cast<size_t>(h * 2 + j)];
      }
  }
  for (int g = 0; g < 2; ++g)
    for (int t = 0; t < 5; ++t)
      EXPECT_FLOAT_EQ(h2o.score(1, 1, g, t), ref[static_cast<size_t>(g * 16 + t)]) << g << " " << t;
  // Other (sequence, layer) pairs are untouched by observations.
  EXPECT_FLOAT_EQ(h2o.score(1, 0, 0, 0), 1.0f);
  EXPECT_FLOAT_EQ(h2o.score(0, 1, 0, 0), 0.0f);

  // Tokens evicted now start at the kv-head's best score so far.
  h2o.on_host_append(1, 5, 7);
  for (int g = 0; g < 2; ++g) {
    const float best = *std::max_element(ref.begin() + g * 16, ref.begin() + g * 16 + 5);
    EXPECT_FLOAT_EQ(h2o.score(1, 1, g, 5), best);
    EXPECT_FLOAT_EQ(h2o.score(1, 1, g, 6), best);
    ref[static_cast<size_t>(g * 16 + 5)] = ref[static_cast<size_t>(g * 16 + 6)] = best;
  }

  // select: the top-K accumulated scores per kv-head
  Inputs in = make_inputs(2, 7, 13, false);
  const int K = 3;
  const Result r = run(h2o, in, K, 1, 1);
  for (int g = 0; g < 2; ++g) {
    const std::vector<float> score(ref.begin() + g * 16, ref.begin() + g * 16 + 7);
    EXPECT_EQ(std::vector<int32_t>(r.idx.begin() + g * K, r.idx.begin() + (g + 1) * K), reference_top_k(score, K));
  }
  expect_logits(in, r, K);

  h2o.reset(1);
  EXPECT_FLOAT_EQ(h2o.score(1, 1, 0, 0), 0.0f);
  EXPECT_FLOAT_EQ(h2o.score(1, 0, 1, 4), 0.0f);
}

// When the scheduler may switch to Pre-QKᵀ, the policy's predictor is set up with the selection
// and observes the Post-QKᵀ steps before the switch: the h2o predictor's first Pre selection is the
// tokens those steps attended, not (all scores still equal) the newest ones.
TEST(HostSelection, ASwitchingPoliciesPredictorObservesThePostSteps) {
  const ModelSpec spec = attention_spec(1, 2, 1, 8);
  const int n = 32, K = 2;
  const mem::Topology topology = mem::Topology::discover();
  HostStore host(spec, DType::F32, n, topology, mem::resolve_placement(topology, {}));
  host.append_tokens(n);
  for (int t = 0; t < n; ++t)  // keys along dimension 0: tokens 3 and 7 stand out for q = e0
    for (int d = 0; d < spec.head_dim; ++d)
      static_cast<float*>(host.k_row(0, 0, t))[d] = d == 0 ? (t == 3 || t == 7 ? 4.0f : 0.1f) : 0.0f;
  ThreadPool pool(1);
  auto first_pre_selection = [&](SchedMode sched) {
    Policy policy = policy_preset("hybrid");
    policy.sched = sched;
    policy.predictor = "h2o";
    policy.K = K;
    HostSelection selection(SelectorContext{spec, policy, n, 1}, 1);
    selection.on_host_append(0, 0, n);
    HostResult r;
    r.q.assign(static_cast<size_t>(spec.n_heads * spec.head_dim), 0.0f);
    r.q[0] = r.q[static_cast<size_t>(spec.head_dim)] = 1.0f;
    const StepPlan post{K, Selection::Post, "h2o"}, pre{K, Selection::Pre, "h2o"};
    for (int step = 0; step < 3; ++step) {
      selection.select(pool, 0, 0, post, host, r);
      EXPECT_EQ(r.idx, (std::vector<int32_t>{3, 7}));
    }
    selection.prepare(std::span(&pre, 1));  // as the engine does at the switch
    selection.select(pool, 0, 0, pre, host, r);
    return r.idx;
  };
  EXPECT_EQ(first_pre_selection(SchedMode::Adaptive), (std::vector<int32_t>{3, 7}));
  EXPECT_EQ(first_pre_selection(SchedMode::AdaptiveSelect), (std::vector<int32_t>{3, 7}));
  // With a fixed plan nothing switches on its own; a predictor a plan names later starts then.
  EXPECT_EQ(first_pre_selection(SchedMode::Fixed), (std::vector<int32_t>{30, 31}));
}

// The K largest by (score, then the more recent index), in increasing index order, against a
// sort of the whole row; scores drawn from few values so that ties cross the threshold, with
// both signed zeros and negatives, and a normal bulk (the radix selection's buckets then hold
// most of the row).
TEST(TopK, MatchesAFullSortWithTiesToTheRecent) {
  std::mt19937 rng(7);
  const float values[] = {-2.5f, -0.0f, 0.0f, 1.0f, 3.0f, -1e-30f};
  std::vector<int32_t> order, got, want;
  for (int64_t n : {1, 2, 7, 64, 1000, 3072, 4095}) {
    std::vector<float> scores(static_cast<size_t>(n));
    for (int K : {0, 1, 3, static_cast<int>(n) / 2, static_cast<int>(n) - 1, static_cast<int>(n)}) {
      if (K < 0 || K > n) continue;
      // many ties (six values), then spread values over the whole float range with infinities
      std::normal_distribution<float> wide(0.0f, 1e3f);
      for (auto& x : scores) x = values[rng() % 6];
      if (n % 2 == 0)
        for (auto& x : scores)
          x = rng() % 50 == 0 ? -INFINITY : rng() % 50 == 0 ? 3e38f : wide(rng) * 1e-30f * (rng() % 2 ? 1 : 1e33f);
      // logits as a decode step has them: a normal bulk whose keys share their high bytes
      std::normal_distribution<float> bulk(0.0f, 2.0f);
      if (n % 3 == 0)
        for (auto& x : scores) x = bulk(rng);
      std::vector<int32_t> all(static_cast<size_t>(n));
      std::iota(all.begin(), all.end(), 0);
      std::sort(all.begin(), all.end(), [&](int32_t a, int32_t b) {
        return scores[static_cast<size_t>(a)] > scores[static_cast<size_t>(b)] ||
               (scores[static_cast<size_t>(a)] == scores[static_cast<size_t>(b)] && a > b);
      });
      want.assign(all.begin(), all.begin() + K);
      std::sort(want.begin(), want.end());
      got.assign(static_cast<size_t>(K), -1);
      top_k_indices(scores.data(), n, K, got.data(), order);
      EXPECT_EQ(got, want) << "n " << n << " K " << K;
    }
  }
}

}  // namespace
}  // namespace hg::test
