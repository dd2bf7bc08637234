// Policy presets and knob parsing. The presets follow DESIGN.md's table; `hybrid` starts from a
// fixed K (the feedback scheduler that tunes K is separate).
#include "hybridgen/policy.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <sstream>

#include "attention/selectors/infinigen.h"
#include "hybridgen/error.h"
#include "sched/knobs.h"
#include "util/thread_pool.h"

namespace hg {

const std::vector<PresetInfo>& preset_table() {
  static const std::vector<PresetInfo> table = {
      {"full", "all on device (oracle)", "every token's K and V on the device"},
      {"offload", "FlexGen (attention on the device)",
       "every token on the host; each layer's K and V copied host->device, the next layer's copy overlapping this "
       "layer; exact"},
      {"cpu-attn", "MoE-Lightning (attention on the CPU)", "all attention on the host CPU over host KV, exact"},
      {"hybrid", "HybridGen", "device window + sinks; host top-K of the next layer's logits from this layer's input"},
      {"hgca", "HGCA", "device window + exact host attention over the rest, log-sum-exp merge"},
      {"streaming", "StreamingLLM", "sinks + recent window on the device; older tokens dropped"},
      {"h2o", "H2O (heavy hitters, Post-QKᵀ)",
       "per kv-head --heavy tokens of largest accumulated attention + --window recent on the device; rest dropped"},
      {"keyformer", "Keyformer (Post-QKᵀ)",
       "as h2o, scored by accumulated Gumbel-softmax, τ from --tau-init to --tau-end over the generated tokens"},
      {"infinigen", "InfiniGen (Pre-QKᵀ, speculative fetch)",
       "device window; per kv-head the host tokens within --alpha of the max skewed partial score (<= --max-kv), "
       "attended with the true query"},
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
  Policy p;
  p.name = name;
  if (name == "full") return p;
  if (name == "offload") {
    p.offload = true;
    return p;
  }
  p.hybrid = true;
  if (name == "hybrid") {  // window 1024 + 4 sinks, Post-QKᵀ, speculative, logits merge, the feedback scheduler
    p.sched = SchedMode::Adaptive;
    return p;
  }
  if (name == "hgca") {
    p.merge = MergeMode::Lse;
    p.query = QuerySource::Exact;
    return p;
  }
  if (name == "cpu-attn") {
    // MoE-Lightning: every token's attention on the host CPU, exact.
    p.window = 0;
    p.n_sinks = 0;
    p.select = Selection::All;
    p.K = -1;
    p.merge = MergeMode::Lse;
    p.query = QuerySource::Exact;
    return p;
  }
  if (name == "streaming") {
    p.keep_evicted = false;
    p.select = Selection::All;
    p.K = 0;
    p.query = QuerySource::Exact;
    return p;
  }
  if (name == "h2o" || name == "keyformer") {
    // The device keeps window 1024 + heavy 260 = 1284 tokens per kv-head, what hybrid's defaults
    // attend (4 sinks + 1024 + K 256); no sinks (H2O's heavy hitters find them); the rest dropped.
    p.n_sinks = 0;
    p.keep_evicted = false;
    p.select = Selection::All;
    p.K = 0;
    p.query = QuerySource::Exact;
    return p;
  }
  if (name == "infinigen") {
    // Window 1024 + 4 sinks on the device, every other token on the host; per step up to
    // --max-kv 400 host tokens per kv-head chosen from layer l-1's input for layer l >= 2 (layers
    // 0 and 1 take every host token), their K and V rows fetched to the device, which attends
    // over them with the true query (the speculative query only selects).
    p.select = Selection::Pre;
    p.predictor = Predictor::Infinigen;
    p.K = p.max_kv;
    p.query = QuerySource::Speculative;
    p.exact_layers = InfinigenSelector::kExactLayers;
    return p;
  }
  std::string names;
  for (const auto& n : policy_presets()) names += (names.empty() ? "" : ", ") + n;
  throw Error("--policy: '" + name + "' is not a policy (presets: " + names + ")");
}

void apply_policy_yaml(Policy& p, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw Error(path + ": " + e.what());
  }
  // Found by fuzz_policy_yaml: a scalar document ("policy" alone) made root["policy"] throw
  // YAML::BadSubscript past every handler (abort); so did a non-scalar key.
  if (!root.IsMap()) throw Error(path + ": expected a mapping of policy knobs");
  YAML::Node node = root["policy"] ? root["policy"] : root;
  if (!node.IsMap()) throw Error(path + ": expected a mapping of policy knobs");
  const KnobRegistry& knobs = knob_registry();
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      throw Error(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": expected a knob name as the key");
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    const std::string where = path + ":" + std::to_string(v.Mark().line + 1);
    if (!v.IsScalar()) throw Error(where + ": knob '" + key + "': expected a single value");
    if (key == "preset" || key == "name")
      p = policy_preset(v.as<std::string>());
    else
      knobs.set(p, key, v.as<std::string>(), where);
  }
}

bool window_covers_context(const Policy& p, int ctx) {
  return p.hybrid && ctx > 0 && static_cast<int64_t>(p.window) + p.n_sinks >= ctx;
}

void validate_policy(const Policy& p, int /*ctx*/) {
  if (!p.hybrid) return;
  // Each knob's own range is checked by the knob registry when it is set; a Policy built in code
  // (tests, sweeps) is checked against the same ranges here.
  const KnobRegistry& knobs = knob_registry();
  for (const Knob* k : knobs.for_preset(p.name)) {
    Policy copy = p;
    k->parse(copy, k->describe(p));
  }
  if (p.window == 0 && p.keep_evicted == false)
    throw Error("a window of 0 that drops evicted tokens keeps nothing to attend to");
  if (!p.keep_evicted && p.K != 0 && p.select != Selection::All)
    throw Error("--k " + std::to_string(p.K) +
                " selects host tokens, but this policy drops evicted tokens (streaming)");
  if (p.window > 0 && p.window < p.evict_block)
    throw Error("--window " + std::to_string(p.window) + " is smaller than --evict-block " +
                std::to_string(p.evict_block));
  validate_sched_knobs(p);
  if (p.query == QuerySource::Refine && p.select == Selection::All)
    throw Error("--query refine needs a selection (--select post|pre): with all host tokens use --query exact");
}

std::string describe_policy(const Policy& p) {
  std::string system;
  for (const auto& info : preset_table())
    if (info.name == p.name) system = info.system;
  std::ostringstream o;
  o << p.name;
  if (!system.empty()) o << " (" << system << ")";
  const auto knobs = knob_registry().for_preset(p.name);
  if (!p.hybrid) {
    o << (p.offload ? ": every token on the host, streamed to the device layer by layer"
                    : ": all tokens on the device");
  }
  const char* sep = ": ";
  for (const Knob* k : knobs) {
    o << sep << k->name << " " << k->describe(p);
    sep = ", ";
  }
  if (p.name == "keyformer") o << sep << "seed " << p.seed;  // --seed: the Gumbel noise
  return o.str();
}

}  // namespace hg
