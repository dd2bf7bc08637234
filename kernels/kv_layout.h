// One layer's keys (or values) of one sequence, as the kernels read them: the row of kv-head g,
// token t is at
//   base + (t / block_tokens) * block_stride + (g * block_tokens + t % block_tokens) * row_bytes()
// The host store keeps token blocks (src/kv/host_store.h: block_tokens 256, the other layers'
// parts between blocks); a device cache [n_kv_heads][capacity][head_dim] is one block of
// `capacity` tokens (KvView::k_layout, src/device/device.h). Copyable and cheap.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hybridgen/dtype.h"

namespace hg {

struct KvLayout {
  DType dtype = DType::F32;  // F32, F16 or BF16
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t block_tokens = 0;
  size_t block_stride = 0;  // bytes between token blocks
  const std::byte* base = nullptr;

  size_t row_bytes() const { return static_cast<size_t>(head_dim) * dtype_block_bytes(dtype); }
  const void* row(int g, int64_t t) const {
    return base + static_cast<size_t>(t / block_tokens) * block_stride +
           (static_cast<size_t>(g) * static_cast<size_t>(block_tokens) + static_cast<size_t>(t % block_tokens)) *
               row_bytes();
  }
  // Calls fn(t, run) for each run of tokens [first, first + count) within one token block: the
  // rows of such a run are contiguous (per kv-head), one copy each.
  template <typename Fn>
  void for_each_run(int64_t first, int64_t count, Fn&& fn) const {
    for (int64_t t = first; t < first + count;) {
      const int64_t run = std::min<int64_t>(first + count - t, block_tokens - t % block_tokens);
      fn(t, run);
      t += run;
    }
  }
};

// Rows of a ring in many blocks of rows (an eviction's rows of every layer and kv-head, gathered
// into one buffer that then crosses to the host in one copy): row j (j < n) of block b of source
// s is src[s] + b * block_bytes + slot_j * row_bytes, slot_j = ring_base + (ring_head + j) %
// ring_slots; it goes to ((s * blocks + b) * n + j) * row_bytes of the gather's output.
// Device::gather_ring_rows and the CUDA kernel behind it (kernels/cuda/kv_store.cu) read it.
struct RingRows {
  const void* src[2] = {nullptr, nullptr};  // a null source is skipped (its rows in dst untouched)
  int64_t blocks = 0;
  size_t block_bytes = 0;
  size_t row_bytes = 0;
  int ring_base = 0, ring_slots = 0, ring_head = 0, n = 0;
};

}  // namespace hg
