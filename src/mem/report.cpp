#include "mem/report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/strings.h"

namespace hg::mem {

namespace {

std::string per_node(const std::map<int, uint64_t>& bytes) {
  if (bytes.empty()) return "nothing";
  return join(bytes, ", ", [](const auto& node_bytes) {
    const auto& [node, b] = node_bytes;
    return (node < 0 ? std::string("unplaced") : "node " + std::to_string(node)) + " " + format_bytes(b);
  });
}

nlohmann::json per_node_json(const std::map<int, uint64_t>& bytes) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [node, b] : bytes) out[node < 0 ? "unplaced" : std::to_string(node)] = b;
  return out;
}

}  // namespace

ArenaCheck verify_arena(const Arena& arena, size_t samples_per_block) {
  ArenaCheck c;
  c.name = arena.name();
  c.policy = arena.policy().describe();
  c.committed_bytes = arena.size();
  c.planned_bytes_per_node = arena.planned_bytes_per_node();
  if (arena.n_blocks() == 0) return c;

  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages_per_block = arena.block_bytes() / page;
  const size_t per_block = std::clamp<size_t>(samples_per_block, 1, pages_per_block);
  std::vector<void*> addrs;
  addrs.reserve(arena.n_blocks() * per_block);
  for (size_t b = 0; b < arena.n_blocks(); ++b) {
    std::byte* base = arena.block(b);
    // Evenly spaced pages, so an interleaved block shows both (all) of its nodes.
    for (size_t s = 0; s < per_block; ++s) addrs.push_back(base + (s * pages_per_block / per_block) * page);
  }
  std::vector<int> nodes(addrs.size(), -ENOENT);
  const int err = query_page_nodes(addrs, nodes);
  if (err != 0) {
    c.note = "cannot read page nodes: " + errno_text(err);
    c.pages_sampled = addrs.size();
    c.pages_missing = addrs.size();
    return c;
  }
  const uint64_t sample_bytes = arena.block_bytes() / per_block;
  for (size_t b = 0; b < arena.n_blocks(); ++b) {
    const MemPolicy policy = arena.block_policy(b);
    for (size_t s = 0; s < per_block; ++s) {
      const int node = nodes[b * per_block + s];
      ++c.pages_sampled;
      if (node < 0) {
        ++c.pages_missing;
        continue;
      }
      c.bytes_per_node[node] += sample_bytes;
      if (policy.allows(node)) ++c.pages_matched;
    }
  }
  if (!arena.binding_error().empty()) {
    c.note = arena.binding_error() + "; pages are where first touch put them";
  } else if (!c.matched()) {
    c.note = std::to_string(c.pages_sampled - c.pages_matched - c.pages_missing) + " of " +
             std::to_string(c.pages_sampled) + " sampled pages on an unplanned node, " +
             std::to_string(c.pages_missing) + " not resident";
  }
  return c;
}

bool PlacementReport::matched() const {
  return std::all_of(arenas.begin(), arenas.end(), [](const ArenaCheck& c) { return c.matched(); });
}

std::string PlacementReport::describe() const {
  std::ostringstream out;
  out << "placement check: " << (matched() ? "matches the plan" : "DOES NOT match the plan") << "\n";
  for (const auto& c : arenas) {
    out << "  " << c.name << " " << c.policy << ": " << format_bytes(c.committed_bytes) << " committed; measured "
        << per_node(c.bytes_per_node) << "; planned " << per_node(c.planned_bytes_per_node) << "; " << c.pages_matched
        << "/" << c.pages_sampled << " sampled pages as planned";
    if (!c.note.empty()) out << " (" << c.note << ")";
    out << "\n";
  }
  return out.str();
}

nlohmann::json PlacementReport::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : arenas) {
    list.push_back({{"name", c.name},
                    {"policy", c.policy},
                    {"committed_bytes", c.committed_bytes},
                    {"pages_sampled", c.pages_sampled},
                    {"pages_matched", c.pages_matched},
                    {"pages_missing", c.pages_missing},
                    {"bytes_per_node", per_node_json(c.bytes_per_node)},
                    {"planned_bytes_per_node", per_node_json(c.planned_bytes_per_node)},
                    {"matched", c.matched()},
                    {"note", c.note}});
  }
  return {{"matched", matched()}, {"arenas", list}};
}

PlacementReport verify_placement(const std::vector<const Arena*>& arenas, const NumaSupport& support,
                                 size_t samples_per_block) {
  PlacementReport r;
  r.support = support;
  for (const Arena* a : arenas)
    if (a) r.arenas.push_back(verify_arena(*a, samples_per_block));
  return r;
}

std::string numa_report(const Topology& topology, const NumaSupport& support, const Placement* placement,
                        const PlacementPlan* plan, const std::vector<const Arena*>& arenas) {
  std::ostringstream out;
  out << topology.describe();
  out << "memory policy syscalls: " << support.describe() << "\n";
  if (placement) {
    out << "kv placement: " << placement->describe() << "\n";
    for (const auto& n : placement->notes) out << "  " << n << "\n";
  }
  if (plan) out << plan->describe();
  if (!arenas.empty()) out << verify_placement(arenas, support).describe();
  return out.str();
}

nlohmann::json numa_report_json(const Topology& topology, const NumaSupport& support, const Placement* placement,
                                const PlacementPlan* plan, const std::vector<const Arena*>& arenas) {
  nlohmann::json j = {{"topology", topology.to_json()}, {"syscalls", support.to_json()}};
  if (placement) j["placement"] = placement->to_json();
  if (plan) j["plan"] = plan->to_json();
  if (!arenas.empty()) j["check"] = verify_placement(arenas, support).to_json();
  return j;
}

}  // namespace hg::mem
