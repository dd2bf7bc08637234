// A NUMA-placed, growable host arena: one large virtual range reserved up front (PROT_NONE,
// MAP_NORESERVE), committed in blocks. Each block is bound with mbind BEFORE its first touch, so
// its pages are born on the intended node instead of being migrated later; then it is populated
// and, when a DmaRegistrar is set, registered for DMA (cudaHostRegister in the CUDA backend).
// Growth never moves committed data: block i always lives at data() + i * block_bytes(), so
// readers (the host attention workers) keep their pointers across growth and migration.
// Threading: one owner (the KV store) calls grow_to / migrate_block; other threads may read and
// write committed blocks meanwhile (a migrating page is briefly locked by the kernel, not lost).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mem/numa_sys.h"
#include "mem/topology.h"

namespace hg::mem {

// v rounded up to a multiple of `to` (> 0): block and huge-page sizes.
constexpr uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Set by the CUDA backend so that host arenas become DMA-able without src/mem including CUDA.
// Calls come per committed block, and each registered range is unregistered exactly once.
struct DmaRegistrar {
  virtual ~DmaRegistrar() = default;
  // Whether the range is registered now (a refusal leaves it pageable).
  virtual bool register_range(void* addr, size_t bytes) = 0;
  virtual void unregister_range(void* addr, size_t bytes) = 0;
};

struct ArenaOptions {
  std::string name = "arena";           // "K", "V": used in errors and reports
  size_t reserve_bytes = 0;             // virtual range reserved up front; growth past it is an error
  size_t block_bytes = kHugePageBytes;  // commit granularity, rounded up to a 2 MiB multiple
  MemPolicy policy;                     // applied to every block as it is committed
  bool huge_pages = false;              // madvise(MADV_HUGEPAGE) on committed blocks
  bool populate = true;                 // fault pages in at commit time (not inside the decode loop)
  DmaRegistrar* dma = nullptr;          // not owned; must outlive the arena
};

class Arena {
 public:
  // Validates the policy's nodes against `topology` (hg::Error naming the missing node and the
  // nodes that exist), reserves the virtual range and commits nothing yet.
  Arena(const Topology& topology, ArenaOptions options);
  ~Arena();
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  const std::string& name() const { return options_.name; }
  const MemPolicy& policy() const { return options_.policy; }
  bool huge_pages() const { return options_.huge_pages; }
  std::byte* data() const { return base_; }
  size_t size() const { return n_blocks_ * block_bytes_; }  // committed bytes
  size_t capacity() const { return reserved_; }             // reserved bytes
  size_t block_bytes() const { return block_bytes_; }
  size_t n_blocks() const { return n_blocks_; }
  std::byte* block(size_t i) const;

  // Commits whole blocks until size() >= bytes. Existing blocks keep their address and content.
  void grow_to(size_t bytes);
  void grow_blocks(size_t n) { grow_to(size() + n * block_bytes_); }

  // Moves block i's pages to `node` (mbind MPOL_BIND + MPOL_MF_MOVE) and binds the range there,
  // so data and virtual address stay; used to spill the oldest K blocks past the K-node budget.
  // DMA registration is dropped around the move because pinned pages cannot migrate.
  // Returns false (and logs why) when the kernel refused or left pages behind.
  bool migrate_block(size_t i, int node);

  // The policy block i was committed or last migrated with.
  MemPolicy block_policy(size_t i) const;
  // Bytes per node as planned by the block policies (interleave split evenly; first-touch: -1).
  std::map<int, uint64_t> planned_bytes_per_node() const;
  // "" when every block was bound; otherwise why mbind was refused (pages are then first-touch).
  const std::string& binding_error() const { return binding_error_; }

 private:
  void release() noexcept;
  void check_node(int node, const std::string& what) const;

  ArenaOptions options_;
  std::vector<int> node_ids_;  // nodes that exist, for validation messages
  std::vector<int> memory_node_ids_;
  std::string node_list_;
  std::byte* mapping_ = nullptr;  // what mmap returned (before alignment)
  size_t mapping_bytes_ = 0;
  std::byte* base_ = nullptr;  // 2 MiB aligned start of the usable range
  size_t reserved_ = 0;
  size_t block_bytes_ = 0;
  size_t n_blocks_ = 0;
  std::vector<int> migrated_to_;  // per block: node it was migrated to, -1 = arena policy
  std::string binding_error_;
};

}  // namespace hg::mem
