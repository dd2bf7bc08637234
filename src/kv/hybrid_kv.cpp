#include "kv/hybrid_kv.h"

#include <algorithm>
#include <cstring>

#include "hybridgen/error.h"
#include "kernels/cpu/attention.h"

namespace hg {

HybridKv::HybridKv(Device& device, const ModelSpec& spec, const HybridKvLayout& layout, DType dtype, int ctx,
                   int n_seqs, const mem::Topology& topology, const mem::Placement& placement)
    : device_(device),
      spec_(spec),
      layout_(layout),
      dtype_(dtype),
      ctx_(ctx),
      sink_slots_(std::min(layout.n_sinks, ctx)),
      ring_slots_(std::min(layout.window, ctx)),
      heavy_slots_(layout.keep_evicted ? 0 : std::clamp(layout.heavy, 0, ctx)),
      placement_(placement) {
  const size_t slots = static_cast<size_t>(table_row());
  const size_t bytes = static_cast<size_t>(spec.kv_dim()) * std::max<size_t>(slots, 1) * dtype_block_bytes(dtype);
  seqs_.resize(static_cast<size_t>(n_seqs));
  for (auto& s : seqs_) {
    // Every layer's window in one allocation each for K and V, [layer][kv-head][slot][head_dim]:
    // an eviction gathers its rows from all of them at once.
    s.k_all = static_cast<std::byte*>(device.alloc(bytes * spec.n_layers));
    s.v_all = static_cast<std::byte*>(device.alloc(bytes * spec.n_layers));
    for (int l = 0; l < spec.n_layers; ++l) {
      KvView v;
      v.dtype = dtype;
      v.capacity = static_cast<int64_t>(slots);
      v.n_kv_heads = spec.n_kv_heads;
      v.head_dim = spec.head_dim;
      v.k = s.k_all + bytes * l;
      v.v = s.v_all + bytes * l;
      s.window.push_back(v);
    }
    const int host_capacity = layout.keep_evicted ? std::max(1, ctx - sink_slots_) : 1;
    s.host = std::make_unique<HostStore>(spec, dtype, host_capacity, topology, placement,
                                          HostStore::kDefaultBlockTokens, device.dma_registrar());
    s.map.resize(static_cast<size_t>(ctx));
    const size_t tables = static_cast<size_t>(n_tables());
    s.slot.resize(std::max<size_t>(slots, 1) * tables);
    s.pos.resize(std::max<size_t>(slots, 1) * tables);
    if (heavy_slots_ > 0) s.heavy = std::make_unique<HeavySlots>(spec, sink_slots_ + ring_slots_, heavy_slots_);
    s.evicted.self = this;
    s.evicted.seq = static_cast<int>(&s - seqs_.data());
    s.evicted.rows = std::make_unique<mem::PinnedBuffer>(device.dma_registrar());
    if (per_head_tables()) {  // otherwise the kernels get the ring's parameters
      s.slot_dev = static_cast<int32_t*>(device.alloc(sizeof(int32_t) * s.slot.size()));
      s.pos_dev = static_cast<int32_t*>(device.alloc(sizeof(int32_t) * s.pos.size()));
    }
  }
  for (int i = 0; i < n_seqs; ++i) reset(i);
}

HybridKv::~HybridKv() {
  device_.synchronize();  // no eviction's placement may still be queued
  if (evict_dev_) device_.free(evict_dev_);
  for (auto& s : seqs_) {
    device_.free(s.k_all);
    device_.free(s.v_all);
    if (s.slot_dev) device_.free(s.slot_dev);
    if (s.pos_dev) device_.free(s.pos_dev);
  }
}

void HybridKv::reset(int seq) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  s.length = s.n_sinks = s.ring_head = s.ring_count = s.ring_pos0 = s.table_count = 0;
  s.host->clear();
  std::fill(s.map.begin(), s.map.end(), TokenLocation{});
  if (s.heavy) s.heavy->reset();
}

DeviceTokens HybridKv::tokens(int seq, int layer) const {
  const Seq& s = seqs_[static_cast<size_t>(seq)];
  DeviceTokens t;
  t.count = s.table_count;
  t.n_lead = s.n_sinks;
  if (!per_head_tables()) {  // the sinks and the ring, as parameters
    t.ring = true;
    t.ring_base = sink_slots_;
    t.ring_slots = ring_slots_;
    t.ring_head = s.ring_head;
    t.ring_pos0 = s.ring_pos0;
    return t;
  }
  const size_t table = static_cast<size_t>(layer) * spec_.n_kv_heads * table_row();
  t.slot = s.slot_dev + table;
  t.pos = s.pos_dev + table;
  t.stride = table_row();
  return t;
}

