// The correctness anchor (docs/architecture.md, "The decode step of a hybrid policy"): with query
// `exact` and K = all host tokens, every policy that keeps all tokens gives the logits of `full`
// attention, for prompts several times longer than the window and many decode steps, batch 1 and
// a batch of different lengths. `offload` (every token streamed from the host) is exact by
// construction. So are the pruning and fetching
// presets with budgets that cover the whole context (h2o and keyformer with --heavy >= context,
// infinigen with --max-kv >= context and a huge --alpha, quest with --k >= context). The token
// map keeps every position in exactly one place throughout; every decode step's timing record is there, offload moves
// 2·N·kv_dim floats per layer and sequence, and infinigen and quest fetch the K and V rows of
// every host token (2·n_host·kv_dim floats): the device, not the host, computes their logits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attention/inspect.h"
#include "attention/layer_attention.h"
#include "hybridgen/engine.h"
#include "hybridgen/model.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

constexpr int kCtx = 160;

Policy exact_policy(const std::string& preset, MergeMode merge) {
  Policy p = policy_preset(preset);
  if (preset == "offload") return p;  // no knobs: every token takes part
  if (preset != "cpu-attn") {
    p.window = 16;
    p.n_sinks = preset == "h2o" || preset == "keyformer" ? 0 : 2;
    p.evict_block = 4;
  }
  p.host_threads = 2;
  if (preset == "h2o" || preset == "keyformer") {  // nothing is ever dropped
    p.heavy_hitters.heavy = kCtx;
    return p;
  }
  if (preset == "infinigen") {  // every host token is fetched (selected with the speculative query)
    p.infinigen.max_kv = kCtx;
    p.infinigen.alpha = 1e9f;
    return p;
  }
  if (preset == "quest") {  // a page budget that covers every host token: all fetched
    p.K = kCtx;
    return p;
  }
  p.K = -1;
  p.select = Selection::All;
  p.query = QuerySource::Exact;
  p.merge = merge;
  return p;
}

struct Case {
  std::string variant;
  std::string preset;
  MergeMode merge;
  DType kv = DType::F32;  // the cache; bf16 is what a user gets by default
};

