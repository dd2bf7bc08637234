// Evaluation library (src/eval): perplexity windows, fidelity against a reference engine or
// against precomputed reference logits, and the passkey generator's determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "eval/logit_metrics.h"
#include "eval/passkey.h"
#include "eval/perplexity.h"
#include "eval/shared_prefill.h"
#include "hybridgen/engine.h"
#include "hybridgen/tokenizer.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg::eval {
namespace {

TEST(EvalWindows, SplitsIntoFullWindowsAndAScorablePartialOne) {
  auto w = split_windows(10, 4, 0);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[2].begin, 8u);
  EXPECT_EQ(w[2].end, 10u);
  EXPECT_EQ(split_windows(9, 4, 0).size(), 2u);  // a final window of 1 token scores nothing
  EXPECT_EQ(split_windows(100, 4, 3).size(), 3u);
  EXPECT_EQ(total_positions(w), 10);
  test::expect_error([] { split_windows(1, 4, 0); }, {"at least 2 tokens"});
  test::expect_error([] { split_windows(10, 1, 0); }, {"at least 2"});
}

TEST(EvalWindows, TailScoresTheLastPredictionsOfWholeWindows) {
  const auto w = split_windows(25, 8, 0, false, 3);
  ASSERT_EQ(w.size(), 3u);  // the last 1 token does not make a whole window
  for (const auto& x : w) {
    EXPECT_EQ(x.end - x.begin, 8u);
    EXPECT_EQ(x.skip, 4u);  // predictions 4, 5, 6 of 0..6 scored: the last 3
  }
  test::expect_error([] { split_windows(25, 8, 0, false, 7); }, {"--tail 7", "ctx - 2 = 6"});
  test::expect_error([] { split_windows(25, 8, 0, true, 3); }, {"--tail and --score-second-half"});
  test::expect_error([] { split_windows(5, 8, 0, false, 3); }, {"at least 8 tokens"});
}

TEST(EvalMetrics, LogProbAndKl) {
  const float a[3] = {1.0f, 2.0f, 3.0f}, b[3] = {3.0f, 2.0f, 1.0f};
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(log_prob(a, 3, 2), 3.0 - std::log(z), 1e-12);
  EXPECT_NEAR(kl_divergence(a, a, 3), 0.0, 1e-12);
  EXPECT_GT(kl_divergence(a, b, 3), 0.5);
  EXPECT_EQ(argmax(a, 3), 2);
  EXPECT_EQ(argmax(b, 3), 0);
}

struct Engines {
  std::unique_ptr<Model> model;
  std::unique_ptr<Engine> policy, ref;
};

Engines make_engines(const Policy& p, int ctx) {
  Engines e;
  e.model = load_model(test::tiny_model("llama-gqa").string());
  EngineOptions o;
  o.threads = 1;
  o.ctx = ctx;
  o.kv_dtype = DType::F32;
  EngineOptions ro = o;
  o.policy = p;
  e.policy = std::make_unique<Engine>(*e.model, o);
  e.ref = std::make_unique<Engine>(*e.model, ro);
  return e;
}

