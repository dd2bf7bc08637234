// The feedback scheduler on synthetic latency sequences: a host stage whose cost is
// overhead + scan · host_tokens (Post only) + per_token · K, a device stage of fixed cost, both
// with optional multiplicative noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "hybridgen/error.h"
#include "sched/feedback.h"
#include "test_expect.h"

namespace hg {
namespace {

struct Machine {
  double t_dev = 10e-3;      // s per step
  double overhead = 0.5e-3;  // host cost independent of K and mode (s)
  double scan = 0;           // Post only: s per host token
  double per_token = 5e-6;   // s per selected token (selection, gather, transfer)
  double noise = 0;          // uniform multiplicative noise, ±noise
  int64_t host_tokens = 4096;
  double recall = -1;        // the predictor's recall of Post's top-K where a step measures it
};

class Sim {
 public:
  explicit Sim(const FeedbackParams& p = {}, uint32_t seed = 1) : sched(p), rng(seed) {}

  SchedPlan step(const Machine& m) {
    const SchedPlan plan = sched.plan();
    const int64_t k = std::min<int64_t>(plan.K, m.host_tokens);
    double host = m.overhead + m.per_token * static_cast<double>(k);
    if (plan.select == Selection::Post) host += m.scan * static_cast<double>(m.host_tokens);
    StepTimes t;
    t.t_dev = m.t_dev * jitter(m.noise);
    t.t_host = 0.9 * host * jitter(m.noise);
    t.t_tx = 0.1 * host;
    t.host_tokens = m.host_tokens;
    t.recall = plan.measure_recall && plan.select == Selection::Post ? m.recall : -1;
    return sched.update(t);
  }
  void run(const Machine& m, int steps) {
    for (int i = 0; i < steps; ++i) step(m);
  }

  FeedbackScheduler sched;

