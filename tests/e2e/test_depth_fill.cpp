// Decode at depth without the prefill (bench --depth-fill random) and contexts past the trained
// one (--ctx with a warning): the random fill leaves every policy's cache as a prefill of that
// length does (same length, same token map and host count, same host->device traffic and
// selection per decode step; offload's host stores too), is seeded, and the bench labels its rows.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "attention/inspect.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg::test {
namespace {

Policy small_policy(const std::string& preset) {
  Policy p = policy_preset(preset);
  if (preset == "hybrid" || preset == "streaming") {
    p.window = 32;
    p.n_sinks = 4;
    p.evict_block = 8;
    p.K = 16;
    p.sched = SchedMode::Fixed;  // a K the feedback scheduler would tune by timing: not reproducible
  }
  return p;
}

std::unique_ptr<Engine> make_engine(const Model& model, const std::string& preset) {
  EngineOptions o;
  o.threads = 2;
  o.ctx = 400;
  o.ubatch = 64;
  o.policy = small_policy(preset);
  return std::make_unique<Engine>(model, o);
}

std::vector<float> decode_steps(Engine& e, int steps) {
  std::vector<float> logits(static_cast<size_t>(e.vocab_size())), all;
  const std::vector<int> seq = {0};
  for (int t = 0; t < steps; ++t) {
    const std::vector<int32_t> tok = {static_cast<int32_t>(5 + t)};
    e.decode(seq, tok, logits.data());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

TEST(DepthFill, RandomFillPlacesTokensLikePrefill) {
  auto model = load_model(tiny_model("llama-gqa").string());
  for (const std::string preset : {"full", "hybrid", "streaming", "cpu-attn"}) {
    SCOPED_TRACE(preset);
    auto filled = make_engine(*model, preset), prefilled = make_engine(*model, preset);
    filled->fill_random(0, 300, 7);
    const auto prompt = random_ids(300, 3);
    prefilled->prefill(0, prompt, nullptr);
    ASSERT_EQ(filled->position(0), 300);
    if (preset != "full") {
      HybridKv& a = split_kv(*filled);
      HybridKv& b = split_kv(*prefilled);
      a.check_invariants(0);
      EXPECT_EQ(a.host(0).n_tokens(), b.host(0).n_tokens());
      EXPECT_EQ(a.tokens(0, 0).count, b.tokens(0, 0).count);
      for (int p = 0; p < 300; ++p) {
        EXPECT_EQ(a.location(0, p).place, b.location(0, p).place) << p;
        EXPECT_EQ(a.location(0, p).index, b.location(0, p).index) << p;  // the same slot or host index
      }
    }
    const auto logits = decode_steps(*filled, 20);  // crosses evictions into the host store
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
    EXPECT_EQ(filled->position(0), 320);
    if (preset != "full") split_kv(*filled).check_invariants(0);
  }
}

// offload keeps every token in the host stores and streams each layer's prefix: after the fill
// decode moves as many bytes per layer as after a prefill of that length, and the fill is seeded.
TEST(DepthFill, RandomFillOffload) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const ModelSpec& spec = model->spec;
  auto filled = make_engine(*model, "offload"), prefilled = make_engine(*model, "offload");
  filled->fill_random(0, 300, 7);
  prefilled->prefill(0, random_ids(300, 3), nullptr);
  ASSERT_EQ(filled->position(0), 300);
  EXPECT_EQ(filled->attention().length(0), prefilled->attention().length(0));
  const auto logits = decode_steps(*filled, 3);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  decode_steps(*prefilled, 3);
  EXPECT_EQ(filled->position(0), 303);
  const StepTiming* a = filled->last_step_timing();
  const StepTiming* b = prefilled->last_step_timing();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  for (int l = 0; l < spec.n_layers; ++l) {
    const size_t i = static_cast<size_t>(l);
    EXPECT_EQ(a->layers[i].bytes_h2d, b->layers[i].bytes_h2d);
    EXPECT_GT(a->layers[i].bytes_h2d, 0);
  }
  // the same seed gives the same cache, another seed another
  auto again = make_engine(*model, "offload"), other = make_engine(*model, "offload");
  again->fill_random(0, 300, 7);
  other->fill_random(0, 300, 8);
  EXPECT_EQ(decode_steps(*again, 3), logits);
  EXPECT_NE(decode_steps(*other, 3), logits);
}

TEST(DepthFill, RandomFillIsSeeded) {
  auto model = load_model(tiny_model("llama-gqa").string());
  auto a = make_engine(*model, "hybrid"), b = make_engine(*model, "hybrid"), c = make_engine(*model, "hybrid");
  a->fill_random(0, 200, 1);
  b->fill_random(0, 200, 1);
  c->fill_random(0, 200, 2);
  const auto la = decode_steps(*a, 2), lb = decode_steps(*b, 2), lc = decode_steps(*c, 2);
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, lc);
}

TEST(DepthFill, RandomFillBeyondContextIsAnError) {
  auto model = load_model(tiny_model("llama-gqa").string());
  auto e = make_engine(*model, "full");
  EXPECT_THROW(e->fill_random(0, 401, 1), Error);
}

nlohmann::json bench_json(const std::string& args) {
  const RunResult r =
      run_hybridgen("bench -m '" + tiny_model("llama-gqa").string() + "' -p 0 -n 3 -d 200 -r 1 " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::array();
}

TEST(DepthFill, BenchLabelsRandomFillAndKeepsTheDecodeWork) {
  const std::string hybrid = "--policy hybrid --window 32 --sinks 4 --k 16 --evict-block 8 -o json";
  const auto random = bench_json(hybrid + " --depth-fill random");
  const auto prefill = bench_json(hybrid + " --depth-fill prefill");
  ASSERT_EQ(random.size(), 1u);
  ASSERT_EQ(prefill.size(), 1u);
  EXPECT_EQ(random[0]["test"], "tg3 @ d200 (random KV)");
  EXPECT_EQ(random[0]["depth_fill"], "random");
  EXPECT_EQ(prefill[0]["test"], "tg3 @ d200");
  EXPECT_EQ(prefill[0]["depth_fill"], "prefill");
  // The decode work at depth is the same: the host ships the same bytes and selects as many tokens.
  EXPECT_GT(random[0]["h2d_bytes_per_token"].get<double>(), 0.0);
  EXPECT_EQ(random[0]["h2d_bytes_per_token"], prefill[0]["h2d_bytes_per_token"]);
  EXPECT_EQ(random[0]["selected_per_layer"], prefill[0]["selected_per_layer"]);
  EXPECT_GT(random[0]["peak_rss_bytes"].get<double>(), 0.0);
  EXPECT_GT(random[0]["avg_ts"].get<double>(), 0.0);

  // --depth-fill prefill: one prefill per depth, recorded; the other runs of that policy and of
  // every policy whose prefill is exact load it (streaming's too: it evicts after an exact
  // prefill); streaming with --exact-prefill false drops tokens as it prefills, so its own
  const auto shared = bench_json(
      "-o json --depth-fill prefill --window 32 --sinks 4 --k 16 --evict-block 8 --policy full,hybrid,streaming");
  ASSERT_EQ(shared.size(), 3u);
  EXPECT_EQ(shared[0]["depth_prefills"], 1);  // full: the warm-up run records, the timed one loads
  EXPECT_EQ(shared[0]["depth_loads"], 1);
  EXPECT_EQ(shared[1]["depth_prefills"], 0);  // hybrid
  EXPECT_EQ(shared[1]["depth_loads"], 2);
  EXPECT_EQ(shared[2]["depth_prefills"], 0);  // streaming
  EXPECT_EQ(shared[2]["depth_loads"], 2);
  const auto pruning = bench_json("-o json --depth-fill prefill --window 32 --sinks 4 --policy streaming "
                                  "--exact-prefill false");
  ASSERT_EQ(pruning.size(), 1u);
  EXPECT_EQ(pruning[0]["depth_prefills"], 2);
  EXPECT_EQ(pruning[0]["depth_loads"], 0);
  // hybrid after the loaded state selects and ships as after its own prefill
  EXPECT_EQ(shared[1]["h2d_bytes_per_token"], prefill[0]["h2d_bytes_per_token"]);
  EXPECT_EQ(shared[1]["selected_per_layer"], prefill[0]["selected_per_layer"]);

  const RunResult md = run_hybridgen("bench -m '" + tiny_model("llama-gqa").string() +
                                     "' -p 0 -n 2 -d 100 -r 1 --policy full,cpu-attn --depth-fill random");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| full |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| cpu-attn |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("tg2 @ d100 (random KV)"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("peak RSS"), std::string::npos) << md.out;

  const auto offload = bench_json("--policy offload -o json --depth-fill random");
  ASSERT_EQ(offload.size(), 1u);
  EXPECT_EQ(offload[0]["test"], "tg3 @ d200 (random KV)");
  EXPECT_GT(offload[0]["h2d_bytes_per_token"].get<double>(), 0.0);
}

// bench takes the --policy list grammar of every command: variants of one preset side by side,
// each row labelled as written, the entry's knobs over the command line's.
TEST(DepthFill, BenchRunsVariantsOfOnePresetSideBySide) {
  const auto rows = bench_json("-o json --depth-fill random --window 32 --sinks 4 --evict-block 8 --sched fixed "
                               "--policy full,hybrid:k=16,hybrid:k=0:host-threads=0:query=exact");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["policy"], "full");
  EXPECT_EQ(rows[1]["policy"], "hybrid:k=16");
  EXPECT_EQ(rows[2]["policy"], "hybrid:k=0:host-threads=0:query=exact");
  EXPECT_NE(rows[1]["attention"].get<std::string>().find("k 16"), std::string::npos) << rows[1]["attention"];
  EXPECT_NE(rows[2]["attention"].get<std::string>().find("query exact"), std::string::npos) << rows[2]["attention"];
  EXPECT_GT(rows[1]["h2d_bytes_per_token"].get<double>(), rows[2]["h2d_bytes_per_token"].get<double>());
  const std::string bench = "bench -m '" + tiny_model("llama-gqa").string() + "' -p 0 -n 2 -d 10 -r 1 --policy ";
  expect_one_error_line(run_hybridgen(bench + "full,hybrid:k"), "'k' is not KNOB=VALUE");
  expect_one_error_line(run_hybridgen(bench + "hybrid,hybrid"), "--policy: 'hybrid' is listed twice");
  expect_one_error_line(run_hybridgen(bench + "full:window=8"), "--window does not apply to --policy full");
  // a command of one policy takes an entry too, and refuses a list
  const std::string gen = "generate -m '" + tiny_model("llama-gqa").string() + "' --ids '[1,2,3]' -n 2 --stats ";
  const RunResult one = run_hybridgen(gen + "--policy hybrid:window=16:k=4 --ctx 64");
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("k 4"), std::string::npos) << one.err;
  expect_one_error_line(run_hybridgen(gen + "--policy full,hybrid"), "this command runs one policy");
}

