// One prompt into several engines (one per policy), prefilled once: every policy whose prefill is
// exact attention over the prompt (Engine::exact_prefill) computes the same K/V, so the first
// such engine prefills and records the state (hybridgen/prefill_state.h) and the others place it
// (Engine::load_state). The recorded prefill also computes the prompt scores that h2o and
// keyformer keep tokens by (attention/prompt_scores.h), so they share it too; only a dropping
// policy with --exact-prefill false, whose prefill prunes as it goes, prefills on its own. A 32K
// prompt of a 0.5B model prefills in minutes on 2 cores; nine policies after one prefill instead
// of nine is what makes a long-context table affordable.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hg {
class Engine;
}

namespace hg::eval {

class PrefillCache;

struct SharedPrefillStats {
  int prefills = 0;  // prefills run (one per prompt for the sharing engines, plus one per other)
  int loads = 0;     // engines that started from the recorded state (or from the cache's)
  int cache_hits = 0, cache_stores = 0;  // states read from and written to a PrefillCache
  double prefill_seconds = 0, load_seconds = 0;
};

// How an engine came to hold the prompt.
enum class PrefillRole { Recorded, Loaded, Own };
const char* prefill_role_name(PrefillRole r);  // "recorded" | "shared" | "own"
// The role prefill_role_name names; hg::Error for another name.
PrefillRole prefill_role_of(const std::string& name);

// What a cached state of engine `e` is keyed by besides the model and the prompt (PrefillCache's
// `device`): the device that computed it and the prefill chunk, --ubatch (a prompt's last, short
// chunk may take another GEMM path).
std::string prefill_computed_on(Engine& e);

// Resets sequence `seq` of every engine and makes it hold `ids`; logits[i] ([vocab]) gets engine
// i's logits of the last prompt token, roles[i] (when given) how it got there. With a cache
// (eval/prefill_cache.h) the sharing engines start from its state of the prompt when it holds
// one, and the first of them records it there when it does not.
void shared_prefill(std::span<Engine* const> engines, int seq, std::span<const int32_t> ids,
                    std::vector<std::vector<float>>& logits, SharedPrefillStats& stats,
                    std::vector<PrefillRole>* roles = nullptr, const PrefillCache* cache = nullptr);

}  // namespace hg::eval
