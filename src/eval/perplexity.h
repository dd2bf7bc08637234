// Perplexity and fidelity measurement (library code shared by `perplexity`, `eval` and `sweep`):
// a token stream split into non-overlapping windows of ctx tokens, every token of a window after
// its first scored (llama.cpp-style, without the half-window skip). Fidelity runs the policy
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

struct TokenWindow {
  size_t begin = 0, end = 0;  // [begin, end) of the token stream
};

// [w*ctx, min((w+1)*ctx, n)); a final partial window counts when it has 2+ tokens; at most
// max_windows windows (0: all).
std::vector<TokenWindow> split_windows(size_t n_tokens, int ctx, int max_windows);

struct ScoreHooks {
  // Logits rows as they are computed ([n, vocab]); every position of every window, in order.
  std::function<void(const float* rows, int64_t n)> on_logits;
  // After each window: windows done, windows in all, perplexity so far.
  std::function<void(size_t done, size_t total, double ppl)> on_window;
};

struct PerplexityResult {
  int64_t scored = 0;      // tokens scored
  double nll_sum = 0.0;    // sum of -log p(token)
  bool has_ref = false;    // the fields below are set
  double ref_nll_sum = 0.0;
  int64_t agree = 0;       // positions where the policy's top-1 equals the reference's
  double kl_sum = 0.0;     // sum of KL(ref || policy)

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

// The reference's logits at every scored position ([positions, vocab], windows in order, each
// window's last position left out), computed once with prefill so that many policies can be
// compared with one reference (kmin runs one policy per K). Prefill and decode of full attention
// compute the same sums in another order: agreement of `full` with these rows is 1 up to ties.
struct ReferenceLogits {
  int vocab = 0;
  std::vector<float> rows;  // [positions, vocab]
  double nll_sum = 0.0;     // of the reference itself
};
ReferenceLogits reference_logits(Engine& ref, std::span<const int32_t> ids, const std::vector<TokenWindow>& windows);

// As score_decode with a reference engine, against precomputed reference rows.
PerplexityResult score_decode(Engine& engine, const ReferenceLogits& ref, std::span<const int32_t> ids,
                              const std::vector<TokenWindow>& windows, const ScoreHooks& hooks = {});

}  // namespace hg::eval
