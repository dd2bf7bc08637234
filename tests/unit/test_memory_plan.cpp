// The memory plan of an engine before anything is allocated: the device side (weights copied to
// the device, KV it holds) against its free memory, the host side per NUMA node.
#include <gtest/gtest.h>

#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "kv/kv_cache.h"
#include "kv/memory_plan.h"
#include "test_util.h"

namespace hg {
namespace {

constexpr uint64_t GiB = uint64_t{1} << 30;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryPlan, DeviceHoldsTheCacheOrTheWindow) {
  auto model = load_model(test::tiny_model("llama-gqa").string());
  const uint64_t per_token = KvCache::bytes_per_token(model->spec, DType::BF16);
  const DeviceMemory gpu{8 * GiB, 16 * GiB, /*host=*/false};

  const DeviceMemoryPlan full = plan_device_memory(*model, Policy{}, DType::BF16, 4096, 2, "gpu", gpu);
  EXPECT_EQ(full.kv_bytes, per_token * 4096 * 2);
  EXPECT_EQ(full.weight_bytes, model->weight_bytes());  // copied to a discrete device
  EXPECT_TRUE(full.fits());

  Policy hybrid = policy_preset("hybrid");  // window 1024 + 4 sinks
  EXPECT_EQ(plan_device_memory(*model, hybrid, DType::BF16, 4096, 2, "gpu", gpu).kv_bytes, per_token * 1028 * 2);
  EXPECT_EQ(plan_device_memory(*model, hybrid, DType::BF16, 100, 1, "gpu", gpu).kv_bytes, per_token * 100);  // covers

  const DeviceMemory cpu{1 * GiB, 2 * GiB, /*host=*/true};
  const DeviceMemoryPlan huge = plan_device_memory(*model, Policy{}, DType::BF16, 200'000'000, 1, "cpu", cpu);
  EXPECT_EQ(huge.weight_bytes, 0u);  // the CPU device computes on the mapped weights
  EXPECT_FALSE(huge.fits());
  const std::string msg = error_of([&] { huge.require_fits(); });
  EXPECT_NE(msg.find("memory plan does not fit: device cpu needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("for ctx 200000000 x 1 sequences"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 1.0 GiB available (host memory)"), std::string::npos) << msg;

  EXPECT_TRUE(
      plan_device_memory(*model, Policy{}, DType::BF16, 200'000'000, 1, "x", DeviceMemory{}).fits());  // unknown
}

// h2o keeps window + heavy hitters per sequence; its exact prefill holds the whole prompt (one
// sequence, up to ctx) on a full stage beside them while it runs, which the plan counts.
TEST(MemoryPlan, DroppingPoliciesCountTheirExactPrefill) {
  auto model = load_model(test::tiny_model("llama-gqa").string());
  const uint64_t per_token = KvCache::bytes_per_token(model->spec, DType::BF16);
  Policy h2o = policy_preset("h2o");  // window 1024 + 260 heavy hitters, no sinks
  const DeviceMemory gpu{8 * GiB, 16 * GiB, /*host=*/false};
  const DeviceMemoryPlan p = plan_device_memory(*model, h2o, DType::BF16, 32768, 2, "gpu", gpu);
  EXPECT_EQ(p.kv_bytes, per_token * (1024 + 260) * 2);
  EXPECT_EQ(p.prefill_kv_bytes, per_token * 32768);
  EXPECT_EQ(p.needed(), p.weight_bytes + p.kv_bytes + p.prefill_kv_bytes);
  // A device that holds the policy's KV but not the prompt's: one line naming both, and the way out.
  const DeviceMemory small{p.weight_bytes + p.kv_bytes + per_token * 1000, 16 * GiB, false};
  const DeviceMemoryPlan tight = plan_device_memory(*model, h2o, DType::BF16, 32768, 2, "gpu", small);
  EXPECT_FALSE(tight.fits());
  const std::string msg = error_of([&] { tight.require_fits(); });
  EXPECT_NE(msg.find("the exact prefill's full KV"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--exact-prefill false"), std::string::npos) << msg;
  // Evicting as the prefill goes holds no more than the budget; nor does a window covering ctx.
  h2o.exact_prefill = false;
  EXPECT_EQ(plan_device_memory(*model, h2o, DType::BF16, 32768, 2, "gpu", small).prefill_kv_bytes, 0u);
  EXPECT_TRUE(plan_device_memory(*model, h2o, DType::BF16, 32768, 2, "gpu", small).fits());
  EXPECT_EQ(plan_device_memory(*model, policy_preset("streaming"), DType::BF16, 1000, 1, "gpu", gpu).prefill_kv_bytes,
            0u);
  EXPECT_EQ(plan_device_memory(*model, policy_preset("hybrid"), DType::BF16, 32768, 1, "gpu", gpu).prefill_kv_bytes,
            0u);  // keeps every token: its prefill places them as it goes
}

TEST(MemoryPlan, HostKvPerNode) {
  // Node 0: CPUs and 64 GiB free; node 1: CPU-less (CXL-like), 1 GiB free: semantic puts V there.
  mem::NumaNode n0{0, {0, 1}, 128 * GiB, 64 * GiB, {10, 20}};
  mem::NumaNode n1{1, {}, 2 * GiB, 1 * GiB, {20, 10}};
  const mem::Topology topo = mem::Topology::from_nodes({n0, n1}, "test");
  const mem::Placement placement = mem::resolve_placement(topo, {}, 0);
  ASSERT_EQ(placement.v_node, 1);
  auto model = load_model(test::tiny_model("llama-gqa").string());
  const uint64_t half = KvCache::bytes_per_token(model->spec, DType::F32) / 2;

  const Policy hybrid = policy_preset("hybrid");
  const mem::PlacementPlan small = plan_host_kv(model->spec, hybrid, DType::F32, 4096, 1, topo, placement);
  EXPECT_TRUE(small.fits());
  EXPECT_GE(small.v_bytes, half * (4096 - 4));  // every token past the sinks

  const int64_t ctx = static_cast<int64_t>(4 * GiB / half);  // V alone needs 4 GiB
  const mem::PlacementPlan big = plan_host_kv(model->spec, hybrid, DType::F32, ctx, 1, topo, placement);
  const std::string msg = error_of([&] { big.require_fits(); });
  EXPECT_NE(msg.find("memory plan does not fit: node 1 needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 1.0 GiB free"), std::string::npos) << msg;

  Policy streaming = policy_preset("streaming");  // drops evicted tokens: nothing on the host
  EXPECT_TRUE(plan_host_kv(model->spec, streaming, DType::F32, ctx, 1, topo, placement).fits());
}

}  // namespace
}  // namespace hg
