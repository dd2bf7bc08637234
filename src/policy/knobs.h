// The knob registry: one table of policy knobs {name, help, range, presets, parse, describe}
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
// listed in knob_registry() (knobs.cpp), with the presets they apply to: a knob given for a
// preset it does not apply to is an error (`--heavy` with `--policy hybrid`).
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

struct Knob {
  std::string name;                  // CLI long name and YAML key: "window", "partial-dims"
  std::string help;                  // one line for --help
  std::string range;                 // accepted values, for help and errors: ">= 1", "all|post|pre"
  std::string type = "VALUE";        // the value's kind in --help: INT, FLOAT, BOOL, NAME
  PresetList presets;                // presets it applies to; empty: every preset but `full`
  std::function<void(Policy&, const std::string&)> parse;  // sets the knob; hg::Error on a bad value
  std::function<std::string(const Policy&)> describe;      // the value as parse() accepts it

  bool applies_to(const std::string& preset) const;
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

// The registry of every module's knobs (built once, immutable afterwards).
const KnobRegistry& knob_registry();

// The policy knobs of DESIGN.md (window, sinks, k, select, ...): knobs.cpp.
void register_policy_knobs(KnobRegistry& r);
// The feedback scheduler's knobs (--sched, --k-min, --k-max, --sched-*): sched_knobs.cpp.
void register_sched_knobs(KnobRegistry& r);
// Checks between the scheduler's knobs (--k-min <= --k-max, ...); called by validate_policy.
void validate_sched_knobs(const Policy& p);
// The presets that split the KV cache between a device window and the host (hybrid, hgca,
// cpu-attn, streaming, ...): the presets the window/selection knobs apply to.
PresetList split_kv_presets();

// ---- helpers to declare knobs of Policy fields ----
// hg::Error("--flag: 'value' is not RANGE").
[[noreturn]] void throw_bad_knob(const std::string& flag, const std::string& value, const std::string& range);

// An integer in [min, max]; `special` documents values outside that range that are allowed too
// (e.g. {-1, "all host tokens"} for --k).
Knob int_knob(std::string name, std::string help, int Policy::*field, int min, int max, PresetList presets = {},
              std::vector<std::pair<int, std::string>> special = {});
Knob float_knob(std::string name, std::string help, float Policy::*field, float min, float max,
                PresetList presets = {});
Knob bool_knob(std::string name, std::string help, bool Policy::*field, PresetList presets = {});

// One of an enum's names (policy/enum_names.h).
template <typename E>
Knob enum_knob(std::string name, std::string help, E Policy::*field, PresetList presets = {}) {
  std::string range;
  for (const auto& v : enum_names<E>()) range += (range.empty() ? "" : "|") + std::string(v.name);
  Knob k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.range = range;
  k.type = "NAME";
  k.presets = std::move(presets);
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
Knob name_knob(std::string name, std::string help, std::string Policy::*field, std::vector<std::string> (*names)(),
               PresetList presets = {});

}  // namespace hg
