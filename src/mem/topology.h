// Memory-node discovery: which NUMA nodes exist, their CPUs, memory and distances.
// A node with memory and no CPUs is what CXL (or other far) memory looks like to Linux; the
// semantic-aware KV placement puts values there. The sysfs root is a parameter so that tests can
// describe machines that are not the one they run on.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace hg::mem {

inline constexpr const char* kDefaultSysfsRoot = "/sys/devices/system/node";

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;       // nodeN/cpulist, ascending
  uint64_t mem_total = 0;      // bytes, nodeN/meminfo MemTotal
  uint64_t mem_free = 0;       // bytes, nodeN/meminfo MemFree (at discovery time)
  std::vector<int> distances;  // nodeN/distance: one entry per Topology::nodes() element, same order

  bool has_memory() const { return mem_total > 0; }
  // Memory without CPUs: a CXL expander, or an emulated one (numactl/QEMU memory-only node).
  bool far_memory() const { return has_memory() && cpus.empty(); }
};

class Topology {
 public:
  // Reads <sysfs_root>/nodeN/{cpulist,meminfo,distance}. On the live machine, when the sysfs tree
  // is absent (some containers), falls back to libnuma, then to one node holding every CPU.
  static Topology discover(const std::filesystem::path& sysfs_root = kDefaultSysfsRoot);
  // For callers that already know the machine (tests, a topology read from a JSON dump).
  static Topology from_nodes(std::vector<NumaNode> nodes, std::string source);

  const std::vector<NumaNode>& nodes() const { return nodes_; }
  const std::string& source() const { return source_; }  // where the description came from
  bool has_node(int id) const;
  // Throws hg::Error "NUMA node 7 does not exist (nodes: 0)".
  const NumaNode& node(int id) const;
  // As node(), and also rejects a node without memory; `what` prefixes the message (a flag name).
  const NumaNode& memory_node(int id, const std::string& what) const;

  std::vector<int> node_ids() const;
  std::vector<int> memory_nodes() const;      // nodes with memory, ascending
  std::vector<int> far_memory_nodes() const;  // memory and no CPUs, ascending
  int node_of_cpu(int cpu) const;             // -1 when no node lists that CPU
  // SLIT distance (10 = local); 10/20 guesses when sysfs gave no usable distance table.
  int distance(int from, int to) const;
  // The node with memory closest to `from` (itself when it has memory); ties go to the lower id.
  int nearest_memory_node(int from, const std::vector<int>& candidates) const;
  std::string node_list() const;  // "0, 2"

  std::string describe() const;
  nlohmann::json to_json() const;

 private:
  std::vector<NumaNode> nodes_;
  std::string source_;
};

// The whole machine's memory from /proc/meminfo (MemAvailable counts reclaimable page cache);
// zeros when it cannot be read.
struct SystemMemory {
  uint64_t total = 0;
  uint64_t available = 0;
};
SystemMemory system_memory();

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}. Throws hg::Error naming `what` on malformed text.
std::vector<int> parse_cpulist(const std::string& text, const std::string& what);
// "0-3,8" from a sorted list; the inverse of parse_cpulist.
std::string format_cpulist(const std::vector<int>& cpus);
// 1536 -> "1.5 KiB"; used by every report in src/mem.
std::string format_bytes(uint64_t bytes);

}  // namespace hg::mem