const int32_t* HybridKv::token_positions(int seq, int layer) const {
  const Seq& s = seqs_[static_cast<size_t>(seq)];
  return s.pos.data() + (per_head_tables() ? static_cast<size_t>(layer) * spec_.n_kv_heads * table_row() : 0);
}

void HybridKv::update_table(Seq& s) {
  // per kv-head (and layer, with heavy hitters): sinks, heavy hitters, the ring, in position order
  const int n_tables = this->n_tables();
  const size_t row = static_cast<size_t>(table_row());
  for (int t = 0; t < n_tables; ++t) {
    int32_t* slot = s.slot.data() + static_cast<size_t>(t) * row;
    int32_t* pos = s.pos.data() + static_cast<size_t>(t) * row;
    int n = 0;
    for (int p = 0; p < s.n_sinks; ++p, ++n) slot[n] = pos[n] = p;
    if (s.heavy) {
      const HeavySlots::Set& h = s.heavy->set(static_cast<size_t>(t));
      for (size_t j = 0; j < h.pos.size(); ++j, ++n) {
        slot[n] = h.slot[j];
        pos[n] = h.pos[j];
      }
    }
    for (int j = 0; j < s.ring_count; ++j, ++n) {
      slot[n] = sink_slots_ + (s.ring_head + j) % ring_slots_;
      pos[n] = s.ring_pos0 + j;
    }
    s.table_count = n;  // the same for every table: each heavy set holds min(heavy, evicted) tokens
  }
  if (!per_head_tables()) return;  // tokens() describes the ring by its parameters
  const size_t bytes = sizeof(int32_t) * s.slot.size();
  device_.copy_to_device(s.slot_dev, s.slot.data(), bytes);
  device_.copy_to_device(s.pos_dev, s.pos.data(), bytes);
}

// Moves the n oldest window tokens (all layers) to the host, or drops them.
void HybridKv::evict(int seq, Seq& s, int n) {
  if (n <= 0) return;
  const size_t row = static_cast<size_t>(spec_.head_dim) * dtype_block_bytes(dtype_);
  int64_t host_first = 0;
  if (layout_.keep_evicted) {
    host_first = s.host->append_tokens(n);
    // One gather of the n oldest window rows of every layer and kv-head, K then V, one copy into
    // a pinned buffer, and a host callback behind it that places them in the store's token blocks.
    const int64_t blocks = static_cast<int64_t>(spec_.n_layers) * spec_.n_kv_heads;
    RingRows rows;
    rows.src[0] = s.k_all;
    rows.src[1] = s.v_all;
    rows.blocks = blocks;
    rows.block_bytes = static_cast<size_t>(s.window[0].capacity) * row;
    rows.row_bytes = row;
    rows.ring_base = sink_slots_;
    rows.ring_slots = ring_slots_;
    rows.ring_head = s.ring_head;
    rows.n = n;
    const size_t bytes = 2 * static_cast<size_t>(blocks) * n * row;
    if (bytes > evict_dev_bytes_) {
      if (evict_dev_) device_.free(evict_dev_);
      evict_dev_ = device_.alloc(bytes);
      evict_dev_bytes_ = bytes;
    }
    device_.wait_compute_fence(s.evicted.placed);  // the last eviction's rows are in place (normally long since)
    device_.gather_ring_rows(rows, evict_dev_);
    device_.copy_to_host_async(grow_pinned(device_, *s.evicted.rows, bytes), evict_dev_, bytes);
    s.evicted.host_first = host_first;
    s.evicted.n = n;
    device_.host_callback(&place_evicted, &s.evicted);
    s.evicted.placed = device_.compute_fence();
    evicted_bytes_ += 2ull * n * row * spec_.n_kv_heads * spec_.n_layers;
    // Past the K budget, the oldest K blocks move to the V node (same addresses). Here, not in the
    // callback: a move re-registers the block for DMA, a CUDA call a host callback may not make;
    // rows the callback places later land on the block's new node.
    spilled_k_blocks_ += s.host->enforce_k_budget(placement_);
  }
  if (s.heavy) {
    s.heavy->retain(device_, s.window, ring(s), n, seq, retainer_);
    s.heavy->mark(s.map, s.n_sinks, s.ring_pos0, s.ring_pos0 + n);
  } else {
    for (int j = 0; j < n; ++j) {
      TokenLocation& loc = s.map[static_cast<size_t>(s.ring_pos0 + j)];
      loc = layout_.keep_evicted ? TokenLocation{TokenPlace::Host, static_cast<int32_t>(host_first + j)}
                                 : TokenLocation{TokenPlace::Dropped, -1};
    }
  }
  s.ring_head = (s.ring_head + n) % ring_slots_;
  s.ring_count -= n;
  s.ring_pos0 += n;
}

