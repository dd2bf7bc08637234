// One prefill shared by the policies (hybridgen/prefill_state.h): a policy that starts from a
// recorded prefill answers as after its own prefill. Loading a policy's own recorded state is
// bit-equal to its own prefill (the same K/V placed the same way, InfiniGen's skew from the same
// queries). Across policies the K/V of `full`'s prefill differ from a split policy's own by the
// order of the floating-point sums (the host's part merged by LSE), so there the logits agree
// within 2e-3 of their largest magnitude, and the greedy tokens are the same. The dropping presets
// (streaming, h2o, keyformer) prefill exactly and evict once: from full's recorded prefill with the
// prompt scores (attention/prompt_scores.h) they answer bit-equal to their own prefill; h2o keeps
// the window and the top-scored tokens of the whole prompt, whose scores match a direct
// double-precision sum of the prompt's softmax columns (keyformer's: of its Gumbel-softmax with the
// observer's noise). With --exact-prefill false they prune as they prefill and refuse a state. The
// file format: round trip, truncation, version, model. The prefill cache (eval/prefill_cache.h): a
// later run loads the state an earlier one recorded, bit-equal to prefilling again; an entry that
// cannot serve is a miss, written anew.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "attention/inspect.h"
#include "attention/selectors/keyformer_scores.h"
#include "device/device.h"
#include "eval/prefill_cache.h"
#include "eval/shared_prefill.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "hybridgen/prefill_state.h"
#include "kernels/cpu/half.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg::test {
namespace {

constexpr int kPrompt = 300, kSteps = 12;

Policy small_policy(const std::string& preset) {
  Policy p = policy_preset(preset);
  if (p.splits_kv()) {
    p.window = 48;
    p.n_sinks = 4;
    p.evict_block = 8;
    p.K = 24;
    p.heavy_hitters.heavy = 16;
    p.sched = SchedMode::Fixed;  // a K the feedback scheduler would tune by timing: not reproducible
  }
  return p;
}

std::unique_ptr<Engine> make_engine(const Model& model, const Policy& policy, int ubatch = 64) {
  EngineOptions o;
  o.threads = 2;
  o.ctx = 400;
  o.ubatch = ubatch;
  o.policy = policy;
  return std::make_unique<Engine>(model, o);
}
std::unique_ptr<Engine> make_engine(const Model& model, const std::string& preset) {
  return make_engine(model, small_policy(preset));
}

// A dropping preset that prunes its prompt as it prefills (--exact-prefill false).
Policy chunk_pruning(const std::string& preset) {
  Policy p = small_policy(preset);
  p.exact_prefill = false;
  return p;
}

// The logits of the prompt's last token and of kSteps decode steps fed `tokens` (the same tokens
// for every engine compared, so the logits can be compared step by step).
std::vector<std::vector<float>> decode_after(Engine& e, std::vector<float> first, const std::vector<int32_t>& tokens) {
  std::vector<std::vector<float>> out = {std::move(first)};
  const int seq = 0;
  for (int32_t t : tokens) {
    std::vector<float> logits(static_cast<size_t>(e.vocab_size()));
    e.decode(std::span(&seq, 1), std::span(&t, 1), logits.data());
    out.push_back(std::move(logits));
  }
  return out;
}

const std::vector<std::string> kSharing = {"full",      "offload",   "hybrid", "cpu-attn", "hgca",
                                           "infinigen", "quest",     "streaming", "h2o",      "keyformer"};
const std::vector<std::string> kDropping = {"streaming", "h2o", "keyformer"};

// The prompt scores every preset of kSharing keeps tokens by (h2o's, keyformer's).
std::vector<std::string> every_prompt_score(const Model& model) {
  std::vector<std::string> names;
  for (const char* preset : {"h2o", "keyformer"})
    for (const std::string& n : make_engine(model, preset)->prompt_scores()) names.push_back(n);
  return names;
}

TEST(PrefillState, LoadingItsOwnStateEqualsItsOwnPrefill) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const auto prompt = random_ids(kPrompt, 11);
  const auto tokens = random_ids(kSteps, 12);
  for (const std::string& preset : kSharing) {
    SCOPED_TRACE(preset);
    auto own = make_engine(*model, preset), loaded = make_engine(*model, preset);
    ASSERT_TRUE(own->exact_prefill());
    PrefillState state;
    std::vector<float> a(static_cast<size_t>(own->vocab_size())), b(a.size());
    own->prefill(0, prompt, a.data(), nullptr, &state);
    ASSERT_EQ(state.n_tokens(), kPrompt);
    ASSERT_EQ(state.q_rows(), kPrompt);
    loaded->load_state(0, state, b.data());
    EXPECT_EQ(loaded->position(0), kPrompt);
    EXPECT_EQ(a, b);
    // the same placement and the same predictor state: every decode step bit-equal, across
    // evictions into the host store
    EXPECT_EQ(decode_after(*own, a, tokens), decode_after(*loaded, b, tokens));
  }
}

