// The heavy-hitter pruning policies, h2o and keyformer: an observer of the device's attention and
// the retainer of its tokens (the policies keep no host tokens: they drop what they evict). Its
// work is
//  - observe(): the device's probabilities over the tokens it attended, every prompt row and every
//    decode step, accumulated per kv-head (H2O: the probabilities; Keyformer: their Gumbel-softmax
//    with τ rising over the generated tokens, attention/selectors/keyformer_scores.h);
//  - retain(): when tokens leave the recent window, they and the kv-head's current heavy hitters
//    compete for its --heavy slots by score (attention/selectors/h2o_scores.h): H2O's "the heavy
//    of largest score outside the recent window", since a token outside the window that is not a
//    heavy hitter is already gone. The rest are dropped for good and their scores forgotten.
#pragma once
#include <memory>
#include <vector>

#include "attention/prompt_scores.h"
#include "attention/selectors/h2o_scores.h"
#include "attention/selectors/pruners.h"
#include "attention/selectors/selector.h"

namespace hg {

class HeavyHitterPruner final : public TokenPruner {
 public:
  enum class Score { Attention, Gumbel };  // h2o, keyformer

  HeavyHitterPruner(const SelectorContext& c, Score score);
  std::string name() const override { return score_ == Score::Attention ? "h2o" : "keyformer"; }
  void observe(const ObservedAttention& o, int g_begin, int g_end) override;
  void retain(int seq, int layer, int g, std::span<const int32_t> positions, int keep,
              std::vector<int32_t>& kept) override;
  void reset(int seq) override;
  // The prompt scores this pruner keeps tokens by after an exact prefill (h2o's attention, or
  // keyformer's Gumbel-softmax with its seed and τ_init), and taking them for (seq, layer):
  // scores [n_tokens][n_kv_heads], the prompt n_tokens long.
  PromptScoreSpec prompt_score_spec() const override;
  void learn_prompt_scores(int seq, int layer, const float* scores, int n_tokens) override;

  const TokenScores& scores(int seq, int layer) const { return scores_[static_cast<size_t>(seq) * n_layers_ + layer]; }

 private:
  struct HeadScratch {  // per kv-head: observe() runs concurrently for disjoint kv-head ranges
    std::vector<float> noise, y;
    std::vector<int32_t> keep, drop, order;
  };
  TokenScores& mutable_scores(int seq, int layer) { return scores_[static_cast<size_t>(seq) * n_layers_ + layer]; }

  Score score_;
  int n_layers_, ctx_;
  float tau_init_, tau_end_;
  uint64_t seed_;
  std::vector<TokenScores> scores_;   // [seq * n_layers + layer]
  std::vector<int> prompt_len_;       // per sequence: prompt rows observed (Keyformer's τ)
  std::vector<HeadScratch> scratch_;  // [n_kv_heads]
};

}  // namespace hg
