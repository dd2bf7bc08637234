// Engine: owns the device, the device-resident weights and the KV caches of a static batch of
// sequences, and runs prefill and decode steps. It orchestrates; it holds no policy logic.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hybridgen/dtype.h"
#include "hybridgen/model.h"
#include "hybridgen/policy.h"
#include "hybridgen/prefill_state.h"
#include "hybridgen/stats.h"

namespace hg {

class Device;
class BatchScheduler;

// The prefill chunk when EngineOptions::ubatch is 0. Exact policies: larger chunks only amortize
// more (the prefill GEMM dequantizes each weight panel once per chunk: 14% of a 32K prefill at
// 256 rows on the AMX Xeon, docs/performance.md); the results of an exact prefill do not depend
// on the chunk beyond rounding. The dropping policies that prune as they prefill (--exact-prefill
// false) keep the 256 rows their results were made with.
inline constexpr int kExactPrefillUbatch = 1024;
inline constexpr int kPruningPrefillUbatch = 256;

// The arithmetic of a run on the CPU device (--precision): f32 (fp32 GEMMs and attention
// products) or bf16 (bf16 GEMMs, and bf16 attention products over a bf16 cache, where the CPU has
// AMX or AVX512_BF16; elsewhere f32 all the same). Auto follows the weights: f32 for a checkpoint
// whose matrices are f32 or f16, bf16 for bf16 and quantized ones (bf16 is their speed and loses
// nothing they hold; an f32 checkpoint asked for f32).
enum class Precision { Auto, F32, Bf16 };
Precision parse_precision(const std::string& name);  // "auto" | "f32" | "bf16"; hg::Error otherwise
const char* precision_name(Precision p);              // "auto" | "f32" | "bf16"
// What `asked` is for `model`: asked itself, or for auto what the weights give.
Precision resolve_precision(Precision asked, const Model& model);

struct EngineOptions {
  int threads = 0;               // CPU threads of the device (0: all cores)
  DType kv_dtype = DType::BF16;  // f32, f16 or bf16
  Precision precision = Precision::Auto;
  int ctx = 0;                   // tokens per sequence the KV cache holds (0: the model's max)
  int batch = 1;                 // sequences decoded together
  // Prefill processes prompts in chunks of this many tokens (0: kExactPrefillUbatch when the
  // policy's prefill is exact attention, kPruningPrefillUbatch for the policies whose prefill
  // evicts as it goes: streaming, h2o, keyformer with --exact-prefill false; what they keep
  // depends on the chunk).
  int ubatch = 0;
  std::string device = "auto";  // auto | cpu | cuda
  int gpu = 0;                  // CUDA device index
  Policy policy;                // attention policy (default: full)
  // Host KV placement (hybrid policies): --kv-placement, --k-node, --v-node, --k-dram-budget
  std::string kv_placement = "semantic";
  int k_node = -1, v_node = -1;  // -1: auto
  uint64_t k_dram_budget = 0;    // bytes, 0: no limit
  bool kv_huge_pages = true;     // transparent huge pages for the host KV arenas
  // Instrumentation (tests): called at the start of each decode layer's host job (split policies),
  // on a host thread, with the decode step (0-based) and the layer; a test slows the host with it.
  std::function<void(int64_t step, int layer)> host_job_hook;
};

struct LayerStats;

// After each prefill chunk: the prompt's tokens done so far; false stops the prefill.
using PrefillChunkDone = std::function<bool(int64_t tokens_done)>;

class Engine {
 public:
  Engine(const Model& model, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelSpec& spec() const;
  const EngineOptions& options() const;
  Device& device();
  int vocab_size() const;

  // Appends `tokens` to sequence `seq`. logits_last: [vocab] for the last token (may be null);
  // logits_all: [tokens.size(), vocab] for every token (may be null). record (may be null): a state
  // of this sequence's tokens so far (PrefillState::for_model when it is empty) that the prefill's
  // K/V rows, first queries, last logits and the prompt scores it names (with the policy's own)
  // are appended to; hg::Error when the policy's prefill is not exact attention (exact_prefill()).
  // A dropping policy's prompt (streaming, h2o, keyformer; from position 0) is prefilled exactly
  // on a full-attention stage made for it, then placed as load_state places a state.
  // chunk_done (may be empty): called after each chunk of ubatch rows with the tokens done so far
  // (progress bars); returning false stops the prefill there and prefill returns false (the
  // sequence holds the chunks done; a dropping policy's prompt, nothing; `record` is then not a
  // state of them). The whole prompt in one call: a dropping policy's exact prefill is placed once
  // it ends, so a prompt given in pieces would be evicted after its first piece.
  bool prefill(int seq, std::span<const int32_t> tokens, float* logits_last, float* logits_all = nullptr,
               PrefillState* record = nullptr, const PrefillChunkDone& chunk_done = {});
  // Resets `seq` and makes it hold the state's first n_tokens tokens (-1: all) as its own prefill
  // of them would leave it (K/V where the policy puts them, the predictors fed the prompt's
  // queries), without running the model. logits_last [vocab] (may be null): the state's, when
  // n_tokens is all of it. hg::Error when the state is another model's, does not fit the context,
  // or the policy prefills otherwise (!exact_prefill()).
  void load_state(int seq, const PrefillState& state, float* logits_last, int n_tokens = -1);
  // True when the policy's prefill is exact attention over the whole prompt, the same for every
  // such policy: it can record a state and start from one (every preset; not the dropping ones,
  // streaming, h2o and keyformer, with --exact-prefill false).
  bool exact_prefill() const;
  // The prompt scores (attention/prompt_scores.h names) the policy keeps tokens by after its
  // prefill (h2o, keyformer): a state it starts from must hold them, a prefill it records adds them.
  std::vector<std::string> prompt_scores() const;
  // The model's fingerprint (model_fingerprint), computed once: what keys stored prefill states.
  const std::string& fingerprint() const;
  // Benchmarks (bench --depth-fill random): resets `seq` and fills it with n_tokens positions of
  // seeded random K/V in the cache's dtype and layout, as if prefilled, in seconds rather than a
  // quadratic prefill. Decode after it runs at that depth; its logits measure speed, not quality.
  void fill_random(int seq, int n_tokens, uint64_t seed);
  // One token for each listed sequence; logits: [seqs.size(), vocab].
  void decode(std::span<const int> seqs, std::span<const int32_t> tokens, float* logits);
  int position(int seq) const;  // tokens the sequence holds
  // Bytes of K and V the sequence holds now, on the device and on the host (every layer, the
  // cache's dtype): what a server reports, and what must return to zero when a sequence ends.
  struct KvBytes {
    int64_t device = 0, host = 0;
  };
  KvBytes kv_bytes(int seq) const;
  void reset(int seq);
  void reset_all();

  // The plan the next decode steps of `seq` run with (K, selection mode): the policy's
  // initial_plan until a scheduler sets another; reset(seq) restores the initial one.
  void set_step_plan(int seq, const StepPlan& plan);
  const StepPlan& step_plan(int seq) const;
  // Per-layer T_dev / T_host / T_tx of the latest decode step (null for `full`).
  const StepTiming* last_step_timing() const;
  // The feedback scheduler of hybrid policies (its trace, per sequence); null otherwise. Under
  // an adaptive --sched it sets the step plans after every decode step, over set_step_plan.
  const BatchScheduler* scheduler() const;

  RunStats& stats();
  // Per-layer attention-stage statistics of hybrid policies (empty for full).
  std::vector<LayerStats> layer_stats() const;
  std::string describe_attention() const;
  // What the device chose for the knobs the policy left to it (--host-threads auto, --query
  // auto) and why; "" when none was left (resolve_device_defaults, src/sched/cores.h).
  const std::string& device_defaults() const;
  // The attention stage (tests use it to inspect the token map).
  class LayerAttention& attention();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

DType parse_kv_dtype(const std::string& name);  // "f32" | "f16" | "bf16"

}  // namespace hg
