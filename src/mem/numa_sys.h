// Thin, errno-returning wrappers over the NUMA memory-policy syscalls (mbind, get_mempolicy,
// move_pages) and a probe of which of them this process may use. Containers and some kernels
// refuse them (EPERM under seccomp, ENOSYS without CONFIG_NUMA); callers turn the errno into a
// report line instead of crashing.
#pragma once
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

namespace hg::mem {

// What mbind is asked for. `first_touch` leaves the default policy: pages land where they are
// first written.
enum class PolicyMode { first_touch, bind, preferred, interleave };

struct MemPolicy {
  PolicyMode mode = PolicyMode::first_touch;
  std::vector<int> nodes;  // bind/preferred: one node; interleave: the set

  static MemPolicy bind(int node) { return {PolicyMode::bind, {node}}; }
  static MemPolicy preferred(int node) { return {PolicyMode::preferred, {node}}; }
  static MemPolicy interleave(std::vector<int> nodes) { return {PolicyMode::interleave, std::move(nodes)}; }
  // Whether a page found on `node` is where this policy asked for it.
  bool allows(int node) const;
  std::string describe() const;  // "bind(0)", "interleave(0,1)", "first-touch"
  bool operator==(const MemPolicy&) const = default;
};

// mbind(2) over [addr, addr+bytes) (page aligned). flags: 0, or MPOL_MF_MOVE|MPOL_MF_STRICT to
// migrate pages already there. Returns 0 or errno.
int set_policy(void* addr, size_t bytes, const MemPolicy& policy, unsigned flags);
// Node of each page (move_pages with no target: a query). out[i] is the node, or -errno for a
// page that is not present (-ENOENT: never touched). Falls back to get_mempolicy per page when
// move_pages is refused. Returns 0 or the errno of the whole call.
int query_page_nodes(std::span<void* const> pages, std::span<int> out);

// True for errno values that mean "this process may not use NUMA policy here" rather than "bad
// request": the placement then degrades to first-touch and says so.
bool policy_unsupported(int err);
std::string errno_text(int err);  // "EPERM (Operation not permitted)"

// Which calls work in this process, found by trying them on a scratch mapping.
struct NumaSupport {
  int mbind_errno = 0;                  // 0 = mbind(MPOL_BIND) works
  int move_errno = 0;                   // 0 = mbind(MPOL_MF_MOVE) works (migration of existing pages)
  int get_mempolicy_errno = 0;          // 0 = get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR) works
  int move_pages_errno = 0;             // 0 = move_pages query works
  bool populate_write = false;          // madvise(MADV_POPULATE_WRITE), Linux 5.14+
  bool transparent_huge_pages = false;  // madvise(MADV_HUGEPAGE) accepted

  bool can_bind() const { return mbind_errno == 0; }
  bool can_migrate() const { return move_errno == 0; }
  bool can_verify() const { return get_mempolicy_errno == 0 || move_pages_errno == 0; }
  static NumaSupport probe(int node);  // `node`: a node with memory this process may use
  std::string describe() const;
  nlohmann::json to_json() const;
};

}  // namespace hg::mem
