#include "attention/selectors/pruners.h"

#include <climits>

#include "attention/selectors/h2o_prune.h"
#include "hybridgen/error.h"
#include "util/strings.h"

namespace hg {

const std::vector<PrunerInfo>& pruner_table() {
  static const std::vector<PrunerInfo> table = {
      {"none", "the window and the sinks only (StreamingLLM)", false, nullptr},
      {"h2o", "the heavy hitters of accumulated attention", false,
       [](const SelectorContext& c) -> std::unique_ptr<TokenPruner> {
         return std::make_unique<HeavyHitterPruner>(c, HeavyHitterPruner::Score::Attention);
       }},
      {"keyformer", "the heavy hitters of accumulated Gumbel-softmax scores, τ from --tau-init to --tau-end", true,
       [](const SelectorContext& c) -> std::unique_ptr<TokenPruner> {
         return std::make_unique<HeavyHitterPruner>(c, HeavyHitterPruner::Score::Gumbel);
       }},
  };
  return table;
}

std::vector<std::string> pruner_names() {
  std::vector<std::string> names;
  for (const auto& p : pruner_table()) names.push_back(p.name);
  return names;
}

const PrunerInfo& find_pruner(const std::string& name) {
  for (const auto& p : pruner_table())
    if (p.name == name) return p;
  throw Error("--prune: '" + name + "' is not a pruner (pruners: " + join(pruner_names()) + ")");
}

std::unique_ptr<TokenPruner> make_pruner(const SelectorContext& c) {
  const PrunerInfo& info = find_pruner(c.policy.prune);
  return info.make ? info.make(c) : nullptr;
}

namespace {
bool prunes(const Policy& p) { return drops_evicted(p) && find_pruner(p.prune).make != nullptr; }
bool seeded_pruner(const Policy& p) { return prunes(p) && find_pruner(p.prune).seeded; }
}  // namespace

void register_pruner_knobs(KnobRegistry& r) {
  r.add(name_knob("prune",
                  "which device tokens stay beyond the window: the heavy hitters of accumulated attention (h2o) or "
                  "Gumbel-softmax (keyformer), or none",
                  &Policy::prune, pruner_names, prunes));
  r.add(int_knob("heavy", "heavy hitters per kv-head kept on the device beside the window", {&Policy::heavy_hitters, &Policy::HeavyHitters::heavy}, 0, INT_MAX,
                 prunes));
  r.add(float_knob("tau-init", "Gumbel-softmax temperature at the first generated token", {&Policy::heavy_hitters, &Policy::HeavyHitters::tau_init}, 0.0625f,
                   100.0f, seeded_pruner));
  r.add(float_knob("tau-end", "Gumbel-softmax temperature at the last position of the context", {&Policy::heavy_hitters, &Policy::HeavyHitters::tau_end},
                   0.0625f, 100.0f, seeded_pruner));
}

}  // namespace hg
