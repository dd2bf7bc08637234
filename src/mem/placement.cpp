#include "mem/placement.h"

#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hybridgen/error.h"

namespace hg::mem {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

PlacementPolicy parse_placement_policy(const std::string& text) {
  const std::string t = lower(text);
  if (t == "semantic") return PlacementPolicy::semantic;
  if (t == "interleave") return PlacementPolicy::interleave;
  if (t == "local") return PlacementPolicy::local;
  throw Error("--kv-placement: unknown policy '" + text + "' (expected semantic, interleave or local)");
}

std::string to_string(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::semantic:
      return "semantic";
    case PlacementPolicy::interleave:
      return "interleave";
    case PlacementPolicy::local:
      return "local";
  }
  return "?";
}

int parse_node_option(const std::string& flag, const std::string& text) {
  if (lower(text) == "auto") return kAutoNode;
  size_t used = 0;
  int node = -1;
  try {
    node = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || node < 0)
    throw Error(flag + ": expected a NUMA node number or 'auto', got '" + text + "'");
  return node;
}

uint64_t parse_byte_size(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = lower(text.substr(used));
  uint64_t scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib")
    scale = uint64_t{1} << 10;
  else if (unit == "m" || unit == "mb" || unit == "mib")
    scale = uint64_t{1} << 20;
  else if (unit == "g" || unit == "gb" || unit == "gib")
    scale = uint64_t{1} << 30;
  else if (unit == "t" || unit == "tb" || unit == "tib")
    scale = uint64_t{1} << 40;
  // 2^60 bytes (1 EiB) bounds every real memory and keeps the conversion below exact.
  if (used == 0 || scale == 0 || !(value >= 0) || !(value * static_cast<double>(scale) <= 0x1p60))
    throw Error(flag + ": expected a size like 8G, 512MiB or 0 (at most 1 EiB), got '" + text + "'");
  return static_cast<uint64_t>(std::llround(value * static_cast<double>(scale)));
}

MemPolicy Placement::k_policy() const {
  if (policy == PlacementPolicy::interleave) return MemPolicy::interleave(interleave_nodes);
  return strict ? MemPolicy::bind(k_node) : MemPolicy::preferred(k_node);
}

MemPolicy Placement::v_policy() const {
  if (policy == PlacementPolicy::interleave) return MemPolicy::interleave(interleave_nodes);
  return strict ? MemPolicy::bind(v_node) : MemPolicy::preferred(v_node);
}

std::string Placement::describe() const {
  std::ostringstream out;
  out << to_string(policy) << ": K " << k_policy().describe() << ", V " << v_policy().describe() << ", workers on node "
      << worker_node;
  if (k_dram_budget > 0) out << ", K budget " << format_bytes(k_dram_budget) << " on node " << k_node;
  if (huge_pages) out << ", huge pages";
  return out.str();
}

nlohmann::json Placement::to_json() const {
  return {{"policy", to_string(policy)},
          {"worker_node", worker_node},
          {"k_node", k_node},
          {"v_node", v_node},
          {"interleave_nodes", interleave_nodes},
          {"k_policy", k_policy().describe()},
          {"v_policy", v_policy().describe()},
          {"k_dram_budget", k_dram_budget},
          {"strict", strict},
          {"huge_pages", huge_pages},
          {"notes", notes}};
}

