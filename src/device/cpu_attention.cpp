#include "device/cpu_attention.h"

namespace hg {

void CpuTiledAttention::run(ThreadPool& pool, const cpu::PrefillAttentionArgs& a) {
  if (scratch_.size() < static_cast<size_t>(pool.size())) scratch_.resize(static_cast<size_t>(pool.size()));
  const int64_t heads = a.n_kv_heads;
  const int64_t tiles = cpu::prefill_attention_items(a) / heads;
  pool.parallel_for(tiles * heads, [&](int64_t b, int64_t e, int t) {
    for (int64_t j = b; j < e; ++j) {
      const int64_t p = j / heads;
      const int64_t tile = p % 2 == 0 ? p / 2 : tiles - 1 - p / 2;
      const int64_t item = tile * heads + j % heads;
      cpu::prefill_attention(a, item, item + 1, scratch_[static_cast<size_t>(t)]);
    }
  });
}

void CpuTiledAttention::causal(ThreadPool& pool, const float* q, int n, int n_heads, const KvView& kv, int past,
                               float scale, float* out, bool bf16, std::span<const cpu::MassSoftmax> mass_softmax,
                               float* const* mass, int64_t ld_mass) {
  visible_.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) visible_[static_cast<size_t>(i)] = past + i + 1;
  lse_.resize(static_cast<size_t>(n) * static_cast<size_t>(n_heads));
  cpu::PrefillAttentionArgs a = cpu::dense_prefill_args(q, n, n_heads, kv.n_kv_heads, kv.head_dim, scale,
                                                        kv.k_layout(), kv.v_layout(), visible_.data(), out, lse_.data());
  a.mass_softmax = mass_softmax;
  a.mass = mass;
  a.ld_mass = ld_mass;
  a.bf16 = bf16;
  run(pool, a);
}

}  // namespace hg