void HybridKv::place_evicted(void* evicted) {
  const Evicted& e = *static_cast<const Evicted*>(evicted);
  HybridKv& kv = *e.self;
  Seq& s = kv.seqs_[static_cast<size_t>(e.seq)];
  const size_t row = static_cast<size_t>(kv.spec_.head_dim) * dtype_block_bytes(kv.dtype_);
  const std::byte* from = e.rows->data();
  for (int c = 0; c < 2; ++c)
    for (int l = 0; l < kv.spec_.n_layers; ++l)
      for (int g = 0; g < kv.spec_.n_kv_heads; ++g, from += static_cast<size_t>(e.n) * row)
        s.host->k_layout(l).for_each_run(e.host_first, e.n, [&](int64_t t, int64_t run) {
          std::memcpy(c == 0 ? s.host->k_row(l, g, t) : s.host->v_row(l, g, t),
                      from + static_cast<size_t>(t - e.host_first) * row, static_cast<size_t>(run) * row);
        });
}

void HybridKv::make_room(int seq, int end, std::vector<TokenLocation>& places) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  if (end > ctx_)
    throw Error("sequence " + std::to_string(seq) + ": " + std::to_string(end) + " tokens exceed the context of " +
                std::to_string(ctx_));
  places.clear();
  const int start = s.length;
  // After this step the window holds positions [keep_from, end): the last ring_slots ones.
  int keep_from = std::max(sink_slots_, end - ring_slots_);
  if (s.ring_count > 0 && s.ring_pos0 < keep_from) {
    int n = std::min(s.ring_count, keep_from - s.ring_pos0);
    // A decode step into a full window evicts a whole block, not one token per step.
    if (end - start == 1) n = std::min(s.ring_count, std::max(n, layout_.evict_block));
    evict(seq, s, n);
  }
  if (s.ring_count == 0) s.ring_pos0 = std::max(start, keep_from);
  keep_from = std::max(keep_from, s.ring_pos0);

  // Heavy hitters: new tokens that do not fit in the ring (a prefill chunk longer than the
  // window) take heavy slots, so that the chunk's later rows attend to them.
  const int overflow_first = std::max(start, sink_slots_);
  if (s.heavy && keep_from > overflow_first) {
    s.heavy->admit(overflow_first, keep_from - overflow_first, seq, retainer_);
    s.heavy->mark(s.map, s.n_sinks, s.ring_pos0, keep_from);
  }

  int new_host = 0;
  for (int p = start; p < end; ++p) {
    TokenLocation loc;
    if (p < sink_slots_) {
      loc = {TokenPlace::Sink, p};
      s.n_sinks = p + 1;
    } else if (ring_slots_ > 0 && p >= keep_from) {
      loc = {TokenPlace::Window, sink_slots_ + (s.ring_head + (p - s.ring_pos0)) % ring_slots_};
      ++s.ring_count;
    } else if (layout_.keep_evicted) {
      // Host tokens are positions [sink_slots, ...) in order: index = offset past the sinks.
      loc = {TokenPlace::Host, p - sink_slots_};
      ++new_host;
    } else if (s.heavy) {
      loc = s.map[static_cast<size_t>(p)];  // HeavySlots::admit's choice: Heavy or Dropped
    }
    s.map[static_cast<size_t>(p)] = loc;
    places.push_back(loc);
  }
  if (new_host > 0) s.host->append_tokens(new_host);
  update_table(s);
}

