#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "eval/logit_metrics.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"

namespace hg::eval {

std::vector<TokenWindow> split_windows(size_t n_tokens, int ctx, int max_windows) {
  if (ctx < 2) throw Error("perplexity needs a context of at least 2 tokens, got " + std::to_string(ctx));
  std::vector<TokenWindow> windows;
  for (size_t b = 0; b < n_tokens; b += static_cast<size_t>(ctx)) {
    const size_t e = std::min(n_tokens, b + static_cast<size_t>(ctx));
    if (e - b >= 2) windows.push_back({b, e});
    if (max_windows > 0 && static_cast<int>(windows.size()) == max_windows) break;
  }
  if (windows.empty()) throw Error("perplexity needs at least 2 tokens, got " + std::to_string(n_tokens));
  return windows;
}

double PerplexityResult::ppl() const { return scored > 0 ? std::exp(nll_sum / static_cast<double>(scored)) : 0.0; }

nlohmann::json PerplexityResult::to_json() const {
  const double n = static_cast<double>(std::max<int64_t>(scored, 1));
  nlohmann::json j = {{"ppl", ppl()}, {"n_tokens", scored}, {"nll_mean", nll_sum / n}};
  if (has_ref) {
    j["ref_ppl"] = std::exp(ref_nll_sum / n);
    j["top1_agreement"] = static_cast<double>(agree) / n;
    j["kl_mean"] = kl_sum / n;
  }
  return j;
}

PerplexityResult score_prefill(Engine& engine, std::span<const int32_t> ids, const std::vector<TokenWindow>& windows,
                               const ScoreHooks& hooks) {
  const int vocab = engine.vocab_size();
  size_t longest = 0;
  for (const auto& w : windows) longest = std::max(longest, w.end - w.begin);
  std::vector<float> logits(longest * static_cast<size_t>(vocab));  // [window, vocab]
  PerplexityResult r;
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::span<const int32_t> window = ids.subspan(windows[w].begin, windows[w].end - windows[w].begin);
    engine.reset(0);
    engine.prefill(0, window, nullptr, logits.data());
    for (size_t i = 0; i + 1 < window.size(); ++i)
      r.nll_sum -= log_prob(logits.data() + i * static_cast<size_t>(vocab), vocab, window[i + 1]);
    r.scored += static_cast<int64_t>(window.size()) - 1;
    if (hooks.on_logits) hooks.on_logits(logits.data(), static_cast<int64_t>(window.size()));
    if (hooks.on_window) hooks.on_window(w + 1, windows.size(), r.ppl());
  }
  return r;
}

PerplexityResult score_decode(Engine& engine, Engine* ref, std::span<const int32_t> ids,
                              const std::vector<TokenWindow>& windows, const ScoreHooks& hooks) {
  const int vocab = engine.vocab_size();
  std::vector<float> logits(static_cast<size_t>(vocab)), ref_logits(static_cast<size_t>(vocab));  // [vocab]
  PerplexityResult r;
  r.has_ref = ref != nullptr;
  const int seq = 0;
  // Feeds token `tok` at the window's position `i` (prefill for the first, decode after).
  auto step = [&](Engine& e, bool first, int32_t tok, float* out) {
    if (first)
      e.prefill(seq, std::span(&tok, 1), out);
    else
      e.decode(std::span(&seq, 1), std::span(&tok, 1), out);
  };
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto [b, e] = windows[w];
    engine.reset(seq);
    if (ref) ref->reset(seq);
    for (size_t i = b; i + 1 < e; ++i) {
      step(engine, i == b, ids[i], logits.data());
      r.nll_sum -= log_prob(logits.data(), vocab, ids[i + 1]);
      if (ref) {
        step(*ref, i == b, ids[i], ref_logits.data());
        r.ref_nll_sum -= log_prob(ref_logits.data(), vocab, ids[i + 1]);
        r.agree += argmax(logits.data(), vocab) == argmax(ref_logits.data(), vocab);
        r.kl_sum += kl_divergence(ref_logits.data(), logits.data(), vocab);
      }
      if (hooks.on_logits) hooks.on_logits(logits.data(), 1);
      ++r.scored;
    }
    if (hooks.on_logits) {  // the window's last position: its logits predict past the window
      step(engine, false, ids[e - 1], logits.data());
      hooks.on_logits(logits.data(), 1);
    }
    if (hooks.on_window) hooks.on_window(w + 1, windows.size(), r.ppl());
  }
  return r;
}

}  // namespace hg::eval