TEST(EvalFidelity, PrecomputedReferenceMatchesAReferenceEngineSteppedAlongside) {
  const std::vector<int32_t> ids = test::random_ids(150, 7);
  const auto windows = split_windows(ids.size(), 64, 0);
  Policy p = policy_preset("hybrid");
  p.window = 16;
  p.K = 4;
  p.sched = SchedMode::Fixed;  // two runs must select alike: no K tuned by timing
  p.query = QuerySource::Exact;
  Engines e = make_engines(p, 64);
  const PerplexityResult stepped = score_decode(*e.policy, e.ref.get(), ids, windows);
  const PerplexityResult pre = score_decode(*e.policy, reference_logits(*e.ref, ids, windows), ids, windows);
  EXPECT_EQ(stepped.scored, 150 - 3);  // three windows, each scores all but its first token
  EXPECT_EQ(pre.scored, stepped.scored);
  EXPECT_DOUBLE_EQ(pre.nll_sum, stepped.nll_sum);  // the policy's own run is the same
  EXPECT_NEAR(pre.ref_nll_sum, stepped.ref_nll_sum, 1e-3 * std::abs(stepped.ref_nll_sum));
  EXPECT_NEAR(pre.kl_sum, stepped.kl_sum, 1e-3 + 1e-2 * stepped.kl_sum);
  EXPECT_NEAR(static_cast<double>(pre.agree), static_cast<double>(stepped.agree), 2.0);
  // A K of 4 out of up to 44 host tokens loses something: the comparison is not vacuous.
  EXPECT_GT(stepped.kl_sum, 0.0);
  EXPECT_LT(stepped.agree, stepped.scored);
  const auto j = stepped.to_json();
  EXPECT_NEAR(j["ppl"].get<double>(), std::exp(stepped.nll_sum / 147.0), 1e-9);
  EXPECT_TRUE(j.contains("top1_agreement") && j.contains("kl_mean") && j.contains("ref_ppl"));

  // Full attention against itself: identical rows.
  Engines f = make_engines(Policy{}, 64);
  const PerplexityResult same = score_decode(*f.policy, f.ref.get(), ids, windows);
  EXPECT_EQ(same.agree, same.scored);
  EXPECT_NEAR(same.kl_sum, 0.0, 1e-9);
  // Prefill scoring of full attention gives the decode path's perplexity.
  const PerplexityResult prefill = score_prefill(*f.policy, ids, windows);
  EXPECT_NEAR(prefill.ppl(), same.ppl(), 1e-3 * same.ppl());
  test::expect_error([&] { score_decode(*f.policy, ReferenceLogits{}, ids, windows); }, {"reference logits"});
}

// --tail: the context prefilled once for the policy and the reference where both prefill exactly
// (one prefill, one load per window), the tail token by token; the reference's scores equal full
// attention's token-by-token scores of the same positions, within the prefill-vs-decode rounding.
TEST(EvalFidelity, TailSharesOnePrefillAndScoresWhatItsOwnPrefillScores) {
  const std::vector<int32_t> ids = test::random_ids(130, 11);
  const auto windows = split_windows(ids.size(), 64, 0, false, 12);
  ASSERT_EQ(windows.size(), 2u);
  Policy p = policy_preset("hybrid");
  p.window = 16;
  p.K = 4;
  p.sched = SchedMode::Fixed;
  p.query = QuerySource::Exact;
  Engines e = make_engines(p, 64);
  SharedPrefillStats stats;
  const PerplexityResult tail = score_tail(*e.policy, e.ref.get(), ids, windows, {}, &stats);
  EXPECT_EQ(tail.scored, 2 * 12);
  EXPECT_EQ(stats.prefills, 2);  // one per window: the reference's, which the policy loads
  EXPECT_EQ(stats.loads, 2);
  // The reference's side is full attention over the same positions the decode path scores.
  Engines f = make_engines(Policy{}, 64);
  const PerplexityResult full_decode = score_decode(*f.policy, nullptr, ids, windows);
  EXPECT_EQ(full_decode.scored, tail.scored);
  EXPECT_NEAR(tail.ref_nll_sum, full_decode.nll_sum, 1e-3 * std::abs(full_decode.nll_sum));
  // full against full: every top-1 equal, no divergence
  SharedPrefillStats same_stats;
  const PerplexityResult same = score_tail(*f.policy, f.ref.get(), ids, windows, {}, &same_stats);
  EXPECT_EQ(same.agree, same.scored);
  EXPECT_NEAR(same.kl_sum, 0.0, 1e-6);
  EXPECT_NEAR(same.nll_sum, full_decode.nll_sum, 1e-3 * std::abs(full_decode.nll_sum));
  // The reference records the shared state and the policy loads it: the reference's side is its
  // own prefill whatever the policy, so every row of a sweep shares one reference.
  EXPECT_EQ(tail.ref_nll_sum, same.ref_nll_sum);
  // the policy: K = 4 of up to ~40 host tokens loses something; after the reference's prefill it
  // scores what it scores after its own (not what the token-by-token path scores: there every
  // context position already attended sparsely, so the later layers' keys differ)
  EXPECT_GT(tail.kl_sum, 0.0);
  SharedPrefillStats alone_stats;
  const PerplexityResult alone = score_tail(*e.policy, nullptr, ids, windows, {}, &alone_stats);
  EXPECT_EQ(alone_stats.prefills, 2);
  EXPECT_EQ(alone_stats.loads, 0);
  EXPECT_EQ(alone.scored, tail.scored);
  EXPECT_NEAR(tail.nll_sum, alone.nll_sum, 1e-3 * std::abs(alone.nll_sum));
  // streaming pruning as it prefills prefills on its own: two prefills per window, no load
  Policy s = policy_preset("streaming");
  s.window = 16;
  s.exact_prefill = false;
  Engines st = make_engines(s, 64);
  SharedPrefillStats own;
  score_tail(*st.policy, st.ref.get(), ids, windows, {}, &own);
  EXPECT_EQ(own.prefills, 4);
  EXPECT_EQ(own.loads, 0);
}