void HybridKv::store(int seq, int layer, int n, const std::vector<TokenLocation>& places, const float* k_dev,
                     const float* v_dev, const float* k_host, const float* v_host) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const KvView& w = s.window[static_cast<size_t>(layer)];
  const int kv_dim = spec_.kv_dim();
  for (int i = 0; i < n;) {
    const TokenLocation& loc = places[static_cast<size_t>(i)];
    if (loc.place == TokenPlace::Sink || loc.place == TokenPlace::Window) {
      // contiguous device slots in one kv_store call
      int run = 1;
      while (i + run < n && places[static_cast<size_t>(i + run)].place == loc.place &&
             places[static_cast<size_t>(i + run)].index == loc.index + run)
        ++run;
      device_.kv_store(w, k_dev + static_cast<int64_t>(i) * kv_dim, v_dev + static_cast<int64_t>(i) * kv_dim, run, loc.index);
      i += run;
    } else if (loc.place == TokenPlace::Heavy) {
      // an admitted prefill token: its slot differs per kv-head (and some may not keep it)
      const size_t row = static_cast<size_t>(spec_.head_dim) * dtype_block_bytes(dtype_);
      row_k_.resize(row);
      row_v_.resize(row);
      const int32_t p = static_cast<int32_t>(s.length + i);
      for (int g = 0; g < spec_.n_kv_heads; ++g) {
        const int32_t slot = s.heavy->slot_of(layer, g, p);
        if (slot < 0) continue;
        const size_t dst = (static_cast<size_t>(g) * w.capacity + static_cast<size_t>(slot)) * row;
        const int64_t src = static_cast<int64_t>(i) * kv_dim + g * spec_.head_dim;
        cpu::store_kv_row(dtype_, row_k_.data(), k_host + src, spec_.head_dim);
        cpu::store_kv_row(dtype_, row_v_.data(), v_host + src, spec_.head_dim);
        device_.copy_to_device(static_cast<std::byte*>(w.k) + dst, row_k_.data(), row);
        device_.copy_to_device(static_cast<std::byte*>(w.v) + dst, row_v_.data(), row);
      }
      ++i;
    } else if (loc.place == TokenPlace::Host) {
      const int64_t t = loc.index;
      HostStore& h = *s.host;
      for (int g = 0; g < spec_.n_kv_heads; ++g) {
        const int64_t src = static_cast<int64_t>(i) * kv_dim + g * spec_.head_dim;
        cpu::store_kv_row(dtype_, h.k_row(layer, g, t), k_host + src, spec_.head_dim);
        cpu::store_kv_row(dtype_, h.v_row(layer, g, t), v_host + src, spec_.head_dim);
      }
      ++i;
    } else {
      ++i;
    }
  }
}

void HybridKv::commit(int seq, int end) { seqs_[static_cast<size_t>(seq)].length = end; }

