// InfiniGen's speculation of the next layer's important tokens (snu-comparch/InfiniGen
// speedup/infinigen/infinigen/kv_selection_controller.py, speculate_attention): the partial query
// (the skewed query's chosen channels) is dotted with the partial keys of every host token; per
// query head the tokens scoring above max − alpha are counted, n = min(mean count over the heads,
// max_kv), and each head's n best tokens are fetched. Here GQA kv-heads fetch for their group
// (scores: max over the group's heads), so each K and V row crosses once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attention/selectors/infinigen_skew.h"

namespace hg {

// The partial keys of one sequence's layer, (k A)[channels] per kv-head and host token; sized
// for the whole context up front.
class PartialKeys {
 public:
  void resize(int n_kv_heads, int64_t capacity, int n_partial);
  void clear() { n_tokens_ = 0; }
  int64_t n_tokens() const { return n_tokens_; }
  int n_partial() const { return n_partial_; }
  int n_kv_heads() const { return n_kv_heads_; }
  const float* row(int g, int64_t t) const {
    return data_.data() + (static_cast<size_t>(g) * capacity_ + t) * n_partial_;
  }
  // Appends one token: k [n_kv_heads][head_dim] (fp32, after RoPE), projected per kv-head.
  void append(const float* k, const std::vector<PartialProjection>& proj);

 private:
  int n_kv_heads_ = 0, n_partial_ = 0;
  int64_t capacity_ = 0, n_tokens_ = 0;
  std::vector<float> data_;  // [n_kv_heads][capacity][n_partial]
};

// scores[h * ld + t] = scale · pq[h] · keys(g(h), t) for the heads of kv-heads [g_begin, g_end) and
// every stored token.  pq: [n_heads][n_partial].
void partial_scores(const PartialKeys& keys, const float* pq, int n_heads, float scale, int g_begin, int g_end,
                    float* scores, int64_t ld);

// InfiniGen's fetch count: min(⌊mean over heads of #{t : s[h][t] > max_t s[h][t] − alpha}⌋, max_kv).
int fetch_count(const float* scores, int n_heads, int64_t n_tokens, int64_t ld, float alpha, int max_kv);

}  // namespace hg