 private:
  double jitter(double noise) {
    if (noise == 0) return 1.0;
    return std::uniform_real_distribution<double>(1.0 - noise, 1.0 + noise)(rng);
  }
  std::mt19937 rng;
};

// Host cost of the machine in Post mode at K (what the scheduler balances against T_dev).
double post_cost(const Machine& m, double k) {
  return m.overhead + m.scan * static_cast<double>(m.host_tokens) + m.per_token * k;
}

TEST(Feedback, StartsAtKMinPost) {
  FeedbackParams p;
  p.k_min = 48;
  FeedbackScheduler s(p);
  EXPECT_EQ(s.plan().K, 48);
  EXPECT_EQ(s.plan().select, Selection::Post);
  EXPECT_EQ(s.switches(), 0);
}

TEST(Feedback, DeviceBoundClimbsToKMaxAndStays) {
  Sim sim;
  Machine m;  // host cost at K 1024: 0.5 + 5.1 ms < 9 ms
  int reached = -1;
  for (int i = 0; i < 100; ++i) {
    sim.step(m);
    if (reached < 0 && sim.sched.plan().K == 1024) reached = i;
    if (reached >= 0) {
      ASSERT_EQ(sim.sched.plan().K, 1024) << "step " << i;
    }
  }
  // 64 -> 1024 at x1.5 per step: 7 steps; the EWMA of the per-token cost may hold it a few more.
  EXPECT_GE(reached, 0);
  EXPECT_LE(reached, 12);
  EXPECT_EQ(sim.sched.plan().select, Selection::Post);
  EXPECT_EQ(sim.sched.switches(), 0);
}

TEST(Feedback, DeviceBoundFollowsTheHostTokenCount) {
  Sim sim;
  Machine m;
  m.host_tokens = 300;  // fewer host tokens than k_max: K is all of them, and grows with them
  sim.run(m, 30);
  EXPECT_EQ(sim.sched.plan().K, 300);
  for (int i = 0; i < 50; ++i) {
    ++m.host_tokens;
    sim.step(m);
    EXPECT_EQ(sim.sched.plan().K, m.host_tokens);
  }
  EXPECT_EQ(sim.sched.plan().select, Selection::Post);
}

TEST(Feedback, HostBoundFallsToKMinThenPre) {
  FeedbackParams p;
  Sim sim(p);
  Machine m;
  sim.run(m, 30);  // device-bound first: K climbs to k_max
  ASSERT_EQ(sim.sched.plan().K, 1024);
  m.scan = 3e-6;  // the key scan over 4096 host tokens: 12.3 ms > T_dev 10 ms
  int at_kmin = -1, pre = -1;
  for (int i = 0; i < 60; ++i) {
    const SchedPlan plan = sim.step(m);
    if (at_kmin < 0 && plan.K == p.k_min) at_kmin = i;
    if (pre < 0 && plan.select == Selection::Pre) pre = i;
    if (plan.select == Selection::Post && !plan.probe) {
      ASSERT_TRUE(pre < 0) << "back to Post at step " << i << " although Post cannot fit";
    }
  }
  // Two steps for the EWMA to say host-bound, then K shrinks by T_dev / cost (~0.7) per step:
  // 1024 -> 64 in about 8 more.
  ASSERT_GE(at_kmin, 0);
  EXPECT_LE(at_kmin, 16);
  ASSERT_GE(pre, 0);
  EXPECT_LE(pre - at_kmin, p.pre_after + 1);
  EXPECT_EQ(sim.sched.plan().K, p.k_min);
  EXPECT_EQ(sim.sched.switches(), 1);
  // The key-scan cost was measured from the two modes' costs at k_min: 3 µs per host token.
  EXPECT_NEAR(sim.sched.scan_cost_per_token(), 3e-6, 0.5e-6);
}

// Shared cores (the CPU device, 2 cores, one host worker: host_share 0.5). A Post key scan of
// 0.6 · T_dev is hidden on a device of its own (K climbs, Post stays), but on shared cores it
// costs the device 0.3 · T_dev, over shared_loss (0.1): host-bound, so K falls and the scheduler
// goes to Pre, and stays there; a scan of 0.1 · T_dev (0.05 of the device) keeps Post.
TEST(Feedback, SharedCoresChargeTheHostToTheDevice) {
  Machine m;
  m.scan = 1.5e-6;  // 4096 host tokens: 6.1 ms of a 10 ms device step
  FeedbackParams own;
  Sim separate(own);
  separate.run(m, 60);
  EXPECT_EQ(separate.sched.plan().select, Selection::Post);
  EXPECT_GT(separate.sched.plan().K, own.k_min);

  FeedbackParams shared;
  shared.host_share = 0.5;
  Sim cpu(shared);
  int pre = -1;
  for (int i = 0; i < 60; ++i)
    if (cpu.step(m).select == Selection::Pre && pre < 0) pre = i;
  ASSERT_GE(pre, 0);
  EXPECT_LE(pre, shared.pre_after + 4);
  cpu.run(m, 200);
  EXPECT_EQ(cpu.sched.plan().select, Selection::Pre);
  EXPECT_EQ(cpu.sched.plan().K, shared.k_min);
  EXPECT_EQ(cpu.sched.switches(), 1);
  // Probes confirmed the scan's cost at Pre steps 32, 96 and 224: their intervals double.
  EXPECT_EQ(cpu.sched.probes(), 3);
  EXPECT_NEAR(cpu.sched.scan_cost_per_token(), m.scan, 0.1 * m.scan);

  m.scan = 0.15e-6;  // 0.6 ms: Post at k_min costs 1.4 ms, 0.07 of the device: affordable
  Sim light(shared);
  light.run(m, 100);
  EXPECT_EQ(light.sched.plan().select, Selection::Post);
  EXPECT_EQ(light.sched.switches(), 0);
  // K balances the host at (1 - margin) of its budget B = 0.2 · T_dev: 1.8 ms, K ~ 200.
  const double budget = 0.2 * m.t_dev, cost = post_cost(m, light.sched.plan().K);
  EXPECT_LE(cost, budget * 1.05);
  EXPECT_GE(cost, budget * 0.8);

  // Many cores per host worker: a share of 1/16 leaves the host all of T_dev, as on a GPU.
  m.scan = 1.5e-6;
  FeedbackParams wide;
  wide.host_share = 1.0 / 16;
  Sim big(wide);
  big.run(m, 60);
  EXPECT_EQ(big.sched.plan().select, Selection::Post);
  EXPECT_EQ(big.sched.plan().K, separate.sched.plan().K);
}

TEST(Feedback, StepChangeConvergesToTheNewBalance) {
  FeedbackParams p;
  Sim sim(p);
  Machine m;
  m.overhead = 2e-3;
  m.per_token = 10e-6;  // balance at T_dev 10 ms: (9 - 2) / 0.01 = 700 (dead band up to 800)
  // K settles where the predicted cost sits in the dead band [(1 - margin) T_dev, T_dev].
  auto check_balanced = [&](const char* when) {
    const double cost = post_cost(m, sim.sched.plan().K);
    EXPECT_GE(cost, (1 - p.margin) * m.t_dev * 0.97) << when << ": K " << sim.sched.plan().K;
    EXPECT_LE(cost, m.t_dev * 1.03) << when << ": K " << sim.sched.plan().K;
  };
  sim.run(m, 40);
  check_balanced("before");
  m.t_dev = 6e-3;  // balance now (5.4 - 2) / 0.01 = 340
  constexpr int kBound = 25;
  sim.run(m, kBound);
  check_balanced("after the drop");
  m.t_dev = 12e-3;  // and back up: balance 880
  sim.run(m, kBound);
  check_balanced("after the rise");
  EXPECT_EQ(sim.sched.switches(), 0);
}

TEST(Feedback, NoiseAroundTheModeBoundaryDoesNotFlap) {
  // Post at k_min costs T_dev on average, ±20% noise on every measurement: the worst place for
  // the mode to flap. Pre is cheap.
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    FeedbackParams p;
    Sim sim(p, seed);
    Machine m;
    m.noise = 0.2;
    m.overhead = 0.2e-3;
    m.per_token = 2e-6;
    m.scan = (m.t_dev - m.overhead - m.per_token * p.k_min) / static_cast<double>(m.host_tokens);
    sim.run(m, 2000);
    EXPECT_LE(sim.sched.switches(), 4) << "seed " << seed;
    for (const auto& e : sim.sched.trace()) ASSERT_GE(e.K, p.k_min);
  }
}

TEST(Feedback, NoiseAroundABalanceInsideTheRangeKeepsPost) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    FeedbackParams p;
    Sim sim(p, seed);
    Machine m;
    m.noise = 0.2;
    m.overhead = 2e-3;
    m.per_token = 20e-6;  // balance near K 350
    sim.run(m, 2000);
    EXPECT_EQ(sim.sched.switches(), 0) << "seed " << seed;
    int lo = 1 << 30, hi = 0;
    for (size_t i = 200; i < sim.sched.trace().size(); ++i) {
      lo = std::min(lo, sim.sched.trace()[i].K);
      hi = std::max(hi, sim.sched.trace()[i].K);
    }
    // K wanders with the noise, but around the balance, not across the range.
    EXPECT_GE(lo, 150) << "seed " << seed;
    EXPECT_LE(hi, 600) << "seed " << seed;
  }
}

