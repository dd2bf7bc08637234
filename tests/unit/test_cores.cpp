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
  // overlapping presets keep one worker beside the device.
  EXPECT_EQ(policy_preset("cpu-attn").host_threads, 0);
  EXPECT_EQ(policy_preset("hybrid").host_threads, 1);
  EXPECT_EQ(policy_preset("hgca").host_threads, 1);
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

}  // namespace
}  // namespace hg
