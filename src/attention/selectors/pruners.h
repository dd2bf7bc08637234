// The pruners of the dropping policies: which of the device's tokens stay beyond the recent
// window. One table, one row each (name, one line of help, whether it draws seeded noise, a
// factory), as the Pre-QKᵀ predictors have theirs (predictors.h): --prune names a row, and a new
// pruner is one file and one row in pruners.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attention/prompt_scores.h"
#include "attention/selectors/selector.h"
#include "policy/knobs.h"

namespace hg {

// A pruner observes the device's attention (AttentionObserver) and decides which tokens leaving
// the window stay (TokenRetainer); after an exact prefill it keeps tokens by the prompt's scores.
class TokenPruner : public AttentionObserver, public TokenRetainer {
 public:
  virtual std::string name() const = 0;
  virtual void reset(int seq) = 0;
  // The prompt scores it keeps tokens by after an exact prefill (attention/prompt_scores.h), and
  // taking them for (seq, layer): scores [n_tokens][n_kv_heads], the prompt n_tokens long.
  virtual PromptScoreSpec prompt_score_spec() const = 0;
  virtual void learn_prompt_scores(int seq, int layer, const float* scores, int n_tokens) = 0;
};

struct PrunerInfo {
  std::string name;
  std::string help;
  bool seeded = false;  // draws noise from the policy's --seed (keyformer's Gumbel noise)
  std::unique_ptr<TokenPruner> (*make)(const SelectorContext&) = nullptr;  // null: no pruner ("none")
};

const std::vector<PrunerInfo>& pruner_table();
std::vector<std::string> pruner_names();
// The row of `name`; hg::Error listing the pruners when there is none.
const PrunerInfo& find_pruner(const std::string& name);
// The policy's pruner (--prune), or null for "none".
std::unique_ptr<TokenPruner> make_pruner(const SelectorContext& c);

// --prune, --heavy (the policies that drop evicted tokens and keep heavy hitters: h2o,
// keyformer), --tau-init, --tau-end (those whose pruner is keyformer).
void register_pruner_knobs(KnobRegistry& r);

}  // namespace hg
