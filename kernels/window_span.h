// The device-resident tokens of one sequence's layer, as attention kernels (CPU and CUDA) see
// them. Slots [0, sink_slots) hold the sinks (positions 0 .. n_sinks-1); a ring of ring_slots
// slots follows, whose ring_count tokens (positions ring_pos0 ...) start at ring offset ring_head.
#pragma once

namespace hg {

struct WindowSpan {
  int n_sinks = 0;
  int sink_slots = 0;
  int ring_slots = 0;
  int ring_head = 0;
  int ring_count = 0;
  int ring_pos0 = 0;
};

// What the host shipped for one sequence's layer (device memory).
struct HostPart {
  enum class Kind { None, Logits, Partial };
  Kind kind = Kind::None;
  int K = 0;                      // Logits: selected host tokens per kv-head
  const float* logits = nullptr;  // Logits: [n_heads][K], already scaled, in token order
  const float* v = nullptr;       // Logits: [n_kv_heads][K][head_dim]
  const float* out = nullptr;     // Partial: [n_rows][n_heads][head_dim]
  const float* lse = nullptr;     // Partial: [n_rows][n_heads]
};

}  // namespace hg
