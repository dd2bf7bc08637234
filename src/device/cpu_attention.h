// The tiled (flash-attention style) prefill attention of kernels/cpu/prefill_attention.h run on a
// thread pool, over K/V in host memory: the CPU device's attention for more than a few rows, the
// host stage's part of a hybrid prefill (attention/host_ops.h), and a recorded prefill's
// attention that keeps the prompt scores' sums from its own score tiles (attention/prompt_state.h).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "device/device.h"
#include "kernels/cpu/prefill_attention.h"
#include "util/thread_pool.h"

namespace hg {

// Up to this many query rows the CPU device's attention splits the context over the pool
// (decode); more rows take the tiled kernel.
inline constexpr int kCpuSplitMaxRows = 4;

class CpuTiledAttention {
 public:
  // a's work items on `pool`. A later query tile sees more keys and the pool splits items in
  // contiguous runs, so items go out pairing the cheapest tile left with the dearest (0, T-1, 1,
  // T-2, ...): every run holds about the same number of score products. Each item is computed
  // alone, so the order changes no bit of the result.
  void run(ThreadPool& pool, const cpu::PrefillAttentionArgs& a);
  // Causal attention of n query rows at positions past .. past+n-1 over the cache kv (host memory)
  // as Device::attention: row i sees slots [0, past + i]. With mass_softmax, the rows' prompt
  // scores' sums too (cpu::PrefillAttentionArgs's mass fields).
  // bf16: products over a bf16 cache may run in bf16 (Device::bf16_compute).
  void causal(ThreadPool& pool, const float* q, int n, int n_heads, const KvView& kv, int past, float scale, float* out,
              bool bf16, std::span<const cpu::MassSoftmax> mass_softmax = {}, float* const* mass = nullptr,
              int64_t ld_mass = 0);

 private:
  std::vector<cpu::PrefillAttentionScratch> scratch_;  // per pool thread
  std::vector<int64_t> visible_;                       // causal: tokens each row sees
  std::vector<float> lse_;                             // ... its log-sum-exp output (unused)
};

}  // namespace hg
