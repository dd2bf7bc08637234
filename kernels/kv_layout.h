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

}  // namespace hg
