#include "kv/host_store.h"

#include "hybridgen/error.h"

namespace hg {

HostStore::HostStore(const ModelSpec& spec, DType dtype, int capacity_tokens, const mem::Topology& topology,
                     const mem::Placement& placement, int block_tokens, mem::DmaRegistrar* dma)
    : n_layers_(spec.n_layers),
      n_kv_heads_(spec.n_kv_heads),
      head_dim_(spec.head_dim),
      block_tokens_(block_tokens),
      dtype_(dtype),
      capacity_(capacity_tokens) {
  layer_bytes_ = static_cast<size_t>(n_kv_heads_) * block_tokens_ * head_dim_ * dtype_block_bytes(dtype);
  block_bytes_ = layer_bytes_ * n_layers_;
  bytes_per_token_ = block_bytes_ / static_cast<size_t>(block_tokens_);
  const size_t n_blocks = static_cast<size_t>((capacity_tokens + block_tokens - 1) / block_tokens) + 1;
  auto arenas = mem::make_kv_arenas(topology, placement, n_blocks * block_bytes_, n_blocks * block_bytes_, dma);
  k_ = std::make_unique<mem::Arena>(std::move(arenas.k));
  v_ = std::make_unique<mem::Arena>(std::move(arenas.v));
}

KvLayout HostStore::layout(const std::byte* arena_base, int layer) const {
  KvLayout l;
  l.dtype = dtype_;
  l.n_kv_heads = n_kv_heads_;
  l.head_dim = head_dim_;
  l.block_tokens = block_tokens_;
  l.block_stride = block_bytes_;
  l.base = arena_base + static_cast<size_t>(layer) * layer_bytes_;
  return l;
}

int64_t HostStore::append_tokens(int n) {
  if (n_tokens_ + n > capacity_)
    throw Error("host KV store full: " + std::to_string(n_tokens_ + n) + " tokens > capacity " + std::to_string(capacity_));
  const int64_t first = n_tokens_;
  n_tokens_ += n;
  const size_t blocks = static_cast<size_t>((n_tokens_ + block_tokens_ - 1) / block_tokens_);
  if (k_->size() < blocks * block_bytes_) {
    k_->grow_to(blocks * block_bytes_);
    v_->grow_to(blocks * block_bytes_);
  }
  return first;
}

size_t HostStore::enforce_k_budget(const mem::Placement& placement) {
  size_t over = mem::k_blocks_over_budget(*k_, placement);
  size_t moved = 0;
  while (over > 0 && spilled_blocks_ < k_->n_blocks()) {
    // Oldest first: arena block i holds older tokens than block i + 1.
    if (k_->migrate_block(spilled_blocks_, placement.v_node)) ++moved;
    ++spilled_blocks_;
    --over;
  }
  return moved;
}

}  // namespace hg
