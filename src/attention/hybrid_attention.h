// HybridAttention: the decode pipeline of DESIGN.md. The device keeps sinks + a window of recent
// tokens; host workers compute the next layer's logits over the host tokens (from the current
// layer's input, with their own copies of Wq and the norm), select the important ones, and ship
// their logits and V rows (or a partial result + LSE) for the device to merge, or, for a fetching
// selector (InfiniGen), their K and V rows for the device to attend over with the true query.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "attention/host_ops.h"
#include "attention/host_stage.h"
#include "attention/layer_attention.h"
#include "attention/selectors/h2o_prune.h"
#include "attention/selectors/selector.h"
#include "attention/step_timer.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_packed.h"
#include "kv/hybrid_kv.h"
#include "mem/placement.h"
#include "mem/topology.h"

namespace hg {

class HybridAttention final : public LayerAttention {
 public:
  HybridAttention(const AttentionContext& c, const Policy& policy, const mem::PlacementOptions& placement);
  ~HybridAttention() override;

  int length(int seq) const override { return kv_->length(seq); }
  int64_t host_tokens(int seq) const override { return kv_->host(seq).n_tokens(); }
  void reset(int seq) override;
  void begin_step(const std::vector<TokenRow>& rows, bool prefill, std::span<const StepPlan> plans) override;
  void layer_input(int layer, const float* x, const std::vector<TokenRow>& rows) override;
  void attend(int layer, const float* q, const float* k, const float* v, const std::vector<TokenRow>& rows,
              float* out) override;
  void end_step(const std::vector<TokenRow>& rows) override;
  void fill_random(int seq, int n_tokens, uint64_t seed) override;  // hybrid_fill.cpp
  std::vector<LayerStats>* layer_stats() override { return &stats_; }
  const StepTiming* last_step_timing() const override { return step_timing_.step >= 0 ? &step_timing_ : nullptr; }
  std::string describe() const override;
  nlohmann::json memory_report() const override;

  HybridKv& kv() { return *kv_; }
  const mem::Placement& placement() const { return placement_; }

 private:
  // What the host computed for one sequence and layer.
  struct SeqResult {
    int K = 0;                  // selected tokens per kv-head
    int64_t n_host = 0;         // host tokens available
    std::vector<int32_t> idx;   // [n_kv_heads][K]
    std::vector<float> logits;  // [n_heads][K]
    std::vector<float> v;       // [n_kv_heads][K][head_dim]
    bool fetch = false;         // K and V rows go to the device, which scores them (Shipment::KeyValue)
    std::vector<float> k;       // [n_kv_heads][K][head_dim] the fetched K rows
    std::vector<float> out;     // [rows][n_heads][head_dim] (LSE merge)
    std::vector<float> lse;     // [rows][n_heads]
    std::vector<float> q;       // [n_heads][head_dim] the query the host used
    std::vector<float> p;       // [n_heads][K] the selection's probabilities (observing selectors)
  };
  struct HostLayer {  // the host's own copies for q̃ = RoPE(Wq · norm(x) + bq)
    TensorView wq;
    std::unique_ptr<cpu::PackedWeight> wq_packed;  // Wq for the packed GEMV, where it pays (or null)
    std::vector<float> bq, norm_w, norm_b;
  };
  struct DeviceSeqBuffers {  // where the host part lands on the device
    float* logits = nullptr;
    float* v = nullptr;
    float* out = nullptr;
    float* lse = nullptr;
    size_t capacity = 0;  // floats each buffer holds
  };
  struct FetchStaging {   // one layer's fetched K and V rows of one row, on the device
    float* k = nullptr;   // [n_kv_heads][K][head_dim]
    float* v = nullptr;   // [n_kv_heads][K][head_dim]
    size_t capacity = 0;  // floats each buffer holds
  };