TEST(PrefillState, EveryExactPolicyAnswersAfterFullsPrefillAsAfterItsOwn) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const auto prompt = random_ids(kPrompt, 21);
  const auto tokens = random_ids(kSteps, 22);
  auto full = make_engine(*model, "full");
  PrefillState state;
  state.score_names = every_prompt_score(*model);
  std::vector<float> first(static_cast<size_t>(full->vocab_size()));
  full->prefill(0, prompt, first.data(), nullptr, &state);
  ASSERT_EQ(state.score_names.size(), 2u);
  for (const std::string& preset : kSharing) {
    SCOPED_TRACE(preset);
    auto own = make_engine(*model, preset), shared = make_engine(*model, preset);
    std::vector<float> a(first.size()), b(first.size());
    own->prefill(0, prompt, a.data());
    shared->load_state(0, state, b.data());
    const auto la = decode_after(*own, a, tokens), lb = decode_after(*shared, b, tokens);
    float max_diff = 0, max_abs = 0;
    for (size_t s = 0; s < la.size(); ++s) {
      for (size_t i = 0; i < la[s].size(); ++i) {
        max_diff = std::max(max_diff, std::abs(la[s][i] - lb[s][i]));
        max_abs = std::max(max_abs, std::abs(la[s][i]));
      }
      EXPECT_EQ(std::max_element(la[s].begin(), la[s].end()) - la[s].begin(),
                std::max_element(lb[s].begin(), lb[s].end()) - lb[s].begin())
          << "step " << s;
    }
    if (preset == "full" || preset == "offload" ||
        std::find(kDropping.begin(), kDropping.end(), preset) != kDropping.end()) {
      // the same device attention over the same K/V (the dropping presets: their own prefill is
      // full's on a stage of its own, the same scores, then the same placement)
      EXPECT_EQ(la, lb);
    } else {
      // the bound: the host part's sums in another order, through the layers and 12 steps
      // (measured on logits up to 6.3: at most 3.7e-4 with the AVX-512 kernels, 3.0e-3 with the
      // AVX2 ones, 9.5e-3 with the scalar twins: HG_CPU_ISA=scalar)
      EXPECT_LE(max_diff, 2e-3f * std::max(1.0f, max_abs)) << "max |logit| " << max_abs;
    }
  }
}

