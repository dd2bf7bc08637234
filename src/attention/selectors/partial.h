// Pre-QKᵀ "partial" (InfiniGen-like, without the skew): approximate scores from the
// --partial-dims query dimensions of largest |q| summed over the group's heads (a token's score is
// the largest over the group's heads), top-K of those, then exact logits of the chosen tokens.
//
// The scan reads only the chosen channels: the selector keeps a channel-major bf16 copy of the
// host keys per (sequence, layer, kv-head), in tiles of kChannelTile tokens ([tile][head_dim]
// [kChannelTile]), and folds the new host tokens in before it scores (each worker its own
// kv-heads). With --partial-dims 16 of 64 a step reads a quarter of the key bytes. The copy is as
// large as the host keys in bf16; it is exact for a bf16 cache (the default), rounded to bf16
// for f16 and f32 ones (the scores are approximate anyway; the chosen tokens' logits come from
// the cache).
#pragma once
#include <vector>

#include "attention/selectors/key_copies.h"
#include "attention/selectors/selector.h"

namespace hg {

class PartialSelector final : public Selector {
 public:
  explicit PartialSelector(const SelectorContext& c);
  std::string name() const override { return "partial"; }
  bool post_qk() const override { return false; }
  void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& s) override;
  void reset(int seq) override;

 private:
  struct Columns {
    int64_t n_tokens = 0;        // host tokens folded in
    std::vector<uint16_t> bf16;  // [tiles][head_dim][kChannelTile]
  };
  void catch_up(Columns& c, const KvLayout& k, int g, int64_t n_tokens, SelectorScratch& s) const;

  int dims_;
  KeyCopies<Columns> columns_;
};

}  // namespace hg
