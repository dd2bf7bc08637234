// The registry of every part's knobs, and what reads it: a policy's YAML file, its checks and its
// one-line description (the presets: src/policy/presets.cpp).
#include "attention/policy_knobs.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <sstream>

#include "attention/selectors/infinigen.h"
#include "attention/selectors/predictors.h"
#include "attention/selectors/pruners.h"
#include "hybridgen/error.h"
#include "sched/sched_knobs.h"

namespace hg {

const KnobRegistry& knob_registry() {
  // Built on first use and never changed afterwards: configuration, not mutable state. The order
  // is the order of --help and of describe_policy.
  static const KnobRegistry registry = [] {
    KnobRegistry r;
    register_policy_knobs(r, predictor_names);
    register_pruner_knobs(r);
    register_infinigen_knobs(r);
    register_sched_knobs(r);
    // Other parts' knobs: one register_X_knobs(r) line each.
    return r;
  }();
  return registry;
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

void validate_policy(const Policy& p, int /*ctx*/) {
  if (!p.splits_kv()) return;
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
}

std::string describe_policy(const Policy& p) {
  std::string system;
  for (const auto& info : preset_table())
    if (info.name == p.name) system = info.system;
  std::ostringstream o;
  o << p.name;
  if (!system.empty()) o << " (" << system << ")";
  const auto knobs = knob_registry().for_preset(p.name);
  if (!p.splits_kv()) {
    o << (p.kv == KvHome::Host ? ": every token on the host, streamed to the device layer by layer"
                    : ": all tokens on the device");
  }
  const char* sep = ": ";
  for (const Knob* k : knobs) {
    o << sep << k->name << " " << k->describe(p);
    sep = ", ";
  }
  if (find_pruner(p.prune).seeded) o << sep << "seed " << p.seed;  // --seed: the Gumbel noise
  return o.str();
}

}  // namespace hg
