// What a recorded prefill appends to its state (hybridgen/prefill_state.h), layer by layer as the
// forward pass runs: the rows' K and V, the first kQueryRows queries, and the prompt scores the
// state names (attention/prompt_scores.h: h2o's and keyformer's, from the rows' queries and every
// key so far), computed on the host on `pool`.
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
  PrefillRecorder(PrefillState& state, const ModelSpec& spec, ThreadPool* pool);
  PrefillState& state() { return state_; }
  // After `layer`'s attention of the rows (one sequence, positions from state().n_tokens()):
  // q, k, v of the rows in the scratch (device memory).
  void record(Device& d, const Scratch& s, int layer, const std::vector<TokenRow>& rows);

 private:
  PrefillState& state_;
  const ModelSpec& spec_;
  ThreadPool* pool_;
  std::vector<PromptScoreSpec> specs_;  // as state_.score_names
  PromptScorer scorer_;
  std::vector<float> q_;  // the rows' queries on the host, for the scores
};

}  // namespace hg
