// HybridAttention: the attention stage of every policy that splits the KV cache (hybrid, hgca,
// cpu-attn, streaming, h2o, keyformer, infinigen, quest). The device keeps sinks + a window of
// recent tokens (and, for the pruning policies, heavy hitters); the host keeps the rest. One
// decode step, as the engine's forward pass drives it layer by layer (engine/forward.cpp):
//
//   begin_step       place the new tokens: the window evicts its oldest into the host store
//   for layer ℓ:
//     layer_input(ℓ)   HOST  start ℓ+1's part from ℓ's input x: q̃ ─► select ─► gather ┐ overlap
//                      DEVICE  norm, Q, K, V of ℓ                                   ┘
//     attend(ℓ)        store ℓ's new K, V; HOST ℓ's part: wait for it (or, with the exact
//                      query, run it now), refine; SHIP it; DEVICE attend over the window
//                      merged with the part; observers see the device's probabilities
//   end_step         the new tokens count; the step's timings go to the scheduler
//
// The parts, each in its own file: the host query (host_query.h: exact, speculative, refine),
// the host selectors (host_selection.h, selectors/), the shipment (shipment.h: logits + V rows,
// partial + LSE, fetched K and V rows), the observer of device attention (device_observer.h),
// the device token map and retainers (kv/hybrid_kv.h: window ring, heavy hitters), the step
// clock (step_timer.h). A prefill chunk attends exactly: the host's part is a partial result over
// the host tokens each row sees, merged by LSE.
//
// Beside a GPU a decode step is issued without a host wait (hybrid_async.cpp): the device thread
// queues the whole step and the stream hands the host its inputs through host callbacks
// (Device::host_callback): layer ℓ's input and true query cross into pinned buffers, a callback
// starts ℓ+1's host job, another waits for ℓ's part (the device waits meanwhile, not the host
// thread), refines it and writes it into the shipment's pinned buffer, laid out beforehand from
// each row's planned K, and the copies and the attention follow in stream order. The step is one
// CUDA graph with host nodes and its only wait is the logits' copy. A step falls back to the
// synchronous path where the plan's K is not known ahead (InfiniGen's fetch), a new row goes to
// the host store (no window), or the device has no callbacks (the CPU device; HG_CUDA_HOST_CALLBACKS=0).
#pragma once
#include <exception>
#include <memory>
#include <vector>

#include "attention/device_observer.h"
#include "attention/host_ops.h"
#include "attention/host_query.h"
#include "attention/host_selection.h"
#include "attention/host_stage.h"
#include "attention/layer_attention.h"
#include "attention/prompt_state.h"
#include "attention/selectors/pruners.h"
#include "attention/shipment.h"
#include "attention/step_timer.h"
#include "kv/hybrid_kv.h"
#include "mem/placement.h"
#include "mem/topology.h"

namespace hg {

class HybridAttention final : public LayerAttention, public PromptState {
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
  void layers_done() override;
  void end_step(const std::vector<TokenRow>& rows) override;
  // hybrid_fill.cpp
  void fill(int seq, int n_tokens, const KvRowSource& source) override;
  bool exact_prefill() const override;
  PromptState* prompt_state() override { return this; }
  // PromptState (hybrid_fill.cpp)
  bool attend_scored(int layer, const float* q, const float* k, const float* v, const std::vector<TokenRow>& rows,
                     float* out, const PromptMassSink& sink) override;
  bool places_prefill() const override;
  std::unique_ptr<LayerAttention> exact_stage(int n_tokens) override;
  std::vector<std::string> prompt_scores() const override;
  void learn_prompt_scores(int seq, int layer, size_t i, const float* scores, int n_tokens) override;
  void learn_prompt_queries(int seq, int layer, const float* q, int n_rows) override;
  std::vector<LayerStats>* layer_stats() override { return clock_.all_stats(); }
  const StepTiming* last_step_timing() const override { return clock_.last(); }
  double last_recall(int seq) const override;
  std::string describe() const override;
  nlohmann::json memory_report() const override;
  HybridKv* split_kv() override { return kv_.get(); }

