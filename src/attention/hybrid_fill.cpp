// HybridAttention::fill: the K/V a prefill would write (sinks and window on the device, older
// tokens in the host stores, H2O scores initialised), through the same placement and store calls,
// without computing attention; and the prompt's queries for the predictors that learn from them.
#include "attention/hybrid_attention.h"
#include "attention/kv_fill.h"

namespace hg {

void HybridAttention::fill(int seq, int n_tokens, const KvRowSource& source) {
  KvFill fill(device_, spec_.kv_dim());
  fill.run(
      seq, n_tokens, source, spec_.n_layers, [&](const std::vector<TokenRow>& rows) { begin_step(rows, true, plans_); },
      [&](int layer, int n, const float* k_dev, const float* v_dev, const float* k_host, const float* v_host) {
        kv_->store(seq, layer, n, places_[static_cast<size_t>(seq)], k_dev, v_dev, k_host, v_host);
      },
      [&](const std::vector<TokenRow>& rows) { end_step(rows); });
}

void HybridAttention::learn_prompt_queries(int seq, int layer, const float* q, int n_rows) {
  if (selection_.wants_queries(seq, layer)) selection_.learn_queries(seq, layer, q, n_rows);
}

bool HybridAttention::exact_prefill() const {
  // Streaming drops the tokens that leave the window and h2o/keyformer prune the prompt as it
  // comes: their prefill attends to fewer tokens than the prompt holds.
  return policy_.keep_evicted && !pruner_;
}

}  // namespace hg
