// A policy is a set of attention knobs (docs/architecture.md, "How a policy plugs in"): where tokens live, which host
// tokens take part, how host and device results merge, and where the query comes from. Presets
// name the paper's systems; every knob can be overridden on the command line or in YAML.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hg {

enum class Selection { All, Post, Pre };  // host tokens: all / Post-QKᵀ top-K / Pre-QKᵀ prediction
enum class MergeMode { Logits, Lse };     // ship logits + V rows, or a partial result + LSE
// Auto: the device chooses (resolve_device_defaults in src/sched/cores.h): exact where the host
// stage runs inline on the device's cores, refine where host workers overlap the device.
enum class QuerySource { Exact, Speculative, Refine, Auto };
// Feedback scheduler: fixed K and mode, both adapted, or one of them (the paper's comparisons).
enum class SchedMode { Fixed, Adaptive, AdaptiveK, AdaptiveSelect };
// Where a policy keeps the K and V rows of its tokens.
enum class KvHome {
  Device,  // every token on the device (`full`, the oracle)
  Host,    // every token on the host, each layer's rows streamed to the device (FlexGen's offload)
  Split,   // sinks + a recent window on the device, the older tokens on the host (or dropped)
};
// The names of these enums, as the knobs and the reports spell them, are in one table:
// src/policy/enum_names.h. Pre-QKᵀ predictors are named by their row in the predictor table
// (src/attention/selectors/predictors.cpp): "recent", "h2o", "partial", "infinigen", ...; the
// dropping policies' pruners by theirs (src/attention/selectors/pruners.cpp): "none", "h2o", ...

constexpr int kHostThreadsAuto = -1;  // --host-threads auto

struct Policy {
  std::string name = "full";
  KvHome kv = KvHome::Device;  // where K and V live
  int window = 1024;           // recent tokens on the device
  int n_sinks = 4;             // first tokens kept on the device
  bool keep_evicted = true;    // false: tokens leaving the window are dropped (pruning)
  Selection select = Selection::Post;
  int K = 256;                       // host tokens per kv-head that take part (-1: all)
  std::string predictor = "recent";  // the Pre-QKᵀ predictor (--predictor)
  int partial_dims = 16;             // Partial predictor: query dimensions used for approximate scores
  MergeMode merge = MergeMode::Logits;
  // The host's query (src/attention/host_query.h). refine: select with q̃, the next layer's query
  // predicted from this layer's input (the paper's overlap), then score the K selected tokens with
  // the true q. The paper's `speculative` ships q̃'s logits; on Qwen2.5-0.5B's RULER at 4K that
  // lost 16 points against refine's 0 at the same decode speed (docs/performance.md, "hybrid's
  // query: refine by default"). Auto (every split preset but those that name theirs): the device
  // chooses, with the host stage (resolve_device_defaults).
  QuerySource query = QuerySource::Auto;
  // Layers [0, exact_layers) use the exact query even when speculating: measured on SmolLM2,
  // cos(q̃, q) is 0.27 and 0.63 in layers 1 and 2 (the residual stream changes most there)
  // against 0.95-0.99 deeper down.
  int exact_layers = 3;
  // Host attention workers; 0: every core of the run (-t, else every CPU this process may use),
  // cpu-attn's default: its device waits for the host at every layer, so nothing overlaps the
  // host's work and the cores the device stage would keep would only idle (src/sched/cores.h).
  // kHostThreadsAuto (the other split presets): the device chooses (resolve_device_defaults):
  // inline on every core on the CPU device, one worker beside a CUDA device.
  int host_threads = kHostThreadsAuto;
  int evict_block = 16;  // tokens moved from the window to the host at once
  // Dropping policies (keep_evicted false): the prompt's prefill is exact attention over all of it
  // and the tokens are evicted once after it, as streaming's, H2O's and Keyformer's code does;
  // false: they are evicted as the prefill goes, chunk by chunk (memory never exceeds the budget).
  bool exact_prefill = true;
  // The dropping policies' pruner: which device tokens stay beyond the window (a row of the pruner
  // table, src/attention/selectors/pruners.cpp).
  std::string prune = "none";
  uint64_t seed = 0;  // keyformer: seed of the Gumbel noise (--seed of every command; generate's is also the sampler's)
  // The feedback scheduler's mode (src/sched/feedback.h); the hybrid preset: Adaptive.
  SchedMode sched = SchedMode::Fixed;

