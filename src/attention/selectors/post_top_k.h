// Post-QKᵀ selection (HybridGen's default): the logits of every host token, then per kv-head the
// K tokens of largest group score (the max over the group's query heads).
#pragma once
#include "attention/selectors/selector.h"

namespace hg {

class PostTopKSelector final : public Selector {
 public:
  std::string name() const override { return "post"; }
  bool post_qk() const override { return true; }
  void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& s) override;
};

}  // namespace hg
