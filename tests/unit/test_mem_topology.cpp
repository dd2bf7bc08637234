// Node discovery, auto placement and the memory plan, on fake sysfs trees that describe machines
// other than this one (one node; two sockets; two sockets plus a CPU-less CXL-like node; a
// numbering gap), plus a sanity check of the live machine.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hybridgen/error.h"
#include "mem/placement.h"
#include "mem/topology.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace hg::mem;

namespace {

constexpr uint64_t GiB = uint64_t{1} << 30;
constexpr uint64_t MiB = uint64_t{1} << 20;

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

// One sysfs nodeN directory, formatted as the kernel writes it.
void add_node(const fs::path& root, int id, const std::string& cpulist, uint64_t mem_kb, const std::string& distance) {
  const fs::path dir = root / ("node" + std::to_string(id));
  fs::create_directories(dir);
  write(dir / "cpulist", cpulist + "\n");
  write(dir / "meminfo", "Node " + std::to_string(id) + " MemTotal:       " + std::to_string(mem_kb) + " kB\nNode " +
                             std::to_string(id) + " MemFree:        " + std::to_string(mem_kb / 2) + " kB\nNode " +
                             std::to_string(id) + " MemUsed:        " + std::to_string(mem_kb / 2) + " kB\n");
  write(dir / "distance", distance + "\n");
}

fs::path one_node() {
  fs::path root = hg::test::temp_dir("numa_one");
  add_node(root, 0, "0-1", 16 * 1024 * 1024, "10");
  write(root / "online", "0\n");
  return root;
}

fs::path two_sockets() {
  fs::path root = hg::test::temp_dir("numa_two");
  add_node(root, 0, "0-3", 64 * 1024 * 1024, "10 21");
  add_node(root, 1, "4-7", 64 * 1024 * 1024, "21 10");
  return root;
}

// Two sockets and a CXL expander (memory, no CPUs), nearer to socket 0 than to socket 1.
fs::path two_sockets_cxl() {
  fs::path root = hg::test::temp_dir("numa_cxl");
  add_node(root, 0, "0-3", 64 * 1024 * 1024, "10 21 24");
  add_node(root, 1, "4-7", 64 * 1024 * 1024, "21 10 28");
  add_node(root, 2, "", 128 * 1024 * 1024, "24 28 10");
  return root;
}

Placement resolve(const fs::path& root, PlacementOptions o, int cpu = 0) {
  return resolve_placement(Topology::discover(root), o, cpu);
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const hg::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(MemTopology, ParsesCpuLists) {
  EXPECT_EQ(parse_cpulist("0-3,8,10-11\n", "x"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(parse_cpulist("\n", "x").empty());
  EXPECT_EQ(format_cpulist({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_NE(error_of([] { parse_cpulist("0-x", "node0/cpulist"); }).find("node0/cpulist: malformed CPU list"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_cpulist("3-1", "c"); }).find("malformed"), std::string::npos);
}

TEST(MemTopology, OneNode) {
  Topology t = Topology::discover(one_node());
  ASSERT_EQ(t.nodes().size(), 1u);
  const NumaNode& n = t.node(0);
  EXPECT_EQ(n.cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(n.mem_total, 16 * GiB);
  EXPECT_EQ(n.mem_free, 8 * GiB);
  EXPECT_FALSE(n.far_memory());
  EXPECT_TRUE(t.far_memory_nodes().empty());
  EXPECT_EQ(t.node_of_cpu(1), 0);
  EXPECT_EQ(t.node_of_cpu(5), -1);
  EXPECT_EQ(t.distance(0, 0), 10);
}

TEST(MemTopology, MissingNodeListsTheNodesThatExist) {
  Topology t = Topology::discover(one_node());
  EXPECT_EQ(error_of([&] { t.node(7); }), "NUMA node 7 does not exist (nodes: 0)");
  EXPECT_EQ(error_of([&] { resolve(one_node(), {.k_node = 7}); }), "--k-node: NUMA node 7 does not exist (nodes: 0)");
  EXPECT_EQ(error_of([&] { resolve(one_node(), {.v_node = 7}); }), "--v-node: NUMA node 7 does not exist (nodes: 0)");
  // A gap in the numbering (node1 offline) is a missing node too.
  fs::path gap = hg::test::temp_dir("numa_gap");
  add_node(gap, 0, "0-1", 1024 * 1024, "10 20");
  add_node(gap, 2, "2-3", 1024 * 1024, "20 10");
  Topology g = Topology::discover(gap);
  EXPECT_EQ(g.node_ids(), (std::vector<int>{0, 2}));
  EXPECT_EQ(g.distance(0, 2), 20);
  EXPECT_EQ(error_of([&] { resolve_placement(g, {.policy = PlacementPolicy::local, .k_node = 1}, 0); }),
            "--k-node: NUMA node 1 does not exist (nodes: 0, 2)");
}

TEST(MemTopology, TwoSockets) {
  Topology t = Topology::discover(two_sockets());
  EXPECT_EQ(t.node_ids(), (std::vector<int>{0, 1}));
  EXPECT_EQ(t.memory_nodes(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(t.far_memory_nodes().empty());
  EXPECT_EQ(t.node_of_cpu(5), 1);
  EXPECT_EQ(t.distance(0, 1), 21);
  // Semantic with no CPU-less node: K local to the workers, V stays there too (logged).
  Placement p = resolve_placement(t, {}, 5);
  EXPECT_EQ(p.worker_node, 1);
  EXPECT_EQ(p.k_node, 1);
  EXPECT_EQ(p.v_node, 1);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes.back().find("no CPU-less memory node"), std::string::npos);
  // Explicit nodes win.
  Placement q = resolve_placement(t, {.k_node = 0, .v_node = 1}, 5);
  EXPECT_EQ(q.k_node, 0);
  EXPECT_EQ(q.v_node, 1);
  EXPECT_EQ(q.k_policy(), MemPolicy::bind(0));
  EXPECT_EQ(q.v_policy(), MemPolicy::bind(1));
  Placement soft = resolve_placement(t, {.k_node = 0, .v_node = 1, .strict = false}, 5);
  EXPECT_EQ(soft.v_policy(), MemPolicy::preferred(1));
}

TEST(MemTopology, CpuLessNodeIsFarMemoryAndGetsTheValues) {
  Topology t = Topology::discover(two_sockets_cxl());
  EXPECT_EQ(t.far_memory_nodes(), (std::vector<int>{2}));
  EXPECT_TRUE(t.node(2).far_memory());
  EXPECT_NE(t.describe().find("far memory"), std::string::npos);
  EXPECT_TRUE(t.to_json()["nodes"][2]["far_memory"].get<bool>());

  Placement p = resolve_placement(t, {}, 0);
  EXPECT_EQ(p.policy, PlacementPolicy::semantic);
  EXPECT_EQ(p.k_node, 0);
  EXPECT_EQ(p.v_node, 2);
  // Workers on socket 1: K follows them, V still goes to the far node.
  Placement q = resolve_placement(t, {}, 6);
  EXPECT_EQ(q.k_node, 1);
  EXPECT_EQ(q.v_node, 2);
  EXPECT_NE(q.describe().find("V bind(2)"), std::string::npos);

  Placement local = resolve_placement(t, {.policy = PlacementPolicy::local}, 6);
  EXPECT_EQ(local.k_node, 1);
  EXPECT_EQ(local.v_node, 1);
  Placement inter = resolve_placement(t, {.policy = PlacementPolicy::interleave}, 0);
  EXPECT_EQ(inter.interleave_nodes, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(inter.k_policy(), MemPolicy::interleave({0, 1, 2}));
  // Workers cannot be pinned to a memory-only node.
  EXPECT_NE(error_of([&] { node_cpus(t, 2); }).find("has no CPUs"), std::string::npos);
}

TEST(MemTopology, NearestFarNodeIsChosen) {
  fs::path root = hg::test::temp_dir("numa_two_cxl");
  add_node(root, 0, "0-1", 1024 * 1024, "10 21 14 30");
  add_node(root, 1, "2-3", 1024 * 1024, "21 10 30 14");
  add_node(root, 2, "", 1024 * 1024, "14 30 10 40");
  add_node(root, 3, "", 1024 * 1024, "30 14 40 10");
  Topology t = Topology::discover(root);
  EXPECT_EQ(resolve_placement(t, {}, 0).v_node, 2);
  EXPECT_EQ(resolve_placement(t, {}, 3).v_node, 3);
}

TEST(MemTopology, MemorylessWorkerNodeFallsBackToNearestMemory) {
  fs::path root = hg::test::temp_dir("numa_memless");
  add_node(root, 0, "0-1", 0, "10 20");
  add_node(root, 1, "2-3", 1024 * 1024, "20 10");
  Topology t = Topology::discover(root);
  Placement p = resolve_placement(t, {.policy = PlacementPolicy::local}, 0);
  EXPECT_EQ(p.worker_node, 0);
  EXPECT_EQ(p.k_node, 1);
  EXPECT_NE(p.notes.front().find("node 0 has no memory"), std::string::npos);
  EXPECT_EQ(error_of([&] { resolve_placement(t, {.k_node = 0}, 0); }),
            "--k-node: NUMA node 0 has no memory (nodes with memory: 1)");
}

TEST(MemTopology, BadDistanceTableIsDropped) {
  fs::path root = hg::test::temp_dir("numa_baddist");
  add_node(root, 0, "0", 1024, "10 20 30");
  add_node(root, 1, "1", 1024, "20 10 30");
  Topology t = Topology::discover(root);
  EXPECT_TRUE(t.node(0).distances.empty());
  EXPECT_EQ(t.distance(0, 1), 20);
}

TEST(MemTopology, NonexistentRootIsAnError) {
  EXPECT_NE(error_of([] { Topology::discover("/nonexistent/sysfs/node"); }).find("does not exist"), std::string::npos);
}

TEST(MemTopology, PlanSplitsKAndVPerNode) {
  Topology t = Topology::discover(two_sockets_cxl());
  // 1 MiB of K and 1 MiB of V per token is absurd but makes the arithmetic readable.
  Placement p = resolve_placement(t, {.k_dram_budget = 6 * MiB}, 0);
  PlacementPlan plan = plan_placement(MiB, MiB, 10, t, p);
  EXPECT_EQ(plan.k_bytes, 10 * MiB);
  EXPECT_EQ(plan.v_bytes, 10 * MiB);
  ASSERT_EQ(plan.nodes.size(), 2u);
  EXPECT_EQ(plan.nodes[0].node, 0);
  EXPECT_EQ(plan.nodes[0].k_bytes, 6 * MiB);
  EXPECT_EQ(plan.nodes[0].v_bytes, 0u);
  EXPECT_EQ(plan.nodes[1].node, 2);
  EXPECT_EQ(plan.nodes[1].k_bytes, 4 * MiB);
  EXPECT_EQ(plan.nodes[1].v_bytes, 10 * MiB);
  EXPECT_TRUE(plan.fits());
  EXPECT_TRUE(plan.to_json()["fits"].get<bool>());

  // Budgets count whole 2 MiB blocks; sizes round up to blocks.
  PlacementPlan odd = plan_placement(1000, 3000, 1000, t, resolve_placement(t, {.k_dram_budget = 3 * MiB}, 0));
  EXPECT_EQ(odd.k_bytes, 2 * MiB);
  EXPECT_EQ(odd.v_bytes, 4 * MiB);
  EXPECT_EQ(odd.nodes[0].k_bytes, 2 * MiB);

  PlacementPlan inter =
      plan_placement(MiB, MiB, 12, t, resolve_placement(t, {.policy = PlacementPolicy::interleave}, 0));
  ASSERT_EQ(inter.nodes.size(), 3u);
  for (const auto& n : inter.nodes) EXPECT_EQ(n.k_bytes, 4 * MiB);

  PlacementPlan local = plan_placement(MiB, MiB, 10, t, resolve_placement(t, {.policy = PlacementPolicy::local}, 0));
  ASSERT_EQ(local.nodes.size(), 1u);
  EXPECT_EQ(local.nodes[0].k_bytes + local.nodes[0].v_bytes, 20 * MiB);
}

TEST(MemTopology, PlanThatDoesNotFitSaysSoBeforeAllocating) {
  Topology t = Topology::discover(two_sockets_cxl());  // node 0: 32 GiB free, node 2: 64 GiB
  PlacementPlan plan = plan_placement(GiB / 1024, GiB / 1024, 100 * 1024, t, resolve_placement(t, {}, 0));
  EXPECT_FALSE(plan.fits());
  EXPECT_NE(plan.describe().find("DOES NOT FIT"), std::string::npos);
  const std::string msg = error_of([&] { plan.require_fits(); });
  EXPECT_NE(msg.find("memory plan does not fit: node 0 needs 100.0 GiB of K+V for ctx 102400"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("has 32.0 GiB free"), std::string::npos) << msg;
}

TEST(MemTopology, BudgetOnlyAppliesWhenKAndVAreApart) {
  Topology t = Topology::discover(two_sockets());
  Placement p = resolve_placement(t, {.k_dram_budget = 4 * MiB}, 0);  // V stays local: no spill target
  EXPECT_EQ(p.k_dram_budget, 0u);
  EXPECT_NE(p.notes.back().find("--k-dram-budget ignored"), std::string::npos);
  EXPECT_EQ(resolve_placement(t, {.k_node = 0, .v_node = 1, .k_dram_budget = 4 * MiB}, 0).k_dram_budget, 4 * MiB);
}

TEST(MemTopology, ParsesFlags) {
  EXPECT_EQ(parse_placement_policy("semantic"), PlacementPolicy::semantic);
  EXPECT_EQ(parse_placement_policy("Interleave"), PlacementPolicy::interleave);
  EXPECT_EQ(error_of([] { parse_placement_policy("cxl"); }),
            "--kv-placement: unknown policy 'cxl' (expected semantic, interleave or local)");
  EXPECT_EQ(parse_node_option("--k-node", "auto"), kAutoNode);
  EXPECT_EQ(parse_node_option("--k-node", "3"), 3);
  EXPECT_NE(error_of([] { parse_node_option("--v-node", "3x"); }).find("--v-node: expected a NUMA node"),
            std::string::npos);
  EXPECT_EQ(parse_byte_size("--k-dram-budget", "8G"), 8 * GiB);
  EXPECT_EQ(parse_byte_size("--k-dram-budget", "512MiB"), 512 * MiB);
  EXPECT_EQ(parse_byte_size("--k-dram-budget", "1.5g"), 3 * GiB / 2);
  EXPECT_EQ(parse_byte_size("--k-dram-budget", "0"), 0u);
  EXPECT_NE(error_of([] { parse_byte_size("--k-dram-budget", "lots"); }).find("expected a size"), std::string::npos);
  EXPECT_NE(error_of([] { parse_byte_size("--k-dram-budget", "-1G"); }).find("expected a size"), std::string::npos);
}

TEST(MemTopology, LiveMachine) {
  Topology t = Topology::discover();
  ASSERT_FALSE(t.nodes().empty());
  ASSERT_FALSE(t.memory_nodes().empty());
  Placement p = resolve_placement(t, {});  // the calling thread's CPU
  EXPECT_TRUE(t.has_node(p.k_node));
  EXPECT_TRUE(t.has_node(p.v_node));
  const std::vector<int> cpus = node_cpus(t, p.worker_node);
  EXPECT_FALSE(cpus.empty());
  for (int c : cpus) EXPECT_EQ(t.node_of_cpu(c), p.worker_node);
  const int missing = t.nodes().back().id + 7;
  EXPECT_NE(error_of([&] { node_cpus(t, missing); }).find("does not exist (nodes: " + t.node_list() + ")"),
            std::string::npos);
}
