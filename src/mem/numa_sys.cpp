#include "mem/numa_sys.h"

#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older glibc headers lack the name
#endif

namespace hg::mem {

namespace {

// The kernel reads maxnode-1 bits (it decrements first), so pass one more than the mask holds.
struct NodeMask {
  std::vector<unsigned long> words;
  unsigned long maxnode = 0;
};

NodeMask make_mask(const std::vector<int>& nodes) {
  constexpr int bits = 8 * sizeof(unsigned long);
  int top = 0;
  for (int n : nodes) top = std::max(top, n);
  NodeMask m;
  m.words.assign(static_cast<size_t>(top / bits + 1), 0UL);
  for (int n : nodes) m.words[static_cast<size_t>(n / bits)] |= 1UL << (n % bits);
  m.maxnode = m.words.size() * bits + 1;
  return m;
}

int mode_of(PolicyMode mode) {
  switch (mode) {
    case PolicyMode::bind:
      return MPOL_BIND;
    case PolicyMode::preferred:
      return MPOL_PREFERRED;
    case PolicyMode::interleave:
      return MPOL_INTERLEAVE;
    case PolicyMode::first_touch:
      break;
  }
  return MPOL_DEFAULT;
}

}  // namespace

bool MemPolicy::allows(int node) const {
  if (mode == PolicyMode::first_touch) return true;
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

std::string MemPolicy::describe() const {
  std::string name;
  switch (mode) {
    case PolicyMode::first_touch:
      return "first-touch";
    case PolicyMode::bind:
      name = "bind";
      break;
    case PolicyMode::preferred:
      name = "preferred";
      break;
    case PolicyMode::interleave:
      name = "interleave";
      break;
  }
  std::string list;
  for (int n : nodes) {
    if (!list.empty()) list += ',';
    list += std::to_string(n);
  }
  return name + "(" + list + ")";
}

int set_policy(void* addr, size_t bytes, const MemPolicy& policy, unsigned flags) {
  long rc;
  if (policy.mode == PolicyMode::first_touch) {
    rc = mbind(addr, bytes, MPOL_DEFAULT, nullptr, 0, flags);
  } else {
    NodeMask m = make_mask(policy.nodes);
    rc = mbind(addr, bytes, mode_of(policy.mode), m.words.data(), m.maxnode, flags);
  }
  return rc == 0 ? 0 : errno;
}

int query_page_nodes(std::span<void* const> pages, std::span<int> out) {
  std::vector<void*> addrs(pages.begin(), pages.end());
  std::fill(out.begin(), out.end(), -ENOENT);
  // move_pages with a null target only reports; batches keep the kernel's temporary arrays small.
  constexpr size_t batch = 4096;
  int err = 0;
  for (size_t i = 0; i < addrs.size() && err == 0; i += batch) {
    const size_t n = std::min(batch, addrs.size() - i);
    if (move_pages(0, n, addrs.data() + i, nullptr, out.data() + i, 0) != 0) err = errno;
  }
  if (err == 0) return 0;
  // Refused (seccomp, old kernel): ask get_mempolicy page by page. It faults the page in, which
  // is harmless here because callers only query committed memory.
  for (size_t i = 0; i < addrs.size(); ++i) {
    int node = -1;
    if (get_mempolicy(&node, nullptr, 0, addrs[i], MPOL_F_NODE | MPOL_F_ADDR) != 0) return errno;
    out[i] = node;
  }
  return 0;
}

bool policy_unsupported(int err) { return err == EPERM || err == ENOSYS || err == EACCES; }

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return std::string(name ? name : "errno " + std::to_string(err)) + " (" + std::strerror(err) + ")";
}

NumaSupport NumaSupport::probe(int node) {
  NumaSupport s;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = 2 * page;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    s.mbind_errno = s.move_errno = s.get_mempolicy_errno = s.move_pages_errno = errno;
    return s;
  }
  s.mbind_errno = set_policy(p, bytes, MemPolicy::bind(node), 0);
  s.populate_write = madvise(p, bytes, MADV_POPULATE_WRITE) == 0;
  if (!s.populate_write) std::memset(p, 0, bytes);
  s.move_errno = set_policy(p, bytes, MemPolicy::bind(node), MPOL_MF_MOVE | MPOL_MF_STRICT);
  int where = -1;
  s.get_mempolicy_errno = get_mempolicy(&where, nullptr, 0, p, MPOL_F_NODE | MPOL_F_ADDR) == 0 ? 0 : errno;
  int status = 0;
  void* pages[1] = {p};
  s.move_pages_errno = move_pages(0, 1, pages, nullptr, &status, 0) == 0 ? 0 : errno;
  munmap(p, bytes);
  // THP needs a 2 MiB-aligned range to say anything; a refused advice is all we test here.
  void* h = mmap(nullptr, 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (h != MAP_FAILED) {
    s.transparent_huge_pages = madvise(h, 4 << 20, MADV_HUGEPAGE) == 0;
    munmap(h, 4 << 20);
  }
  return s;
}

std::string NumaSupport::describe() const {
  auto one = [](int err) { return err == 0 ? std::string("yes") : "no, " + errno_text(err); };
  return "mbind: " + one(mbind_errno) + "; migrate (MPOL_MF_MOVE): " + one(move_errno) +
         "; get_mempolicy: " + one(get_mempolicy_errno) + "; move_pages: " + one(move_pages_errno) +
         "; MADV_POPULATE_WRITE: " + (populate_write ? "yes" : "no") +
         "; MADV_HUGEPAGE: " + (transparent_huge_pages ? "yes" : "no");
}

nlohmann::json NumaSupport::to_json() const {
  auto one = [](int err) { return err == 0 ? std::string("ok") : errno_text(err); };
  return {{"mbind", one(mbind_errno)},
          {"migrate", one(move_errno)},
          {"get_mempolicy", one(get_mempolicy_errno)},
          {"move_pages", one(move_pages_errno)},
          {"populate_write", populate_write},
          {"transparent_huge_pages", transparent_huge_pages}};
}

}  // namespace hg::mem