TEST(Feedback, SwitchesBackToPostWhenSlackReturns) {
  FeedbackParams p;
  Sim sim(p);
  Machine m;
  m.scan = 0.5e-6;  // Post at K 64: 0.5 + 2 + 0.3 ms: fits
  sim.run(m, 40);
  ASSERT_EQ(sim.sched.plan().select, Selection::Post);
  m.overhead = 9e-3;  // something slows the host stage in both modes (the test-only delay hook)
  sim.run(m, 60);
  ASSERT_EQ(sim.sched.plan().select, Selection::Pre);
  ASSERT_EQ(sim.sched.plan().K, p.k_min);
  m.overhead = 0.5e-3;  // and goes away (the probe 4 steps later compares Post with the newest Pre
                        // step, not with the EWMA that still remembers the slow ones: Pre is cheap)
  int back = -1;
  for (int i = 0; i < 100 && back < 0; ++i) {
    const SchedPlan plan = sim.step(m);
    if (plan.select == Selection::Post && !plan.probe) back = i;
  }
  ASSERT_GE(back, 0);
  EXPECT_GE(back, p.hysteresis - 1);   // not before the hysteresis
  EXPECT_LE(back, p.hysteresis + 10);  // nor long after (the EWMA of the Pre cost must drop first)
  sim.run(m, 100);
  EXPECT_EQ(sim.sched.plan().select, Selection::Post);
  EXPECT_GT(sim.sched.plan().K, 512);
  EXPECT_EQ(sim.sched.switches(), 2);
}

