// A recorded prefill: an attention stage that runs the prompt on another stage and appends to a
// state (hybridgen/prefill_state.h), layer by layer as the forward pass runs, the rows' K and V,
// the first kQueryRows queries, and the prompt scores the state names (attention/prompt_scores.h:
// h2o's and keyformer's, from the rows' queries and every key so far, in the cache's dtype: the
// scores of the attention the rows ran). Where the inner stage's attention keeps its own Q·Kᵀ for
// them (PromptState::attend_scored: the CPU device's tiled prefill) the scores cost no second
// Q·Kᵀ; elsewhere they are computed on the host on `pool`. The forward pass sees only a stage.
#pragma once
#include <vector>

#include "attention/layer_attention.h"
#include "attention/prompt_scores.h"
#include "hybridgen/prefill_state.h"
#include "util/thread_pool.h"

namespace hg {

class RecordingAttention final : public LayerAttention {
 public:
  // inner: the stage the prompt runs on (one sequence, positions from state.n_tokens()).
  // pool: where the scores are computed (may be null when the state names none).
  // kv_dtype: the cache's, which the keys of the scores are rounded to.
  RecordingAttention(LayerAttention& inner, Device& device, PrefillState& state, const ModelSpec& spec,
                     DType kv_dtype, ThreadPool* pool);

  // inner's attend(), keeping its scores where the stage can, then what it appends to the state
  // (q, k, v: device memory).
  void attend(int layer, const float* q, const float* k, const float* v, const std::vector<TokenRow>& rows,
              float* out) override;

  int length(int seq) const override { return inner_.length(seq); }
  int64_t host_tokens(int seq) const override { return inner_.host_tokens(seq); }
  void reset(int seq) override { inner_.reset(seq); }
  void begin_step(const std::vector<TokenRow>& rows, bool prefill, std::span<const StepPlan> plans) override {
    inner_.begin_step(rows, prefill, plans);
  }
  void layer_input(int layer, const float* x, const std::vector<TokenRow>& rows) override {
    inner_.layer_input(layer, x, rows);
  }
  void layers_done() override { inner_.layers_done(); }
  void end_step(const std::vector<TokenRow>& rows) override { inner_.end_step(rows); }
  bool exact_prefill() const override { return inner_.exact_prefill(); }
  std::string describe() const override { return inner_.describe(); }

 private:
  LayerAttention& inner_;
  Device& device_;
  PrefillState& state_;
  const ModelSpec& spec_;
  ThreadPool* pool_;
  std::vector<PromptScoreSpec> specs_;  // as state_.score_names
  DType kv_dtype_;
  PromptScorer scorer_;
  std::vector<float> q_;  // the rows' queries on the host, for the scores
  // per layer: its keys rounded to the cache's dtype, for the scores the recorder computes itself
  std::vector<std::vector<float>> k_rounded_;
};

}  // namespace hg