  static int effective_k(const StepPlan& plan, int64_t n_host);
  // Whether layer L's host part is computed ahead from the previous layer's input.
  bool speculates(int layer) const { return policy_.query != QuerySource::Exact && layer >= policy_.exact_layers; }
  void submit_decode_job(int layer, const float* x_host, const float* q_host, const std::vector<TokenRow>& rows);
  void decode_job(ThreadPool& pool, int layer, const float* x_host, const float* q_host,
                  const std::vector<TokenRow>& rows);
  // The host part of one sequence's layer: the plan's selector picks K tokens per kv-head and
  // scores them; observing selectors see the probabilities; V rows or a partial result follow.
  void select_and_score(ThreadPool& pool, int layer, int seq, SeqResult& r);
  Selector& selector_for(const StepPlan& plan, bool all);
  void set_up_predictor(const std::string& name);
  // What an observer is told about `count` tokens per kv-head (`tokens` in `space`); p is the caller's.
  ObservedAttention observation(int seq, int layer, TokenSpace space, int count, const int32_t* tokens) const;
  void observe_selection(int seq, int layer, SeqResult& r, int g_begin, int g_end);
  void host_partial(ThreadPool& pool, int layer, int seq, SeqResult& r);
  double refine(int layer, const float* q_host, const std::vector<TokenRow>& rows);  // host seconds
  void prefill_host_part(int layer, const std::vector<TokenRow>& rows);
  void copy_queries(const float* q, int n);  // q [n][q_dim] -> q_host_
  // The layer's true queries to the selectors that learn from them (InfiniGen's skew).
  void learn_queries(int layer, const float* q, const std::vector<TokenRow>& rows, bool copied);
  float* device_probs(size_t floats);
  void observe_device(int layer, const std::vector<TokenRow>& rows, int first, int n_rows, int count, bool prefill);
  void ship_and_merge(int layer, const float* q, const std::vector<TokenRow>& rows, float* out, bool prefill);
  void compute_query(int layer, const float* x, int pos, float* q_out, ThreadPool& pool);
  DeviceSeqBuffers& device_buffers(int seq, size_t floats);

  Device& device_;
  const Model& model_;
  const ModelSpec& spec_;
  Policy policy_;
  mem::Topology topology_;
  mem::Placement placement_;
  std::unique_ptr<HybridKv> kv_;
  std::unique_ptr<HostStage> stage_;
  std::vector<HostLayer> host_layers_;
  std::vector<float> inv_freq_;
  std::vector<float> query_norm_;         // norm(x) for compute_query [d_model]; host jobs run one at a time
  cpu::MatmulWorkspace query_workspace_;  // compute_query's matmul scratch (the same one job at a time)
  float scale_;
  int n_seqs_;
  int ctx_ = 0;

  bool prefill_ = false;
  std::vector<std::vector<TokenLocation>> places_;  // per sequence, this step's new positions
  std::vector<StepPlan> plans_;                     // per sequence, this step's plan
  std::vector<std::vector<SeqResult>> results_;     // [layer % 2][row]
  std::vector<SelectorScratch> scratch_;            // per host thread
  std::unique_ptr<Selector> post_;                  // Post-QKᵀ top-K (and "every host token")
  std::map<std::string, std::unique_ptr<Selector>> pre_;  // Pre-QKᵀ predictors, by name (predictors.h)
  std::vector<Selector*> observers_;                // the selectors that accumulate scores
  HostPrefillAttention prefill_attention_;          // tiled host part of prefill
  std::vector<int64_t> prefill_visible_;            // [rows] host tokens each prefill row sees
  std::unique_ptr<HeavyHitterSelector> pruner_;     // h2o / keyformer: which device tokens stay
  float* probs_dev_ = nullptr;                      // pruner_: the device tokens' probabilities
  size_t probs_cap_ = 0;                            // floats probs_dev_ holds
  std::vector<float> probs_host_;                   // the same on the host
  std::vector<std::vector<float>> x_host_;          // [layer % 2]: [rows][d_model]
  std::vector<float> q_host_, k_host_, v_host_;     // [rows][q_dim], [rows][kv_dim] x2
  std::vector<DeviceSeqBuffers> dev_bufs_;          // per row
  // [layer * n_seqs + row]: one staging area per layer, so that a layer's fetch need not wait for
  // the compute of the layers before it: the step's copies are ordered once, behind the previous
  // step's compute (fetch_ordered_), which read every layer's staging.
  std::vector<FetchStaging> fetched_;
  bool fetch_ordered_ = false;
  std::vector<HostPart> parts_;  // per row: what ship_and_merge gives the device
  std::vector<LayerStats> stats_;
  std::vector<LayerMarks> marks_;  // this step's device timing marks, per layer
  StepTiming step_timing_;
  // Test only (HG_TEST_HOST_DELAY="MS@FROM:TO"): the host stage sleeps MS ms per decode step
  // (spread over its layer jobs) during decode steps [FROM, TO), as if the host were slower, so
  // tests can watch the feedback scheduler switch to Pre-QKᵀ and back. Read once, here.
  struct TestHostDelay {
    double ms = 0;
    int64_t from = 0, to = 0;
  } test_delay_;
};

}  // namespace hg
