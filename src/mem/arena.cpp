#include "mem/arena.h"

#include <numaif.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "hybridgen/error.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace hg::mem {

namespace {

size_t page_bytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// Faults every page in for writing. MADV_POPULATE_WRITE does it in one call (and reports ENOMEM
// instead of raising SIGBUS); the touch loop is for kernels older than 5.14.
int populate(std::byte* p, size_t bytes) {
  if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return 0;
  if (errno != EINVAL) return errno;
  const size_t page = page_bytes();
  for (size_t off = 0; off < bytes; off += page) *reinterpret_cast<volatile char*>(p + off) = 0;
  return 0;
}

}  // namespace

Arena::Arena(const Topology& topology, ArenaOptions options) : options_(std::move(options)) {
  node_ids_ = topology.node_ids();
  memory_node_ids_ = topology.memory_nodes();
  node_list_ = topology.node_list();
  if (options_.policy.mode != PolicyMode::first_touch && options_.policy.nodes.empty())
    throw Error("arena " + name() + ": policy " + options_.policy.describe() + " names no node");
  for (int n : options_.policy.nodes) check_node(n, "arena " + name());
  if (options_.reserve_bytes == 0) throw Error("arena " + name() + ": reserve_bytes must be > 0");

  block_bytes_ = round_up(std::max<size_t>(options_.block_bytes, 1), kHugePageBytes);
  reserved_ = round_up(options_.reserve_bytes, block_bytes_);
  // Over-reserve by one huge page so the usable range can start 2 MiB aligned: THP can then back
  // whole blocks, and block boundaries never split a huge page.
  mapping_bytes_ = reserved_ + kHugePageBytes;
  void* m = mmap(nullptr, mapping_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    throw Error("arena " + name() + ": cannot reserve " + format_bytes(reserved_) +
                " of address space: " + errno_text(errno));
  mapping_ = static_cast<std::byte*>(m);
  const auto addr = reinterpret_cast<uintptr_t>(mapping_);
  base_ = mapping_ + (round_up(addr, kHugePageBytes) - addr);
}

Arena::~Arena() { release(); }

Arena::Arena(Arena&& other) noexcept
    : options_(std::move(other.options_)),
      node_ids_(std::move(other.node_ids_)),
      memory_node_ids_(std::move(other.memory_node_ids_)),
      node_list_(std::move(other.node_list_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)),
      base_(std::exchange(other.base_, nullptr)),
      reserved_(std::exchange(other.reserved_, 0)),
      block_bytes_(other.block_bytes_),
      n_blocks_(std::exchange(other.n_blocks_, 0)),
      migrated_to_(std::move(other.migrated_to_)),
      binding_error_(std::move(other.binding_error_)) {}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    release();
    options_ = std::move(other.options_);
    node_ids_ = std::move(other.node_ids_);
    memory_node_ids_ = std::move(other.memory_node_ids_);
    node_list_ = std::move(other.node_list_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    base_ = std::exchange(other.base_, nullptr);
    reserved_ = std::exchange(other.reserved_, 0);
    block_bytes_ = other.block_bytes_;
    n_blocks_ = std::exchange(other.n_blocks_, 0);
    migrated_to_ = std::move(other.migrated_to_);
    binding_error_ = std::move(other.binding_error_);
  }
  return *this;
}

void Arena::release() noexcept {
  if (!mapping_) return;
  if (options_.dma) {
    for (size_t i = 0; i < n_blocks_; ++i) options_.dma->unregister_range(block(i), block_bytes_);
  }
  munmap(mapping_, mapping_bytes_);
  mapping_ = nullptr;
  base_ = nullptr;
  n_blocks_ = 0;
  migrated_to_.clear();
}

void Arena::check_node(int node, const std::string& what) const {
  if (std::find(node_ids_.begin(), node_ids_.end(), node) == node_ids_.end())
    throw Error(what + ": NUMA node " + std::to_string(node) + " does not exist (nodes: " + node_list_ + ")");
  if (std::find(memory_node_ids_.begin(), memory_node_ids_.end(), node) == memory_node_ids_.end())
    throw Error(what + ": NUMA node " + std::to_string(node) + " has no memory");
}

std::byte* Arena::block(size_t i) const {
  if (i >= n_blocks_)
    throw Error("arena " + name() + ": block " + std::to_string(i) + " is not committed (" + std::to_string(n_blocks_) +
                " blocks)");
  return base_ + i * block_bytes_;
}

