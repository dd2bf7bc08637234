// The preset table: one row per preset (name, the paper's system, what it keeps where, and its
// knob values over Policy's defaults). policy_preset, policy_presets, --help and the README's
// table read it; a new preset is one row here (its parts' knobs live with the parts).
#include <string>
#include <vector>

#include "hybridgen/error.h"
#include "hybridgen/policy.h"

namespace hg {

namespace {

// Sinks + window on the device, the rest on the host: what every split preset starts from.
void split(Policy& p) { p.kv = KvHome::Split; }

// Tokens that leave the window are dropped; the device attends only to what it keeps.
void dropping(Policy& p) {
  split(p);
  p.keep_evicted = false;
  p.select = Selection::All;
  p.K = 0;
  p.query = QuerySource::Exact;
}

// H2O and Keyformer: the device keeps window 1024 + heavy 260 = 1284 tokens per kv-head, what
// hybrid's defaults attend (4 sinks + 1024 + K 256); no sinks (the heavy hitters find them).
void heavy_hitters(Policy& p, const char* prune) {
  dropping(p);
  p.n_sinks = 0;
  p.prune = prune;
}

}  // namespace

const std::vector<PresetInfo>& preset_table() {
  static const std::vector<PresetInfo> table = {
      {"full", "all on device (oracle)", "every token's K and V on the device", [](Policy&) {}},
      {"offload", "FlexGen (attention on the device)",
       "every token on the host; each layer's K and V copied host->device, the next layer's copy overlapping this "
       "layer; exact",
       [](Policy& p) { p.kv = KvHome::Host; }},
      {"cpu-attn", "MoE-Lightning (attention on the CPU)", "all attention on the host CPU over host KV, exact",
       [](Policy& p) {
         split(p);
         p.window = 0;
         p.n_sinks = 0;
         p.select = Selection::All;
         p.K = -1;
         p.merge = MergeMode::Lse;
         p.query = QuerySource::Exact;
         p.host_threads = 0;  // every core: the device waits for the host at every layer
       }},
      {"hybrid", "HybridGen",
       "device window + sinks; the host's top-K tokens per kv-head, their logits and V rows shipped (CPU device: "
       "inline with the exact query; GPU: from the next layer's predicted query, rescored with the true one); the "
       "feedback scheduler tunes K and Post/Pre-QK",
       [](Policy& p) {  // window 1024 + 4 sinks, Post-QKᵀ, logits merge, the query and the host
                        // stage the device's (auto), the feedback scheduler; where it switches to
                        // Pre-QKᵀ (while its recall allows), the partial predictor (query-aware:
                        // `recent` loses the needle of long-context tasks; `q4` finds more of
                        // Post's tokens but its scan is slower on the CPU today, performance.md)
         split(p);
         p.sched = SchedMode::Adaptive;
         p.predictor = "partial";
       }},
      {"hgca", "HGCA", "device window + exact host attention over the rest, log-sum-exp merge",
       [](Policy& p) {
         split(p);
         p.merge = MergeMode::Lse;
         p.query = QuerySource::Exact;
       }},
      {"streaming", "StreamingLLM", "sinks + recent window on the device; older tokens dropped", dropping},
      {"h2o", "H2O (heavy hitters, Post-QKᵀ)",
       "per kv-head --heavy tokens of largest accumulated attention + --window recent on the device; rest dropped",
       [](Policy& p) { heavy_hitters(p, "h2o"); }},
      {"keyformer", "Keyformer (Post-QKᵀ)",
       "as h2o, scored by accumulated Gumbel-softmax, τ from --tau-init to --tau-end over the generated tokens",
       [](Policy& p) { heavy_hitters(p, "keyformer"); }},
      {"infinigen", "InfiniGen (Pre-QKᵀ, speculative fetch)",
       "device window; per kv-head the host tokens within --alpha of the max skewed partial score (<= --max-kv), "
       "attended with the true query",
       [](Policy& p) {
         // Window 1024 + 4 sinks on the device, every other token on the host; per step up to
         // --max-kv 400 host tokens per kv-head chosen from layer l-1's input for layer l >= 2
         // (layers 0 and 1 take every host token), their K and V rows fetched to the device, which
         // attends over them with the true query (the speculative query only selects).
         split(p);
         p.select = Selection::Pre;
         p.predictor = "infinigen";
         p.K = p.infinigen.max_kv;
         p.query = QuerySource::Speculative;
         p.exact_layers = 2;  // InfinigenSelector::kExactLayers: layers 0 and 1 take every host token
       }},
      {"quest", "Quest (query-aware pages, Pre-QKᵀ)",
       "device window + sinks; per kv-head the host pages of 16 tokens of largest logit bound Σ max(q·min, q·max), "
       "--k tokens, their K and V attended with the true query",
       [](Policy& p) {
         // Window 1024 + 4 sinks + 256 host tokens (16 pages) per kv-head: what hybrid's defaults
         // attend. The pages are ranked with the layer's own query, as Quest does (--query exact).
         split(p);
         p.select = Selection::Pre;
         p.predictor = "quest";
         p.query = QuerySource::Exact;
       }},
  };
  return table;
}

std::vector<std::string> policy_presets() {
  std::vector<std::string> names;
  for (const auto& p : preset_table()) names.push_back(p.name);
  return names;
}

StepPlan initial_plan(const Policy& p) {
  StepPlan plan;
  plan.K = p.K;
  plan.select = p.select;
  plan.predictor = p.predictor;
  return plan;
}

Policy policy_preset(const std::string& name) {
  for (const PresetInfo& row : preset_table()) {
    if (row.name != name) continue;
    Policy p;
    p.name = name;
    row.apply(p);
    return p;
  }
  std::string names;
  for (const auto& n : policy_presets()) names += (names.empty() ? "" : ", ") + n;
  throw Error("--policy: '" + name + "' is not a policy (presets: " + names + ")");
}

bool window_covers_context(const Policy& p, int ctx) {
  return p.splits_kv() && ctx > 0 && static_cast<int64_t>(p.window) + p.n_sinks >= ctx;
}

}  // namespace hg