TEST(PrefillState, PoliciesThatPruneTheirPrefillRefuseAState) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const auto prompt = random_ids(120, 31);
  PrefillState state;
  state.score_names = every_prompt_score(*model);
  make_engine(*model, "full")->prefill(0, prompt, nullptr, nullptr, &state);
  for (const std::string& preset : kDropping) {
    SCOPED_TRACE(preset);
    auto e = make_engine(*model, chunk_pruning(preset));
    EXPECT_FALSE(e->exact_prefill());
    expect_error([&] { e->load_state(0, state, nullptr); }, {"drops or prunes tokens during its prefill"});
    PrefillState mine;
    expect_error([&] { e->prefill(0, prompt, nullptr, nullptr, &mine); }, {"drops or prunes tokens"});
  }
  // A state recorded without the scores h2o keeps tokens by: one error naming them
  PrefillState bare;
  make_engine(*model, "full")->prefill(0, prompt, nullptr, nullptr, &bare);
  auto h2o = make_engine(*model, "h2o");
  expect_error([&] { h2o->load_state(0, bare, nullptr); }, {"holds no 'h2o' prompt scores", "--save-state"});
  expect_error([&] { h2o->load_state(0, state, nullptr, 100); }, {"'h2o' prompt scores for a prefix"});
  // ... and a prefix of the sequence continued by a second prefill prunes as it goes: no record
  h2o->prefill(0, std::span(prompt).first(60), nullptr);
  PrefillState more;
  expect_error([&] { h2o->prefill(0, std::span(prompt).subspan(60), nullptr, nullptr, &more); },
               {"drops or prunes tokens during this prefill"});
}

// Σ over the prompt's rows i >= t and the query heads of kv-head g of softmax(x_i)[t], in double,
// straight from the state's queries and its fp32 keys rounded to bf16, as the engine's cache (its
// default dtype) holds them and its attention read them: x = q·k/√d (h2o), or (q·k/√d + Gumbel
// noise) / τ with keyformer's noise for (layer, head, i, t) (keyformer).
std::vector<double> direct_scores(const PrefillState& st, const ModelSpec& m, int layer, int g, bool gumbel,
                                  uint64_t seed, double tau) {
  const int n = st.n_tokens(), hd = m.head_dim, group = m.n_heads / m.n_kv_heads;
  const auto& l = st.layers[static_cast<size_t>(layer)];
  std::vector<double> mass(static_cast<size_t>(n), 0.0), x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    for (int h = g * group; h < (g + 1) * group; ++h) {
      double mx = -1e300, sum = 0;
      for (int t = 0; t <= i; ++t) {
        double dot = 0;
        for (int d = 0; d < hd; ++d)
          dot += static_cast<double>(l.q[static_cast<size_t>(i) * m.q_dim() + h * hd + d]) *
                 cpu::bf16_to_fp32(cpu::fp32_to_bf16(l.k[static_cast<size_t>(t) * m.kv_dim() + g * hd + d]));
        dot /= std::sqrt(static_cast<double>(hd));
        if (gumbel) dot = (dot + gumbel_noise(seed, layer, h, i, t)) / tau;
        x[static_cast<size_t>(t)] = dot;
        mx = std::max(mx, dot);
      }
      for (int t = 0; t <= i; ++t) sum += std::exp(x[static_cast<size_t>(t)] - mx);
      for (int t = 0; t <= i; ++t) mass[static_cast<size_t>(t)] += std::exp(x[static_cast<size_t>(t)] - mx) / sum;
    }
  return mass;
}

