// The parts of a policy that decide which tokens take part, by role; a class implements the roles
// it has (H2O's predictor selects and observes, its pruner observes and retains):
//
//   Selector           which host tokens of one sequence's layer take part, and their logits:
//                      Post-QKᵀ top-K (post_top_k.*), the Pre-QKᵀ predictors (predictors.cpp)
//   AttentionObserver  accumulates the probabilities tokens received (host selections, or the
//                      device's own tokens) into scores: H2O, Keyformer
//   TokenRetainer      which device tokens stay when the window moves on: the pruners (h2o_prune.*)
//   QueryLearner       learns from a layer's true queries: InfiniGen's skew
//
// HostSelection (attention/host_selection.h) drives the selectors:
//
//   plan K, mode ──► Selector::select(request, kv-head range) ──► idx [n_kv_heads][K] + logits
//                    [AttentionObserver::observe(probabilities)]
//                    gather V rows / partial attention            (the driver, by merge mode)
//
// Each part owns its state (H2O's accumulated scores), per sequence and layer, sized at
// construction from SelectorContext; reset(seq) clears one sequence at the start of a request.
// select and observe run concurrently on the host workers for DISJOINT kv-head ranges of one
// (sequence, layer), each worker with its own SelectorScratch; state must be indexed by kv-head
// so that those calls never share memory.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hybridgen/model.h"
#include "hybridgen/policy.h"
#include "kernels/cpu/key_scores_q4.h"
#include "kv/host_store.h"

namespace hg {

// What every selector is built with.
struct SelectorContext {
  const ModelSpec& spec;
  const Policy& policy;  // construction-time knobs only (partial_dims, ...): K and mode come per step
  int ctx;               // tokens per sequence
  int n_seqs;
};

// One sequence's layer at one step.
struct SelectionRequest {
  int seq = 0;
  int layer = 0;
  KvLayout k;            // host keys of this layer: [n_kv_heads][n_tokens][head_dim]
  const float* q = nullptr;  // [n_heads][head_dim]: the exact or speculative query (after RoPE)
  int n_heads = 0;
  float scale = 1.0f;    // 1/√head_dim: logits are scale · q·k
  int64_t n_tokens = 0;  // host tokens of the sequence
  int K = 0;             // tokens to select per kv-head, 0 <= K <= n_tokens (the driver clamps)
  // Every host token's logit, [n_heads][n_tokens], when the driver computed them beforehand (a
  // Post-QKᵀ selector's scan, split over every worker by token ranges); null otherwise.
  const float* logits = nullptr;
};

// Where a selector writes; rows of kv-heads outside its range are left alone.
struct SelectedTokens {
  int32_t* idx = nullptr;   // [n_kv_heads][K] host token indices, increasing
  float* logits = nullptr;  // [n_heads][K] scaled logits of the selected tokens, in idx order; null
                            // for a KeyValue shipment that no observer reads (the device scores it)
};

// Per-worker scratch, reused across calls so that no step allocates once warm.
struct SelectorScratch {
  std::vector<float> scores, all_logits, p, row, wide;
  std::vector<int32_t> order, dims;
  std::vector<uint8_t> q4_row;  // q4: a key row in Q4_1
  cpu::Q4Query q4_query;        // q4: the group's query heads in int8
};

// Indices an observation is expressed in.
enum class TokenSpace {
  Host,      // host token indices (HostStore order)
  Position,  // sequence positions (device tokens: sinks, window, kept heavy hitters)
};

// Attention probabilities of one step over a set of tokens, for score-based selectors.
struct ObservedAttention {
  int seq = 0;
  int layer = 0;
  TokenSpace space = TokenSpace::Host;
  int n_heads = 0;
  int n_kv_heads = 0;
  int query_pos = 0;                // the observing row's position
  bool prefill = false;             // a prompt row (Keyformer's τ starts rising after the prompt)
  int count = 0;                    // tokens per kv-head
  const int32_t* tokens = nullptr;  // [n_kv_heads][count] in `space`
  const float* p = nullptr;         // [n_heads][count]: softmax probabilities (sum <= 1 per head)
};

// What the device receives for the selected tokens.
enum class Shipment {
  Logits,    // host-computed logits + V rows (or a partial result + LSE with --merge lse)
  KeyValue,  // K and V rows; the device computes exact logits (InfiniGen's fetch)
};

class AttentionObserver {
 public:
  virtual ~AttentionObserver() = default;
  // Probabilities the observed tokens received, kv-heads [g_begin, g_end) (heads of those groups).
  virtual void observe(const ObservedAttention& o, int g_begin, int g_end) = 0;
  // The sequence's host store grew from `before` to `after` tokens (eviction or prefill); called
  // on the device thread before any layer of the step runs.
  virtual void on_host_append(int /*seq*/, int64_t /*before*/, int64_t /*after*/) {}
};

class TokenRetainer {
 public:
  virtual ~TokenRetainer() = default;
  // Kv-head g of (seq, layer) holds `positions` (increasing) on the device and must keep `keep` of
  // them; appends the positions to keep (increasing) to `kept`. Without a retainer the device
  // keeps the most recent ones (the ring of StreamingLLM and HybridGen).
  virtual void retain(int seq, int layer, int g, std::span<const int32_t> positions, int keep,
                      std::vector<int32_t>& kept) = 0;
};

class QueryLearner {
 public:
  virtual ~QueryLearner() = default;
  // Whether it wants this layer's true queries (roped) of the step's rows, prefill and decode.
  // They are handed over once the layer's host part has run; in decode a learner stops wanting
  // them at its selector's first selection over host tokens (InfiniGen makes its skew there, from
  // the queries before), so a decode step whose sequence has host tokens feeds it nothing.
  virtual bool wants_queries(int seq, int layer) const = 0;
  virtual void on_queries(int seq, int layer, const float* q /*[n_rows][q_dim]*/, int n_rows) = 0;
};

class Selector {
 public:
  virtual ~Selector() = default;
  virtual std::string name() const = 0;

