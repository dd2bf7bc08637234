// The split KV cache of the hybrid policies, per sequence:
//   positions [0, n_sinks)             sinks, on the device, never evicted
//   positions [n_sinks, ring_pos0)     host stores (or dropped when the policy prunes)
//   positions [ring_pos0, length)      the device window: a ring of `window` slots
// per layer the device holds K and V as [n_kv_heads][sink_slots + window][head_dim]. The token
// map records every position's place; eviction moves the oldest block of the window (least
// recently generated) to the host stores. Prefill writes each token where it will live.
// The kernels get the device tokens (tokens(seq), kernels/device_tokens.h) as the ring's
// parameters; a host copy of the same list (a slot table) serves the observers and the checks.
// Heavy-hitter pruning (h2o, keyformer: layout.heavy > 0 with keep_evicted false) adds `heavy`
// slots per layer and kv-head after the ring (kv/heavy_slots.h: who stays is the retainer's
// choice, the policy's pruner). The kernels then get slot tables, one row per kv-head and one
// table per layer (per_head_tables()), copied to the device whenever the device set changes.
// An eviction gathers its rows of every layer on the device and copies them into a pinned
// buffer without a host wait; a host callback (Device::host_callback) places them in the host
// store once the copy has run, ahead, in the stream's order, of every host job that reads them
// (a job of the synchronous path starts only after a host wait for the stream).
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "device/device.h"
#include "kv/heavy_slots.h"
#include "kv/host_store.h"
#include "mem/pinned_buffer.h"

namespace hg {

// What the split cache needs of a policy.
struct HybridKvLayout {
  int window = 1024;         // recent tokens on the device
  int n_sinks = 4;           // first tokens on the device, never evicted
  bool keep_evicted = true;  // false: tokens leaving the window are dropped
  int evict_block = 16;      // tokens a decode step evicts at once from a full window
  int heavy = 0;             // pruning only: heavy-hitter slots per layer and kv-head
};

class HybridKv {
 public:
  HybridKv(Device& device, const ModelSpec& spec, const HybridKvLayout& layout, DType dtype, int ctx, int n_seqs,
           const mem::Topology& topology, const mem::Placement& placement);
  ~HybridKv();
  HybridKv(const HybridKv&) = delete;
  HybridKv& operator=(const HybridKv&) = delete;

  int length(int seq) const { return seqs_[static_cast<size_t>(seq)].length; }
  void reset(int seq);
  const KvView& window(int seq, int layer) const { return seqs_[static_cast<size_t>(seq)].window[static_cast<size_t>(layer)]; }
  // The device tokens of layer `layer` of `seq`: the sinks and the ring by their parameters (the
  // same for every layer and kv-head), or with heavy hitters a table in device memory, one row
  // per kv-head.
  DeviceTokens tokens(int seq, int layer) const;
  // The same table's positions on the host: [n_kv_heads][count] with heavy hitters, else [count].
  const int32_t* token_positions(int seq, int layer) const;
  // Heavy hitters: who decides which tokens stay (the policy's selector).
  void set_retainer(Retainer r) { retainer_ = std::move(r); }
  int heavy_slots() const { return heavy_slots_; }
  // The heavy hitters kv-head g of (seq, layer) keeps: positions (increasing) and their slots.
  std::span<const int32_t> heavy_positions(int seq, int layer, int g) const { return heavy(seq, layer, g).pos; }
  std::span<const int32_t> heavy_cache_slots(int seq, int layer, int g) const { return heavy(seq, layer, g).slot; }
  HostStore& host(int seq) { return *seqs_[static_cast<size_t>(seq)].host; }
  const HostStore& host(int seq) const { return *seqs_[static_cast<size_t>(seq)].host; }
  // Slots reserved for sinks: host tokens hold positions [sink_slots, sink_slots + host.n_tokens())
  // when the policy keeps them.
  int sink_slots() const { return sink_slots_; }
  const TokenLocation& location(int seq, int pos) const { return seqs_[static_cast<size_t>(seq)].map[static_cast<size_t>(pos)]; }

