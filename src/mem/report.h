// Placement verification: read back the node of sampled pages of each arena (move_pages query,
// or get_mempolicy) and compare with the plan. This is what `hybridgen info --numa` and the bench
// and --stats output print, so that a run on a CXL machine shows where K and V really were.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "mem/arena.h"
#include "mem/numa_sys.h"
#include "mem/placement.h"
#include "mem/topology.h"

namespace hg::mem {

struct ArenaCheck {
  std::string name;
  std::string policy;  // the arena policy ("bind(0)")
  uint64_t committed_bytes = 0;
  size_t pages_sampled = 0;
  size_t pages_matched = 0;                // on a node their block's policy allows
  size_t pages_missing = 0;                // not resident (never touched, or swapped out)
  std::map<int, uint64_t> bytes_per_node;  // measured: each sample stands for its share of a block
  std::map<int, uint64_t> planned_bytes_per_node;
  std::string note;  // why it could not be checked, or why it differs

  // Every sampled page is where the plan put it (vacuously true for an empty arena).
  bool matched() const { return pages_missing == 0 && pages_matched == pages_sampled; }
};

// Samples up to `samples_per_block` pages evenly spread over each committed block; SIZE_MAX
// checks every page. Never throws for a refused syscall: the note says what was refused.
ArenaCheck verify_arena(const Arena& arena, size_t samples_per_block = 16);

struct PlacementReport {
  NumaSupport support;
  std::vector<ArenaCheck> arenas;
  bool matched() const;
  std::string describe() const;
  nlohmann::json to_json() const;
};

PlacementReport verify_placement(const std::vector<const Arena*>& arenas, const NumaSupport& support,
                                 size_t samples_per_block = 16);

// The full block for `hybridgen info --numa`, --stats and bench output: topology, what the
// kernel permits, the resolved placement, the plan for a context (when given) and the checked
// arenas (when given). Pointers may be null / the vector empty.
std::string numa_report(const Topology& topology, const NumaSupport& support, const Placement* placement,
                        const PlacementPlan* plan, const std::vector<const Arena*>& arenas);
nlohmann::json numa_report_json(const Topology& topology, const NumaSupport& support, const Placement* placement,
                                const PlacementPlan* plan, const std::vector<const Arena*>& arenas);

}  // namespace hg::mem