std::unique_ptr<Tokenizer> gpt2() { return load_tokenizer(test::data_dir() / "tokenizers/gpt2/vocab.json"); }

TEST(Passkey, GeneratorIsDeterministicPerSeedAndCutsToTheContext) {
  auto tok = gpt2();
  const std::string text = test::read_file(test::data_dir() / "text/moby-dick/chapter_1.txt");
  const std::vector<int32_t> filler = tok->encode(text, false);
  PasskeyConfig c;
  c.ctx = 600;
  c.seed = 42;
  const PasskeyPrompt a = make_passkey_prompt(*tok, filler, c, 0, 0.5);
  const PasskeyPrompt b = make_passkey_prompt(*tok, filler, c, 0, 0.5);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.ids.size(), 600u);
  ASSERT_EQ(a.key.size(), 5u);
  EXPECT_GE(a.key[0], '1');
  // The key sits at the depth asked for and the text there holds it.
  const PasskeyPrompt early = make_passkey_prompt(*tok, filler, c, 0, 0.1);
  const PasskeyPrompt late = make_passkey_prompt(*tok, filler, c, 0, 0.9);
  EXPECT_EQ(early.key, a.key);  // every depth of a trial hides the same key
  EXPECT_LT(early.key_pos, a.key_pos);
  EXPECT_LT(a.key_pos, late.key_pos);
  EXPECT_NEAR(static_cast<double>(a.key_pos) / 600.0, 0.5, 0.1);
  const std::string around = tok->decode(std::span(a.ids).subspan(a.key_pos, 12));
  EXPECT_NE(around.find("The pass key is " + a.key), std::string::npos) << around;
  const std::string end = tok->decode(std::span(a.ids).last(12));
  EXPECT_NE(end.find("What is the pass key? The pass key is"), std::string::npos) << end;
  // Other trials and other seeds draw other keys.
  std::set<std::string> keys;
  for (int t = 0; t < 8; ++t) keys.insert(make_passkey_prompt(*tok, filler, c, t, 0.5).key);
  EXPECT_GE(keys.size(), 7u);
  PasskeyConfig other = c;
  other.seed = 43;
  EXPECT_NE(make_passkey_prompt(*tok, filler, other, 0, 0.5).key, a.key);
  // The key of trial 0, seed 42 is 10000 + the first mt19937_64(42) output mod 90000, whose value
  // the C++ standard fixes: the same on every machine and standard library.
  EXPECT_EQ(a.key, "30406");
}

TEST(Passkey, BadConfigurationsAreOneError) {
  auto tok = gpt2();
  const std::vector<int32_t> filler = tok->encode("call me Ishmael. ", false);
  PasskeyConfig c;
  c.ctx = 600;
  test::expect_error([&] { make_passkey_prompt(*tok, filler, c, 0, 0.5); }, {"-f", "filler text has", "tokens"});
  c.ctx = 40;
  test::expect_error([&] { c.validate(); }, {"--ctx"});
  c.ctx = 600;
  c.depths = {1.5};
  test::expect_error([&] { c.validate(); }, {"--depths", "1.5"});
  c.depths = {0.5};
  c.trials = 0;
  test::expect_error([&] { c.validate(); }, {"--trials"});
}

}  // namespace
}  // namespace hg::eval
