// The engine agrees with itself: prefill-then-decode gives the logits of a single full prefill,
// a batch of sequences of different lengths gives each sequence's logits alone, and chunked
// prefill (ubatch) changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "hybridgen/engine.h"
#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "hybridgen/policy.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

double max_diff(const float* a, const float* b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

// Two threads, an fp32 cache (the comparisons are of arithmetic, not of the cache's rounding).
EngineOptions f32_options(int ctx) {
  EngineOptions o;
  o.threads = 2;
  o.kv_dtype = DType::F32;
  o.ctx = ctx;
  return o;
}

class Consistency : public ::testing::TestWithParam<std::string> {};

TEST_P(Consistency, PrefillThenDecodeEqualsFullPrefill) {
  auto model = load_model(tiny_model(GetParam()).string());
  EngineOptions o = f32_options(128);
  o.ubatch = 16;  // several prefill chunks
  Engine engine(*model, o);
  const int vocab = engine.vocab_size();
  const auto ids = random_ids(100, 3);

  std::vector<float> full(ids.size() * static_cast<size_t>(vocab));
  engine.prefill(0, ids, nullptr, full.data());

  engine.reset(0);
  const size_t split = 37;
  std::vector<float> step(static_cast<size_t>(vocab));
  engine.prefill(0, std::span(ids.data(), split), step.data());
  EXPECT_LE(max_diff(step.data(), full.data() + (split - 1) * vocab, static_cast<size_t>(vocab)), 1e-4);
  const int seq = 0;
  for (size_t i = split; i < ids.size(); ++i) {
    engine.decode(std::span(&seq, 1), std::span(ids.data() + i, 1), step.data());
    ASSERT_LE(max_diff(step.data(), full.data() + i * vocab, static_cast<size_t>(vocab)), 1e-4) << "position " << i;
  }
  EXPECT_EQ(engine.position(0), static_cast<int>(ids.size()));
}

TEST_P(Consistency, BatchOfDifferentLengthsEqualsEachAlone) {
  auto model = load_model(tiny_model(GetParam()).string());
  EngineOptions o = f32_options(96);
  o.batch = 3;
  Engine batched(*model, o);
  o.batch = 1;
  Engine single(*model, o);
  const int vocab = batched.vocab_size();
  const int lengths[3] = {5, 23, 11};
  std::vector<std::vector<int32_t>> seqs;
  for (int s = 0; s < 3; ++s) seqs.push_back(random_ids(lengths[s] + 20, 10u + static_cast<uint32_t>(s)));

  std::vector<float> last(static_cast<size_t>(vocab));
  for (int s = 0; s < 3; ++s) batched.prefill(s, std::span(seqs[s].data(), static_cast<size_t>(lengths[s])), last.data());
  std::vector<float> batch_logits(3 * static_cast<size_t>(vocab));
  std::vector<std::vector<float>> per_step(3);
  const int ids[3] = {0, 1, 2};
  for (int step = 0; step < 20; ++step) {
    int32_t toks[3];
    for (int s = 0; s < 3; ++s) toks[s] = seqs[s][static_cast<size_t>(lengths[s] + step)];
    batched.decode(std::span(ids, 3), std::span(toks, 3), batch_logits.data());
    for (int s = 0; s < 3; ++s)
      per_step[s].insert(per_step[s].end(), batch_logits.begin() + s * vocab, batch_logits.begin() + (s + 1) * vocab);
  }
  for (int s = 0; s < 3; ++s) {
    single.reset(0);
    std::vector<float> full(seqs[s].size() * static_cast<size_t>(vocab));
    single.prefill(0, seqs[s], nullptr, full.data());
    EXPECT_LE(max_diff(per_step[s].data(), full.data() + static_cast<size_t>(lengths[s]) * vocab, per_step[s].size()), 1e-4)
        << "sequence " << s;
  }
}

TEST_P(Consistency, AllLogitsOfALongChunkComeInSlicesThatMatchSmallChunks) {
  // One chunk of 600 rows: its logits come in slices of Scratch::kMaxLogitRows (256) rows.
  auto model = load_model(tiny_model(GetParam()).string());
  EngineOptions o = f32_options(600);
  o.ubatch = 600;
  Engine one_chunk(*model, o);
  o.ubatch = 64;
  Engine small_chunks(*model, o);
  const auto ids = random_ids(600, 7);
  const int vocab = one_chunk.vocab_size();
  std::vector<float> a(ids.size() * static_cast<size_t>(vocab)), b(a.size()), last(static_cast<size_t>(vocab));
  one_chunk.prefill(0, ids, last.data(), a.data());
  small_chunks.prefill(0, ids, nullptr, b.data());
  for (size_t i = 0; i < ids.size(); ++i)
    ASSERT_LE(max_diff(a.data() + i * vocab, b.data() + i * vocab, static_cast<size_t>(vocab)), 1e-4) << "row " << i;
  // the last row's logits alone (one row: the GEMV path) against its row of the slices
  EXPECT_LE(max_diff(last.data(), a.data() + (ids.size() - 1) * vocab, static_cast<size_t>(vocab)), 1e-4);
}

TEST_P(Consistency, Bf16CacheStaysClose) {
  auto model = load_model(tiny_model(GetParam()).string());
  EngineOptions o = f32_options(64);
  Engine f32(*model, o);
  o.kv_dtype = DType::BF16;
  Engine bf16(*model, o);
  const auto ids = random_ids(60, 5);
  const int vocab = f32.vocab_size();
  std::vector<float> a(ids.size() * static_cast<size_t>(vocab)), b(a.size());
  f32.prefill(0, ids, nullptr, a.data());
  bf16.prefill(0, ids, nullptr, b.data());
  double max_abs = 0.0;
  for (float x : a) max_abs = std::max(max_abs, static_cast<double>(std::fabs(x)));
  EXPECT_LE(max_diff(a.data(), b.data(), a.size()), 0.05 * max_abs);
}

TEST(Ubatch, AutoIsLargeForExactPrefillsAndKeepsThePruningPoliciesChunk) {
  auto model = load_model(tiny_model("llama-gqa").string());
  auto resolved = [&](std::string preset) {  // PRESET[:pruning]: --exact-prefill false
    const size_t colon = preset.find(':');
    const bool pruning = colon != std::string::npos;
    if (pruning) preset.resize(colon);
    EngineOptions o;
    o.threads = 2;
    o.ctx = 64;
    o.policy = policy_preset(preset);
    o.policy.exact_prefill = !pruning;
    if (preset != "full") o.policy.window = 16;
    o.policy.heavy_hitters.heavy = 6;
    o.policy.feedback.k_min = 8;  // no K_min profile lookup
    return Engine(*model, o).options().ubatch;
  };
  EXPECT_EQ(resolved("full"), kExactPrefillUbatch);
  EXPECT_EQ(resolved("hybrid"), kExactPrefillUbatch);
  EXPECT_EQ(resolved("cpu-attn"), kExactPrefillUbatch);
  // the dropping presets prefill exactly (and evict after it) unless they prune as they go
  EXPECT_EQ(resolved("streaming"), kExactPrefillUbatch);
  EXPECT_EQ(resolved("h2o"), kExactPrefillUbatch);
  EXPECT_EQ(resolved("streaming:pruning"), kPruningPrefillUbatch);
  EXPECT_EQ(resolved("h2o:pruning"), kPruningPrefillUbatch);
  EXPECT_EQ(resolved("keyformer:pruning"), kPruningPrefillUbatch);
  EngineOptions o;
  o.threads = 2;
  o.ctx = 64;
  o.ubatch = 40;
  EXPECT_EQ(Engine(*model, o).options().ubatch, 40);
  o.ubatch = -1;
  EXPECT_THROW(Engine(*model, o), Error);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Consistency, ::testing::Values("llama-gqa", "qwen2", "opt", "opt-postln-proj"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace hg::test
