// HybridAttention::fill: the K/V a prefill would write (sinks and window on the device, older
// tokens in the host stores, or dropped), through the same placement and store calls, without
// computing attention; the prompt's queries for the predictors that learn from them; and the
// prompt's scores for h2o and keyformer, learnt before the fill so that the tokens leaving the
// window as it goes compete by the whole prompt's scores: what stays is the window and the
// `heavy` top-scored tokens before it, H2O's eviction after its prefill.
#include "attention/hybrid_attention.h"
#include "attention/kv_fill.h"

namespace hg {

void HybridAttention::fill(int seq, int n_tokens, const KvRowSource& source) {
  // Heavy hitters: a window's worth of rows at a time, so that every token before the final window
  // leaves it through the pruner's retain (a longer chunk would skip tokens past the window into
  // the heavy slots unscored, as a pruning prefill's chunk does: HeavySlots::admit)
  KvFill fill(device_, spec_.kv_dim(), pruner_ ? policy_.window : KvFill::kChunk);
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
  // Streaming, h2o and keyformer with --exact-prefill false drop or prune the prompt as it comes:
  // their prefill attends to fewer tokens than the prompt holds.
  return (policy_.keep_evicted && !pruner_) || places_prefill();
}

bool HybridAttention::places_prefill() const { return !policy_.keep_evicted && policy_.exact_prefill; }

// The prompt's exact attention holds only this prompt (one sequence), and only while it runs (H2O's
// code, too, holds the whole prompt on the GPU while it prefills).
std::unique_ptr<LayerAttention> HybridAttention::exact_stage(int n_tokens) {
  if (!places_prefill()) return nullptr;
  return make_full_attention(AttentionContext{device_, model_, kv_dtype_, n_tokens, 1, {}});
}

// A stage that records a prefill runs exact attention (a hybrid prefill's host part merged by LSE):
// the recorder computes the scores itself.
bool HybridAttention::attend_scored(int layer, const float* q, const float* k, const float* v,
                                    const std::vector<TokenRow>& rows, float* out, const PromptMassSink& /*sink*/) {
  attend(layer, q, k, v, rows, out);
  return false;
}

std::vector<std::string> HybridAttention::prompt_scores() const {
  if (!pruner_ || !places_prefill()) return {};
  return {pruner_->prompt_score_spec().name()};
}

void HybridAttention::learn_prompt_scores(int seq, int layer, size_t i, const float* scores, int n_tokens) {
  if (pruner_ && i == 0) pruner_->learn_prompt_scores(seq, layer, scores, n_tokens);
}

}  // namespace hg
