// Perplexity and fidelity measurement (library code shared by `perplexity`, `eval` and `sweep`):
// a token stream split into non-overlapping windows of ctx tokens, every token of a window after
// its first scored, or (second_half, as llama-perplexity does) only the tokens after ctx / 2. Fidelity runs the policy
// token by token through the decode path beside a reference engine (full attention) and compares
// the two logits rows at every position: top-1 agreement and mean KL(ref || policy).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

namespace hg {
class Engine;
}

namespace hg::eval {

struct SharedPrefillStats;
class PrefillCache;

struct TokenWindow {
  size_t begin = 0, end = 0;  // [begin, end) of the token stream
  size_t skip = 0;            // leading predictions not scored (they only give the rest a context)
};

// [w*ctx, min((w+1)*ctx, n)); a final partial window counts when it has 2+ tokens; at most
// max_windows windows (0: all). second_half: llama-perplexity's scoring: whole windows only, and
// in each the predictions of tokens ctx/2 + 1 .. ctx - 1 scored (skip = ctx / 2). tail > 0: whole
// windows only, and in each only the last `tail` predictions scored (skip = ctx - 1 - tail).
std::vector<TokenWindow> split_windows(size_t n_tokens, int ctx, int max_windows, bool second_half = false,
                                       int tail = 0);

struct ScoreProgress {
  int64_t positions = 0;  // positions run so far (of every window, its last included)
  size_t window = 0;      // the window being scored (0-based)
  size_t windows = 0;     // windows in all
  double ppl = 0.0;       // so far
};

struct ScoreHooks {
  // Logits rows as they are computed ([n, vocab]); every position of every window, in order.
  std::function<void(const float* rows, int64_t n)> on_logits;
  // After every position of the decode path, after every window of the prefill path.
  std::function<void(const ScoreProgress&)> on_progress;
};

// Positions the windows hold (what on_logits receives, what progress counts to).
int64_t total_positions(const std::vector<TokenWindow>& windows);

struct PerplexityResult {
  int64_t scored = 0;    // tokens scored
  double nll_sum = 0.0;  // sum of -log p(token)
  bool has_ref = false;  // the fields below are set
  double ref_nll_sum = 0.0;
  int64_t agree = 0;    // positions where the policy's top-1 equals the reference's
  double kl_sum = 0.0;  // sum of KL(ref || policy)

  double ppl() const;
  // {"ppl", "n_tokens", "nll_mean"} and, with a reference, {"ref_ppl", "top1_agreement", "kl_mean"}.
  nlohmann::json to_json() const;
};

// Prefills each window at once and scores all its positions from one logits pass (the fast path
// of full attention, where the policy does not change what a position sees).
PerplexityResult score_prefill(Engine& engine, std::span<const int32_t> ids, const std::vector<TokenWindow>& windows,
                               const ScoreHooks& hooks = {});

// Token by token through the decode path, so the policy applies at every position; with `ref`,
// the reference engine runs the same tokens and every position is compared.
PerplexityResult score_decode(Engine& engine, Engine* ref, std::span<const int32_t> ids,
                              const std::vector<TokenWindow>& windows, const ScoreHooks& hooks = {});

// The reference's logits at every position that predicts a token of its window ([positions, vocab],
// windows in order, each window's last position left out; positions a window skips included), computed once with prefill so that many policies can be
// compared with one reference (kmin runs one policy per K). Prefill and decode of full attention
// compute the same sums in another order: agreement of `full` with these rows is 1 up to ties.
struct ReferenceLogits {
  int vocab = 0;
  std::vector<float> rows;  // [positions, vocab]
};
ReferenceLogits reference_logits(Engine& ref, std::span<const int32_t> ids, const std::vector<TokenWindow>& windows);

// As score_decode with a reference engine, against precomputed reference rows.
PerplexityResult score_decode(Engine& engine, const ReferenceLogits& ref, std::span<const int32_t> ids,
                              const std::vector<TokenWindow>& windows, const ScoreHooks& hooks = {});

// Long context, the scored tail only: each window's first skip + 1 tokens go in one prefill, shared
// with `ref` where both policies' prefills are exact attention (shared_prefill.h: one prefill for
// the two), and only the positions after them run token by token through the decode path, in
// both engines, compared at every position. What makes fidelity at 16K-32K affordable: a 32K
// window costs one prefill and `tail` decode steps instead of 32K decode steps per engine.
// hooks.on_logits is not called (the prefilled positions have no rows); `prefills` (when given)
// counts the prefills run and the loads that replaced one; `cache` (when given) keeps each
// window's prefill between runs (eval/prefill_cache.h).
PerplexityResult score_tail(Engine& engine, Engine* ref, std::span<const int32_t> ids,
                            const std::vector<TokenWindow>& windows, const ScoreHooks& hooks = {},
                            SharedPrefillStats* prefills = nullptr, const PrefillCache* cache = nullptr);

}  // namespace hg::eval
