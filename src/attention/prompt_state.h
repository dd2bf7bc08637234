// The optional part of an attention stage that serves a recorded or loaded prefill
// (hybridgen/prefill_state.h), apart from the decode core of layer_attention.h: only the stages
// that need it implement it (LayerAttention::prompt_state).
//   - FullAttention: on the CPU device its tiled prefill attention keeps the prompt scores' sums
//     from its own Q·Kᵀ (attend_scored), so a recorded prefill costs no second Q·Kᵀ;
//   - HybridAttention: the dropping policies (streaming, h2o, keyformer) place their prefill: the
//     prompt runs exact attention on a full stage of theirs (exact_stage), then they start from
//     what it recorded, keeping what they keep (their papers' code prefills the whole prompt with
//     full attention and evicts once after it); h2o and keyformer keep tokens by the prompt's
//     scores (prompt_scores, learn_prompt_scores); InfiniGen's skew learns from the prompt's
//     queries (learn_prompt_queries).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "attention/layer_attention.h"
#include "attention/prompt_scores.h"

namespace hg {

class PromptState {
 public:
  virtual ~PromptState() = default;

  // LayerAttention::attend of a recorded prefill's rows (one sequence), keeping the rows' prompt
  // scores in `sink` where the stage's own attention computes them: true when it wrote them,
  // false when the recorder must compute them itself.
  virtual bool attend_scored(int layer, const float* q, const float* k, const float* v,
                             const std::vector<TokenRow>& rows, float* out, const PromptMassSink& sink) = 0;

  // True when the stage does not prefill a prompt itself: the prompt runs on exact_stage() and the
  // stage then starts from the recorded state (LayerAttention::fill after learn_prompt_scores).
  virtual bool places_prefill() const { return false; }
  // A full-attention stage for the n_tokens rows of one prompt, made for that prefill only.
  virtual std::unique_ptr<LayerAttention> exact_stage(int /*n_tokens*/) { return nullptr; }
  // The prompt scores (attention/prompt_scores.h names) the stage places a prompt by: h2o's or
  // keyformer's; a state it starts from must hold them.
  virtual std::vector<std::string> prompt_scores() const { return {}; }
  // Before a fill: `layer`'s prompt scores of prompt_scores()[i], [n_tokens][n_kv_heads].
  virtual void learn_prompt_scores(int /*seq*/, int /*layer*/, size_t /*i*/, const float* /*scores*/,
                                   int /*n_tokens*/) {}
  // After a fill: `layer`'s true queries of the prompt's first rows, for the predictors that learn
  // from them (InfiniGen's skew), as a prefill of those rows would have fed them.
  virtual void learn_prompt_queries(int /*seq*/, int /*layer*/, const float* /*q*/, int /*n_rows*/) {}
};

}  // namespace hg
