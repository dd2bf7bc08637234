// The attention stage of a transformer layer, behind one interface so the engine only
// orchestrates: FullAttention (every token on the device), OffloadAttention (every token on the
// host, streamed to the device per layer) and HybridAttention (window on the device, older tokens
// on the host, both computing at once) implement it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "device/device.h"
#include "hybridgen/model.h"
#include "hybridgen/policy.h"
#include "hybridgen/stats.h"
#include "mem/placement.h"

namespace hg {

// One row of a forward pass: a token of sequence `seq` at position `pos`. Rows of one sequence
// are contiguous and in position order.
struct TokenRow {
  int seq;
  int pos;
  int32_t token;
};

// Per-layer timing and traffic of the attention stage, summed over steps.
struct LayerStats {
  double t_layer = 0;  // wall time of the layer on the device thread (s)
  double t_host = 0;   // host stage time for this layer (s)
  double t_tx = 0;     // host -> device transfer time (s)
  double t_wait = 0;   // device waiting for the host (s)
  int64_t steps = 0;
  int64_t selected = 0;      // host tokens taking part, summed over kv-heads, sequences, steps
  int64_t host_tokens = 0;   // host tokens available, summed likewise
  int64_t bytes_h2d = 0;     // bytes shipped host -> device
  double q_cos_sum = 0;      // refine: cosine of the speculative q̃ and the true q, summed per head
  int64_t q_cos_n = 0;

  // device time of the layer: its wall time less the waits for the host and the transfers
  double t_dev() const { return t_layer - t_wait - t_tx; }
};

class HybridKv;
class PromptState;

// K/V rows of `layer` at positions [pos0, pos0 + n): k, v [n][kv_dim] fp32 (a fill's source).
using KvRowSource = std::function<void(int layer, int64_t pos0, int64_t n, float* k, float* v)>;

// Instrumentation a caller injects (tests): called at the start of each decode layer's host job,
// on a host thread, with the decode step (0-based, counted by the stage) and the layer.
using HostJobHook = std::function<void(int64_t step, int layer)>;

class LayerAttention {
 public:
  virtual ~LayerAttention() = default;
  virtual int length(int seq) const = 0;
  // Tokens of `seq` held on the host (per kv-head); what K is clamped to.
  virtual int64_t host_tokens(int /*seq*/) const { return 0; }
  // Tokens of `seq` whose K/V the device holds (the rest are on the host).
  virtual int64_t device_tokens(int seq) const { return length(seq) - host_tokens(seq); }
  virtual void reset(int seq) = 0;
  // Places the rows' new positions (eviction happens here, before any layer runs). plans[seq] is
  // the step's plan of each sequence of the batch (K, selection mode); the stage reads K and the
  // mode from there at every step, never from its Policy.
  virtual void begin_step(const std::vector<TokenRow>& rows, bool prefill, std::span<const StepPlan> plans) = 0;
  // The device is about to run `layer` with input x [n, d_model] (device memory).
  virtual void layer_input(int layer, const float* x, const std::vector<TokenRow>& rows) = 0;
  // q: [n, q_dim] after RoPE; k, v: [n, kv_dim]. Stores k and v, writes out [n, q_dim].
  virtual void attend(int layer, const float* q, const float* k, const float* v, const std::vector<TokenRow>& rows,
                      float* out) = 0;
  // Every layer of the step has been issued; the output head and the logits' copy follow.
  virtual void layers_done() {}
  virtual void end_step(const std::vector<TokenRow>& rows) = 0;
  // Makes `seq` (empty) n_tokens long with the K/V rows of `rows`, written where a prefill of that
  // length puts them; no attention runs (attention/kv_fill.h: random rows for benchmarks, a
  // recorded prefill's rows for a shared prefill).
  virtual void fill(int seq, int n_tokens, const KvRowSource& rows);
  // True when the stage's prefill of a prompt is exact attention over every token of it (the
  // dropping policies': exact, then evicted once), so that it can start from a recorded prefill
  // (hybridgen/prefill_state.h) and record one; false where it drops or prunes as it prefills.
  virtual bool exact_prefill() const { return true; }
  // The stage's part that records or places a prefill (attention/prompt_state.h); null for a
  // stage that needs neither.
  virtual PromptState* prompt_state() { return nullptr; }

  virtual std::vector<LayerStats>* layer_stats() { return nullptr; }
  // The latest decode step's per-layer T_dev / T_host / T_tx (null when the stage keeps none).
  virtual const StepTiming* last_step_timing() const { return nullptr; }
  // The plan's predictor's recall of Post-QKᵀ's top-K in the sequence's last decode step, when
  // that step's plan asked for it (measure_recall), else -1: the share of each head's attention
  // over Post's K tokens that falls on tokens the predictor chose too, averaged over heads and
  // layers (HostResult::recall_mass).
  virtual double last_recall(int /*seq*/) const { return -1; }
  // Where the host KV stores live, checked page by page (JSON; null when there are none).
  virtual nlohmann::json memory_report() const { return nullptr; }
  virtual std::string describe() const = 0;
  // The split KV cache's token map and stores (tests, through attention/inspect.h); null when the
  // stage keeps none.
  virtual HybridKv* split_kv() { return nullptr; }
};

struct AttentionContext {
  Device& device;
  const Model& model;
  DType kv_dtype;
  int ctx;
  int n_seqs;
  HostJobHook host_job_hook = {};
};

// The attention stage of a policy, the one way the engine builds one: where the policy keeps K
// and V picks it (KvHome: full, offload, or the split stage of every other preset). A split
// policy whose window and sinks cover the context never moves a token to the host: it runs as
// full attention, and `note` says so (not an error: the policy's result is full attention's).
struct AttentionStage {
  std::unique_ptr<LayerAttention> attention;
  std::string note;  // empty, or why the stage is not the policy's own
};
AttentionStage make_attention(const AttentionContext& c, const Policy& policy, const mem::PlacementOptions& placement);

std::unique_ptr<LayerAttention> make_full_attention(const AttentionContext& c);
// FlexGen's offload: every token on the host, each layer's K/V streamed to the device.
std::unique_ptr<LayerAttention> make_offload_attention(const AttentionContext& c,
                                                       const mem::PlacementOptions& placement);
std::unique_ptr<LayerAttention> make_hybrid_attention(const AttentionContext& c, const Policy& policy,
                                                      const mem::PlacementOptions& placement);

}  // namespace hg