// A host that is slow only until the switch (a loaded machine, another job): the scan's cost,
// measured as Post's cost before the switch less Pre's after it, comes out 5x too large, and
// Post never seems to fit again. A probe measures it afresh and the run returns to Post.
TEST(Feedback, AProbeCorrectsAnInflatedScanEstimate) {
  for (const int probe_every : {32, 0}) {
    FeedbackParams p;
    p.probe_every = probe_every;
    Sim sim(p);
    Machine m;
    m.scan = 0.5e-6;  // Post at K 64: 0.5 + 2 + 0.3 ms, far inside T_dev 10 ms
    int switched = -1, back = -1;
    for (int i = 0; i < 200; ++i) {
      m.overhead = switched < 0 ? 9e-3 : 0.5e-3;
      const SchedPlan plan = sim.step(m);
      if (switched < 0 && plan.select == Selection::Pre) switched = i;
      if (switched >= 0 && back < 0 && plan.select == Selection::Post && !plan.probe) back = i;
    }
    ASSERT_GE(switched, 0);
    if (probe_every == 0) {  // what happened before probes: Pre for good
      EXPECT_EQ(back, -1);
      EXPECT_GT(sim.sched.scan_cost_per_token(), 4 * m.scan);
      continue;
    }
    // The probe after 32 Pre steps, then the hysteresis (8 steps).
    ASSERT_GE(back, 0);
    EXPECT_LE(back - switched, 32 + p.hysteresis + 4);
    EXPECT_NEAR(sim.sched.scan_cost_per_token(), m.scan, 0.1 * m.scan);
    EXPECT_EQ(sim.sched.plan().select, Selection::Post);
    EXPECT_GT(sim.sched.plan().K, 512);
    EXPECT_EQ(sim.sched.switches(), 2);
    EXPECT_EQ(sim.sched.probes(), 1);
  }
}

// The first decode steps run cold (10x their cost here): measured, not smoothed, no switch.
TEST(Feedback, ColdFirstStepsDoNotSwitchToPre) {
  for (const auto& [warmup, pre_after] : {std::pair{4, 3}, std::pair{4, 1}, std::pair{0, 3}}) {
    FeedbackParams p;
    p.host_share = 0.5;  // shared cores: the host's budget is 0.2 T_dev = 2 ms
    p.warmup_steps = warmup;
    p.pre_after = pre_after;  // 1: a single host-bound step would switch, were it counted
    Sim sim(p);
    Machine m;
    m.scan = 0.1e-6;  // Post at K 64: 0.5 + 0.4 + 0.3 ms = 1.2 ms warm
    Machine cold = m;
    cold.overhead = 10 * m.overhead, cold.scan = 10 * m.scan, cold.per_token = 10 * m.per_token;
    sim.run(cold, 4);
    sim.run(m, 60);
    if (warmup == 0) {  // three cold steps at k_min are enough to leave Post
      EXPECT_GE(sim.sched.switches(), 1);
      continue;
    }
    EXPECT_EQ(sim.sched.switches(), 0);
    EXPECT_EQ(sim.sched.plan().select, Selection::Post);
    EXPECT_GT(sim.sched.plan().K, p.k_min);
  }
}

