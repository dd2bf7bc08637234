#include "kv/heavy_slots.h"

#include <algorithm>

namespace hg {

HeavySlots::HeavySlots(const ModelSpec& spec, int first_slot, int n_slots)
    : n_kv_heads_(spec.n_kv_heads),
      first_slot_(first_slot),
      n_slots_(n_slots),
      sets_(static_cast<size_t>(spec.n_layers) * spec.n_kv_heads) {
  reset();
}

void HeavySlots::reset() {
  for (Set& h : sets_) {
    h.pos.clear();
    h.slot.clear();
    h.free.clear();
    for (int j = n_slots_ - 1; j >= 0; --j) h.free.push_back(first_slot_ + j);
  }
}

void HeavySlots::retain(Device& device, const std::vector<KvView>& window, const RingSlots& ring, int n, int seq,
                        const Retainer& retainer) {
  const int n_layers = static_cast<int>(sets_.size()) / n_kv_heads_;
  for (int l = 0; l < n_layers; ++l) {
    const KvView& w = window[static_cast<size_t>(l)];
    const size_t row = static_cast<size_t>(w.head_dim) * dtype_block_bytes(w.dtype);
    for (int g = 0; g < n_kv_heads_; ++g) {
      Set& h = sets_[static_cast<size_t>(l) * n_kv_heads_ + g];
      candidates_.assign(h.pos.begin(), h.pos.end());
      for (int j = 0; j < n; ++j) candidates_.push_back(ring.pos0 + j);
      kept_.clear();
      if (retainer) retainer(seq, l, g, candidates_, n_slots_, kept_);
      // kept heavy hitters keep their slots; the others' slots are free for the leaving tokens
      std::vector<int32_t>& pos = pos_scratch_;
      std::vector<int32_t>& slot = slot_scratch_;
      pos.clear();
      slot.clear();
      size_t old = 0;
      for (int32_t p : kept_) {
        while (old < h.pos.size() && h.pos[old] < p) h.free.push_back(h.slot[old++]);
        if (old < h.pos.size() && h.pos[old] == p) {
          pos.push_back(p);
          slot.push_back(h.slot[old++]);
        } else {
          pos.push_back(p);
          slot.push_back(-1 - (p - ring.pos0));  // from the ring: gets a slot below
        }
      }
      while (old < h.pos.size()) h.free.push_back(h.slot[old++]);
      for (size_t j = 0; j < slot.size(); ++j) {
        if (slot[j] >= 0) continue;
        const int from = ring.slot_of(-1 - slot[j]);
        slot[j] = h.free.back();
        h.free.pop_back();
        // K and V rows from the ring slot to the heavy slot
        const size_t src = (static_cast<size_t>(g) * w.capacity + static_cast<size_t>(from)) * row;
        const size_t dst = (static_cast<size_t>(g) * w.capacity + static_cast<size_t>(slot[j])) * row;
        device.copy_on_device(static_cast<std::byte*>(w.k) + dst, static_cast<const std::byte*>(w.k) + src, row);
        device.copy_on_device(static_cast<std::byte*>(w.v) + dst, static_cast<const std::byte*>(w.v) + src, row);
      }
      h.pos.swap(pos);
      h.slot.swap(slot);
    }
  }
}

void HeavySlots::admit(int first, int m, int seq, const Retainer& retainer) {
  const int admitted = std::min(m, n_slots_);  // the latest ones; earlier ones are dropped unseen
  const int n_layers = static_cast<int>(sets_.size()) / n_kv_heads_;
  for (int l = 0; l < n_layers; ++l)
    for (int g = 0; g < n_kv_heads_; ++g) {
      Set& h = sets_[static_cast<size_t>(l) * n_kv_heads_ + g];
      if (static_cast<int>(h.pos.size()) + admitted > n_slots_) {  // make room among the current ones
        kept_.clear();
        if (retainer) retainer(seq, l, g, h.pos, n_slots_ - admitted, kept_);
        pos_scratch_.clear();
        slot_scratch_.clear();
        size_t j = 0;
        for (size_t i = 0; i < h.pos.size(); ++i) {
          if (j < kept_.size() && kept_[j] == h.pos[i]) {
            pos_scratch_.push_back(h.pos[i]);
            slot_scratch_.push_back(h.slot[i]);
            ++j;
          } else {
            h.free.push_back(h.slot[i]);
          }
        }
        h.pos.swap(pos_scratch_);
        h.slot.swap(slot_scratch_);
      }
      for (int p = first + m - admitted; p < first + m; ++p) {
        h.pos.push_back(p);
        h.slot.push_back(h.free.back());
        h.free.pop_back();
      }
    }
}

void HeavySlots::mark(std::vector<TokenLocation>& map, int n_sinks, int ring_pos0, int end) const {
  // A position stays on the device while any (layer, kv-head) keeps it.
  for (int p = n_sinks; p < end; ++p) {
    TokenLocation& loc = map[static_cast<size_t>(p)];
    if (loc.place == TokenPlace::Heavy || loc.place == TokenPlace::Dropped || p >= ring_pos0)
      loc = TokenLocation{TokenPlace::Dropped, -1};
  }
  for (const Set& h : sets_)
    for (const int32_t p : h.pos) map[static_cast<size_t>(p)] = TokenLocation{TokenPlace::Heavy, -1};
}

int32_t HeavySlots::slot_of(int layer, int g, int32_t p) const {
  const Set& h = set(layer, g);
  const auto it = std::lower_bound(h.pos.begin(), h.pos.end(), p);
  return it == h.pos.end() || *it != p ? -1 : h.slot[static_cast<size_t>(it - h.pos.begin())];
}

}  // namespace hg
