// The host selectors of the split policies, driven for one sequence's layer at a time:
//
//   step plan (K, mode, predictor) ──► Selector::select over kv-head ranges ──► idx + logits
//                                      [observers: softmax of the selection ──► AttentionObserver::observe]
//                                      gather V rows (and K rows for a fetch) / partial + LSE
//
// It owns the selectors: Post-QKᵀ top-K (which also serves "every host token") and each Pre-QKᵀ
// predictor a plan has named (predictors.h), kept across mode switches so that a predictor's
// state survives them. The kv-heads are split over the host workers; each worker has its scratch.
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attention/selectors/selector.h"
#include "util/thread_pool.h"

namespace hg {

// What the host computed for one row's sequence and layer.
struct HostResult {
  int K = 0;                  // selected tokens per kv-head
  int64_t n_host = 0;         // host tokens available
  std::vector<int32_t> idx;   // [n_kv_heads][K]
  std::vector<float> logits;  // [n_heads][K]
  std::vector<float> v;       // [n_kv_heads][K][head_dim]
  bool fetch = false;         // K and V rows go to the device, which scores them (Shipment::KeyValue)
  std::vector<float> k;       // [n_kv_heads][K][head_dim] the fetched K rows
  std::vector<float> out;     // [rows][n_heads][head_dim] (LSE merge; prefill)
  std::vector<float> lse;     // [rows][n_heads]
  std::vector<float> q;       // [n_heads][head_dim] the query the host used
  std::vector<float> p;       // [n_heads][K] the selection's probabilities (observing selectors)
  // A step plan's measure_recall: the predictor's choice beside Post's top-K, and the share of
  // each head's attention over Post's K tokens that falls on tokens the predictor chose too
  // (recall = recall_mass / recall_heads; recall_heads 0 when nothing was measured). Weighted by
  // attention, a miss among the near-ties at the end of Post's K costs little, a missed needle much.
  std::vector<int32_t> pred_idx;    // [n_kv_heads][K]
  std::vector<float> pred_logits;   // [n_heads][K]
  std::vector<double> pred_mass;    // [n_kv_heads]: summed over the group's heads
  double recall_mass = 0;
  int recall_heads = 0;
};

class HostSelection {
 public:
  // n_threads: the host workers (one scratch each).
  HostSelection(const SelectorContext& c, int n_threads);

  // Sets up the predictors the step's plans name; on the device thread, no host job running.
  void prepare(std::span<const StepPlan> plans);
  // The sequence's host store grew from `before` to `after` tokens (device thread).
  void on_host_append(int seq, int64_t before, int64_t after);
  void reset(int seq);

  // The host part of one sequence's layer with the query r.q: the plan's selector picks K tokens
  // per kv-head and scores them, observers see the probabilities, then V rows (and K rows for a
  // fetch) are gathered, or with --merge lse the partial result + LSE computed. With the plan's
  // measure_recall a Post step also runs the plan's predictor and measures its recall (pred_mass).
  void select(ThreadPool& pool, int layer, int seq, const StepPlan& plan, const HostStore& host, HostResult& r);
  // --query refine: r.q is now the true query; the selected tokens' logits (and partial) again.
  void rescore(ThreadPool& pool, int layer, const HostStore& host, HostResult& r);

  // The K select() will take for a plan over n_host host tokens, known before the host part runs,
  // or where the selector decides from the data (InfiniGen's alpha rule: k_from_data) the most it
  // can take; and whether it fetches the K and V rows (HostResult::fetch). The asynchronous
  // pipeline lays the layer's shipment out from them. A Pre plan's predictor must have been prepared.
  int planned_k(int layer, const StepPlan& plan, int64_t n_host);
  bool k_from_data(const StepPlan& plan);
  bool fetches(const StepPlan& plan);

  // The predictors that learn from a layer's true queries (InfiniGen's skew, prefill and decode).
  bool wants_queries(int seq, int layer) const;
  void learn_queries(int seq, int layer, const float* q, int n_rows);

 private:
  Selector& selector_for(const StepPlan& plan, bool all);
  void observe(int seq, int layer, HostResult& r, int g_begin, int g_end);
  void partial(ThreadPool& pool, int layer, const HostStore& host, HostResult& r);
  // r.pred_mass of kv-heads [g_begin, g_end): Post's selection in r.idx / r.logits, the predictor's in r.pred_idx.
  void measure_recall(HostResult& r, int g_begin, int g_end, SelectorScratch& sc) const;

  const ModelSpec& spec_;
  const Policy& policy_;
  int ctx_, n_seqs_;
  float scale_;
  std::unique_ptr<Selector> post_;                        // Post-QKᵀ top-K (and "every host token")
  std::map<std::string, std::unique_ptr<Selector>> pre_;  // Pre-QKᵀ predictors, by name
  std::vector<AttentionObserver*> observers_;             // the selectors that accumulate scores
  std::vector<SelectorScratch> scratch_;                  // per host thread
  std::vector<float> all_logits_;                         // a Post-QKᵀ scan's logits [n_heads][n_host]
};

}  // namespace hg