TEST(Feedback, PreThatSavesNothingIsLeftAndSeldomRetried) {
  // A host stage that costs the same in both modes (no key scan to save: overhead only) and Post
  // that never fits: host-bound at the floor, so Pre is tried, but it saves less than
  // min_pre_saving, so the scheduler goes back to Post at once. It tries Pre again after 8 probe
  // intervals (256 steps) while the host tokens stand still, or once they have grown by a quarter.
  FeedbackParams p;
  Sim sim(p);
  Machine m;
  m.overhead = 12e-3;
  const auto count = [&](SchedRule r) {
    const auto& tr = sim.sched.trace();
    return std::count_if(tr.begin(), tr.end(), [r](const SchedTraceEntry& e) { return e.rule == r; });
  };
  const auto pre_steps = [&] {
    const auto& tr = sim.sched.trace();
    return std::count_if(tr.begin(), tr.end(), [](const SchedTraceEntry& e) { return e.select == Selection::Pre; });
  };
  sim.run(m, 200);
  EXPECT_EQ(count(SchedRule::PreCostly), 1);
  EXPECT_EQ(sim.sched.switches(), 2);
  EXPECT_LE(pre_steps(), p.settle_steps);
  EXPECT_EQ(sim.sched.plan().select, Selection::Post);
  EXPECT_NE(describe_trace(sim.sched.trace(), sim.sched.switches(), p.k_min, p.k_max).find("as no cheaper than Post"),
            std::string::npos);
  sim.run(m, 1000);  // tokens standing still: a try every ~260 steps
  EXPECT_GE(count(SchedRule::PreCostly), 4);
  EXPECT_LE(count(SchedRule::PreCostly), 5);
  const auto tries = count(SchedRule::PreCostly);
  m.host_tokens = 4096 + 4096 / 4;  // the context grew by a quarter: the next host-bound steps try Pre
  sim.run(m, 10);
  EXPECT_EQ(count(SchedRule::PreCostly), tries + 1);
  EXPECT_EQ(sim.sched.switches(), 2 * (tries + 1));  // every try ends in a return
  EXPECT_LE(pre_steps(), p.settle_steps * (tries + 1));

  // With min_pre_saving 0 the rule is off, even where Pre costs more than Post (here by 2 ms of a
  // 14 ms host stage): Pre holds (the key scan's cost comes out 0, so Post never seems to fit:
  // the paper's scheduler).
  FeedbackParams off_params;
  off_params.min_pre_saving = 0;
  Sim off(off_params);
  Machine dearer = m;
  dearer.overhead = 14e-3;
  dearer.scan = -0.5e-6;  // Post 2 ms cheaper than Pre at 4096 host tokens, and still host-bound
  off.run(dearer, 3000);
  EXPECT_EQ(off.sched.switches(), 1);
  EXPECT_EQ(off.sched.plan().select, Selection::Pre);
}

TEST(Feedback, PartialConfigurations) {
  Machine m;
  m.scan = 4e-6;  // host-bound in Post at any K
  FeedbackParams post_only;
  post_only.adapt_select = false;
  Sim a(post_only);
  a.run(m, 100);
  EXPECT_EQ(a.sched.plan().select, Selection::Post);
  EXPECT_EQ(a.sched.plan().K, post_only.k_min);
  EXPECT_EQ(a.sched.switches(), 0);

  FeedbackParams select_only;  // K pinned at 256: only the mode adapts
  select_only.k_min = select_only.k_max = 256;
  select_only.adapt_k = false;
  Sim b(select_only);
  Machine slow;
  slow.overhead = 12e-3;  // a slow host stage in both modes, Pre saving the key scan
  slow.scan = 1e-6;
  b.run(slow, 20);
  EXPECT_EQ(b.sched.plan().select, Selection::Pre);
  b.run(Machine{}, 40);
  EXPECT_EQ(b.sched.plan().select, Selection::Post);
  for (const auto& e : b.sched.trace()) ASSERT_EQ(e.K, 256);
  EXPECT_EQ(b.sched.switches(), 2);
}

TEST(Feedback, KNeverLeavesItsRange) {
  FeedbackParams p;
  p.k_min = 32;
  p.k_max = 200;
  FeedbackScheduler s(p);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ms(0.0, 20e-3);
  std::uniform_int_distribution<int64_t> tokens(0, 1000);
  for (int i = 0; i < 5000; ++i) {
    StepTimes t{ms(rng), ms(rng), ms(rng) * 0.1, tokens(rng)};
    if (i % 97 == 0) t.t_host = 0;  // degenerate samples too
    if (i % 89 == 0) t.t_dev = 0;
    const SchedPlan plan = s.update(t);
    ASSERT_GE(plan.K, p.k_min) << "step " << i;
    ASSERT_LE(plan.K, p.k_max) << "step " << i;
  }
}

