// The feedback scheduler end to end: adaptive K that keeps every host token equals full
// attention; a slow key scan makes the scheduler switch to Pre-QKᵀ and back once it is fast
// again, and a Pre that costs more than Post is left at once (on synthetic timings, so that the
// test does not race the machine's speed), and in a real
// run slowed by an injected hook (EngineOptions::host_job_hook) every step runs the plan the
// scheduler made of what the steps before it measured; `eval --task kmin` writes a profile that
// `--k-min auto` reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "attention/layer_attention.h"
#include "hybridgen/engine.h"
#include "hybridgen/model.h"
#include "sched/batch_scheduler.h"
#include "sched/cores.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

// Decodes `steps` tokens of two sequences after prompts of different lengths; returns every
// step's logits [steps][2][vocab].
std::vector<float> decode_batch(Engine& engine, const std::vector<int32_t>& ids, int steps) {
  const int vocab = engine.vocab_size();
  const int prompt[2] = {70, 45};
  std::vector<float> last(static_cast<size_t>(vocab));
  for (int s = 0; s < 2; ++s)
    engine.prefill(s, std::span(ids.data() + s * 150, static_cast<size_t>(prompt[s])), last.data());
  std::vector<float> out, step(2 * static_cast<size_t>(vocab));
  const int seqs[2] = {0, 1};
  for (int t = 0; t < steps; ++t) {
    const int32_t toks[2] = {ids[static_cast<size_t>(prompt[0] + t)], ids[static_cast<size_t>(150 + prompt[1] + t)]};
    engine.decode(seqs, toks, step.data());
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

TEST(Sched, AdaptiveWithKMinAboveTheHostTokensEqualsFull) {
  const auto model = load_model(tiny_model("llama-gqa").string());
  const auto ids = random_ids(300, 11, model->spec.vocab_size);
  EngineOptions o;
  o.threads = 2;
  o.kv_dtype = DType::F32;
  o.ctx = 160;
  o.batch = 2;
  o.ubatch = 24;
  Engine full(*model, o);
  o.policy = policy_preset("hybrid");
  ASSERT_EQ(o.policy.sched, SchedMode::Adaptive);  // the preset's default
  o.policy.window = 16;
  o.policy.n_sinks = 2;
  o.policy.evict_block = 4;
  o.policy.query = QuerySource::Exact;
  o.policy.feedback.k_min = o.policy.feedback.k_max = 200;  // more than any sequence's host tokens
  Engine hybrid(*model, o);
  constexpr int kSteps = 40;
  const auto a = decode_batch(full, ids, kSteps), b = decode_batch(hybrid, ids, kSteps);
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
  EXPECT_LE(max_diff, 1e-4);
  // Each sequence of the batch has its own trace, one entry per decode step.
  ASSERT_NE(hybrid.scheduler(), nullptr);
  for (int s = 0; s < 2; ++s) {
    const auto& trace = hybrid.scheduler()->trace(s);
    ASSERT_EQ(trace.size(), static_cast<size_t>(kSteps));
    for (const auto& e : trace) {
      EXPECT_EQ(e.select, Selection::Post);
      EXPECT_GE(e.K, e.host_tokens);
      EXPECT_GT(e.host_tokens, 0);
    }
  }
  const nlohmann::json j = hybrid.scheduler()->to_json();
  EXPECT_EQ(j["seqs"].size(), 2u);
  EXPECT_EQ(j["k_min"], 200);
  // reset(seq) starts that sequence's scheduler over and leaves the other's alone.
  hybrid.reset(0);
  EXPECT_TRUE(hybrid.scheduler()->trace(0).empty());
  EXPECT_EQ(hybrid.scheduler()->trace(1).size(), static_cast<size_t>(kSteps));
}

// The first decode step after a prefill, or after a loaded state, attends the floor of the host
// tokens the prompt left (--k-min-share), not k_min: the floor is known before any step.
TEST(Sched, FirstStepAfterAPrefillAttendsTheFloor) {
  const auto model = load_model(tiny_model("llama-gqa").string());
  const auto ids = random_ids(200, 12, model->spec.vocab_size);
  EngineOptions o;
  o.threads = 2;
  o.ctx = 200;
  o.ubatch = 32;
  o.policy = policy_preset("hybrid");
  o.policy.window = 16;
  o.policy.n_sinks = 2;
  o.policy.evict_block = 4;
  o.policy.feedback.k_min = 4;
  o.policy.feedback.k_max = 8;
  o.policy.feedback.k_min_share = 0.5;  // device + K tokens >= half the context
  o.policy.feedback.k_max_share = 0.5;
  Engine engine(*model, o);
  ASSERT_TRUE(engine.exact_prefill());
  EXPECT_EQ(engine.step_plan(0).K, 4) << "no context yet: k_min";
  PrefillState state = PrefillState::for_model(*model);
  std::vector<float> logits(static_cast<size_t>(engine.vocab_size()));
  engine.prefill(0, std::span(ids.data(), 150), logits.data(), nullptr, &state);
  const int64_t host = engine.attention().host_tokens(0);
  ASSERT_GT(host, 100);
  const FeedbackScheduler rule(feedback_params(o.policy, 4, 0));
  const int floor = rule.k_floor(host);
  ASSERT_GT(floor, 50);
  EXPECT_EQ(engine.step_plan(0).K, floor);
  const int seq = 0;
  engine.decode(std::span(&seq, 1), std::span(ids.data() + 150, 1), logits.data());
  ASSERT_EQ(engine.scheduler()->trace(0).size(), 1u);
  EXPECT_EQ(engine.scheduler()->trace(0)[0].K, floor);
  EXPECT_GE(engine.layer_stats().back().selected, static_cast<int64_t>(floor) * model->spec.n_kv_heads)
      << "the host stage selected that many a kv-head";
  // A recorded state loaded by another engine of the policy: the same.
  Engine loaded(*model, o);
  loaded.load_state(0, state, nullptr);
  EXPECT_EQ(loaded.step_plan(0).K, floor);
}

// A model large enough that its device stage takes milliseconds per step: the cached SmolLM2,
// or seeded random weights of its shape.
std::unique_ptr<Model> timing_model() {
  const std::string real = smollm2_path();
  if (!real.empty()) return load_model(real);
  return make_synthetic_model(source_dir() / "configs/models/smollm2-135m.yaml", DType::Q8_0, 1);
}

// The slow host of the two tests below: 80 ms more host time per step during decode steps
// [20, 50), against a device stage of ~25 ms (SmolLM2 on 2 cores).
constexpr int64_t kSlowFrom = 20, kSlowUntil = 50;
constexpr double kSlowHostSeconds = 0.080;
constexpr int kDelayedSteps = 109;

// The hybrid preset at k_min 32 with the host's budget all of T_dev, as with cores of its own: on a
// loaded 2-core machine the default (a tenth of the device's time) puts Post at k_min on the edge
// of it without any delay, and these tests are about the delay.
Policy delayed_host_policy() {
  Policy p = policy_preset("hybrid");
  p.window = 64;
  p.feedback.k_min = 32;
  p.feedback.shared_loss = 1.0f;
  return p;
}

// The scheduler fed the timings of such a run directly, modelled on what a run of the test below
// measured on 2 cores (6 Dec 2026): T_dev ~25 ms; the host stage (with its transfers) ~1.3 ms +
// 4 us per selected token + 0.5 us per host token (the key scan) under Post-QKᵀ, and ~2 ms + 4 us
// per selected token under Pre-QKᵀ (the partial predictor); 248 host tokens, 16 more every 16
// steps (--evict-block). Made up rather than measured, the timings leave when the scheduler
// switches to its rules alone, not to how fast (or how loaded) the machine running the test is.
// slow_scan_only: the delay slows Post's key scan alone (another job takes the memory bandwidth
// the scan needs), not the whole host stage (the test-only hook's sleep).
nlohmann::json run_delayed_host(double pre_base, bool slow_scan_only) {
  constexpr int kLayers = 30;
  constexpr double kDevice = 0.025, kPerSelected = 4e-6, kScanPerHostToken = 0.5e-6;
  constexpr double kPostBase = 0.0013;
  BatchScheduler sched(delayed_host_policy(), 32, 1);
  const int seq = 0;
  for (int64_t step = 0; step < kDelayedSteps; ++step) {
    const StepPlan plan = sched.plan(seq);
    const int64_t host_tokens = 248 + 16 * (step / 16);
    const double selected = kPerSelected * static_cast<double>(std::min<int64_t>(plan.K, host_tokens));
    double t_host = plan.select == Selection::Pre
                        ? pre_base + selected
                        : kPostBase + selected + kScanPerHostToken * static_cast<double>(host_tokens);
    if (step >= kSlowFrom && step < kSlowUntil && (plan.select == Selection::Post || !slow_scan_only))
      t_host += kSlowHostSeconds;
    StepTiming timing;  // spread over the layers, as the step clock measures it
    timing.step = step;
    timing.layers.assign(kLayers, LayerStepTiming{kDevice / kLayers, t_host / kLayers, 0, 0, 0});
    // A predictor that finds 90% of Post's top-K where a step measures it: the recall rule allows Pre.
    const double recall = plan.measure_recall ? 0.9 : -1.0;
    sched.after_step(std::span(&seq, 1), timing, std::span(&host_tokens, 1), std::span(&recall, 1));
  }
  nlohmann::json j = sched.to_json();
  j["summary"] = sched.summary(seq);
  return j;
}

// A key scan slowed by 80 ms a step sends the scheduler to Pre, which skips it, and it comes
// back once the delay is gone (a probe measures the scan afresh, then the hysteresis).
TEST(Sched, SlowScanSwitchesToPreAndBack) {
  const nlohmann::json j = run_delayed_host(0.002, true);
  const std::string summary = j["summary"];
  const auto& trace = j["trace"];
  ASSERT_EQ(trace.size(), static_cast<size_t>(kDelayedSteps));
  int first_pre = -1, last_pre = -1;
  for (const auto& e : trace) {
    const int step = e["step"].get<int>();
    if (e["select"] == "pre") {
      if (first_pre < 0) first_pre = step;
      last_pre = step;
    }
    EXPECT_GE(e["k"].get<int>(), 32);
    EXPECT_LE(e["k"].get<int>(), 1024);
  }
  ASSERT_GE(first_pre, 0) << "never switched to Pre: " << summary;
  EXPECT_GE(first_pre, kSlowFrom) << "switched before the delay began: " << summary;
  EXPECT_LT(first_pre, 40) << "the delay began at step 20: " << summary;
  // Back to Post once the delay is gone (the probe after 32 Pre steps, the hysteresis of 8).
  EXPECT_GE(last_pre, kSlowUntil) << summary;
  EXPECT_LT(last_pre, 90) << summary;
  EXPECT_EQ(trace.back()["select"], "post") << summary;
  EXPECT_GE(j["switches"].get<int>(), 2) << summary;
  // The trace holds the host time fed to it, in milliseconds.
  ASSERT_EQ(trace[30]["select"], "pre") << summary;
  EXPECT_NEAR(trace[30]["t_host_ms"].get<double>(), 1e3 * (0.002 + 4e-6 * 32), 1e-6);
}

// A slow host stage (80 ms a step in both modes, as the hook's sleep) with the costs the 6 Dec run
// measured: Pre (2 ms) is dearer than Post at the floor (~1.5 ms). Host-bound at the floor, the
// scheduler still tries Pre, and the first comparison sends it back (the rule "pre-costly"), not
// the end of the delay; Pre waits 32 steps before another try.
TEST(Sched, SlowHostLeavesPreThatCostsMore) {
  const nlohmann::json j = run_delayed_host(0.002, false);
  const std::string summary = j["summary"];
  const auto& trace = j["trace"];
  int pre = 0, costly = -1;
  for (const auto& e : trace) {
    pre += e["select"] == "pre";
    if (costly < 0 && e["rule"] == "pre-costly") costly = e["step"].get<int>();
  }
  ASSERT_GE(costly, kSlowFrom) << summary;
  EXPECT_LT(costly, kSlowUntil) << summary;
  EXPECT_LE(pre, 3 * 2) << summary;  // a try or two of the settle steps
  EXPECT_EQ(trace.back()["select"], "post") << summary;
  EXPECT_NE(summary.find("as no cheaper than Post"), std::string::npos) << summary;
}

// The same slow host in a real run, made by a hook (EngineOptions::host_job_hook) that sleeps at
// the start of every layer's host job. How fast the machine is decides when the scheduler
// switches, so this asserts only what no machine can change: every slow step measured the delay
// (a sleep lasts at least as long as asked), every step ran the plan its trace entry records, and
// those plans are what the scheduler's rules make of the timings measured: a fresh scheduler fed
// the trace's timings plans step for step the same.
TEST(Sched, DelayedHostStageRunsThePlansItsSchedulerMakes) {
  const auto model = timing_model();
  const int n_layers = model->spec.n_layers;
  EngineOptions o;
  o.ctx = 410;
  o.policy = delayed_host_policy();
  std::vector<std::atomic<int>> hook_calls(kDelayedSteps);
  o.host_job_hook = [&hook_calls, n_layers](int64_t step, int) {
    hook_calls.at(static_cast<size_t>(step)).fetch_add(1);
    if (step >= kSlowFrom && step < kSlowUntil)
      std::this_thread::sleep_for(std::chrono::duration<double>(kSlowHostSeconds / n_layers));
  };
  Engine engine(*model, o);
  const std::vector<int32_t> ids = random_ids(300, 5, 30000);
  std::vector<float> logits(static_cast<size_t>(engine.vocab_size()));
  engine.prefill(0, ids, logits.data());
  const int seq = 0;
  std::vector<StepPlan> ran;
  for (int step = 0; step < kDelayedSteps; ++step) {  // greedy, as generate --temp 0
    ran.push_back(engine.step_plan(seq));
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    engine.decode(std::span(&seq, 1), std::span(&next, 1), logits.data());
  }
  const auto& trace = engine.scheduler()->trace(seq);
  const std::string summary = engine.scheduler()->summary(seq);
  ASSERT_EQ(trace.size(), static_cast<size_t>(kDelayedSteps)) << summary;

  const Policy& policy = engine.options().policy;  // as the engine resolved it (host threads)
  const double host_share =
      plan_cores(engine.options().threads, available_cpus(), policy.host_workers(), true).host_share();
  BatchScheduler replay(policy, 32, 1, host_share);
  for (size_t step = 0; step < trace.size(); ++step) {
    const SchedTraceEntry& e = trace[step];
    EXPECT_EQ(hook_calls[step].load(), n_layers) << "step " << step;
    EXPECT_EQ(e.K, ran[step].K) << "step " << step;
    EXPECT_EQ(e.select, ran[step].select) << "step " << step;
    EXPECT_EQ(e.K, replay.plan(seq).K) << "step " << step << "; " << summary;
    EXPECT_EQ(e.select, replay.plan(seq).select) << "step " << step << "; " << summary;
    EXPECT_GE(e.K, 32);
    if (e.select == Selection::Pre) {
      EXPECT_EQ(e.K, 32) << "step " << step;  // Pre runs at k_min
    }
    // The slow steps measured the delay; 1 us less for the nanoseconds each sleep rounds off.
    if (static_cast<int64_t>(step) >= kSlowFrom && static_cast<int64_t>(step) < kSlowUntil) {
      EXPECT_GE(e.t_host, kSlowHostSeconds - 1e-6) << "step " << step;
    }
    EXPECT_EQ(e.recall >= 0, ran[step].measure_recall) << "step " << step;  // measured where planned
    StepTiming timing;
    timing.step = static_cast<int64_t>(step);
    timing.layers.assign(1, LayerStepTiming{e.t_dev, e.t_host, e.t_tx, 0, 0});
    replay.after_step(std::span(&seq, 1), timing, std::span(&e.host_tokens, 1), std::span(&e.recall, 1));
  }
  EXPECT_EQ(replay.switches(seq), engine.scheduler()->switches(seq));
  EXPECT_EQ(replay.summary(seq), summary);
}

TEST(Sched, KminProfileIsWrittenAndReadByKMinAuto) {
  const auto cache = temp_dir("sched_kmin");
  const std::string model = "-m '" + tiny_model("llama-gqa").string() + "'";
  write_ids(cache / "ids.json", random_ids(260, 3, 300));
  const std::string env = "HG_CACHE='" + cache.string() + "' '" + (bin_dir() / "hybridgen").string() + "' ";
  const std::string ids = " --ids-file '" + (cache / "ids.json").string() + "'";
  // No profile yet: the logged default.
  RunResult g = run(env + "generate " + model + ids + " -n 2 --policy hybrid --window 32 -v");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.err.find("no K_min profile for this model"), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("using k_min 64"), std::string::npos) << g.err;

  const RunResult k = run(env + "eval --task kmin --json " + model + ids +
                          " --ctx 200 --window 32 --kv-dtype f32 --ks 4,16,64,256 --tolerance 0.02");
  ASSERT_EQ(k.exit_code, 0) << k.err;
  const auto j = nlohmann::json::parse(k.out);
  const fs::path profile = j["profile"].get<std::string>();
  EXPECT_EQ(profile.parent_path(), cache / "profiles");
  ASSERT_TRUE(fs::exists(profile));
  ASSERT_EQ(j["points"].size(), 4u);
  // Agreement grows with K; K 256 keeps every host token (at most 168): agreement 1.
  EXPECT_LT(j["points"][0]["top1_agreement"].get<double>(), j["points"][3]["top1_agreement"].get<double>());
  EXPECT_DOUBLE_EQ(j["points"][3]["top1_agreement"].get<double>(), 1.0);
  const int k_min = j["k_min"].get<int>();
  EXPECT_GT(k_min, 4);

  g = run(env + "generate " + model + ids + " -n 2 --policy hybrid --window 32 -v --k-min auto");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.err.find("k_min " + std::to_string(k_min) + " from the K_min profile " + profile.string()),
            std::string::npos)
      << g.err;

  // A corrupt profile is an error naming the file.
  std::ofstream(profile) << "{\"fingerprint\": ";
  g = run(env + "generate " + model + ids + " -n 2 --policy hybrid --window 32");
  EXPECT_NE(g.exit_code, 0);
  EXPECT_EQ(std::count(g.err.begin(), g.err.end(), '\n'), 1) << g.err;
  EXPECT_NE(g.err.find(profile.string() + ": corrupt K_min profile"), std::string::npos) << g.err;
}

TEST(Sched, AKGivenByHandWithoutSchedIsTheFixedSchedule) {
  const auto dir = temp_dir("sched_fixed");
  write_ids(dir / "ids.json", random_ids(120, 9, 300));
  const std::string base = "generate -m '" + tiny_model("llama-gqa").string() + "' --ids-file '" +
                           (dir / "ids.json").string() + "' -n 6 --policy hybrid --window 32 --stats-json '" +
                           (dir / "s.json").string() + "'";
  auto mode = [&](const std::string& extra) {
    const RunResult r = run_hybridgen(base + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(read_file(dir / "s.json"));
    return j["sched"]["mode"].get<std::string>() + " " + std::to_string(j["sched"]["trace"][0]["k"].get<int>());
  };
  EXPECT_EQ(mode(""), "adaptive 64");
  EXPECT_EQ(mode(" --k 8"), "fixed 8");
  EXPECT_EQ(mode(" --k 8 --sched adaptive --k-min 16"), "adaptive 16");
}

}  // namespace
}  // namespace hg::test
