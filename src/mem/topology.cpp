#include "mem/topology.h"

#include <numa.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hybridgen/error.h"
#include "util/strings.h"

namespace hg::mem {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "Node 0 MemTotal:        4679456 kB" -> bytes for the given key, 0 when absent.
uint64_t meminfo_field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto pos = line.find(key + ":");
    if (pos == std::string::npos) continue;
    std::istringstream rest(line.substr(pos + key.size() + 1));
    uint64_t value = 0;
    std::string unit;
    rest >> value >> unit;
    return unit == "kB" ? value * 1024 : value;
  }
  return 0;
}

std::vector<int> parse_ints(const std::string& text) {
  std::istringstream in(text);
  std::vector<int> out;
  int v;
  while (in >> v) out.push_back(v);
  return out;
}

// The sysfs tree is missing on the live machine: ask libnuma, or describe one node.
std::vector<NumaNode> discover_without_sysfs(std::string& source) {
  std::vector<NumaNode> nodes;
  if (numa_available() >= 0) {
    source = "libnuma";
    const int max_node = numa_max_node();
    for (int id = 0; id <= max_node; ++id) {
      if (!numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(id))) continue;
      NumaNode n;
      n.id = id;
      long long free_bytes = 0;
      long long total = numa_node_size64(id, &free_bytes);
      n.mem_total = total > 0 ? static_cast<uint64_t>(total) : 0;
      n.mem_free = free_bytes > 0 ? static_cast<uint64_t>(free_bytes) : 0;
      bitmask* cpus = numa_allocate_cpumask();
      if (numa_node_to_cpus(id, cpus) == 0) {
        for (unsigned c = 0; c < cpus->size; ++c)
          if (numa_bitmask_isbitset(cpus, c)) n.cpus.push_back(static_cast<int>(c));
      }
      numa_free_cpumask(cpus);
      nodes.push_back(std::move(n));
    }
    for (auto& a : nodes)
      for (auto& b : nodes) a.distances.push_back(numa_distance(a.id, b.id));
    if (!nodes.empty()) return nodes;
  }
  source = "single node (no NUMA information)";
  NumaNode n;
  const long n_cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < n_cpus; ++c) n.cpus.push_back(static_cast<int>(c));
  const std::string meminfo = read_text("/proc/meminfo");
  n.mem_total = meminfo_field(meminfo, "MemTotal");
  n.mem_free = meminfo_field(meminfo, "MemAvailable");
  n.distances = {10};
  nodes.push_back(std::move(n));
  return nodes;
}

}  // namespace

SystemMemory system_memory() {
  const std::string meminfo = read_text("/proc/meminfo");
  return {meminfo_field(meminfo, "MemTotal"), meminfo_field(meminfo, "MemAvailable")};
}