TEST(Feedback, SequencesOfABatchAreIndependent) {
  // Two sequences' schedulers stepped in lockstep (as the engine does for a batch) evolve as if
  // each ran alone; resetting one leaves the other alone.
  FeedbackParams p;
  Machine host_bound, device_bound;
  host_bound.scan = 4e-6;
  std::vector<Sim> batch{Sim(p, 1), Sim(p, 2)};
  Sim alone0(p, 1), alone1(p, 2);
  for (int i = 0; i < 80; ++i) {
    batch[0].step(host_bound);
    batch[1].step(device_bound);
    alone0.step(host_bound);
    alone1.step(device_bound);
  }
  EXPECT_EQ(batch[0].sched.plan().select, Selection::Pre);
  EXPECT_EQ(batch[1].sched.plan().K, 1024);
  for (int s = 0; s < 2; ++s) {
    const auto& a = batch[static_cast<size_t>(s)].sched.trace();
    const auto& b = (s == 0 ? alone0 : alone1).sched.trace();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].K, b[i].K);
      EXPECT_EQ(a[i].select, b[i].select);
    }
  }
  batch[0].sched.reset();
  EXPECT_EQ(batch[0].sched.plan().K, p.k_min);
  EXPECT_EQ(batch[0].sched.plan().select, Selection::Post);
  EXPECT_TRUE(batch[0].sched.trace().empty());
  EXPECT_EQ(batch[0].sched.switches(), 0);
  EXPECT_EQ(batch[1].sched.plan().K, 1024);
  EXPECT_EQ(batch[1].sched.trace().size(), 80u);
}

TEST(Feedback, ResetGivesAFreshScheduler) {
  Sim a, b;
  Machine m;
  m.scan = 4e-6;
  a.run(m, 50);
  a.sched.reset();
  for (int i = 0; i < 50; ++i) {
    const SchedPlan pa = a.step(m), pb = b.step(m);
    ASSERT_EQ(pa.K, pb.K);
    ASSERT_EQ(pa.select, pb.select);
  }
}

TEST(Feedback, NoHostTokensKeepsKMin) {
  FeedbackScheduler s;
  for (int i = 0; i < 10; ++i) s.update({10e-3, 0, 0, 0});
  EXPECT_EQ(s.plan().K, 64);
  EXPECT_EQ(s.plan().select, Selection::Post);
}

TEST(Feedback, BadParameters) {
  auto make = [](auto edit) {
    FeedbackParams p;
    edit(p);
    FeedbackScheduler s(p);
  };
  test::expect_error([&] { make([](FeedbackParams& p) { p.k_min = -1; }); }, {"--k-min must be >= 0"});
  test::expect_error([&] { make([](FeedbackParams& p) { p.k_min = 300, p.k_max = 200; }); },
                     {"--k-min 300 is larger than --k-max 200"});
  test::expect_error([&] { make([](FeedbackParams& p) { p.alpha = 0; }); }, {"--sched-alpha"});
  test::expect_error([&] { make([](FeedbackParams& p) { p.grow = 1; }); }, {"--sched-grow"});
  test::expect_error([&] { make([](FeedbackParams& p) { p.hysteresis = 0; }); }, {"--sched-hysteresis"});
  test::expect_error([&] { make([](FeedbackParams& p) { p.host_share = 1.5; }); }, {"host share"});
  test::expect_error([&] { make([](FeedbackParams& p) { p.shared_loss = 0; }); }, {"shared loss"});
}

TEST(Feedback, DescribeTrace) {
  Sim sim;
  Machine m;
  m.scan = 4e-6;
  sim.run(m, 20);
  const std::string d = describe_trace(sim.sched.trace(), sim.sched.switches(), 64, 1024);
  EXPECT_NE(d.find("K 64..64"), std::string::npos) << d;
  EXPECT_NE(d.find("1 switches"), std::string::npos) << d;
  EXPECT_NE(d.find("pre "), std::string::npos) << d;
}

