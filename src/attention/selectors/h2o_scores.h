// The score state of the heavy-hitter selectors (H2O and Keyformer): per kv-head, one
// accumulated score per position of the sequence, and H2O's rule for what stays on the device.
//
// H2O (Zhang et al., NeurIPS 2023; FMInference/H2O h2o_hf/utils_real_drop/modify_llama.py,
// H2OKVCache_LayerWise) adds every query row's softmax probabilities to each key token's score
// (summed over batch and query rows there, over the group's query heads here, because a GQA
// kv-head's tokens are kept or dropped together), at prefill over all prompt rows and at every
// decode step. When the cache exceeds heavy + recent tokens, the `heavy` tokens of largest score
// among those outside the recent window stay and the others are dropped for good.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace hg {

class TokenScores {
 public:
  TokenScores() = default;
  TokenScores(int n_kv_heads, int ctx) { resize(n_kv_heads, ctx); }
  void resize(int n_kv_heads, int ctx);
  void clear();  // every score 0 (a new sequence)

  int n_kv_heads() const { return n_kv_heads_; }
  int ctx() const { return ctx_; }
  float* head(int g) { return scores_.data() + static_cast<size_t>(g) * ctx_; }  // [ctx]
  const float* head(int g) const { return scores_.data() + static_cast<size_t>(g) * ctx_; }

  // score[g][pos[j]] += Σ_{h < group} p[h * ld + j] for j < n: one query row's probabilities
  // over n tokens for the `group` query heads of kv-head g (p: [group][ld]).
  void add_group(int g, const int32_t* pos, int64_t n, const float* p, int group, int64_t ld);
  // A token dropped for good leaves no score behind (so a reused position starts from 0).
  void forget(int g, int32_t pos) { head(g)[pos] = 0.0f; }

 private:
  int n_kv_heads_ = 0, ctx_ = 0;
  std::vector<float> scores_;  // [n_kv_heads][ctx]
};

// H2O's keep rule for one kv-head: of `candidates` (positions: the current heavy hitters and
// the tokens leaving the recent window), the `heavy` of largest score stay, ties to the more
// recent token; the rest are dropped. `keep` and `drop` come out in increasing position order.
// order: scratch.
void keep_heavy_hitters(const float* score, std::span<const int32_t> candidates, int heavy, std::vector<int32_t>& keep,
                        std::vector<int32_t>& drop, std::vector<int32_t>& order);

}  // namespace hg