void Arena::grow_to(size_t bytes) {
  if (bytes <= size()) return;
  const size_t target = round_up(bytes, block_bytes_);
  if (target > reserved_)
    throw Error("arena " + name() + ": growing to " + format_bytes(target) + " exceeds the reserved " +
                format_bytes(reserved_));
  std::byte* start = base_ + size();
  const size_t len = target - size();
  const std::string where = "arena " + name() + " (" + options_.policy.describe() + ")";

  auto undo = [&] {
    madvise(start, len, MADV_DONTNEED);
    mprotect(start, len, PROT_NONE);
  };
  if (mprotect(start, len, PROT_READ | PROT_WRITE) != 0)
    throw Error(where + ": cannot commit " + format_bytes(len) + ": " + errno_text(errno));
  // Policy first, then the first touch: pages are allocated on the right node from the start.
  if (options_.policy.mode != PolicyMode::first_touch) {
    const int err = set_policy(start, len, options_.policy, 0);
    if (err != 0 && policy_unsupported(err)) {
      if (binding_error_.empty()) {
        binding_error_ = "mbind refused: " + errno_text(err);
        spdlog::warn("{}: {}; pages will be placed by first touch", where, binding_error_);
      }
    } else if (err != 0) {
      undo();
      // EINVAL for a node that exists usually means the cpuset forbids it.
      throw Error(where + ": mbind failed: " + errno_text(err) +
                  (err == EINVAL ? " (is the node in this process's Mems_allowed_list, /proc/self/status?)" : ""));
    }
  }
  if (options_.huge_pages && madvise(start, len, MADV_HUGEPAGE) != 0)
    spdlog::debug("{}: MADV_HUGEPAGE refused: {}", where, errno_text(errno));
  if (options_.populate) {
    const int err = populate(start, len);
    if (err != 0) {
      undo();
      throw Error(where + ": cannot commit " + format_bytes(len) + ": " + errno_text(err) +
                  (err == ENOMEM ? " (the node is full)" : ""));
    }
  }
  const size_t first = n_blocks_;
  const size_t last = target / block_bytes_;
  migrated_to_.resize(last, -1);
  for (size_t i = first; i < last; ++i) {
    std::byte* b = base_ + i * block_bytes_;
    if (options_.dma) {
      try {
        options_.dma->register_range(b, block_bytes_);
      } catch (...) {
        // Blocks before i stay committed and registered; the rest go back to reserved.
        madvise(b, base_ + target - b, MADV_DONTNEED);
        mprotect(b, base_ + target - b, PROT_NONE);
        migrated_to_.resize(n_blocks_);
        throw;
      }
    }
    ++n_blocks_;
  }
}

bool Arena::migrate_block(size_t i, int node) {
  std::byte* b = block(i);
  check_node(node, "arena " + name() + ": migrate_block");
  if (options_.dma) options_.dma->unregister_range(b, block_bytes_);
  const int err = set_policy(b, block_bytes_, MemPolicy::bind(node), MPOL_MF_MOVE | MPOL_MF_STRICT);
  if (options_.dma) options_.dma->register_range(b, block_bytes_);
  // EIO: the policy is set but some pages stayed (shared or pinned elsewhere); future faults and
  // the report follow the new policy, the stragglers show up as mismatches.
  if (err == 0 || err == EIO) migrated_to_[i] = node;
  if (err != 0) {
    spdlog::warn("arena {}: moving block {} to node {} failed: {}", name(), i, node, errno_text(err));
    return false;
  }
  return true;
}

MemPolicy Arena::block_policy(size_t i) const {
  block(i);  // range check
  return migrated_to_[i] >= 0 ? MemPolicy::bind(migrated_to_[i]) : options_.policy;
}

std::map<int, uint64_t> Arena::planned_bytes_per_node() const {
  std::map<int, uint64_t> out;
  for (size_t i = 0; i < n_blocks_; ++i) {
    const MemPolicy p = block_policy(i);
    if (p.mode == PolicyMode::first_touch) {
      out[-1] += block_bytes_;
    } else if (p.mode == PolicyMode::interleave) {
      for (int n : p.nodes) out[n] += block_bytes_ / p.nodes.size();
    } else {
      out[p.nodes.front()] += block_bytes_;
    }
  }
  return out;
}

}  // namespace hg::mem
