#include "eval/shared_prefill.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "device/device.h"
#include "eval/prefill_cache.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"
#include "hybridgen/prefill_state.h"

namespace hg::eval {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::string prefill_computed_on(Engine& e) {
  return e.device().name() + ", ubatch " + std::to_string(e.options().ubatch);
}

const char* prefill_role_name(PrefillRole r) {
  switch (r) {
    case PrefillRole::Recorded:
      return "recorded";
    case PrefillRole::Loaded:
      return "shared";
    case PrefillRole::Own:
      return "own";
  }
  return "";
}

PrefillRole prefill_role_of(const std::string& name) {
  for (PrefillRole r : {PrefillRole::Recorded, PrefillRole::Loaded, PrefillRole::Own})
    if (name == prefill_role_name(r)) return r;
  throw Error("'" + name + "' is not a prefill role (recorded, shared, own)");
}

void shared_prefill(std::span<Engine* const> engines, int seq, std::span<const int32_t> ids,
                    std::vector<std::vector<float>>& logits, SharedPrefillStats& stats,
                    std::vector<PrefillRole>* roles, const PrefillCache* cache) {
  logits.resize(engines.size());
  if (roles) roles->assign(engines.size(), PrefillRole::Own);
  std::optional<PrefillState> state;
  bool from_cache = false;
  // Every prompt score an engine keeps tokens by (h2o, keyformer): the recorded state holds them all
  std::vector<std::string> scores;
  for (Engine* e : engines)
    for (const std::string& name : e->prompt_scores())
      if (std::find(scores.begin(), scores.end(), name) == scores.end()) scores.push_back(name);
  for (size_t i = 0; i < engines.size(); ++i) {
    Engine& e = *engines[i];
    logits[i].resize(static_cast<size_t>(e.vocab_size()));
    const auto t0 = std::chrono::steady_clock::now();
    if (e.exact_prefill() && !state && cache && !from_cache) {
      from_cache = true;  // looked up once per prompt
      state = cache->find(e.fingerprint(), prefill_computed_on(e), ids);
      if (state && !state->holds_scores(scores)) state.reset();  // recorded without them: a miss
      stats.cache_hits += state ? 1 : 0;
    }
    if (e.exact_prefill() && state) {
      e.load_state(seq, *state, logits[i].data());
      stats.loads += 1;
      stats.load_seconds += since(t0);
      if (roles) (*roles)[i] = PrefillRole::Loaded;
      continue;
    }
    // the first sharing engine records the state; one that does not share prefills for itself
    PrefillState* record = e.exact_prefill() ? &state.emplace() : nullptr;
    if (record) record->score_names = scores;
    if (roles && record) (*roles)[i] = PrefillRole::Recorded;
    e.reset(seq);
    e.prefill(seq, ids, logits[i].data(), nullptr, record);
    stats.prefills += 1;
    stats.prefill_seconds += since(t0);
    if (record && cache) {
      cache->store(*record, prefill_computed_on(e));
      stats.cache_stores += 1;
    }
  }
}

}  // namespace hg::eval
