// InfiniGen (Lee et al., OSDI 2024; snu-comparch/InfiniGen speedup/flexgen/infinigen/): a
// Pre-QKᵀ selector whose chosen tokens' K and V rows are fetched to the device, which then runs
// exact attention over its window and the fetched tokens with the true query.
//
// Per sequence and layer it keeps
//  - the skew (attention/selectors/infinigen_skew.h), computed once from the first
//    kSkewRows query rows the layer saw (the prompt's; InfiniGen's skewing script uses a
//    2048-token prompt) when the layer first speculates;
//  - the partial keys of every host token (on the device in InfiniGen; here beside the selector,
//    extended as tokens reach the host);
// and at every step turns the speculative query (layer ℓ+1's query from layer ℓ's input) into
// partial scores, picks n = min(mean count within --alpha of the max, --max-kv) tokens per
// kv-head (choose_k), and returns each kv-head's n best (select). Layers 0 and 1 fetch every
// host token, as InfiniGen does.
#pragma once
#include <vector>

#include "attention/selectors/infinigen_skew.h"
#include "attention/selectors/infinigen_speculation.h"
#include "attention/selectors/selector.h"
#include "policy/knobs.h"

namespace hg {

class InfinigenSelector final : public Selector, public QueryLearner {
 public:
  static constexpr int kSkewRows = 2048;  // query rows per layer the skew is computed from
  static constexpr int kExactLayers = 2;  // layers that fetch every host token

  explicit InfinigenSelector(const SelectorContext& c);
  std::string name() const override { return "infinigen"; }
  bool post_qk() const override { return false; }
  Shipment ships() const override { return Shipment::KeyValue; }

  QueryLearner* query_learner() override { return this; }
  bool wants_queries(int seq, int layer) const override;
  void on_queries(int seq, int layer, const float* q, int n_rows) override;
  int choose_k(const SelectionRequest& r, SelectorScratch& scratch) override;
  // The alpha rule reads the data: at most --max-kv (every host token at the exact layers).
  int planned_k(int layer, int K, int64_t n_tokens) const override;
  bool k_from_data() const override { return true; }
  void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& scratch) override;
  void reset(int seq) override;

  // The skew of (seq, layer), once computed (tests).
  const std::vector<PartialProjection>* projection(int seq, int layer) const;

 private:
  struct LayerState {
    std::vector<float> q_rows;  // [n_q_rows][q_dim] until the skew exists
    int n_q_rows = 0;
    bool skewed = false;
    std::vector<PartialProjection> proj;  // [n_kv_heads]
    PartialKeys keys;                     // [n_kv_heads][ctx][n_partial]
    std::vector<float> scores;            // [n_heads][ctx] this step's partial scores
  };
  LayerState& state(int seq, int layer) { return layers_[static_cast<size_t>(seq) * spec_.n_layers + layer]; }
  void make_skew(LayerState& s);
  void catch_up_keys(LayerState& s, const KvLayout& k, int64_t n_tokens, SelectorScratch& scratch);

  const ModelSpec& spec_;
  int ctx_;
  int n_partial_;
  float alpha_;
  int max_kv_;
  std::vector<LayerState> layers_;  // [seq * n_layers + layer]
};

// --partial-ratio, --alpha, --max-kv (infinigen).
void register_infinigen_knobs(KnobRegistry& r);

}  // namespace hg