void HybridKv::check_invariants(int seq) const {
  const Seq& s = seqs_[static_cast<size_t>(seq)];
  std::vector<int> seen_slots(static_cast<size_t>(sink_slots_ + ring_slots_), -1);
  int64_t host_expected = 0;
  for (int p = 0; p < s.length; ++p) {
    const TokenLocation& loc = s.map[static_cast<size_t>(p)];
    auto fail = [&](const std::string& why) {
      throw Error("token map, sequence " + std::to_string(seq) + ", position " + std::to_string(p) + ": " + why);
    };
    if (p < sink_slots_ && (loc.place != TokenPlace::Sink || loc.index != p)) fail("a sink left the device");
    if (loc.place == TokenPlace::Sink || loc.place == TokenPlace::Window) {
      if (loc.index < 0 || loc.index >= static_cast<int>(seen_slots.size())) fail("slot out of range");
      if (seen_slots[static_cast<size_t>(loc.index)] >= 0) fail("slot shared with position " + std::to_string(seen_slots[static_cast<size_t>(loc.index)]));
      seen_slots[static_cast<size_t>(loc.index)] = p;
      if (loc.place == TokenPlace::Window && (p < s.ring_pos0 || p >= s.ring_pos0 + s.ring_count)) fail("window token outside the ring range");
    } else if (loc.place == TokenPlace::Host) {
      if (loc.index != host_expected) fail("host tokens out of position order");
      ++host_expected;
    } else if (layout_.keep_evicted) {
      fail("dropped, but the policy keeps evicted tokens");
    }
  }
  if (host_expected != (layout_.keep_evicted ? s.host->n_tokens() : 0)) throw Error("token map: host count mismatch");
  // The slot table(s): the device tokens of the map, in position order, at their slots; with
  // heavy hitters one per (layer, kv-head), each listing the sinks, its heavy set and the window.
  const int n_tables = this->n_tables();
  std::vector<uint8_t> in_a_set(static_cast<size_t>(s.length), 0);
  for (int t = 0; t < n_tables; ++t) {
    const std::string where = "slot table, sequence " + std::to_string(seq) +
                              (s.heavy ? ", layer " + std::to_string(t / spec_.n_kv_heads) + ", kv-head " +
                                                      std::to_string(t % spec_.n_kv_heads)
                                                : std::string()) +
                              ": ";
    const HeavySlots::Set* h = s.heavy ? &s.heavy->set(static_cast<size_t>(t)) : nullptr;
    if (h) {
      if (h->pos.size() > static_cast<size_t>(heavy_slots_) ||
          h->pos.size() + h->free.size() != static_cast<size_t>(heavy_slots_))
        throw Error(where + std::to_string(h->pos.size()) + " heavy hitters and " + std::to_string(h->free.size()) +
                    " free slots for " + std::to_string(heavy_slots_) + " heavy slots");
      std::vector<uint8_t> used(static_cast<size_t>(heavy_slots_), 0);
      auto use = [&](int32_t slot) {
        const int k = slot - sink_slots_ - ring_slots_;
        if (k < 0 || k >= heavy_slots_ || used[static_cast<size_t>(k)])
          throw Error(where + "heavy slot " + std::to_string(slot) + " out of range or used twice");
        used[static_cast<size_t>(k)] = 1;
      };
      for (size_t i = 0; i < h->pos.size(); ++i) {
        const int32_t p = h->pos[i];
        if ((i > 0 && p <= h->pos[i - 1]) || p < s.n_sinks || p >= s.ring_pos0 ||
            s.map[static_cast<size_t>(p)].place != TokenPlace::Heavy)
          throw Error(where + "heavy hitter at position " + std::to_string(p) +
                      " out of order, in the window or not marked heavy");
        use(h->slot[i]);
        in_a_set[static_cast<size_t>(p)] = 1;
      }
      for (const int32_t slot : h->free) use(slot);  // a free slot is no kept token's
    }
    const int32_t* slot = s.slot.data() + static_cast<size_t>(t) * table_row();
    const int32_t* pos = s.pos.data() + static_cast<size_t>(t) * table_row();
    int j = 0;
    size_t hj = 0;
    for (int p = 0; p < s.length; ++p) {
      const TokenLocation& loc = s.map[static_cast<size_t>(p)];
      int32_t want = -1;
      if (loc.place == TokenPlace::Sink || loc.place == TokenPlace::Window) {
        want = loc.index;
      } else if (loc.place == TokenPlace::Heavy && h && hj < h->pos.size() && h->pos[hj] == p) {
        want = h->slot[hj++];
      } else {
        continue;
      }
      if (j >= s.table_count || pos[j] != p || slot[j] != want)
        throw Error(where + "entry " + std::to_string(j) + " is not position " + std::to_string(p) + " in slot " +
                    std::to_string(want));
      ++j;
    }
    if (j != s.table_count)
      throw Error(where + std::to_string(s.table_count) + " entries for " + std::to_string(j) + " device tokens");
  }
  // The ring's parameters, which the kernels get instead of a table, list the same tokens.
  const DeviceTokens tok = tokens(seq, 0);
  if (tok.ring)
    for (int j = 0; j < tok.count; ++j)
      if (token_slot(tok, 0, j) != s.slot[static_cast<size_t>(j)] || token_pos(tok, 0, j) != s.pos[static_cast<size_t>(j)])
        throw Error("ring of sequence " + std::to_string(seq) + ": token " + std::to_string(j) +
                    " is not the slot table's");
  for (int p = 0; p < s.length; ++p)
    if (s.map[static_cast<size_t>(p)].place == TokenPlace::Heavy && !in_a_set[static_cast<size_t>(p)])
      throw Error("token map, sequence " + std::to_string(seq) + ", position " + std::to_string(p) +
                  ": marked heavy but no layer or kv-head keeps it");
  if (s.n_sinks > s.table_count) throw Error("slot table: more lead tokens than entries");
}

}  // namespace hg
