// The device-resident tokens of one sequence's layer, as attention kernels (CPU and CUDA) see
// them. Slots [0, sink_slots) hold the sinks (positions 0 .. n_sinks-1); a ring of ring_slots
// slots follows, whose ring_count tokens (positions ring_pos0 ...) start at ring offset ring_head.
#pragma once
#include "kernels/device_tokens.h"

namespace hg {

struct WindowSpan {
  int n_sinks = 0;
  int sink_slots = 0;
  int ring_slots = 0;
  int ring_head = 0;
  int ring_count = 0;
  int ring_pos0 = 0;
};

}  // namespace hg
