#include "policy/knobs.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "hybridgen/error.h"
#include "util/strings.h"
#include "util/thread_pool.h"

namespace hg {

namespace {

// YAML files of earlier versions spell the knobs with underscores (partial_dims).
std::string dashed(std::string s) {
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

std::string int_range(int min, int max, const std::vector<std::pair<int, std::string>>& special) {
  std::string r = max == INT_MAX ? ">= " + std::to_string(min) : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  for (const auto& [v, what] : special) r += " (or " + std::to_string(v) + " for " + what + ")";
  return r;
}

std::string float_text(float v) {
  std::ostringstream o;
  o.precision(9);  // enough digits that parsing the text gives the same float back
  o << v;
  return o.str();
}

}  // namespace

void throw_bad_knob(const std::string& flag, const std::string& value, const std::string& range) {
  throw Error(flag + ": '" + value + "' is not " + range);
}

bool Knob::applies_to(const std::string& preset) const {
  for (const PresetInfo& row : preset_table()) {
    if (row.name != preset) continue;
    Policy p;
    row.apply(p);
    return scope ? scope(p) : preset != "full";
  }
  return false;
}

PresetList Knob::presets() const {
  PresetList names;
  for (const PresetInfo& row : preset_table())
    if (applies_to(row.name)) names.push_back(row.name);
  return names;
}

void KnobRegistry::add(Knob knob) {
  if (find(knob.name)) throw Error("knob registry: knob '" + knob.name + "' is registered twice");
  if (!knob.parse || !knob.describe) throw Error("knob registry: knob '" + knob.name + "' lacks parse or describe");
  knobs_.push_back(std::move(knob));
}

const Knob* KnobRegistry::find(const std::string& name) const {
  const std::string n = dashed(name);
  for (const auto& k : knobs_)
    if (k.name == n) return &k;
  return nullptr;
}

void KnobRegistry::set(Policy& p, const std::string& name, const std::string& value, const std::string& where) const {
  const Knob* k = find(name);
  if (!k) throw Error(where + ": unknown policy knob '" + name + "'");
  // On the command line the knob's own messages name it already; elsewhere say where it was set.
  const auto located = [&](const std::string& message) { return where == k->flag() ? message : where + ": " + message; };
  if (!k->applies_to(p.name))
    throw Error(located(k->flag() + " does not apply to --policy " + p.name + " (it applies to " + join(k->presets()) + ")"));
  try {
    k->parse(p, value);
  } catch (const Error& e) {
    throw Error(located(e.what()));
  }
}

std::vector<const Knob*> KnobRegistry::for_preset(const std::string& preset) const {
  std::vector<const Knob*> out;
  for (const auto& k : knobs_)
    if (k.applies_to(preset)) out.push_back(&k);
  return out;
}

Knob int_knob(std::string name, std::string help, PolicyField<int> field, int min, int max, KnobScope scope,
              std::vector<std::pair<int, std::string>> special) {
  Knob k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.range = int_range(min, max, special);
  k.type = "INT";
  k.scope = scope;
  k.parse = [flag = k.flag(), field, min, max, special, range = k.range](Policy& p, const std::string& s) {
    int v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) throw_bad_knob(flag, s, "an integer " + range);
    const bool allowed = std::any_of(special.begin(), special.end(), [v](const auto& sp) { return sp.first == v; });
    if (!allowed && (v < min || v > max)) throw Error(flag + " must be " + range + ", got " + s);
    field(p) = v;
  };
  k.describe = [field](const Policy& p) { return std::to_string(field(p)); };
  return k;
}

Knob auto_int_knob(std::string name, std::string help, PolicyField<int> field, int min, int max, KnobScope scope,
                   std::vector<std::pair<int, std::string>> special) {
  Knob k = int_knob(std::move(name), std::move(help), field, min, max, scope, special);
  const std::string numbers = k.range;
  k.range = numbers + " (or auto)";
  k.type = "INT|auto";
  k.parse = [flag = k.flag(), inner = k.parse, field, range = k.range, numbers](Policy& p, const std::string& s) {
    if (s == "auto") {
      field(p) = -1;
      return;
    }
    // -1 is how auto is kept, not a value to give
    if (s == "-1") throw Error(flag + " must be " + range + ", got " + s);
    int v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) throw_bad_knob(flag, s, "auto or an integer " + numbers);
    inner(p, s);
  };
  k.describe = [field](const Policy& p) { return field(p) == -1 ? std::string("auto") : std::to_string(field(p)); };
  return k;
}

