// The heavy-hitter slots of one sequence's split cache (h2o, keyformer): `n_slots` device slots
// per layer and kv-head after the ring. When tokens leave the window, they and a (layer,
// kv-head)'s current heavy hitters compete for its slots; a retainer (the policy's pruner,
// attention/selectors/h2o_prune.h) decides who stays, the others are dropped and their slots
// reused. The K and V rows of a token that stays move from its ring slot to a heavy slot.
// HybridKv owns one per sequence and lists each set's tokens in that (layer, kv-head)'s slot table.
#pragma once
#include <functional>
#include <span>
#include <vector>

#include "device/device.h"

namespace hg {

// Heavy: left the window and kept on the device by at least one (layer, kv-head) as a heavy
// hitter (which ones, and in which slots: HeavySlots).
enum class TokenPlace : uint8_t { Sink, Window, Host, Dropped, Heavy };

struct TokenLocation {
  TokenPlace place = TokenPlace::Dropped;
  int32_t index = -1;  // Sink/Window: device slot; Host: host token index
};

// Chooses which of `candidates` (positions, increasing) kv-head g of (seq, layer) keeps, at most
// `keep`; appends them to `kept` in increasing order.
using Retainer = std::function<void(int seq, int layer, int g, std::span<const int32_t> candidates, int keep,
                                    std::vector<int32_t>& kept)>;

// Where the device window's ring is: `n_slots` cache slots from `first_slot`, the oldest token
// (position `pos0`) at ring offset `head`.
struct RingSlots {
  int first_slot = 0;
  int n_slots = 0;
  int head = 0;
  int pos0 = 0;
  int slot_of(int offset) const { return first_slot + (head + offset) % n_slots; }
};

class HeavySlots {
 public:
  struct Set {                  // one layer's kv-head
    std::vector<int32_t> pos;   // kept positions, increasing
    std::vector<int32_t> slot;  // their cache slots
    std::vector<int32_t> free;  // heavy slots not in use
  };

  // n_slots per (layer, kv-head) at cache slots [first_slot, first_slot + n_slots).
  HeavySlots(const ModelSpec& spec, int first_slot, int n_slots);

  int n_slots() const { return n_slots_; }
  int first_slot() const { return first_slot_; }
  void reset();
  const Set& set(int layer, int g) const { return sets_[static_cast<size_t>(layer) * n_kv_heads_ + g]; }
  const Set& set(size_t table) const { return sets_[table]; }  // table = layer * n_kv_heads + g

  // The ring's n oldest tokens (positions ring.pos0 ...) leave the window: per (layer, kv-head)
  // they and the current heavy hitters compete for the slots; those that stay move from their
  // ring slot to a heavy slot in `window` (every layer's cache).
  void retain(Device& device, const std::vector<KvView>& window, const RingSlots& ring, int n, int seq,
              const Retainer& retainer);
  // m new tokens from position `first` skip the ring (a prefill chunk longer than the window):
  // the latest min(m, n_slots) take heavy slots, the retainer making room among the current ones.
  void admit(int first, int m, int seq, const Retainer& retainer);
  // Map entries of positions [n_sinks, end) outside the ring (from ring_pos0 on): Heavy if a set
  // keeps them, else Dropped.
  void mark(std::vector<TokenLocation>& map, int n_sinks, int ring_pos0, int end) const;
  // The slot kv-head g of `layer` keeps position p in, or -1.
  int32_t slot_of(int layer, int g, int32_t p) const;

 private:
  int n_kv_heads_;
  int first_slot_, n_slots_;
  std::vector<Set> sets_;  // [n_layers][n_kv_heads]
  std::vector<int32_t> candidates_, kept_, pos_scratch_, slot_scratch_;
};

}  // namespace hg