std::vector<int> parse_cpulist(const std::string& text, const std::string& what) {
  std::vector<int> cpus;
  std::string trimmed;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) trimmed.push_back(c);
  if (trimmed.empty()) return cpus;
  std::istringstream in(trimmed);
  std::string item;
  while (std::getline(in, item, ',')) {
    int lo = 0, hi = 0;
    char dash = 0;
    std::istringstream one(item);
    if (!(one >> lo) || lo < 0) throw Error(what + ": malformed CPU list '" + text + "'");
    hi = lo;
    if (one >> dash) {
      if (dash != '-' || !(one >> hi) || hi < lo) throw Error(what + ": malformed CPU list '" + text + "'");
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpulist(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

Topology Topology::discover(const fs::path& sysfs_root) {
  std::error_code ec;
  const bool live = sysfs_root == fs::path(kDefaultSysfsRoot);
  if (!fs::is_directory(sysfs_root, ec)) {
    if (!live) throw Error("NUMA sysfs root " + sysfs_root.string() + " does not exist");
    std::string source;
    auto nodes = discover_without_sysfs(source);
    return from_nodes(std::move(nodes), source);
  }
  std::vector<NumaNode> nodes;
  for (const auto& entry : fs::directory_iterator(sysfs_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 5 || name.compare(0, 4, "node") != 0 || !entry.is_directory()) continue;
    if (!std::all_of(name.begin() + 4, name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      continue;
    NumaNode n;
    n.id = std::stoi(name.substr(4));
    n.cpus = parse_cpulist(read_text(entry.path() / "cpulist"), (entry.path() / "cpulist").string());
    const std::string meminfo = read_text(entry.path() / "meminfo");
    n.mem_total = meminfo_field(meminfo, "MemTotal");
    n.mem_free = meminfo_field(meminfo, "MemFree");
    n.distances = parse_ints(read_text(entry.path() / "distance"));
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) {
    if (!live) throw Error("NUMA sysfs root " + sysfs_root.string() + " lists no nodeN directories");
    std::string source;
    auto fallback = discover_without_sysfs(source);
    return from_nodes(std::move(fallback), source);
  }
  return from_nodes(std::move(nodes), sysfs_root.string());
}

Topology Topology::from_nodes(std::vector<NumaNode> nodes, std::string source) {
  std::sort(nodes.begin(), nodes.end(), [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  // sysfs lists distances to online nodes in id order; a table of any other length cannot be
  // matched to nodes, so drop it rather than guess.
  for (auto& n : nodes)
    if (n.distances.size() != nodes.size()) n.distances.clear();
  Topology t;
  t.nodes_ = std::move(nodes);
  t.source_ = std::move(source);
  return t;
}

bool Topology::has_node(int id) const {
  return std::any_of(nodes_.begin(), nodes_.end(), [id](const NumaNode& n) { return n.id == id; });
}

const NumaNode& Topology::node(int id) const {
  for (const auto& n : nodes_)
    if (n.id == id) return n;
  throw Error("NUMA node " + std::to_string(id) + " does not exist (nodes: " + node_list() + ")");
}

const NumaNode& Topology::memory_node(int id, const std::string& what) const {
  const std::string prefix = what.empty() ? "" : what + ": ";
  if (!has_node(id))
    throw Error(prefix + "NUMA node " + std::to_string(id) + " does not exist (nodes: " + node_list() + ")");
  const NumaNode& n = node(id);
  if (!n.has_memory()) {
    const std::string with_memory = join(memory_nodes(), ", ", [](int m) { return std::to_string(m); });
    throw Error(prefix + "NUMA node " + std::to_string(id) + " has no memory (nodes with memory: " + with_memory + ")");
  }
  return n;
}

std::vector<int> Topology::node_ids() const {
  std::vector<int> ids;
  for (const auto& n : nodes_) ids.push_back(n.id);
  return ids;
}

std::vector<int> Topology::memory_nodes() const {
  std::vector<int> ids;
  for (const auto& n : nodes_)
    if (n.has_memory()) ids.push_back(n.id);
  return ids;
}

std::vector<int> Topology::far_memory_nodes() const {
  std::vector<int> ids;
  for (const auto& n : nodes_)
    if (n.far_memory()) ids.push_back(n.id);
  return ids;
}

int Topology::node_of_cpu(int cpu) const {
  for (const auto& n : nodes_)
    if (std::binary_search(n.cpus.begin(), n.cpus.end(), cpu)) return n.id;
  return -1;
}

int Topology::distance(int from, int to) const {
  const NumaNode& a = node(from);
  if (!a.distances.empty()) {
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].id == to) return a.distances[i];
  }
  node(to);  // throws for a missing node
  return from == to ? 10 : 20;
}

int Topology::nearest_memory_node(int from, const std::vector<int>& candidates) const {
  int best = -1, best_distance = 0;
  for (int c : candidates) {
    if (!node(c).has_memory()) continue;
    const int d = distance(from, c);
    if (best < 0 || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string Topology::node_list() const {
  return join(nodes_, ", ", [](const NumaNode& n) { return std::to_string(n.id); });
}

std::string Topology::describe() const {
  std::ostringstream out;
  out << nodes_.size() << " NUMA node" << (nodes_.size() == 1 ? "" : "s") << " (from " << source_ << ")\n";
  for (const auto& n : nodes_) {
    out << "  node " << n.id << ": cpus " << (n.cpus.empty() ? "none" : format_cpulist(n.cpus)) << ", memory "
        << format_bytes(n.mem_total) << " (" << format_bytes(n.mem_free) << " free)";
    if (n.far_memory()) out << ", far memory (CPU-less, CXL-like)";
    if (!n.has_memory()) out << ", no memory";
    if (!n.distances.empty()) {
      out << ", distances";
      for (int d : n.distances) out << " " << d;
    }
    out << "\n";
  }
  return out.str();
}

nlohmann::json Topology::to_json() const {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : nodes_) {
    nodes.push_back({{"id", n.id},
                     {"cpus", format_cpulist(n.cpus)},
                     {"mem_total", n.mem_total},
                     {"mem_free", n.mem_free},
                     {"far_memory", n.far_memory()},
                     {"distances", n.distances}});
  }
  return {{"source", source_}, {"nodes", nodes}};
}

}  // namespace hg::mem