// The hybrid preset's bounds of K: k_min 64 and k_max 1024, rising with the context (k_min_share
// 0.125, k_max_share 0.25) beside 1028 device tokens (window 1024 + 4 sinks).
FeedbackParams context_params() {
  FeedbackParams p;
  p.k_min = 64;
  p.k_max = 1024;
  p.k_min_share = 0.125;
  p.k_max_share = 0.25;
  p.device_tokens = 1028;
  p.min_recall = 0.8;
  return p;
}

// The floor and the ceiling follow the context: device + K tokens >= k_min_share of it.
TEST(Feedback, FloorAndCeilingFollowTheContext) {
  FeedbackParams p = context_params();
  FeedbackScheduler f(p);
  EXPECT_EQ(f.k_floor(3068), 64);      // 4K: the window alone is 25% of the context
  EXPECT_EQ(f.k_floor(15356), 1020);   // 16K: 2048 attended
  EXPECT_EQ(f.k_floor(31740), 3068);   // 32K: 4096 attended, 12.5%
  EXPECT_EQ(f.k_ceiling(3068), 1024);
  EXPECT_EQ(f.k_ceiling(31740), 8192 - 1028);
  p.k_min_share = p.k_max_share = 0;  // off: the fixed bounds
  EXPECT_EQ(FeedbackScheduler(p).k_floor(31740), 64);
  EXPECT_EQ(FeedbackScheduler(p).k_ceiling(31740), 1024);

  // Host-bound with a predictor too poor for Pre: K sits on the floor, which rises as the
  // context grows (the trace says so), and the run never leaves Post.
  p.k_min_share = 0.125;
  p.k_max_share = 0.25;
  Sim sim(p);
  Machine m;
  m.scan = 1e-5;  // Post's scan alone is host-bound
  m.recall = 0.5;
  for (int64_t n = 3068; n <= 31740; n += 256) {
    m.host_tokens = n;
    const SchedPlan plan = sim.step(m);
    EXPECT_EQ(plan.K, sim.sched.k_floor(n)) << n;
    EXPECT_EQ(plan.select, Selection::Post) << n;
  }
  const auto& tr = sim.sched.trace();
  EXPECT_TRUE(std::any_of(tr.begin(), tr.end(), [](const SchedTraceEntry& e) { return e.rule == SchedRule::Floor; }));
  EXPECT_EQ(tr.back().k_floor, sim.sched.k_floor(tr.back().host_tokens));
  EXPECT_EQ(sim.sched.switches(), 0);
  const std::string d = describe_trace(tr, 0, 64, 1024);
  EXPECT_NE(d.find("floor 3068 at 31740 host tokens"), std::string::npos) << d;

  // Device-bound at 32K: K climbs past k_max to the ceiling the context allows.
  Sim fast(p);
  Machine cheap;
  cheap.t_dev = 1.0;
  cheap.host_tokens = 31740;
  fast.run(cheap, 60);
  EXPECT_EQ(fast.sched.plan().K, 8192 - 1028);
}

// A context known before the first step (a prefill, a loaded state) raises that step's K to its
// floor: before, the floor was learnt from a step's measurements, so a request's first step ran at
// k_min, and the answer's first tokens with it.
TEST(Feedback, ContextKnownBeforeTheFirstStepRaisesItsK) {
  const FeedbackParams p = context_params();
  FeedbackScheduler f(p);
  EXPECT_EQ(f.plan().K, 64);
  EXPECT_EQ(f.follow_context(31740).K, 3068);  // 32K: 4096 attended
  EXPECT_EQ(f.plan().K, 3068);
  EXPECT_EQ(f.plan().select, Selection::Post);
  Sim sim(p);
  sim.sched.follow_context(31740);
  Machine m;
  m.host_tokens = 31740;
  sim.step(m);
  ASSERT_EQ(sim.sched.trace().size(), 1u);
  EXPECT_EQ(sim.sched.trace()[0].K, 3068) << "the first step ran at the floor";
  EXPECT_EQ(sim.sched.trace()[0].rule, SchedRule::Floor) << "and its trace says why";
  // A K above the floor is left alone, and a new request starts from k_min again.
  Sim fast(p);
  Machine cheap;
  cheap.t_dev = 1.0;
  cheap.host_tokens = 31740;
  fast.run(cheap, 60);
  const int grown = fast.sched.plan().K;
  ASSERT_GT(grown, 3068);
  EXPECT_EQ(fast.sched.follow_context(31740).K, grown);
  fast.sched.reset();
  EXPECT_EQ(fast.sched.plan().K, 64);
  EXPECT_EQ(fast.sched.follow_context(3000).K, 64);  // 4K: the window alone is a quarter of it
}

