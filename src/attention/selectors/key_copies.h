// The per (sequence, layer, kv-head) copies of the host keys that a Pre-QKᵀ predictor scans
// instead of the store (partial's channel-major bf16 tiles, q4's Q4_1 rows). Each copy says how
// many host tokens it has folded in; the selector folds the new ones in before it scores, and a
// new request on a sequence (reset) starts its copies over.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hg {

template <typename Copy>  // Copy has `int64_t n_tokens`, the host tokens folded in
class KeyCopies {
 public:
  KeyCopies(int n_seqs, int n_layers, int n_kv_heads)
      : n_layers_(n_layers),
        n_kv_heads_(n_kv_heads),
        copies_(static_cast<size_t>(n_seqs) * n_layers * n_kv_heads) {}

  Copy& at(int seq, int layer, int g) {
    return copies_[(static_cast<size_t>(seq) * n_layers_ + layer) * n_kv_heads_ + g];
  }
  void reset(int seq) {
    for (int l = 0; l < n_layers_; ++l)
      for (int g = 0; g < n_kv_heads_; ++g) at(seq, l, g).n_tokens = 0;
  }

 private:
  int n_layers_, n_kv_heads_;
  std::vector<Copy> copies_;  // [seq][layer][kv-head]
};

}  // namespace hg
