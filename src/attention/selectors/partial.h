// Pre-QKᵀ "partial" (InfiniGen-like, without the skew): approximate scores from the
// --partial-dims query dimensions of largest |q| summed over the group's heads, top-K of those,
// then exact logits of the chosen tokens.
#pragma once
#include "attention/selectors/selector.h"

namespace hg {

class PartialSelector final : public Selector {
 public:
  explicit PartialSelector(int dims) : dims_(dims) {}
  std::string name() const override { return "partial"; }
  bool post_qk() const override { return false; }
  void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& s) override;

 private:
  int dims_;
};

}  // namespace hg