TEST(DepthFill, UnknownFillIsOneErrorLine) {
  const RunResult r =
      run_hybridgen("bench -m '" + tiny_model("llama-gqa").string() + "' -p 0 -n 2 -d 10 --depth-fill magic");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--depth-fill: 'magic' is not one of prefill, random"), std::string::npos) << r.err;
}

TEST(LongContext, CtxPastTrainedContextWarns) {
  // the tiny models are trained (max_position_embeddings) on 1024 positions
  const RunResult r =
      run_hybridgen("generate -m '" + tiny_model("llama-gqa").string() + "' --ids '[1,2,3,4]' -n 2 --ctx 1500");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--ctx 1500 is longer than the model's trained context of 1024 tokens"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("quality will degrade"), std::string::npos) << r.err;
  const RunResult within =
      run_hybridgen("generate -m '" + tiny_model("llama-gqa").string() + "' --ids '[1,2,3,4]' -n 2 --ctx 1024");
  EXPECT_EQ(within.exit_code, 0) << within.err;
  EXPECT_EQ(within.err.find("trained context"), std::string::npos) << within.err;
}

TEST(LongContext, OptPastItsPositionTableIsAnError) {
  const RunResult r =
      run_hybridgen("generate -m '" + tiny_model("opt").string() + "' --ids '[1,2,3,4]' -n 2 --ctx 1500");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("learned position embeddings end at 1024"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hg::test