  // Before a step that appends positions [length, end): evicts window tokens that will not stay
  // (moving them to the host or dropping them) and returns, per new token, its place.
  // Layer-independent: it moves every layer's K and V at once.
  void make_room(int seq, int end, std::vector<TokenLocation>& places);
  // Writes layer `layer`'s k, v ([n, kv_dim] fp32 on the device) of the step's n new positions to
  // the places make_room chose. `k_host`, `v_host`: the same rows on the host (host-bound rows).
  void store(int seq, int layer, int n, const std::vector<TokenLocation>& places, const float* k_dev,
             const float* v_dev, const float* k_host, const float* v_host);
  // Marks positions [length, end) as stored (after every layer's store).
  void commit(int seq, int end);

  // Every position exactly once, in order; sinks on the device; the slot table lists exactly the
  // device tokens, in position order, at their slots. Throws with the first violation.
  void check_invariants(int seq) const;
  // Bytes moved device -> host by eviction so far.
  uint64_t evicted_bytes() const { return evicted_bytes_; }
  // K arena blocks spilled to the V node because of the K budget.
  uint64_t spilled_k_blocks() const { return spilled_k_blocks_; }

 private:
  // An eviction's rows on their way to the host store (place_evicted), per sequence.
  struct Evicted {
    HybridKv* self = nullptr;
    int seq = 0;
    int64_t host_first = 0;  // the first host token they fill
    int n = 0;               // tokens
    std::unique_ptr<mem::PinnedBuffer> rows;  // K then V, [layer][kv-head][n][head_dim] each
    int64_t placed = -1;  // a compute fence behind the placement (guards the next eviction's reuse)
  };
  struct Seq {
    std::byte* k_all = nullptr;  // every layer's window: [n_layers][n_kv_heads][slots][head_dim]
    std::byte* v_all = nullptr;
    std::vector<KvView> window;  // per layer, into k_all and v_all
    std::unique_ptr<HeavySlots> heavy;  // heavy-hitter pruning only
    std::unique_ptr<HostStore> host;
    std::vector<TokenLocation> map;  // per position
    int length = 0;
    int n_sinks = 0;
    int ring_head = 0, ring_count = 0, ring_pos0 = 0;
    // the slot table, host copy: [sink_slots + window], or [n_layers][n_kv_heads][table_row()]
    // with heavy hitters
    std::vector<int32_t> slot, pos;
    int32_t* slot_dev = nullptr;               // the same on the device (heavy hitters only)
    int32_t* pos_dev = nullptr;
    int table_count = 0;
    Evicted evicted;
  };
  void evict(int seq, Seq& s, int n);
  // The host callback of an eviction (an Evicted): its rows into the store's token blocks (host
  // copies only: a host callback makes no CUDA call).
  static void place_evicted(void* evicted);
  RingSlots ring(const Seq& s) const { return {sink_slots_, ring_slots_, s.ring_head, s.ring_pos0}; }
  const HeavySlots::Set& heavy(int seq, int layer, int g) const {
    return seqs_[static_cast<size_t>(seq)].heavy->set(layer, g);
  }
  // With heavy hitters each (layer, kv-head) lists its own device tokens: one slot table each.
  bool per_head_tables() const { return heavy_slots_ > 0; }
  int n_tables() const { return per_head_tables() ? spec_.n_layers * spec_.n_kv_heads : 1; }
  int table_row() const { return sink_slots_ + ring_slots_ + heavy_slots_; }
  // Rebuilds the slot table from the sinks and the ring (and copies it to the device with heavy
  // hitters).
  void update_table(Seq& s);

  Device& device_;
  const ModelSpec& spec_;
  HybridKvLayout layout_;
  DType dtype_;
  int ctx_;
  int sink_slots_, ring_slots_, heavy_slots_;
  Retainer retainer_;
  std::vector<std::byte> row_k_, row_v_;  // one K and one V row, staging for heavy-slot copies
  void* evict_dev_ = nullptr;          // an eviction's rows gathered on the device
  size_t evict_dev_bytes_ = 0;
  std::vector<Seq> seqs_;
  uint64_t evicted_bytes_ = 0;
  uint64_t spilled_k_blocks_ = 0;
  mem::Placement placement_;
};

}  // namespace hg