 private:
  // Layer ℓ's host part for the step's rows, as a job on the host stage: from x (one row each,
  // speculative) or from the true queries q (exact).
  void start_host_part(int layer, const float* x, const float* q, const std::vector<TokenRow>& rows);
  void host_part(ThreadPool& pool, int layer, const float* x, const float* q, const std::vector<TokenRow>& rows);
  // Waits for layer ℓ's host part (the device is idle meanwhile: t_wait) and refines it.
  void finish_host_part(int layer, const std::vector<TokenRow>& rows);
  void prefill_host_part(int layer, const std::vector<TokenRow>& rows);
  void store_kv(int layer, const float* k, const float* v, const std::vector<TokenRow>& rows);
  void copy_queries(const float* q, int n);  // q [n][q_dim] -> q_host_
  // The layer's true queries to the predictors that learn from them (InfiniGen's skew).
  void learn_queries(int layer, const float* q, const std::vector<TokenRow>& rows, bool copied);
  // Ships layer ℓ's host part and runs the device attention merged with it, row by row (one call
  // for a prefill chunk).
  void ship_and_attend(int layer, const float* q, const std::vector<TokenRow>& rows, float* out);
  // The host part's counts for the run's statistics and the step's recall.
  void count_host_part(int layer, const std::vector<HostResult>& results, const std::vector<TokenRow>& rows);
  // The device's attention of every row, merged with its shipped part.
  void device_attention(int layer, const float* q, const std::vector<TokenRow>& rows, float* out);
  // Layer ℓ's host part completed with the true queries q (starts it now if it does not
  // speculate; refines it if it does); returns the host's seconds.
  double complete_host_part(int layer, const float* q, const std::vector<TokenRow>& rows);

  // ---- the asynchronous pipeline (hybrid_async.cpp) ----
  struct Callback {
    HybridAttention* self;
    int layer;
  };
  // Whether this decode step can be issued without a host wait (above); fills planned_.
  bool plan_async_step(const std::vector<TokenRow>& rows);
  void async_layer_input(int layer, const float* x, const std::vector<TokenRow>& rows);
  void async_attend(int layer, const float* q, const std::vector<TokenRow>& rows, float* out);
  void async_layers_done();
  // The host callbacks: ℓ's input reached the host; ℓ's part is wanted; the last layer ended.
  static void input_ready(void* callback);
  static void part_wanted(void* callback);
  static void layers_ended(void* callback);
  // Runs f in a host callback: an exception is kept for end_step, and the step's later callbacks
  // do only what keeps the host stage consistent.
  template <typename F>
  void guarded(F&& f);

  Device& device_;
  const Model& model_;
  const ModelSpec& spec_;
  DType kv_dtype_;
  Policy policy_;
  mem::Topology topology_;
  mem::Placement placement_;
  float scale_;
  int n_seqs_;
  HostJobHook host_job_hook_;  // instrumentation (tests): at the start of each decode host job

  // the parts
  std::unique_ptr<HybridKv> kv_;
  std::unique_ptr<HostStage> stage_;
  HostQuery query_;
  HostSelection selection_;
  HostShipment shipment_;
  std::unique_ptr<TokenPruner> pruner_;        // h2o / keyformer: which device tokens stay
  std::unique_ptr<DeviceObserver> observer_;     // ... and what it learns from
  HostPrefillAttention prefill_attention_;       // tiled host part of prefill

  // this step
  bool prefill_ = false;
  std::vector<std::vector<TokenLocation>> places_;  // per sequence, this step's new positions
  std::vector<StepPlan> plans_;                     // per sequence, this step's plan
  std::vector<std::vector<HostResult>> results_;    // [layer % 2][row]
  std::vector<int64_t> prefill_visible_;            // [rows] host tokens each prefill row sees
  std::vector<std::vector<float>> x_host_;          // [layer % 2]: [rows][d_model]
  std::vector<float> q_host_, k_host_, v_host_;     // [rows][q_dim], [rows][kv_dim] x2
  // per sequence, the last decode step's recall measurement summed over layers (measure_recall)
  std::vector<double> recall_mass_;
  std::vector<int64_t> recall_heads_;

  StepClock clock_;  // the step's timings and the run's statistics

  // the asynchronous pipeline
  bool async_ = false;                          // this step's
  std::vector<std::vector<HostShipment::PlannedRow>> planned_;  // [layer][row]
  const std::vector<TokenRow>* async_rows_ = nullptr;
  std::vector<Callback> callbacks_;             // [layer], stable for the callbacks (and graphs)
  PinnedBuffer x_pinned_[2];                    // [layer % 2]: [rows][d_model]
  PinnedBuffer q_pinned_;                       // [rows][q_dim]
  std::exception_ptr async_error_;              // the first a callback caught
};

}  // namespace hg