TEST(PrefillState, DroppingPresetsKeepTheWindowAndThePromptsTopScoredTokens) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const ModelSpec& m = model->spec;
  const auto prompt = random_ids(kPrompt, 71);
  ASSERT_EQ(EngineOptions{}.kv_dtype, DType::BF16);  // what direct_scores rounds the keys to
  for (const std::string preset : {"h2o", "keyformer"}) {
    SCOPED_TRACE(preset);
    Policy p = small_policy(preset);
    p.seed = 5;
    p.heavy_hitters.tau_init = 0.5f;
    auto e = make_engine(*model, p);
    PrefillState st;
    e->prefill(0, prompt, nullptr, nullptr, &st);
    ASSERT_EQ(st.score_names, e->prompt_scores());
    EXPECT_EQ(st.score_names[0], preset == "h2o" ? "h2o" : "keyformer seed=5 tau=0.5");
    const HybridKv& kv = split_kv(*e);
    int window_from = kPrompt;
    while (window_from > 0 && kv.location(0, window_from - 1).place == TokenPlace::Window) --window_from;
    EXPECT_LE(kPrompt - window_from, p.window);
    EXPECT_GE(kPrompt - window_from, p.window - p.evict_block);
    for (int layer = 0; layer < m.n_layers; ++layer)
      for (int g = 0; g < m.n_kv_heads; ++g) {
        const auto& got = st.layers[static_cast<size_t>(layer)].scores[0];
        const auto want = direct_scores(st, m, layer, g, preset == "keyformer", 5, 0.5);
        double total = 0;
        for (int t = 0; t < kPrompt; ++t) {
          ASSERT_NEAR(got[static_cast<size_t>(t) * m.n_kv_heads + g], want[static_cast<size_t>(t)],
                      1e-4 * std::max(1.0, want[static_cast<size_t>(t)]))
              << "layer " << layer << ", kv-head " << g << ", token " << t;
          total += want[static_cast<size_t>(t)];
        }
        // each row's softmax sums to 1 per query head
        EXPECT_NEAR(total, static_cast<double>(kPrompt) * (m.n_heads / m.n_kv_heads), 1e-6 * total);
        // the heavy hitters: the `heavy` best-scored tokens between the sinks and the window (ties:
        // the later)
        std::vector<int32_t> order(static_cast<size_t>(window_from - p.n_sinks));
        std::iota(order.begin(), order.end(), p.n_sinks);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
          const float sa = got[static_cast<size_t>(a) * m.n_kv_heads + g], sb = got[static_cast<size_t>(b) * m.n_kv_heads + g];
          return sa != sb ? sa > sb : a > b;
        });
        order.resize(static_cast<size_t>(std::min(p.heavy_hitters.heavy, window_from - p.n_sinks)));
        std::sort(order.begin(), order.end());
        const auto kept = kv.heavy_positions(0, layer, g);
        EXPECT_EQ(std::vector<int32_t>(kept.begin(), kept.end()), order) << "layer " << layer << ", kv-head " << g;
      }
    // Chunks of 4 rows take the CPU device's split kernel, which keeps no scores: the recorder
    // computes them itself, from the keys rounded as the cache holds them, to the same reference.
    auto split = make_engine(*model, p, 4);
    PrefillState st4;
    split->prefill(0, prompt, nullptr, nullptr, &st4);
    for (int layer : {0, m.n_layers - 1})
      for (int g = 0; g < m.n_kv_heads; ++g) {
        const auto& got = st4.layers[static_cast<size_t>(layer)].scores[0];
        const auto want = direct_scores(st4, m, layer, g, preset == "keyformer", 5, 0.5);
        for (int t = 0; t < kPrompt; ++t)
          ASSERT_NEAR(got[static_cast<size_t>(t) * m.n_kv_heads + g], want[static_cast<size_t>(t)],
                      1e-4 * std::max(1.0, want[static_cast<size_t>(t)]))
              << "ubatch 4, layer " << layer << ", kv-head " << g << ", token " << t;
      }
  }
}

