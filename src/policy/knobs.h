// The knob registry: one table of policy knobs {name, help, range, scope, parse, describe}
// that every front end reads, so a knob is declared once:
//   - the CLI options (`--NAME VALUE`, add_policy_options in src/cli/common.cpp),
//   - the YAML policy file (`NAME: VALUE`; today's underscore spellings are accepted too),
//   - describe_policy (`NAME VALUE` for each knob that applies to the preset),
//   - the preset help text (which knobs each preset takes),
//   - sweep files (their keys are these names).
// A knob's name is its CLI long name without dashes in front (`partial-dims`). parse() checks the
// value's type and range and throws hg::Error naming `--NAME`; describe() prints the value so
// that parse(describe(p)) leaves p unchanged. Checks that relate several knobs (window + sinks
// against the context, ...) stay in validate_policy.
//
// Other modules register their knobs in a function `void register_X_knobs(KnobRegistry&)`
// listed in knob_registry() (attention/policy_knobs.cpp, the layer that sees every part), each
// saying which policies it applies to by what the policy does (splits its KV cache, drops evicted
// tokens, prunes with heavy hitters, selects by Post-QKᵀ top-K, ...), never by preset names: a
// knob given for a policy it does not apply to is an error (`--heavy` with `--policy hybrid`).
#pragma once
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "hybridgen/policy.h"
#include "policy/enum_names.h"

namespace hg {

using PresetList = std::vector<std::string>;

// Which policies a knob applies to, by what the policy does, asked of the policy its preset
// starts from (so that a knob's scope does not depend on the other knobs given with it).
using KnobScope = bool (*)(const Policy&);
// The scopes the policy's own knobs use.
inline bool splits_kv(const Policy& p) { return p.splits_kv(); }
inline bool drops_evicted(const Policy& p) { return p.splits_kv() && !p.keep_evicted; }

struct Knob {
  std::string name;            // CLI long name and YAML key: "window", "partial-dims"
  std::string help;            // one line for --help
  std::string range;           // accepted values, for help and errors: ">= 1", "all|post|pre"
  std::string type = "VALUE";  // the value's kind in --help: INT, FLOAT, BOOL, NAME
  KnobScope scope = nullptr;   // the policies it applies to; null: every policy that is not `full`
  std::function<void(Policy&, const std::string&)> parse;  // sets the knob; hg::Error on a bad value
  std::function<std::string(const Policy&)> describe;      // the value as parse() accepts it

  // Whether it applies to the preset of that name (false for a name that is not a preset).
  bool applies_to(const std::string& preset) const;
  // The presets it applies to, in the preset table's order (--help, errors).
  PresetList presets() const;
  std::string flag() const { return "--" + name; }
};

class KnobRegistry {
 public:
  // Adds a knob; hg::Error when the name is taken.
  void add(Knob knob);
  const std::vector<Knob>& knobs() const { return knobs_; }
  // The knob of a CLI name or YAML key ("partial-dims" or "partial_dims"); nullptr if none.
  const Knob* find(const std::string& name) const;
  // Sets knob `name` on p: hg::Error when the knob does not exist, does not apply to p.name, or
  // the value is bad. `where` prefixes the message ("--heavy", "policy.yaml:3").
  void set(Policy& p, const std::string& name, const std::string& value, const std::string& where) const;
  // Knobs that apply to a preset, in registry order.
  std::vector<const Knob*> for_preset(const std::string& preset) const;

 private:
  std::vector<Knob> knobs_;
};

// The policy's own knobs (window, sinks, k, select, predictor, ...): knobs.cpp; predictor_names:
// the predictor table's names (attention/selectors/predictors.h), read when parsing. The other
// parts register theirs (the scheduler's in src/sched/sched_knobs.cpp, the selectors' beside
// them), and the registry of them all is attention/policy_knobs.h's knob_registry().
void register_policy_knobs(KnobRegistry& r, std::vector<std::string> (*predictor_names)());

// ---- helpers to declare knobs of Policy fields ----
// A field of Policy a knob sets: a member (`&Policy::window`) or a member of one of its parts'
// groups (`{&Policy::infinigen, &Policy::Infinigen::alpha}`).
template <typename T>
struct PolicyField {
  std::function<T&(Policy&)> ref;
  PolicyField(T Policy::*f) : ref([f](Policy& p) -> T& { return p.*f; }) {}  // NOLINT: implicit
  template <typename G>
  PolicyField(G Policy::*group, T G::*f) : ref([group, f](Policy& p) -> T& { return (p.*group).*f; }) {}
  T& operator()(Policy& p) const { return ref(p); }
  T operator()(const Policy& p) const { return ref(const_cast<Policy&>(p)); }  // a read
};

// hg::Error("--flag: 'value' is not RANGE").
[[noreturn]] void throw_bad_knob(const std::string& flag, const std::string& value, const std::string& range);

// An integer in [min, max]; `special` documents values outside that range that are allowed too
// (e.g. {-1, "all host tokens"} for --k).
Knob int_knob(std::string name, std::string help, PolicyField<int> field, int min, int max, KnobScope scope = nullptr,
              std::vector<std::pair<int, std::string>> special = {});
// int_knob whose word `auto` stands for -1 in the field (the value is chosen later: --k-min by
// the model's profile, --host-threads by the device); describe() prints `auto` back.
Knob auto_int_knob(std::string name, std::string help, PolicyField<int> field, int min, int max, KnobScope scope = nullptr,
                   std::vector<std::pair<int, std::string>> special = {});
Knob float_knob(std::string name, std::string help, PolicyField<float> field, float min, float max,
                KnobScope scope = nullptr);
Knob bool_knob(std::string name, std::string help, PolicyField<bool> field, KnobScope scope = nullptr);

// One of an enum's names (policy/enum_names.h).
template <typename E>
Knob enum_knob(std::string name, std::string help, E Policy::*field, KnobScope scope = nullptr) {
  std::string range;
  for (const auto& v : enum_names<E>()) range += (range.empty() ? "" : "|") + std::string(v.name);
  Knob k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.range = range;
  k.type = "NAME";
  k.scope = scope;
  k.parse = [flag = k.flag(), field, range](Policy& p, const std::string& s) {
    for (const auto& v : enum_names<E>())
      if (v.name == s) {
        p.*field = v.value;
        return;
      }
    throw_bad_knob(flag, s, range);
  };
  k.describe = [field](const Policy& p) { return std::string(enum_name(p.*field)); };
  return k;
}

// One of the names `names()` lists (read when parsing, so a table filled later is seen).
Knob name_knob(std::string name, std::string help, PolicyField<std::string> field, std::vector<std::string> (*names)(),
               KnobScope scope = nullptr);

}  // namespace hg