Knob float_knob(std::string name, std::string help, PolicyField<float> field, float min, float max, KnobScope scope) {
  Knob k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.range = "in [" + float_text(min) + ", " + float_text(max) + "]";
  k.type = "FLOAT";
  k.scope = scope;
  k.parse = [flag = k.flag(), field, min, max, range = k.range](Policy& p, const std::string& s) {
    char* end = nullptr;
    const float v = s.empty() ? NAN : std::strtof(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) throw_bad_knob(flag, s, "a number " + range);
    if (v < min || v > max) throw Error(flag + " must be " + range + ", got " + s);
    field(p) = v;
  };
  k.describe = [field](const Policy& p) { return float_text(field(p)); };
  return k;
}

Knob bool_knob(std::string name, std::string help, PolicyField<bool> field, KnobScope scope) {
  Knob k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.range = "true|false";
  k.type = "BOOL";
  k.scope = scope;
  k.parse = [flag = k.flag(), field](Policy& p, const std::string& s) {
    if (s == "true" || s == "1" || s == "yes" || s == "on") field(p) = true;
    else if (s == "false" || s == "0" || s == "no" || s == "off") field(p) = false;
    else throw_bad_knob(flag, s, "true|false");
  };
  k.describe = [field](const Policy& p) { return std::string(field(p) ? "true" : "false"); };
  return k;
}

Knob name_knob(std::string name, std::string help, PolicyField<std::string> field, std::vector<std::string> (*names)(),
               KnobScope scope) {
  Knob k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.range = join(names(), "|");
  k.type = "NAME";
  k.scope = scope;
  k.parse = [flag = k.flag(), field, names](Policy& p, const std::string& s) {
    const auto all = names();
    if (std::find(all.begin(), all.end(), s) == all.end()) throw_bad_knob(flag, s, join(all, "|"));
    field(p) = s;
  };
  k.describe = [field](const Policy& p) { return field(p); };
  return k;
}

void register_policy_knobs(KnobRegistry& r, std::vector<std::string> (*predictor_names)()) {
  r.add(int_knob("window", "recent tokens kept on the device", &Policy::window, 0, INT_MAX, splits_kv));
  r.add(int_knob("sinks", "first tokens kept on the device", &Policy::n_sinks, 0, INT_MAX, splits_kv));
  r.add(bool_knob("keep-evicted", "keep tokens that leave the window on the host (false: drop them)",
                  &Policy::keep_evicted, splits_kv));
  r.add(bool_knob("exact-prefill",
                  "tokens dropped once after an exact prefill of the whole prompt (false: as the prefill goes, "
                  "chunk by chunk)",
                  &Policy::exact_prefill, drops_evicted));
  r.add(int_knob("evict-block", "tokens moved from the device window to the host at once", &Policy::evict_block, 1,
                 INT_MAX, splits_kv));
  r.add(enum_knob<Selection>("select", "host token selection", &Policy::select, splits_kv));
  r.add(int_knob("k", "host tokens per kv-head that take part", &Policy::K, 0, INT_MAX, splits_kv, {{-1, "all host tokens"}}));
  r.add(name_knob("predictor", "Pre-QK selection predictor", &Policy::predictor, predictor_names, splits_kv));
  r.add(int_knob("partial-dims", "query dimensions of the partial predictor", &Policy::partial_dims, 1, INT_MAX,
                 splits_kv));
  r.add(enum_knob<MergeMode>("merge", "merge of host and device results", &Policy::merge, splits_kv));
  r.add(enum_knob<QuerySource>("query",
                               "host query source (auto: exact where the host stage runs inline, refine where host "
                               "workers overlap the device)",
                               &Policy::query, splits_kv));
  r.add(int_knob("exact-layers", "first layers that use the exact query when speculating", &Policy::exact_layers, 0,
                 INT_MAX, splits_kv));
  // At most the CPUs of this machine: more workers than CPUs only contend (and 5000 threads abort).
  r.add(auto_int_knob("host-threads",
                      "host attention worker threads (auto: the device chooses: inline on every core on the CPU "
                      "device, one worker beside a CUDA device)",
                      &Policy::host_threads, 1, hardware_threads(), splits_kv,
                      {{0, "the host stage inline on every core of the run, cpu-attn's default"}}));
}

}  // namespace hg