Placement resolve_placement(const Topology& topology, const PlacementOptions& options, int worker_cpu) {
  Placement p;
  p.policy = options.policy;
  p.strict = options.strict;
  p.huge_pages = options.huge_pages;
  p.k_dram_budget = options.k_dram_budget;
  auto note = [&p](const std::string& line) {
    spdlog::info("kv placement: {}", line);
    p.notes.push_back(line);
  };
  const std::vector<int> memory = topology.memory_nodes();
  if (memory.empty()) throw Error("no NUMA node has memory (nodes: " + topology.node_list() + ")");
  // Explicit nodes are checked first so that a typo is an error even where it would be ignored.
  if (options.k_node != kAutoNode) topology.memory_node(options.k_node, "--k-node");
  if (options.v_node != kAutoNode) topology.memory_node(options.v_node, "--v-node");

  const int cpu = worker_cpu >= 0 ? worker_cpu : sched_getcpu();
  p.worker_node = topology.node_of_cpu(cpu);
  if (p.worker_node < 0) {
    const auto& nodes = topology.nodes();
    auto with_cpus = std::find_if(nodes.begin(), nodes.end(), [](const NumaNode& n) { return !n.cpus.empty(); });
    p.worker_node = with_cpus != nodes.end() ? with_cpus->id : memory.front();
    note("CPU " + std::to_string(cpu) + " is on no listed node; host workers taken to be on node " +
         std::to_string(p.worker_node));
  }
  int local = topology.nearest_memory_node(p.worker_node, memory);
  if (local != p.worker_node)
    note("node " + std::to_string(p.worker_node) + " has no memory; local memory is node " + std::to_string(local));

  switch (p.policy) {
    case PlacementPolicy::semantic: {
      if (options.k_node != kAutoNode) {
        p.k_node = options.k_node;
      } else {
        p.k_node = local;
        note("K on node " + std::to_string(p.k_node) + ", local to the host worker threads");
      }
      if (options.v_node != kAutoNode) {
        p.v_node = options.v_node;
      } else {
        const std::vector<int> far = topology.far_memory_nodes();
        if (!far.empty()) {
          p.v_node = topology.nearest_memory_node(p.k_node, far);
          note("V on node " + std::to_string(p.v_node) + ", a CPU-less (CXL-like) memory node");
        } else {
          p.v_node = p.k_node;
          note("no CPU-less memory node: V stays local on node " + std::to_string(p.v_node));
        }
      }
      break;
    }
    case PlacementPolicy::local:
      p.k_node = options.k_node != kAutoNode ? options.k_node : local;
      p.v_node = p.k_node;
      if (options.v_node != kAutoNode && options.v_node != p.k_node)
        note("--v-node " + std::to_string(options.v_node) + " ignored: local placement keeps V with K on node " +
             std::to_string(p.k_node));
      break;
    case PlacementPolicy::interleave:
      p.k_node = p.v_node = -1;
      p.interleave_nodes = memory;
      if (options.k_node != kAutoNode || options.v_node != kAutoNode)
        note("--k-node/--v-node ignored: interleave spreads K and V over every node with memory");
      break;
  }
  if (p.k_dram_budget > 0 && (p.policy != PlacementPolicy::semantic || p.k_node == p.v_node)) {
    note("--k-dram-budget ignored: K and V share " +
         std::string(p.policy == PlacementPolicy::interleave ? "the interleaved nodes" : "one node"));
    p.k_dram_budget = 0;
  }
  return p;
}

std::vector<int> node_cpus(const Topology& topology, int node) {
  const NumaNode& n = topology.node(node);
  if (n.cpus.empty())
    throw Error("NUMA node " + std::to_string(node) +
                " has no CPUs (it is memory only); pin workers to a node with CPUs");
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> usable;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return n.cpus;
  std::vector<int> allowed_list;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) allowed_list.push_back(c);
  for (int c : n.cpus)
    if (c < CPU_SETSIZE && CPU_ISSET(c, &allowed)) usable.push_back(c);
  if (usable.empty())
    throw Error("NUMA node " + std::to_string(node) + " has no CPU this process may run on (node cpus: " +
                format_cpulist(n.cpus) + "; allowed: " + format_cpulist(allowed_list) + ")");
  return usable;
}

bool PlacementPlan::fits() const {
  return std::all_of(nodes.begin(), nodes.end(), [](const NodePlan& n) { return n.fits(); });
}

void PlacementPlan::require_fits() const {
  for (const auto& n : nodes) {
    if (n.fits()) continue;
    throw Error("memory plan does not fit: node " + std::to_string(n.node) + " needs " +
                format_bytes(n.k_bytes + n.v_bytes) + " of K+V for ctx " + std::to_string(ctx) + ", has " +
                format_bytes(n.mem_free) + " free");
  }
}

std::string PlacementPlan::describe() const {
  std::ostringstream out;
  out << "KV host plan for ctx " << ctx << " (" << placement.describe() << "): K " << format_bytes(k_bytes) << ", V "
      << format_bytes(v_bytes) << "\n";
  for (const auto& n : nodes) {
    out << "  node " << n.node << ": K " << format_bytes(n.k_bytes) << ", V " << format_bytes(n.v_bytes) << " of "
        << format_bytes(n.mem_free) << " free" << (n.fits() ? "" : "  DOES NOT FIT") << "\n";
  }
  return out.str();
}

