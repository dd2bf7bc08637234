// Pre-QKᵀ "h2o" predictor: the K host tokens with the largest attention mass accumulated so far
// (softmax over each step's selection, summed over the group's heads), then their logits only.
// Tokens entering the host store start at the largest score so far: they were attended on the
// device until now and H2O would still keep them. The scores are this selector's state, per
// sequence, layer and kv-head: [n_seqs * n_layers][n_kv_heads][ctx].
#pragma once
#include "attention/selectors/selector.h"

namespace hg {

class H2oPredictor final : public Selector, public AttentionObserver {
 public:
  explicit H2oPredictor(const SelectorContext& c);
  std::string name() const override { return "h2o"; }
  bool post_qk() const override { return false; }
  void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& s) override;
  AttentionObserver* observer() override { return this; }
  void observe(const ObservedAttention& o, int g_begin, int g_end) override;
  void on_host_append(int seq, int64_t before, int64_t after) override;
  void reset(int seq) override;

  // Accumulated score of host token t of kv-head g (tests).
  float score(int seq, int layer, int g, int64_t t) const { return scores(seq, layer, g)[t]; }

 private:
  float* scores(int seq, int layer, int g) {
    return acc_.data() + ((static_cast<size_t>(seq) * n_layers_ + layer) * n_kv_heads_ + g) * ctx_;
  }
  const float* scores(int seq, int layer, int g) const {
    return acc_.data() + ((static_cast<size_t>(seq) * n_layers_ + layer) * n_kv_heads_ + g) * ctx_;
  }

  int n_layers_, n_kv_heads_;
  size_t ctx_;
  std::vector<float> acc_;  // [n_seqs][n_layers][n_kv_heads][ctx]
};

}  // namespace hg
