// The host K and V stores of one sequence: two arenas (src/mem/, placed by policy: K on the
// K node, V on the V node), filled in position order with tokens evicted from the device window
// (or written there directly by prefill). Layout, in token blocks of block_tokens tokens:
//   block b: [n_layers][n_kv_heads][block_tokens][head_dim]  in the cache dtype
// so one layer's keys of one kv-head are contiguous runs of block_tokens rows, which the host
// logits kernels stream, and the oldest blocks (least recently generated) are the lowest addresses,
// which the K budget spills first.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "hybridgen/model.h"
#include "kernels/kv_layout.h"
#include "mem/placement.h"

namespace hg {

class HostStore {
 public:
  // 256 tokens make each (layer, kv-head) run of keys 32 KiB at head_dim 64 bf16: long enough for
  // the hardware prefetchers. 64 (8 KiB runs) streamed at half the speed (bench_host_logits).
  static constexpr int kDefaultBlockTokens = 256;

  HostStore(const ModelSpec& spec, DType dtype, int capacity_tokens, const mem::Topology& topology,
            const mem::Placement& placement, int block_tokens = kDefaultBlockTokens,
            mem::DmaRegistrar* dma = nullptr);

  int64_t n_tokens() const { return n_tokens_; }
  int capacity() const { return capacity_; }
  KvLayout k_layout(int layer) const { return layout(k_->data(), layer); }
  KvLayout v_layout(int layer) const { return layout(v_->data(), layer); }
  // Writable row of token t, kv-head g, layer l (t < n_tokens after append_tokens).
  void* k_row(int layer, int g, int64_t t) { return const_cast<void*>(k_layout(layer).row(g, t)); }
  void* v_row(int layer, int g, int64_t t) { return const_cast<void*>(v_layout(layer).row(g, t)); }
  // Makes room for n more tokens (commits arena blocks outside any hot loop) and counts them.
  int64_t append_tokens(int n);
  void clear() { n_tokens_ = 0; }
  size_t k_bytes() const { return static_cast<size_t>(n_tokens_) * bytes_per_token_; }
  const mem::Arena& k_arena() const { return *k_; }
  const mem::Arena& v_arena() const { return *v_; }
  // Spills the oldest K arena blocks to the V node while the K budget is exceeded; returns how
  // many moved. Addresses stay, so readers are unaffected.
  size_t enforce_k_budget(const mem::Placement& placement);

 private:
  KvLayout layout(const std::byte* arena_base, int layer) const;

  int n_layers_, n_kv_heads_, head_dim_, block_tokens_;
  DType dtype_;
  int capacity_;
  size_t layer_bytes_;      // one layer's part of a token block
  size_t block_bytes_;      // a whole token block (all layers)
  size_t bytes_per_token_;  // K only, all layers
  int64_t n_tokens_ = 0;
  size_t spilled_blocks_ = 0;
  std::unique_ptr<mem::Arena> k_, v_;
};

}  // namespace hg