TEST(PrefillState, SharedPrefillRunsOncePerPromptForTheSharingPolicies) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const auto prompt = random_ids(200, 41);
  auto full = make_engine(*model, "full"), streaming = make_engine(*model, "streaming"),
       hybrid = make_engine(*model, "hybrid"), h2o = make_engine(*model, "h2o"),
       keyformer = make_engine(*model, "keyformer"), pruning = make_engine(*model, chunk_pruning("h2o"));
  std::vector<Engine*> engines = {full.get(), streaming.get(), hybrid.get(), h2o.get(), keyformer.get(), pruning.get()};
  std::vector<std::vector<float>> logits;
  std::vector<eval::PrefillRole> roles;
  eval::SharedPrefillStats stats;
  eval::shared_prefill(engines, 0, prompt, logits, stats, &roles);
  EXPECT_EQ(stats.prefills, 2);  // full (recording) and the pruning h2o (its own)
  EXPECT_EQ(stats.loads, 4);
  using R = eval::PrefillRole;
  EXPECT_EQ(roles, (std::vector<R>{R::Recorded, R::Loaded, R::Loaded, R::Loaded, R::Loaded, R::Own}));
  for (Engine* e : engines) EXPECT_EQ(e->position(0), 200);
  // The dropping presets' own prefill is full's exact one, evicted after it: the same last logits
  EXPECT_EQ(logits[1], logits[0]);
  // the pruning h2o's own prefill is its own, and not full's: it attended to its window and heavy
  // hitters only, so a state of full's prefill would give it context it never had
  auto own_pruning = make_engine(*model, chunk_pruning("h2o"));
  std::vector<float> s(logits[5].size());
  own_pruning->prefill(0, prompt, s.data());
  EXPECT_EQ(s, logits[5]);
  float apart = 0;
  for (size_t i = 0; i < s.size(); ++i) apart = std::max(apart, std::abs(s[i] - logits[0][i]));
  EXPECT_GT(apart, 1e-2f);
  // a second prompt: the engines are reset first
  eval::shared_prefill(engines, 0, random_ids(50, 42), logits, stats, &roles);
  for (Engine* e : engines) EXPECT_EQ(e->position(0), 50);
}

TEST(PrefillState, CacheServesALaterRunBitEqualAndRecomputesWhatItCannotServe) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const auto prompt = random_ids(kPrompt, 61);
  const auto tokens = random_ids(kSteps, 62);
  const auto dir = temp_dir("prefill-cache") / "cache";  // made by the cache
  const eval::PrefillCache cache(dir);
  using R = eval::PrefillRole;
  // One run: the reference and a policy, as fidelity --tail pairs them; nothing cached yet.
  auto run = [&](const std::string& preset, eval::SharedPrefillStats& stats, std::vector<R>& roles) {
    auto full = make_engine(*model, "full"), policy = make_engine(*model, preset);
    std::vector<Engine*> engines = {full.get(), policy.get()};
    std::vector<std::vector<float>> logits;
    eval::shared_prefill(engines, 0, prompt, logits, stats, &roles, &cache);
    return std::pair{decode_after(*full, logits[0], tokens), decode_after(*policy, logits[1], tokens)};
  };
  eval::SharedPrefillStats first, second, third;
  std::vector<R> roles;
  const auto a = run("hybrid", first, roles);
  EXPECT_EQ(roles, (std::vector<R>{R::Recorded, R::Loaded}));
  EXPECT_EQ(first.prefills, 1);
  EXPECT_EQ(first.cache_hits, 0);
  EXPECT_EQ(first.cache_stores, 1);
  auto full = make_engine(*model, "full");
  const auto entry = cache.path_of(full->fingerprint(), eval::prefill_computed_on(*full), prompt);
  ASSERT_TRUE(std::filesystem::exists(entry));
  // A later run (new engines): nothing prefilled, every logit bit-equal to the first run's.
  const auto b = run("hybrid", second, roles);
  EXPECT_EQ(roles, (std::vector<R>{R::Loaded, R::Loaded}));
  EXPECT_EQ(second.prefills, 0);
  EXPECT_EQ(second.cache_hits, 1);
  EXPECT_EQ(second.cache_stores, 0);
  EXPECT_EQ(a, b);
  // Another prompt, another device or another model: another entry.
  EXPECT_NE(cache.path_of(full->fingerprint(), eval::prefill_computed_on(*full), random_ids(kPrompt, 63)), entry);
  EXPECT_NE(cache.path_of(full->fingerprint(), "cuda (H200)", prompt), entry);
  EXPECT_NE(cache.path_of("0123456789abcdef", eval::prefill_computed_on(*full), prompt), entry);
  // A damaged entry is a miss: prefilled again, written anew, the answers unchanged.
  const std::string bytes = read_file(entry);
  std::ofstream(entry, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 3);
  const auto c = run("hybrid", third, roles);
  EXPECT_EQ(third.prefills, 1);
  EXPECT_EQ(third.cache_hits, 0);
  EXPECT_EQ(third.cache_stores, 1);
  EXPECT_EQ(a, c);
  EXPECT_EQ(read_file(entry), bytes);
  // An entry holding another prompt (a hash collision, or a file copied over) is a miss too.
  const auto other = random_ids(kPrompt, 64);
  std::filesystem::copy_file(entry, cache.path_of(full->fingerprint(), eval::prefill_computed_on(*full), other));
  EXPECT_FALSE(cache.find(full->fingerprint(), eval::prefill_computed_on(*full), other));
  ASSERT_TRUE(cache.find(full->fingerprint(), eval::prefill_computed_on(*full), prompt));
  // A path that cannot be a directory: one clear error.
  expect_error([&] { eval::PrefillCache(entry / "sub"); }, {"--prefill-cache: cannot make the directory"});
}