// Pre-QKᵀ only while its predictor finds what Post-QKᵀ would: a switch needs the recall measured
// beside Post to reach min_recall, and a probe that measures less returns to Post.
TEST(Feedback, RecallDecidesPreAndAPoorPredictorLeavesIt) {
  FeedbackParams p;
  p.k_min = 64;
  p.min_recall = 0.8;
  p.probe_every = 8;
  Machine m;
  m.scan = 5e-6;  // Post at k_min: 0.5 + 20.5 + 0.3 ms against T_dev 10 ms: host-bound
  m.recall = 0.5;
  Sim poor(p);
  int measured = 0;
  for (int i = 0; i < 200; ++i) {
    measured += poor.sched.plan().measure_recall;
    poor.step(m);
    ASSERT_EQ(poor.sched.plan().select, Selection::Post) << "step " << i;
  }
  EXPECT_EQ(poor.sched.switches(), 0);
  // Each refusal doubles the wait before the next measurement (8, 16, ... 64 steps).
  EXPECT_GE(measured, 3);
  EXPECT_LE(measured, 8);
  const auto& tr = poor.sched.trace();
  EXPECT_TRUE(std::any_of(tr.begin(), tr.end(), [](const SchedTraceEntry& e) {
    return e.rule == SchedRule::PreRefused && e.recall == 0.5;
  }));
  EXPECT_NE(describe_trace(tr, 0, 64, 1024).find("Pre refused"), std::string::npos);

  // A good predictor: Pre at the first measurement; when its recall drops, the next probe
  // (every 8 Pre steps, doubling) measures it and the scheduler returns to Post.
  Sim good(p);
  m.recall = 0.95;
  int first_pre = -1;
  for (int i = 0; i < 30 && first_pre < 0; ++i) {
    good.step(m);
    if (good.sched.plan().select == Selection::Pre) first_pre = i;
  }
  ASSERT_GE(first_pre, 0) << describe_trace(good.sched.trace(), good.sched.switches(), 64, 1024);
  EXPECT_LE(first_pre, p.warmup_steps + p.pre_after + 1);
  EXPECT_EQ(good.sched.trace().back().rule, SchedRule::ToPre);
  m.recall = 0.4;
  int back = -1;
  for (int i = 0; i < 40 && back < 0; ++i) {
    good.step(m);
    if (good.sched.plan().select == Selection::Post && !good.sched.plan().probe) back = i;
  }
  ASSERT_GE(back, 0);
  EXPECT_LE(back, p.probe_every + 1);
  EXPECT_EQ(good.sched.trace().back().rule, SchedRule::RecallLow);
  EXPECT_EQ(good.sched.trace().back().recall, 0.4);
  // Back in Post, the poor predictor is refused at the next attempts.
  good.run(m, 100);
  EXPECT_EQ(good.sched.plan().select, Selection::Post);
  EXPECT_EQ(good.sched.switches(), 2);

  // min_recall 0: no measurement, the timing rules alone (the paper's scheduler).
  p.min_recall = 0;
  Sim unchecked(p);
  m.recall = 0.1;
  unchecked.run(m, 20);
  EXPECT_EQ(unchecked.sched.plan().select, Selection::Pre);
  for (const auto& e : unchecked.sched.trace()) EXPECT_LT(e.recall, 0);
}

}  // namespace
}  // namespace hg
