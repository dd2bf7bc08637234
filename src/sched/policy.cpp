// Policy presets and knob parsing. The presets follow DESIGN.md's table; `hybrid` starts from a
// fixed K (the feedback scheduler that tunes K is separate).
#include "hybridgen/policy.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <sstream>

#include "hybridgen/error.h"
#include "util/thread_pool.h"

namespace hg {

namespace {
template <typename T>
T parse_enum(const std::string& flag, const std::string& s, std::initializer_list<std::pair<const char*, T>> values) {
  std::string names;
  for (const auto& [name, v] : values) {
    if (s == name) return v;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  throw Error(flag + ": '" + s + "' is not one of " + names);
}
}  // namespace

Selection parse_selection(const std::string& s) {
  return parse_enum<Selection>("--select", s, {{"all", Selection::All}, {"post", Selection::Post}, {"pre", Selection::Pre}});
}
Predictor parse_predictor(const std::string& s) {
  return parse_enum<Predictor>("--predictor", s,
                               {{"recent", Predictor::Recent}, {"h2o", Predictor::H2O}, {"partial", Predictor::Partial}});
}
MergeMode parse_merge(const std::string& s) {
  return parse_enum<MergeMode>("--merge", s, {{"logits", MergeMode::Logits}, {"lse", MergeMode::Lse}});
}
QuerySource parse_query(const std::string& s) {
  return parse_enum<QuerySource>("--query", s,
                                 {{"exact", QuerySource::Exact}, {"speculative", QuerySource::Speculative},
                                  {"refine", QuerySource::Refine}});
}

std::vector<std::string> policy_presets() { return {"full", "hybrid", "hgca", "cpu-attn", "streaming"}; }

Policy policy_preset(const std::string& name) {
  Policy p;
  p.name = name;
  if (name == "full") return p;
  p.hybrid = true;
  if (name == "hybrid") return p;  // window 1024 + 4 sinks, Post-QKᵀ top-256, speculative, logits merge
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
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    try {
      if (key == "preset" || key == "name") {
        const Policy base = policy_preset(v.as<std::string>());
        p = base;
      } else if (key == "window") p.window = v.as<int>();
      else if (key == "sinks") p.n_sinks = v.as<int>();
      else if (key == "k") p.K = v.as<int>();
      else if (key == "select") p.select = parse_selection(v.as<std::string>());
      else if (key == "predictor") p.predictor = parse_predictor(v.as<std::string>());
      else if (key == "partial_dims") p.partial_dims = v.as<int>();
      else if (key == "merge") p.merge = parse_merge(v.as<std::string>());
      else if (key == "query") p.query = parse_query(v.as<std::string>());
      else if (key == "host_threads") p.host_threads = v.as<int>();
      else if (key == "keep_evicted") p.keep_evicted = v.as<bool>();
      else if (key == "evict_block") p.evict_block = v.as<int>();
      else if (key == "exact_layers") p.exact_layers = v.as<int>();
      else throw Error(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown policy knob '" + key + "'");
    } catch (const YAML::Exception& e) {
      throw Error(path + ":" + std::to_string(v.Mark().line + 1) + ": knob '" + key + "': " + e.what());
    }
  }
}

bool window_covers_context(const Policy& p, int ctx) {
  return p.hybrid && ctx > 0 && static_cast<int64_t>(p.window) + p.n_sinks >= ctx;
}

void validate_policy(const Policy& p, int /*ctx*/) {
  if (!p.hybrid) return;
  if (p.window < 0) throw Error("--window must be >= 0, got " + std::to_string(p.window));
  if (p.n_sinks < 0) throw Error("--sinks must be >= 0, got " + std::to_string(p.n_sinks));
  if (p.K < -1) throw Error("--k must be >= 0 (or -1 for all host tokens), got " + std::to_string(p.K));
  if (p.host_threads < 1 || p.host_threads > hardware_threads())
    throw Error("--host-threads must be between 1 and " + std::to_string(hardware_threads()) +
                " (the CPUs of this machine), got " + std::to_string(p.host_threads));
  if (p.evict_block < 1) throw Error("--evict-block must be >= 1, got " + std::to_string(p.evict_block));
  if (p.partial_dims < 1) throw Error("--partial-dims must be >= 1, got " + std::to_string(p.partial_dims));
  if (p.exact_layers < 0) throw Error("--exact-layers must be >= 0, got " + std::to_string(p.exact_layers));
  if (p.window == 0 && p.keep_evicted == false)
    throw Error("a window of 0 that drops evicted tokens keeps nothing to attend to");
  if (!p.keep_evicted && p.K != 0 && p.select != Selection::All)
    throw Error("--k " + std::to_string(p.K) + " selects host tokens, but this policy drops evicted tokens (streaming)");
  if (p.window > 0 && p.window < p.evict_block)
    throw Error("--window " + std::to_string(p.window) + " is smaller than --evict-block " + std::to_string(p.evict_block));
  if (p.query == QuerySource::Refine && p.select == Selection::All)
    throw Error("--query refine needs a selection (--select post|pre): with all host tokens use --query exact");
}

std::string describe_policy(const Policy& p) {
  if (!p.hybrid) return p.name + " (all tokens on the device)";
  static const char* sel[] = {"all", "post", "pre"};
  static const char* pred[] = {"recent", "h2o", "partial"};
  static const char* mer[] = {"logits", "lse"};
  static const char* qry[] = {"exact", "speculative", "refine"};
  std::ostringstream o;
  o << p.name << ": window " << p.window << " + " << p.n_sinks << " sinks, "
    << (p.keep_evicted ? "evicted tokens on the host" : "evicted tokens dropped") << ", select "
    << sel[static_cast<int>(p.select)];
  if (p.select == Selection::Pre) o << " (" << pred[static_cast<int>(p.predictor)] << ")";
  o << ", K " << (p.K < 0 ? std::string("all") : std::to_string(p.K)) << ", merge " << mer[static_cast<int>(p.merge)]
    << ", query " << qry[static_cast<int>(p.query)];
  if (p.query != QuerySource::Exact) o << " (exact in layers < " << p.exact_layers << ")";
  o << ", " << p.host_threads << " host threads";
  return o.str();
}

}  // namespace hg