TEST(PrefillState, FileRoundTripAndItsErrors) {
  auto model = load_model(tiny_model("llama-gqa").string());
  PrefillState state;
  state.score_names = every_prompt_score(*model);
  make_engine(*model, "full")->prefill(0, random_ids(90, 51), nullptr, nullptr, &state);
  const auto dir = temp_dir("prefill-state");
  const auto path = dir / "s.hgstate";
  save_prefill_state(state, path);
  const PrefillState back = load_prefill_state(path);
  EXPECT_EQ(back.fingerprint, state.fingerprint);
  EXPECT_EQ(back.tokens, state.tokens);
  EXPECT_EQ(back.logits, state.logits);
  ASSERT_EQ(back.layers.size(), state.layers.size());
  for (size_t l = 0; l < back.layers.size(); ++l) {
    EXPECT_EQ(back.layers[l].k, state.layers[l].k);
    EXPECT_EQ(back.layers[l].v, state.layers[l].v);
    EXPECT_EQ(back.layers[l].q, state.layers[l].q);
    EXPECT_EQ(back.layers[l].scores, state.layers[l].scores);
  }
  EXPECT_EQ(back.score_names, state.score_names);
  back.check_model(*model, "s.hgstate");

  const std::string bytes = read_file(path);
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
    return dir / name;
  };
  expect_error([&] { load_prefill_state(write("cut", bytes.substr(0, bytes.size() - 100))); },
               {"truncated state file: a layer's"});
  expect_error([&] { load_prefill_state(write("long", bytes + "xx")); }, {"2 bytes after the state's end"});
  expect_error([&] { load_prefill_state(write("magic", "GGUF" + bytes.substr(4))); }, {"not a hybridgen state file"});
  expect_error([&] { load_prefill_state(write("cut-scores", bytes.substr(0, bytes.size() - 4))); },
               {"truncated state file: a layer's prompt scores"});
  std::string v1 = bytes;
  v1[8] = 1;
  expect_error([&] { load_prefill_state(write("v1", v1)); },
               {"state file format version 1; this build reads version 2"});
  expect_error([&] { load_prefill_state(dir / "missing"); }, {"cannot open the state file"});
  auto other = load_model(tiny_model("qwen2").string());
  expect_error([&] { back.check_model(*other, "s.hgstate"); }, {"the state was saved by another model"});
  auto e = make_engine(*other, "full");
  expect_error([&] { e->load_state(0, back, nullptr); }, {"another model"});
}

