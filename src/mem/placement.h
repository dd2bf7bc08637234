// Where the host K and V stores live (docs/architecture.md, "Memory: the plan and the placement").
//   semantic   K (read by the CPU on the critical path) on the K node, local DRAM by default;
//              V (only copied to the device by DMA) on the V node, a CPU-less (CXL) node by default.
//   interleave pages of both spread over every node with memory (the common baseline).
//   local      both on the node of the host worker threads.
// A K budget caps the bytes of K on the K node; the KV store spills its least recently generated
// K blocks to the V node with Arena::migrate_block when the budget is exceeded.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "mem/arena.h"
#include "mem/topology.h"

namespace hg::mem {

enum class PlacementPolicy { semantic, interleave, local };

inline constexpr int kAutoNode = -1;

// Parsers for the CLI flags; errors name the flag and what it accepts.
PlacementPolicy parse_placement_policy(const std::string& text);  // --kv-placement
std::string to_string(PlacementPolicy policy);
int parse_node_option(const std::string& flag, const std::string& text);     // "auto" -> kAutoNode
uint64_t parse_byte_size(const std::string& flag, const std::string& text);  // "8G", "512MiB", "0"

struct PlacementOptions {
  PlacementPolicy policy = PlacementPolicy::semantic;
  int k_node = kAutoNode;      // --k-node
  int v_node = kAutoNode;      // --v-node
  uint64_t k_dram_budget = 0;  // --k-dram-budget: bytes of K allowed on the K node, 0 = no limit
  bool strict = true;          // MPOL_BIND (fail when the node is full) or MPOL_PREFERRED (spill)
  bool huge_pages = true;      // madvise(MADV_HUGEPAGE) on the arenas (fewer TLB misses in the key stream)
};

// Options resolved against a topology: every node here exists and has memory.
struct Placement {
  PlacementPolicy policy = PlacementPolicy::semantic;
  int worker_node = 0;                // node of the host worker threads
  int k_node = 0;                     // semantic/local; interleave: -1
  int v_node = 0;                     // semantic/local; interleave: -1
  std::vector<int> interleave_nodes;  // interleave only
  uint64_t k_dram_budget = 0;         // 0 = no limit (also when k_node == v_node: nowhere to spill)
  bool strict = true;
  bool huge_pages = false;
  std::vector<std::string> notes;  // how auto choices and fallbacks were made (also logged)

  MemPolicy k_policy() const;
  MemPolicy v_policy() const;
  std::string describe() const;
  nlohmann::json to_json() const;
};

// worker_cpu: a CPU the host worker threads run on; -1 = the CPU of the calling thread.
// Explicit nodes that do not exist are an hg::Error ("--k-node: NUMA node 7 does not exist
// (nodes: 0)"); auto choices fall back with a logged note.
Placement resolve_placement(const Topology& topology, const PlacementOptions& options, int worker_cpu = -1);

// CPUs of `node` this process may run on (its cpulist ∩ sched_getaffinity), to pass as the
// thread pool's pin_cpus. hg::Error when the node does not exist or has no usable CPU.
std::vector<int> node_cpus(const Topology& topology, int node);

// Bytes of K and V per node for a context of `ctx` tokens, computed before any allocation.
struct NodePlan {
  int node = 0;
  uint64_t k_bytes = 0;
  uint64_t v_bytes = 0;
  uint64_t mem_free = 0;
  bool fits() const { return k_bytes + v_bytes <= mem_free; }
};

struct PlacementPlan {
  Placement placement;
  int64_t ctx = 0;
  uint64_t k_bytes_per_token = 0;  // all layers, all kv heads
  uint64_t v_bytes_per_token = 0;
  uint64_t k_bytes = 0;  // arena sizes, rounded up to whole blocks
  uint64_t v_bytes = 0;
  size_t block_bytes = kHugePageBytes;
  std::vector<NodePlan> nodes;  // only nodes that receive bytes

  bool fits() const;
  // hg::Error "memory plan does not fit: node 1 needs 12.0 GiB of K+V, has 8.0 GiB free".
  void require_fits() const;
  std::string describe() const;
  nlohmann::json to_json() const;
};

PlacementPlan plan_placement(uint64_t k_bytes_per_token, uint64_t v_bytes_per_token, int64_t ctx,
                             const Topology& topology, const Placement& placement, size_t block_bytes = kHugePageBytes);

// The two host stores of one engine.
struct KvArenas {
  Arena k;
  Arena v;
};
// Reserves (does not commit) K and V arenas placed as `placement` says.
KvArenas make_kv_arenas(const Topology& topology, const Placement& placement, size_t k_reserve_bytes,
                        size_t v_reserve_bytes, DmaRegistrar* dma = nullptr, size_t block_bytes = kHugePageBytes);
// How many K blocks must move from the K node to the V node to respect the budget (0 when no
// budget applies). The KV store picks which: its least recently generated ones.
size_t k_blocks_over_budget(const Arena& k, const Placement& placement);

}  // namespace hg::mem