  // The parts' own knobs, one group each, each knob registered in the knob registry by its part
  // (src/policy/knobs.h) with the policies it applies to.
  struct HeavyHitters {  // h2o / keyformer (src/attention/selectors/pruners.cpp)
    int heavy = 260;        // heavy hitters per kv-head kept on the device beside the window
    float tau_init = 1.0f;  // keyformer: Gumbel-softmax temperature at the first generated token
    float tau_end = 2.0f;   // keyformer: ... and at the last position of the context
  } heavy_hitters;
  struct Infinigen {  // src/attention/selectors/infinigen.cpp
    float partial_ratio = 0.2f;  // share of each head's skewed channels used for speculation
    float alpha = 4.0f;          // fetch the tokens whose partial score is within alpha of the max
    int max_kv = 400;            // ... but at most this many per kv-head
  } infinigen;
  struct Feedback {  // the feedback scheduler's rules (src/sched/feedback.h, src/sched/sched_knobs.cpp)
    int k_min = -1;  // accuracy floor of K (-1: auto, the model's K_min profile, else 64)
    int k_max = 1024;
    float alpha = 0.25f;        // EWMA weight of the newest step's timings
    float margin = 0.1f;        // K grows while T_host + T_tx <= (1 - margin) T_dev
    float grow = 0.5f;          // the most K grows in one step (0.5: by half)
    int pre_after = 3;          // host-bound steps at k_min before Pre-QKᵀ
    int hysteresis = 8;         // fitting steps before back to Post-QKᵀ
    float post_margin = 0.2f;   // ... fitting within (1 - post_margin) T_dev
    int probe = 32;             // Pre steps between Post probes of the key scan (0: none)
    float shared_loss = 0.1f;   // CPU device: the most of its time the host workers may cost it
    // The floor follows the context: device tokens + K >= k_min_share of it (0.125 held full's
    // RULER score at 4K-32K on Qwen2.5-0.5B); k-max rises to k_max_share of it the same way.
    float k_min_share = 0.125f;
    float k_max_share = 0.25f;
    float min_recall = 0.8f;    // Pre-QKᵀ only while its predictor finds this share of Post's attention
    float min_pre_saving = 0.1f;  // Pre-QKᵀ only while it costs this share less than Post at the floor
  } feedback;

  // Sinks + window on the device, the rest on the host or dropped: the attention stage of
  // src/attention/hybrid_attention.h and the feedback scheduler.
  bool splits_kv() const { return kv == KvHome::Split; }
  // Whether every host token takes part (--select all, --k -1): nothing to select, nor to tune.
  bool takes_every_host_token() const { return select == Selection::All || K == -1; }
  // Whether the feedback scheduler switches between Post- and Pre-QKᵀ (adaptive, adaptive-select).
  bool sched_switches_mode() const { return sched == SchedMode::Adaptive || sched == SchedMode::AdaptiveSelect; }
  // Host attention workers beside the device (the split policies' --host-threads; 0: every core
  // of the run, resolved by resolve_host_threads in src/sched/cores.h).
  int host_workers() const { return splits_kv() ? host_threads : 0; }
};

// What the attention stage does at one decode step for one sequence: the policy's starting
// point, changed from step to step by the feedback scheduler (Engine::set_step_plan). The
// attention stage reads K and the selection mode from here, never from the Policy.
struct StepPlan {
  int K = 256;                         // host tokens per kv-head that take part (-1: all)
  Selection select = Selection::Post;  // Post-QKᵀ top-K, Pre-QKᵀ prediction, or all host tokens
  std::string predictor = "recent";    // the Pre-QKᵀ predictor
  // A Post step that also runs the predictor and measures how much of the attention Post's top-K
  // gets falls on the predictor's tokens (LayerAttention::last_recall): the scheduler's recall rule.
  bool measure_recall = false;
};
// The plan a policy starts every request with.
StepPlan initial_plan(const Policy& p);

// A preset and the system of the paper it stands for (bench --help, README): one row of the
// preset table (src/policy/presets.cpp).
struct PresetInfo {
  std::string name;
  std::string system;
  std::string summary;               // what it keeps where, one line
  void (*apply)(Policy&) = nullptr;  // the preset's knob values over Policy's defaults
};
const std::vector<PresetInfo>& preset_table();

Policy policy_preset(const std::string& name);  // hg::Error listing the presets for an unknown name
std::vector<std::string> policy_presets();
// Applies "key: value" overrides from a YAML mapping (a file's `policy:` section or the whole file);
// keys are the knob registry's names (src/policy/knobs.h), `preset: NAME` starts over from a preset.
void apply_policy_yaml(Policy& p, const std::string& yaml_path);
// Checks the knobs against each other and a context length; hg::Error on contradictions.
void validate_policy(const Policy& p, int ctx);
// A hybrid policy whose device window and sinks hold `ctx` tokens never moves a token to the host:
// it is full attention (not an error: the engine runs it as `full` and says so once).
bool window_covers_context(const Policy& p, int ctx);
// "NAME (SYSTEM): knob value, knob value, ..." for every knob that applies to the preset; each
// value text is what the knob's parser accepts.
std::string describe_policy(const Policy& p);

}  // namespace hg