nlohmann::json PlacementPlan::to_json() const {
  nlohmann::json per_node = nlohmann::json::array();
  for (const auto& n : nodes)
    per_node.push_back({{"node", n.node},
                        {"k_bytes", n.k_bytes},
                        {"v_bytes", n.v_bytes},
                        {"mem_free", n.mem_free},
                        {"fits", n.fits()}});
  return {{"placement", placement.to_json()},
          {"ctx", ctx},
          {"k_bytes_per_token", k_bytes_per_token},
          {"v_bytes_per_token", v_bytes_per_token},
          {"k_bytes", k_bytes},
          {"v_bytes", v_bytes},
          {"block_bytes", block_bytes},
          {"nodes", per_node},
          {"fits", fits()}};
}

PlacementPlan plan_placement(uint64_t k_bytes_per_token, uint64_t v_bytes_per_token, int64_t ctx,
                             const Topology& topology, const Placement& placement, size_t block_bytes) {
  if (ctx < 0) throw Error("memory plan: ctx must be >= 0, got " + std::to_string(ctx));
  PlacementPlan plan;
  plan.placement = placement;
  plan.ctx = ctx;
  plan.k_bytes_per_token = k_bytes_per_token;
  plan.v_bytes_per_token = v_bytes_per_token;
  plan.block_bytes = round_up(std::max<size_t>(block_bytes, 1), kHugePageBytes);
  plan.k_bytes = round_up(k_bytes_per_token * static_cast<uint64_t>(ctx), plan.block_bytes);
  plan.v_bytes = round_up(v_bytes_per_token * static_cast<uint64_t>(ctx), plan.block_bytes);

  std::map<int, NodePlan> by_node;
  auto at = [&](int node) -> NodePlan& {
    NodePlan& n = by_node[node];
    n.node = node;
    n.mem_free = topology.node(node).mem_free;
    return n;
  };
  if (placement.policy == PlacementPolicy::interleave) {
    const auto& nodes = placement.interleave_nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      // Whole pages alternate, so each node gets an equal share; the first takes the remainder.
      NodePlan& n = at(nodes[i]);
      n.k_bytes += plan.k_bytes / nodes.size() + (i == 0 ? plan.k_bytes % nodes.size() : 0);
      n.v_bytes += plan.v_bytes / nodes.size() + (i == 0 ? plan.v_bytes % nodes.size() : 0);
    }
  } else {
    uint64_t k_local = plan.k_bytes;
    if (placement.k_dram_budget > 0) {
      // Spills happen in whole blocks, so only whole blocks count against the budget.
      const uint64_t budget_blocks = placement.k_dram_budget / plan.block_bytes * plan.block_bytes;
      k_local = std::min(k_local, budget_blocks);
    }
    at(placement.k_node).k_bytes += k_local;
    at(placement.v_node).k_bytes += plan.k_bytes - k_local;
    at(placement.v_node).v_bytes += plan.v_bytes;
  }
  for (auto& [node, n] : by_node)
    if (n.k_bytes + n.v_bytes > 0) plan.nodes.push_back(n);
  return plan;
}

KvArenas make_kv_arenas(const Topology& topology, const Placement& placement, size_t k_reserve_bytes,
                        size_t v_reserve_bytes, DmaRegistrar* dma, size_t block_bytes) {
  auto options = [&](const char* name, size_t reserve, MemPolicy policy) {
    ArenaOptions o;
    o.name = name;
    o.reserve_bytes = reserve;
    o.block_bytes = block_bytes;
    o.policy = std::move(policy);
    o.huge_pages = placement.huge_pages;
    o.dma = dma;
    return o;
  };
  return KvArenas{Arena(topology, options("K", k_reserve_bytes, placement.k_policy())),
                  Arena(topology, options("V", v_reserve_bytes, placement.v_policy()))};
}

size_t k_blocks_over_budget(const Arena& k, const Placement& placement) {
  if (placement.k_dram_budget == 0 || placement.policy != PlacementPolicy::semantic ||
      placement.k_node == placement.v_node)
    return 0;
  const auto planned = k.planned_bytes_per_node();
  auto it = planned.find(placement.k_node);
  const uint64_t on_k_node = it == planned.end() ? 0 : it->second;
  if (on_k_node <= placement.k_dram_budget) return 0;
  return (on_k_node - placement.k_dram_budget + k.block_bytes() - 1) / k.block_bytes();
}

}  // namespace hg::mem
