// The core partition between the CPU device's threads and the host workers.
#include <gtest/gtest.h>

#include "hybridgen/policy.h"
#include "sched/cores.h"
#include "test_expect.h"

namespace hg {
namespace {

TEST(Cores, HostThreadsZeroIsEveryCoreOfTheRunAndCpuAttnsDefault) {
  EXPECT_EQ(resolve_host_threads(3, 8), 3);
  EXPECT_EQ(resolve_host_threads(0, 6), 6);
  EXPECT_EQ(resolve_host_threads(0, 0), available_cpus());
  // cpu-attn's device waits for the host at every layer: its host stage takes every core; the
  // other split presets leave it to the device (resolve_device_defaults).
  EXPECT_EQ(policy_preset("cpu-attn").host_threads, 0);
  EXPECT_EQ(policy_preset("hybrid").host_threads, kHostThreadsAuto);
  EXPECT_EQ(policy_preset("hgca").host_threads, kHostThreadsAuto);
  // On the CPU device the stages then share the run's cores: the host stage runs inline, its
  // jobs on the device's pool, which keeps every core.
  const CorePlan p = plan_cores(4, 16, resolve_host_threads(0, 4), /*cpu_device=*/true);
  EXPECT_EQ(p.host_threads, 4);
  EXPECT_EQ(p.device_threads, 4);
  EXPECT_EQ(p.device_width, 4);
  EXPECT_TRUE(p.shared);
}

TEST(Cores, HostWorkersAreCarvedOutOfTheTotalWhileTheyCompute) {
  // The device's pool spans the total; the host's share is lent only while the host computes.
  const CorePlan p = plan_cores(8, 16, 2, /*cpu_device=*/true);
  EXPECT_EQ(p.device_threads, 8);
  EXPECT_EQ(p.device_width, 6);
  EXPECT_EQ(p.host_threads, 2);
  EXPECT_FALSE(p.shared);
  EXPECT_DOUBLE_EQ(p.host_share(), 0.25);  // what the feedback scheduler charges the device
  // -t 0: every available CPU is the total.
  const CorePlan all = plan_cores(0, 16, 3, true);
  EXPECT_EQ(all.device_threads, 16);
  EXPECT_EQ(all.device_width + all.host_threads, 16);
}

TEST(Cores, NoHostStageOrAGpuKeepsEveryThreadForTheDevice) {
  EXPECT_EQ(plan_cores(4, 16, 0, true).device_threads, 4);
  EXPECT_EQ(plan_cores(4, 16, 0, true).device_width, 4);
  const CorePlan gpu = plan_cores(0, 16, 2, /*cpu_device=*/false);
  EXPECT_EQ(gpu.device_threads, 16);
  EXPECT_EQ(gpu.host_threads, 2);
  EXPECT_EQ(gpu.host_share(), 0.0);
  EXPECT_EQ(plan_cores(4, 16, 0, true).host_share(), 0.0);
}

TEST(Cores, TooFewCoresShareThem) {
  const CorePlan p = plan_cores(2, 2, 2, true);
  EXPECT_EQ(p.device_threads, 2);
  EXPECT_EQ(p.device_width, 2);  // the host stage runs inline on the device's pool
  EXPECT_EQ(p.host_threads, 2);
  EXPECT_TRUE(p.shared);
  EXPECT_EQ(p.host_share(), 1.0);
  EXPECT_NE(p.describe().find("runs inline"), std::string::npos);
  EXPECT_FALSE(plan_cores(2, 2, 1, true).shared);
}

TEST(Cores, BadThreadCount) {
  test::expect_error([] { plan_cores(-1, 4, 1, true); }, {"-t/--threads must be >= 0"});
  EXPECT_GE(available_cpus(), 1);
}

// What the device chooses for the knobs a policy leaves to it, and that a knob given wins.
TEST(Cores, DeviceDefaultsFollowTheDeviceAndAnExplicitKnobWins) {
  // The CPU device: the host stage inline on every core, with the exact query.
  Policy cpu = policy_preset("hybrid");
  const std::string why = resolve_device_defaults(cpu, /*cpu_device=*/true, 2, 2);
  EXPECT_EQ(cpu.host_threads, 0);
  EXPECT_EQ(cpu.query, QuerySource::Exact);
  EXPECT_NE(why.find("CPU device defaults"), std::string::npos) << why;
  EXPECT_NE(why.find("inline"), std::string::npos) << why;
  EXPECT_NE(why.find("exact query"), std::string::npos) << why;
  EXPECT_TRUE(plan_cores(2, 2, resolve_host_threads(cpu.host_threads, 2), true).shared);
  // A CUDA device: one worker beside the GPU, the refine query (the paper's overlap).
  Policy gpu = policy_preset("hybrid");
  const std::string gpu_why = resolve_device_defaults(gpu, /*cpu_device=*/false, 2, 2);
  EXPECT_EQ(gpu.host_threads, 1);
  EXPECT_EQ(gpu.query, QuerySource::Refine);
  EXPECT_NE(gpu_why.find("CUDA device defaults"), std::string::npos) << gpu_why;
  // An explicit --host-threads 1 on the CPU device with -t 2: workers overlap, so auto's query
  // is refine; an explicit query is kept and nothing is said of it.
  Policy workers = policy_preset("hybrid");
  workers.host_threads = 1;
  const std::string workers_why = resolve_device_defaults(workers, true, 2, 2);
  EXPECT_EQ(workers.host_threads, 1);
  EXPECT_EQ(workers.query, QuerySource::Refine);
  EXPECT_EQ(workers_why.find("host-threads"), std::string::npos) << workers_why;
  // ... but with -t 1 one worker shares the only core: inline, exact.
  Policy one = policy_preset("hybrid");
  one.host_threads = 1;
  resolve_device_defaults(one, true, 1, 2);
  EXPECT_EQ(one.query, QuerySource::Exact);
  Policy given = policy_preset("hybrid");
  given.host_threads = 1;
  given.query = QuerySource::Speculative;
  EXPECT_EQ(resolve_device_defaults(given, true, 2, 2), "");
  EXPECT_EQ(given.query, QuerySource::Speculative);
  // A policy that keeps every token on the device has nothing to choose; the presets that name
  // their query keep it.
  Policy full = policy_preset("full");
  EXPECT_EQ(resolve_device_defaults(full, true, 2, 2), "");
  Policy quest = policy_preset("quest");
  resolve_device_defaults(quest, false, 2, 2);
  EXPECT_EQ(quest.query, QuerySource::Exact);
  EXPECT_EQ(quest.host_threads, 1);
}

}  // namespace
}  // namespace hg