  // Post-QKᵀ selectors compute every host logit; Pre-QKᵀ ones only the selected tokens'.
  virtual bool post_qk() const = 0;
  virtual Shipment ships() const { return Shipment::Logits; }

  // Chooses K tokens per kv-head for kv-heads [g_begin, g_end): writes out.idx (increasing) and
  // out.logits (when not null). K == n_tokens selects every host token (the driver may skip the
  // call then).
  virtual void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out,
                      SelectorScratch& scratch) = 0;

  // Selectors that choose their own K (InfiniGen's alpha rule, Quest's whole pages): called once
  // per (seq, layer, step) before select(), on one worker; returns K in [0, n_tokens]. Default:
  // the plan's K.
  virtual int choose_k(const SelectionRequest& r, SelectorScratch& /*scratch*/) { return r.K; }
  // The K choose_k will return for a plan's K over n_tokens host tokens, known before the host
  // part runs (the asynchronous pipeline lays its shipment out from it), or, where the choice
  // depends on the data (k_from_data()), the most it can return. Default: the plan's K.
  virtual int planned_k(int /*layer*/, int K, int64_t /*n_tokens*/) const { return K; }
  virtual bool k_from_data() const { return false; }

  // The selector's other roles, if it has them (the driver wires them up).
  virtual AttentionObserver* observer() { return nullptr; }
  virtual QueryLearner* query_learner() { return nullptr; }

  // A new request on sequence `seq`: forget its state.
  virtual void reset(int /*seq*/) {}
};

// The selector a plan's mode names: Post-QKᵀ top-K for Selection::Post and All, otherwise the
// plan's Pre-QKᵀ predictor. HybridAttention keeps one of each it may need, so a plan can switch
// modes between steps without losing a predictor's state.
std::unique_ptr<Selector> make_selector(Selection select, const std::string& predictor, const SelectorContext& c);

}  // namespace hg
