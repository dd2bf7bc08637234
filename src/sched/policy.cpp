// Policy presets and knob parsing. The presets follow DESIGN.md's table; `hybrid` starts from a
// fixed K (the feedback scheduler that tunes K is separate).
#include "hybridgen/policy.h"

#include <yaml-cpp/yaml.h>

#include <sstream>

#include "hybridgen/error.h"
#include "sched/knobs.h"

namespace hg {

const std::vector<PresetInfo>& preset_table() {
  static const std::vector<PresetInfo> table = {
      {"full", "all on device (oracle)", "every token's K and V on the device"},
      {"cpu-attn", "MoE-Lightning (attention on the CPU)", "all attention on the host CPU over host KV, exact"},
      {"hybrid", "HybridGen", "device window + sinks; host top-K of the next layer's logits from this layer's input"},
      {"hgca", "HGCA", "device window + exact host attention over the rest, log-sum-exp merge"},
      {"streaming", "StreamingLLM", "sinks + recent window on the device; older tokens dropped"},
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
  YAML::Node node = root["policy"] ? root["policy"] : root;
  if (!node.IsMap()) throw Error(path + ": expected a mapping of policy knobs");
  const KnobRegistry& knobs = knob_registry();
  for (const auto& kv : node) {
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

void validate_policy(const Policy& p, int ctx) {
  if (!p.hybrid) return;
  // Each knob's own range is checked by the knob registry when it is set; a Policy built in code
  // (tests, sweeps) is checked against the same ranges here.
  const KnobRegistry& knobs = knob_registry();
  for (const Knob* k : knobs.for_preset(p.name)) {
    Policy copy = p;
    k->parse(copy, k->describe(p));
  }
  if (ctx > 0 && p.window + p.n_sinks > ctx)
    throw Error("--window " + std::to_string(p.window) + " + --sinks " + std::to_string(p.n_sinks) +
                " is larger than the context of " + std::to_string(ctx) + " tokens (use --policy full)");
  if (p.window == 0 && p.keep_evicted == false)
    throw Error("a window of 0 that drops evicted tokens keeps nothing to attend to");
  if (!p.keep_evicted && p.K != 0 && p.select != Selection::All)
    throw Error("--k " + std::to_string(p.K) + " selects host tokens, but this policy drops evicted tokens (streaming)");
  if (p.window > 0 && p.window < p.evict_block)
    throw Error("--window " + std::to_string(p.window) + " is smaller than --evict-block " + std::to_string(p.evict_block));
  if (p.select == Selection::Pre && p.predictor == Predictor::Partial && p.partial_dims < 1)
    throw Error("--partial-dims must be >= 1");
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
    o << (p.offload ? ": every token on the host, streamed to the device layer by layer" : ": all tokens on the device");
  }
  const char* sep = ": ";
  for (const Knob* k : knobs) {
    o << sep << k->name << " " << k->describe(p);
    sep = ", ";
  }
  return o.str();
}

}  // namespace hg
