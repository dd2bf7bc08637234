// HybridAttention::fill_random: the K/V a prefill would write (sinks and window on the device,
// older tokens in the host stores, H2O scores initialised), through the same placement and store
// calls, without computing attention.
#include "attention/hybrid_attention.h"
#include "attention/random_fill.h"

namespace hg {

void HybridAttention::fill_random(int seq, int n_tokens, uint64_t seed) {
  RandomFill fill(device_, spec_.kv_dim());
  fill.run(
      seq, n_tokens, seed, spec_.n_layers, [&](const std::vector<TokenRow>& rows) { begin_step(rows, true, plans_); },
      [&](int layer, int n, const float* k_dev, const float* v_dev, const float* k_host, const float* v_host) {
        kv_->store(seq, layer, n, places_[static_cast<size_t>(seq)], k_dev, v_dev, k_host, v_host);
      },
      [&](const std::vector<TokenRow>& rows) { end_step(rows); });
}

}  // namespace hg