std::string case_name(const Case& c) {
  std::string n = c.variant + "_" + c.preset;
  if (c.preset != "offload") n += c.merge == MergeMode::Lse ? "_lse" : "_logits";
  if (c.kv == DType::BF16) n += "_kv_bf16";
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

class HybridExactness : public ::testing::TestWithParam<Case> {};

// What proves the equality below is the split's and not full attention's: the policies that keep
// evicted tokens scored every host token with the host stage (all of them take part: K -1, or a
// budget that covers them), at every layer; h2o and keyformer (nothing dropped with --heavy >=
// context) hold what left the window as heavy hitters on the device.
void expect_the_split_took_part(Engine& engine, const Policy& policy, size_t n_seqs) {
  if (!policy.splits_kv()) return;
  if (policy.keep_evicted) {
    for (const LayerStats& l : engine.layer_stats()) {
      EXPECT_GT(l.host_tokens, 0);
      EXPECT_EQ(l.selected, l.host_tokens) << "every host token takes part in these exact settings";
    }
    return;
  }
  const HybridKv& kv = split_kv(engine);
  for (size_t s = 0; s < n_seqs; ++s) {
    int heavy = 0, elsewhere = 0;
    for (int pos = 0; pos < engine.position(static_cast<int>(s)); ++pos) {
      const TokenPlace place = kv.location(static_cast<int>(s), pos).place;
      heavy += place == TokenPlace::Heavy;
      elsewhere += place == TokenPlace::Host || place == TokenPlace::Dropped;
    }
    EXPECT_GT(heavy, 0) << "sequence " << s << ": the pruner kept no heavy hitter";
    EXPECT_EQ(elsewhere, 0) << "sequence " << s << ": a token left the device";
  }
}

// Runs prompts of the given lengths through prefill, then `steps` batched decode steps, and
// returns every decode step's logits [steps][batch][vocab].
std::vector<float> run_policy(const Model& model, const Policy& policy, const std::vector<std::vector<int32_t>>& seqs,
                              const std::vector<int>& prompt_len, int steps, bool check_map, DType kv) {
  EngineOptions o;
  o.threads = 2;
  o.kv_dtype = kv;
  o.ctx = kCtx;
  o.batch = static_cast<int>(seqs.size());
  o.ubatch = 24;  // prefill chunks smaller than the prompt, larger than the window
  o.policy = policy;
  Engine engine(model, o);
  // The split really runs: a split stage, not the `full` the engine falls back to when the window
  // covers the context (that fallback is ShortContextHybrid's).
  if (policy.splits_kv()) {
    EXPECT_NE(engine.attention().split_kv(), nullptr) << engine.describe_attention();
  }
  const int vocab = engine.vocab_size();
  std::vector<float> last(static_cast<size_t>(vocab));
  for (size_t s = 0; s < seqs.size(); ++s)
    engine.prefill(static_cast<int>(s), std::span(seqs[s].data(), static_cast<size_t>(prompt_len[s])), last.data());
  std::vector<int> ids(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) ids[s] = static_cast<int>(s);
  std::vector<float> out, step(seqs.size() * static_cast<size_t>(vocab));
  for (int t = 0; t < steps; ++t) {
    std::vector<int32_t> toks;
    int64_t past = 0;  // tokens the batch held before this step
    for (size_t s = 0; s < seqs.size(); ++s) {
      toks.push_back(seqs[s][static_cast<size_t>(prompt_len[s] + t)]);
      past += engine.position(static_cast<int>(s));
    }
    engine.decode(ids, toks, step.data());
    out.insert(out.end(), step.begin(), step.end());
    int64_t host = 0;  // host tokens of the batch in this step
    for (size_t s = 0; s < seqs.size(); ++s) host += engine.attention().host_tokens(static_cast<int>(s));
    if (policy.kv != KvHome::Device) {
      const StepTiming* timing = engine.last_step_timing();
      EXPECT_NE(timing, nullptr);
      if (!timing) continue;
      EXPECT_EQ(timing->step, t);
      EXPECT_EQ(timing->layers.size(), static_cast<size_t>(model.spec.n_layers));
      for (const auto& l : timing->layers) {
        EXPECT_GE(l.t_dev, 0.0);
        EXPECT_GE(l.t_tx, 0.0);
        if (policy.kv == KvHome::Host) {
          EXPECT_EQ(l.bytes_h2d, 2 * past * static_cast<int64_t>(dtype_row_bytes(kv, model.spec.kv_dim())));
        }
        if (policy.name == "infinigen" || policy.name == "quest") {
          EXPECT_EQ(l.bytes_h2d, 2 * host * model.spec.kv_dim() * 4);
        } else if (policy.splits_kv() && policy.keep_evicted) {
          EXPECT_GT(l.bytes_h2d, 0) << "the host shipped nothing";  // logits + V rows, or partial + LSE
        }
      }
    }
    // Every prompt outgrows window + sinks from the first step on: the host holds tokens of the
    // policies that keep what the window evicts (the dropping ones keep it on the device instead).
    if (policy.splits_kv() && policy.keep_evicted) {
      EXPECT_GT(host, 0) << "step " << t << ": no host token";
    }
    if (check_map && policy.splits_kv()) {
      auto& kv = split_kv(engine);
      for (size_t s = 0; s < seqs.size(); ++s) kv.check_invariants(static_cast<int>(s));
    }
  }
  expect_the_split_took_part(engine, policy, seqs.size());
  return out;
}

TEST_P(HybridExactness, EqualsFullAttention) {
  const Case& c = GetParam();
  auto model = load_model(tiny_model(c.variant).string());
  const Policy policy = exact_policy(c.preset, c.merge);
  const int steps = 64;
  for (const std::vector<int>& lengths : {std::vector<int>{70}, std::vector<int>{5, 53, 31}}) {
    std::vector<std::vector<int32_t>> seqs;
    for (size_t s = 0; s < lengths.size(); ++s)
      seqs.push_back(random_ids(lengths[s] + steps, 100u + static_cast<uint32_t>(s)));
    const auto ref = run_policy(*model, Policy{}, seqs, lengths, steps, false, c.kv);
    const auto got = run_policy(*model, policy, seqs, lengths, steps, true, c.kv);
    ASSERT_EQ(ref.size(), got.size());
    double max_diff = 0.0;
    for (size_t i = 0; i < ref.size(); ++i)
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(ref[i] - got[i])));
    // With an f32 cache every path reads the same K and V and the same weights: they differ only
    // in the order of fp32 sums, |Δ| <= n·2^-24·Σ|terms|, ~1e-5 of these logits: bound 1e-4.
    // With the default bf16 cache (and a bf16 checkpoint's bf16 prefill GEMMs, the same in both)
    // a K or V element is rounded to 8 significant bits where one path keeps more of it than the
    // other, a relative 2^-9 at most; a score moves by 2^-9 of Σ|q_i·k_i|·scale, and the logits
    // by a few times that relative to their scale: bound 2^-8 of the largest logit (0.027 here;
    // measured 0.0002-0.0016). A host path that lost tokens moves them by their own scale.
    double max_ref = 0.0;
    for (float x : ref) max_ref = std::max(max_ref, static_cast<double>(std::fabs(x)));
    const double bound = c.kv == DType::BF16 ? std::ldexp(max_ref, -8) : 1e-4;
    EXPECT_LE(max_diff, bound) << "batch of " << lengths.size();
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(Tiny, HybridExactness,
                         ::testing::Values(Case{"llama-gqa", "hybrid", MergeMode::Logits},
                                           Case{"llama-gqa", "hybrid", MergeMode::Lse},
                                           Case{"llama-gqa", "cpu-attn", MergeMode::Lse},
                                           Case{"llama-gqa", "cpu-attn", MergeMode::Logits},
                                           Case{"qwen2", "hybrid", MergeMode::Logits},
                                           Case{"qwen2", "hgca", MergeMode::Lse},
                                           Case{"opt", "hybrid", MergeMode::Logits},
                                           Case{"opt-postln", "hybrid", MergeMode::Lse},
                                           Case{"llama3-rope", "hybrid", MergeMode::Logits},
                                           Case{"llama-gqa", "h2o", MergeMode::Logits},
                                           Case{"qwen2", "h2o", MergeMode::Logits},
                                           Case{"opt", "h2o", MergeMode::Logits},
                                           Case{"opt-postln", "keyformer", MergeMode::Logits},
                                           Case{"llama3-rope", "keyformer", MergeMode::Logits},
                                           Case{"llama-gqa", "keyformer", MergeMode::Logits},
                                           Case{"llama-gqa", "infinigen", MergeMode::Logits},
                                           Case{"llama-gqa", "quest", MergeMode::Logits},
                                           Case{"qwen2", "quest", MergeMode::Logits},
                                           Case{"qwen2-untied", "infinigen", MergeMode::Logits},
                                           Case{"opt", "infinigen", MergeMode::Logits},
                                           Case{"opt-postln", "infinigen", MergeMode::Logits},
                                           Case{"llama3-rope", "infinigen", MergeMode::Logits},
                                           Case{"llama-gqa", "offload", MergeMode::Logits},
                                           Case{"qwen2", "offload", MergeMode::Logits},
                                           Case{"opt", "offload", MergeMode::Logits},
                                           Case{"opt-postln", "offload", MergeMode::Logits},
                                           Case{"llama3-rope", "offload", MergeMode::Logits},
                                           // the default arithmetic: a bf16 cache, and a bf16 checkpoint's bf16 GEMMs
                                           Case{"llama-gqa", "hybrid", MergeMode::Logits, DType::BF16},
                                           Case{"llama-gqa-bf16", "hybrid", MergeMode::Logits, DType::BF16},
                                           Case{"llama-gqa-bf16", "hybrid", MergeMode::Lse, DType::BF16},
                                           Case{"llama-gqa-bf16", "cpu-attn", MergeMode::Lse, DType::BF16},
                                           Case{"llama-gqa-bf16", "h2o", MergeMode::Logits, DType::BF16},
                                           Case{"llama-gqa-bf16", "infinigen", MergeMode::Logits, DType::BF16},
                                           Case{"llama-gqa-bf16", "quest", MergeMode::Logits, DType::BF16},
                                           Case{"llama-gqa-bf16", "offload", MergeMode::Logits, DType::BF16}),
                         [](const auto& info) { return case_name(info.param); });
// clang-format on

}  // namespace
}  // namespace hg::test