TEST(PrefillState, GenerateSavesAndLoadsTheState) {
  const std::string m = "-m '" + tiny_model("llama-gqa").string() + "' --temp 0 -n 8 ";
  const auto dir = temp_dir("generate-state");
  const std::string prompt = "[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]";
  const RunResult plain = run_hybridgen("generate " + m + "--ids '" + prompt + "'");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string file = (dir / "p.hgstate").string();
  const RunResult saved = run_hybridgen("generate " + m + "--ids '" + prompt + "' --save-state " + file);
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_EQ(saved.out, plain.out);
  // the saved prompt, continued: no prompt given, nothing prefilled
  const RunResult loaded = run_hybridgen("generate " + m + "--load-state " + file);
  ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_EQ(loaded.out, plain.out);
  EXPECT_NE(loaded.err.find("reused 16 of the prompt's 16 tokens"), std::string::npos) << loaded.err;
  // a prompt that extends the saved one: its prefix is reused, the rest prefilled, under hybrid
  const std::string longer = "[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23]";
  const RunResult fresh = run_hybridgen("generate " + m + "--ids '" + longer + "'");
  const RunResult extended = run_hybridgen("generate " + m + "--ids '" + longer + "' --load-state " + file);
  ASSERT_EQ(extended.exit_code, 0) << extended.err;
  EXPECT_EQ(extended.out, fresh.out);
  EXPECT_NE(extended.err.find("reused 16 of the prompt's 19 tokens"), std::string::npos) << extended.err;
  // a prompt the state ends past: the last prompt token is prefilled again for its logits
  const RunResult shorter = run_hybridgen("generate " + m + "--ids '[5,6,7,8,9,10]' --load-state " + file);
  ASSERT_EQ(shorter.exit_code, 0) << shorter.err;
  EXPECT_EQ(shorter.out, run_hybridgen("generate " + m + "--ids '[5,6,7,8,9,10]'").out);
  EXPECT_NE(shorter.err.find("reused 5 of the prompt's 6 tokens"), std::string::npos) << shorter.err;

  // one clear line for a file of another model, a truncated file, a policy that cannot load it
  const RunResult other = run_hybridgen("generate -m '" + tiny_model("qwen2").string() + "' -n 2 --load-state " + file);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("the state was saved by another model"), std::string::npos) << other.err;
  const std::string bytes = read_file(file);
  std::ofstream(dir / "cut.hgstate", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const RunResult cut = run_hybridgen("generate " + m + "--load-state " + (dir / "cut.hgstate").string());
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.err.find("truncated state file"), std::string::npos) << cut.err;
  const std::string h2o_args = m + "--policy h2o --window 8 --heavy 4 --evict-block 4 ";
  const RunResult h2o = run_hybridgen("generate " + h2o_args + "--load-state " + file);
  EXPECT_NE(h2o.exit_code, 0);
  EXPECT_NE(h2o.err.find("holds no 'h2o' prompt scores"), std::string::npos) << h2o.err;
  const RunResult pruning = run_hybridgen("generate " + h2o_args + "--exact-prefill false --load-state " + file);
  EXPECT_NE(pruning.exit_code, 0);
  EXPECT_NE(pruning.err.find("drops or prunes tokens"), std::string::npos) << pruning.err;
  // a state saved under h2o holds its scores: loaded, it answers as h2o's own prefill
  const std::string h2o_file = (dir / "h2o.hgstate").string();
  const RunResult h2o_plain = run_hybridgen("generate " + h2o_args + "--ids '" + longer + "'");
  const RunResult h2o_saved = run_hybridgen("generate " + h2o_args + "--ids '" + longer + "' --save-state " + h2o_file);
  ASSERT_EQ(h2o_saved.exit_code, 0) << h2o_saved.err;
  EXPECT_EQ(h2o_saved.out, h2o_plain.out);
  const RunResult h2o_loaded = run_hybridgen("generate " + h2o_args + "--load-state " + h2o_file);
  ASSERT_EQ(h2o_loaded.exit_code, 0) << h2o_loaded.err;
  EXPECT_EQ(h2o_loaded.out, h2o_plain.out);
}

}  // namespace
}  // namespace hg::test
