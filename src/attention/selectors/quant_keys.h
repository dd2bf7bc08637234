// Pre-QKᵀ "q4": approximate scores of every host token from a 4-bit copy of the host keys, top-K
// of those (a token's score is the largest over the group's query heads), then exact logits of
// the chosen tokens from the cache.
//
// The copy holds GGUF's Q4_1 blocks of 32 (f16 scale and minimum, 32 nibbles: 40 bytes per 64-dim
// key against bf16's 128), per (sequence, layer, kv-head), folded in as host tokens arrive (each
// worker its own kv-heads), laid out in tiles of 8 tokens for its scan (kernels/cpu/key_scores_q4.h:
// an integer dot over 4 dimensions adds a tile's 8 tokens at once, the query quantized to int8 once
// per call), so it reads under a third of the bytes of Post-QKᵀ's scan, over every dimension of
// every key. `partial`'s 16 of 64 dimensions read fewer bytes still, but on Qwen2.5-0.5B at 16K
// found 53-62% of Post's top-K, where this copy finds most of it (the feedback scheduler measures
// it: its recall rule).
#pragma once
#include <cstdint>
#include <vector>

#include "attention/selectors/key_copies.h"
#include "attention/selectors/selector.h"

namespace hg {

class QuantKeySelector final : public Selector {
 public:
  explicit QuantKeySelector(const SelectorContext& c);  // hg::Error when head_dim is not a multiple of 32
  std::string name() const override { return "q4"; }
  bool post_qk() const override { return false; }
  void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& s) override;
  void reset(int seq) override;

 private:
  struct Copy {
    int64_t n_tokens = 0;        // host tokens folded in
    std::vector<uint8_t> tiles;  // [ceil(n_tokens / 8)][tile_bytes_] (cpu::q4_put_token)
  };
  void catch_up(Copy& c, const KvLayout& k, int g, int64_t n_tokens, SelectorScratch& s) const;

  size_t row_bytes_;   // of a Q4_1 row, as the copy's tokens are quantized
  size_t tile_bytes_;  // of 8 tokens in the scan's layout
  KeyCopies<Copy> copies_;
};

}  // namespace hg
