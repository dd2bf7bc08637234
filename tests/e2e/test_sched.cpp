// The feedback scheduler end to end: adaptive K that keeps every host token equals full
// attention; a host stage slowed down by an injected hook (EngineOptions::host_job_hook) makes a real run
// switch to Pre-QKᵀ and back once the delay is gone; `eval --task kmin` writes a profile that
// `--k-min auto` reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "hybridgen/engine.h"
#include "hybridgen/model.h"
#include "sched/batch_scheduler.h"
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

// A model large enough that its device stage takes milliseconds per step: the cached SmolLM2,
// or seeded random weights of its shape.
std::unique_ptr<Model> timing_model() {
  const std::string real = smollm2_path();
  if (!real.empty()) return load_model(real);
  return make_synthetic_model(source_dir() / "configs/models/smollm2-135m.yaml", DType::Q8_0, 1);
}

TEST(Sched, DelayedHostStageSwitchesToPreAndBack) {
  const auto model = timing_model();
  EngineOptions o;
  o.ctx = 410;
  o.policy = policy_preset("hybrid");
  o.policy.window = 64;
  o.policy.feedback.k_min = 32;
  // The host's budget is all of T_dev, as with cores of its own: on a loaded 2-core machine the
  // default (a tenth of the device's time) puts Post at k_min on the edge of it without any
  // delay, and this test is about the delay.
  o.policy.feedback.shared_loss = 1.0f;
  // The host stage sleeps 80 ms per step (T_dev is ~20 ms) during decode steps [20, 50), spread
  // over its layer jobs: the injected hook stands for a slower host.
  const int n_layers = model->spec.n_layers;
  o.host_job_hook = [n_layers](int64_t step, int) {
    if (step >= 20 && step < 50)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(80.0 / n_layers));
  };
  Engine engine(*model, o);
  const std::vector<int32_t> ids = random_ids(300, 5, 30000);
  std::vector<float> logits(static_cast<size_t>(engine.vocab_size()));
  engine.prefill(0, ids, logits.data());
  const int seq = 0;
  for (int step = 0; step < 109; ++step) {  // greedy, as generate --temp 0
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    engine.decode(std::span(&seq, 1), std::span(&next, 1), logits.data());
  }
  const nlohmann::json j = engine.scheduler()->to_json();
  const std::string summary = engine.scheduler()->summary(0);
  const auto& trace = j["trace"];
  ASSERT_EQ(trace.size(), 109u);
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
  EXPECT_GE(first_pre, 20) << "switched before the delay began";
  EXPECT_LT(first_pre, 40) << "the delay began at step 20";
  // Back to Post once the delay is gone (hysteresis 8 steps, plus the EWMA's memory).
  EXPECT_GE(last_pre, 50);
  EXPECT_LT(last_pre, 90) << summary;
  EXPECT_EQ(trace.back()["select"], "post");
  EXPECT_GE(j["switches"].get<int>(), 2);
  // The slow steps show in the trace's host time.
  EXPECT_GT(trace[30]["t_host_ms"].get<double>(), 40.0);
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
