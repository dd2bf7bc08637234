// What a recorded prefill appends to its state (hybridgen/prefill_state.h), layer by layer as the
// forward pass runs: the rows' K and V, the first kQueryRows queries, and the prompt scores the
// state names (attention/prompt_scores.h: h2o's and keyformer's, from the rows' queries and every
// key so far, in the cache's dtype: the scores of the attention the rows ran). Where the stage's
// attention keeps its own Q·Kᵀ for them (LayerAttention::attend_scored: the CPU device's tiled
// prefill) the scores cost no second Q·Kᵀ; elsewhere they are computed on the host on `pool`.
#pragma once
#include <vector>

#include "attention/layer_attention.h"
#include "attention/prompt_scores.h"
#include "hybridgen/prefill_state.h"
#include "util/thread_pool.h"

namespace hg {

struct Scratch;

class PrefillRecorder {
 public:
  // pool: where the scores are computed (may be null when the state names none).
  // kv_dtype: the cache's, which the keys of the scores are rounded to.
  PrefillRecorder(PrefillState& state, const ModelSpec& spec, DType kv_dtype, ThreadPool* pool);
  PrefillState& state() { return state_; }
  // `layer`'s attention of the rows (one sequence, positions from state().n_tokens()) on `attn`,
  // as LayerAttention::attend (q, k, v in the scratch, device memory; s.attn written), keeping its
  // scores where the stage can, then what it appends to the state.
  void attend(Device& d, LayerAttention& attn, Scratch& s, int layer, const std::vector<TokenRow>& rows);

 private:
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
