// The pruning presets (h2o, keyformer) with budgets that really drop tokens: the token map and
// the per-(layer, kv-head) heavy-hitter sets stay consistent at every prefill chunk and decode
// step (dropped tokens are gone from every structure, kept ones are in exactly one place, the
// slots of dropped tokens are reused and the device cache never grows); the fetching presets
// (infinigen, quest) with a budget below the host tokens ship exactly the chosen tokens' K and V
// rows;
// and the new knobs' bad input: out of range, or given with a preset they do not apply to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "attention/inspect.h"
#include "attention/selectors/infinigen.h"
#include "hybridgen/engine.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg::test {
namespace {

void check_pruned(const HybridKv& kv, const ModelSpec& spec, const Policy& p, int seq, int length) {
  kv.check_invariants(seq);  // map, heavy sets, free slots and slot tables agree
  EXPECT_EQ(kv.host(seq).n_tokens(), 0) << "dropped tokens are not kept on the host";
  int dropped = 0, heavy = 0;
  for (int pos = 0; pos < length; ++pos) {
    dropped += kv.location(seq, pos).place == TokenPlace::Dropped;
    heavy += kv.location(seq, pos).place == TokenPlace::Heavy;
  }
  for (int l = 0; l < spec.n_layers; ++l) {
    EXPECT_EQ(kv.window(seq, l).capacity, p.window + p.heavy_hitters.heavy) << "the device cache never grows";
    for (int g = 0; g < spec.n_kv_heads; ++g) {
      const auto kept = kv.heavy_positions(seq, l, g);
      EXPECT_LE(static_cast<int>(kept.size()), p.heavy_hitters.heavy);
      // once more tokens left the window than there are heavy slots, every slot is in use
      if (length > p.window + p.heavy_hitters.heavy + p.evict_block) {
        EXPECT_EQ(static_cast<int>(kept.size()), p.heavy_hitters.heavy) << "layer " << l << ", kv-head " << g;
      }
      for (const int32_t pos : kept) EXPECT_EQ(kv.location(seq, pos).place, TokenPlace::Heavy);
    }
  }
  if (length > p.window + p.heavy_hitters.heavy + p.evict_block) {
    EXPECT_GT(heavy, 0);
  }
  // a position is dropped once no (layer, kv-head) keeps it: certain only when their heavy sets
  // together cannot cover every token before the window (keyformer's noisy scores spread them)
  if (length > p.window + p.evict_block + p.heavy_hitters.heavy * spec.n_layers * spec.n_kv_heads) {
    EXPECT_GT(dropped, 0);
  }
}

class PruningInvariants : public ::testing::TestWithParam<std::string> {};

TEST_P(PruningInvariants, HoldAtEveryStep) {
  auto model = load_model(tiny_model("llama-gqa").string());
  Policy p = policy_preset(GetParam());
  p.window = 16;
  p.heavy_hitters.heavy = 6;
  p.evict_block = 4;
  p.seed = 3;
  EngineOptions o;
  o.threads = 2;
  o.kv_dtype = DType::F32;
  o.ctx = 160;
  o.batch = 3;
  o.ubatch = 24;  // prefill chunks longer than the window: tokens skip the ring into heavy slots
  o.policy = p;
  Engine engine(*model, o);
  auto& kv = split_kv(engine);
  const std::vector<int> lengths = {5, 61, 30};
  std::vector<std::vector<int32_t>> ids;
  for (size_t s = 0; s < lengths.size(); ++s) ids.push_back(random_ids(lengths[s] + 70, 7u + static_cast<uint32_t>(s)));
  std::vector<float> logits(static_cast<size_t>(engine.vocab_size()) * lengths.size());
  for (size_t s = 0; s < lengths.size(); ++s)
    for (int b = 0; b < lengths[s]; b += 24) {  // chunk by chunk, checking in between
      const int e = std::min(lengths[s], b + 24);
      engine.prefill(static_cast<int>(s), std::span(ids[s].data() + b, static_cast<size_t>(e - b)), logits.data());
      check_pruned(kv, engine.spec(), p, static_cast<int>(s), e);
    }
  const std::vector<int> seqs = {0, 1, 2};
  for (int t = 0; t < 70; ++t) {
    std::vector<int32_t> toks;
    for (size_t s = 0; s < lengths.size(); ++s) toks.push_back(ids[s][static_cast<size_t>(lengths[s] + t)]);
    engine.decode(seqs, toks, logits.data());
    for (size_t s = 0; s < lengths.size(); ++s)
      check_pruned(kv, engine.spec(), p, static_cast<int>(s), lengths[s] + t + 1);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
  // a new request starts from an empty cache again
  engine.reset(1);
  engine.prefill(1, std::span(ids[1].data(), 40), logits.data());
  check_pruned(kv, engine.spec(), p, 1, 40);
}

INSTANTIATE_TEST_SUITE_P(Presets, PruningInvariants, ::testing::Values("h2o", "keyformer"));

// A fetching preset on the tiny GQA model (window 16 + 2 sinks, eviction by 4, f32 KV) over a
// batch of prompts of `lengths` tokens and `steps` decode steps: at every step and layer the
// device received the K and V rows of exactly `expected(layer, host tokens)` tokens per kv-head
// and sequence, counted as selected. Returns the host tokens of each sequence at the end.
std::vector<int64_t> check_fetches(Policy p, const std::vector<int>& lengths, int steps, uint32_t seed,
                                   const std::function<int64_t(int layer, int64_t host)>& expected) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const ModelSpec& spec = model->spec;
  p.window = 16;
  p.n_sinks = 2;
  p.evict_block = 4;
  p.host_threads = 2;
  EngineOptions o;
  o.threads = 2;
  o.kv_dtype = DType::F32;
  o.ctx = 160;
  o.batch = static_cast<int>(lengths.size());
  o.policy = p;
  Engine engine(*model, o);
  LayerAttention& attn = engine.attention();
  std::vector<std::vector<int32_t>> ids;
  std::vector<int> seqs;
  std::vector<float> logits(static_cast<size_t>(engine.vocab_size()) * lengths.size());
  for (size_t s = 0; s < lengths.size(); ++s) {
    ids.push_back(random_ids(lengths[s] + steps, seed + static_cast<uint32_t>(s)));
    engine.prefill(static_cast<int>(s), std::span(ids[s].data(), static_cast<size_t>(lengths[s])), logits.data());
    seqs.push_back(static_cast<int>(s));
  }
  const int64_t row_bytes = static_cast<int64_t>(spec.head_dim) * sizeof(float);  // one K or V row (f32)
  for (int t = 0; t < steps; ++t) {
    std::vector<int32_t> toks;
    for (size_t s = 0; s < lengths.size(); ++s) toks.push_back(ids[s][static_cast<size_t>(lengths[s] + t)]);
    const std::vector<LayerStats> before = *attn.layer_stats();
    engine.decode(seqs, toks, logits.data());
    const StepTiming* timing = engine.last_step_timing();
    EXPECT_NE(timing, nullptr);
    if (!timing) break;
    for (int l = 0; l < spec.n_layers; ++l) {
      int64_t fetched = 0;
      for (int s : seqs) fetched += expected(l, attn.host_tokens(s)) * spec.n_kv_heads;
      const LayerStats& st = (*attn.layer_stats())[static_cast<size_t>(l)];
      EXPECT_EQ(st.selected - before[static_cast<size_t>(l)].selected, fetched) << "layer " << l << ", step " << t;
      EXPECT_EQ(timing->layers[static_cast<size_t>(l)].bytes_h2d, fetched * 2 * row_bytes)
          << "the K and V rows of the fetched tokens, nothing else: layer " << l << ", step " << t;
    }
    for (float x : logits) EXPECT_TRUE(std::isfinite(x));
  }
  std::vector<int64_t> host;
  for (int s : seqs) host.push_back(attn.host_tokens(s));
  return host;
}

TEST(InfinigenFetch, ShipsTheChosenTokensKAndVRowsPerLayer) {
  Policy p = policy_preset("infinigen");
  p.infinigen.max_kv = 3;
  p.infinigen.alpha = 1e9f;  // every token is within alpha of the max: n = max_kv once the host holds more
  // layers 0 and 1 fetch every host token, the others min(max_kv, host tokens) per kv-head
  const auto host = check_fetches(p, {5, 61, 30}, 20, 11, [&](int l, int64_t n) {
    return l < InfinigenSelector::kExactLayers ? n : std::min<int64_t>(p.infinigen.max_kv, n);
  });
  EXPECT_GT(host[1], p.infinigen.max_kv);  // the budget really left host tokens behind
}

// Quest under a budget below the host tokens: layers 0 and 1 fetch every host token, the others
// min(the budget in whole pages, host tokens) per kv-head.
TEST(QuestFetch, ShipsTheChosenPagesKAndVRowsPerLayer) {
  Policy p = policy_preset("quest");
  p.K = 40;  // two pages of 16
  const auto host =
      check_fetches(p, {90, 20}, 10, 31, [](int l, int64_t n) { return l < 2 ? n : std::min<int64_t>(32, n); });
  EXPECT_GT(host[0], 32);
}

TEST(PresetKnobs, BadValuesAndWrongPresetsAreOneErrorLine) {
  const std::string run = "generate -m '" + tiny_model("llama-gqa").string() + "' --ids '[1, 2, 3]' -n 2 --policy ";
  expect_one_error_line(run_hybridgen(run + "h2o --heavy -1"), "--heavy must be >= 0");
  expect_one_error_line(run_hybridgen(run + "keyformer --tau-init 0"), "--tau-init must be in");
  expect_one_error_line(run_hybridgen(run + "keyformer --tau-end 1000"), "--tau-end must be in");
  expect_one_error_line(run_hybridgen(run + "infinigen --partial-ratio 1.5"), "--partial-ratio must be in");
  expect_one_error_line(run_hybridgen(run + "infinigen --alpha -2"), "--alpha must be in");
  expect_one_error_line(run_hybridgen(run + "infinigen --max-kv -3"), "--max-kv must be >= 0");
  expect_one_error_line(run_hybridgen(run + "infinigen --max-kv many"), "--max-kv");
  expect_one_error_line(run_hybridgen(run + "hybrid --heavy 8"), "--heavy does not apply to --policy hybrid");
  expect_one_error_line(run_hybridgen(run + "h2o --tau-init 1.5"), "--tau-init does not apply to --policy h2o");
  expect_one_error_line(run_hybridgen(run + "streaming --alpha 2"), "--alpha does not apply to --policy streaming");
  expect_one_error_line(run_hybridgen(run + "keyformer --max-kv 8"), "--max-kv does not apply to --policy keyformer");
  // the same from a policy file
  const auto yaml = temp_dir("preset_knobs") / "p.yaml";
  std::ofstream(yaml) << "policy:\n  preset: h2o\n  partial-ratio: 0.5\n";
  expect_one_error_line(run_hybridgen("generate -m '" + tiny_model("llama-gqa").string() +
                                      "' --ids '[1, 2, 3]' -n 2 --policy-file '" + yaml.string() + "'"),
                        "--partial-ratio does not apply to --policy h2o");
}

// Keyformer's Gumbel noise follows --seed (it was always seed 0): the same seed scores the same,
// another seed keeps other heavy hitters and scores otherwise; generate's --seed (the sampler's)
// and eval's reach the policy too.
TEST(KeyformerSeed, SeedOptionDrivesTheNoise) {
  const auto dir = temp_dir("keyformer_seed");
  write_ids(dir / "ids.json", random_ids(120, 21));
  const std::string model = "-m '" + tiny_model("llama-gqa").string() + "' ";
  const auto ppl = [&](const std::string& seed) {
    const RunResult r = run_hybridgen("perplexity " + model + "--ids-file '" + (dir / "ids.json").string() +
                                      "' --ctx 120 --kv-dtype f32 -t 2 --json --policy keyformer --window 16 "
                                      "--heavy 6 --evict-block 4 --tau-init 2 --tau-end 4" + seed);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_NE(j["policy"].get<std::string>().find("seed " + (seed.empty() ? "0" : seed.substr(8))), std::string::npos)
        << j["policy"];
    return j["ppl"].get<double>();
  };
  const double s1 = ppl(" --seed 1"), s1_again = ppl(" --seed 1"), s2 = ppl(" --seed 2"), s0 = ppl("");
  EXPECT_EQ(s1, s1_again) << "the same seed, the same noise";
  EXPECT_NE(s1, s2) << "another seed, other heavy hitters";
  EXPECT_NE(s0, s1);

  // generate: the sampler's --seed is the policy's too
  const RunResult g = run_hybridgen("generate " + model + "--ids '[1, 2, 3]' -n 2 --ctx 64 --window 16 --heavy 6 --evict-block 4 --policy keyformer --seed 7 --stats");
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.err.find("seed 7"), std::string::npos) << g.err;
}

}  // namespace
}  // namespace hg::test
