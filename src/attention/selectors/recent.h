// Pre-QKᵀ "recent": the K most recent host tokens of every kv-head (the tokens that left the
// device window last), then their logits only.
#pragma once
#include "attention/selectors/selector.h"

namespace hg {

class RecentSelector final : public Selector {
 public:
  std::string name() const override { return "recent"; }
  bool post_qk() const override { return false; }
  void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& s) override;
};

}  // namespace hg
