#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "eval/logit_metrics.h"
#include "eval/shared_prefill.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"

namespace hg::eval {

std::vector<TokenWindow> split_windows(size_t n_tokens, int ctx, int max_windows, bool second_half, int tail) {
  if (ctx < 2) throw Error("perplexity needs a context of at least 2 tokens, got " + std::to_string(ctx));
  if (tail < 0 || (tail > 0 && tail > ctx - 2))
    throw Error("--tail " + std::to_string(tail) + ": score between 1 and ctx - 2 = " + std::to_string(ctx - 2) +
                " predictions of a window (the rest is its context)");
  if (tail > 0 && second_half)
    throw Error("--tail and --score-second-half choose the scored positions two ways: give one");
  std::vector<TokenWindow> windows;
  const size_t min_size = second_half || tail > 0 ? static_cast<size_t>(ctx) : 2;
  const size_t skip = tail > 0 ? static_cast<size_t>(ctx - 1 - tail) : second_half ? static_cast<size_t>(ctx) / 2 : 0;
  for (size_t b = 0; b < n_tokens; b += static_cast<size_t>(ctx)) {
    const size_t e = std::min(n_tokens, b + static_cast<size_t>(ctx));
    if (e - b >= min_size) windows.push_back({b, e, skip});
    if (max_windows > 0 && static_cast<int>(windows.size()) == max_windows) break;
  }
  if (windows.empty())
    throw Error("perplexity needs at least " + std::to_string(min_size) + " tokens, got " + std::to_string(n_tokens));
  return windows;
}

int64_t total_positions(const std::vector<TokenWindow>& windows) {
  int64_t n = 0;
  for (const auto& w : windows) n += static_cast<int64_t>(w.end - w.begin);
  return n;
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
  int64_t positions = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::span<const int32_t> window = ids.subspan(windows[w].begin, windows[w].end - windows[w].begin);
    engine.reset(0);
    engine.prefill(0, window, nullptr, logits.data());
    for (size_t i = windows[w].skip; i + 1 < window.size(); ++i)
      r.nll_sum -= log_prob(logits.data() + i * static_cast<size_t>(vocab), vocab, window[i + 1]);
    r.scored += static_cast<int64_t>(window.size() - 1 - windows[w].skip);
    if (hooks.on_logits) hooks.on_logits(logits.data(), static_cast<int64_t>(window.size()));
    positions += static_cast<int64_t>(window.size());
    if (hooks.on_progress) hooks.on_progress({positions, w, windows.size(), r.ppl()});
  }
  return r;
}

namespace {

// Feeds one token to sequence `seq`: prefill for the first of a window, decode after.
void feed_token(Engine& e, int seq, bool first, int32_t tok, float* logits) {
  if (first)
    e.prefill(seq, std::span(&tok, 1), logits);
  else
    e.decode(std::span(&seq, 1), std::span(&tok, 1), logits);
}

// The token-by-token loop; ref_row(position index, token, first of window) gives the reference
// row of a position (nullptr: no reference) after the policy's engine has run it; positions a
// window skips run (they are the context of the rest) but are not scored.
template <typename RefRow>
PerplexityResult decode_loop(Engine& engine, std::span<const int32_t> ids, const std::vector<TokenWindow>& windows,
                             const ScoreHooks& hooks, bool has_ref, RefRow ref_row) {
  const int vocab = engine.vocab_size();
  std::vector<float> logits(static_cast<size_t>(vocab));  // [vocab]
  PerplexityResult r;
  r.has_ref = has_ref;
  const int seq = 0;
  size_t position = 0;  // scored positions so far
  int64_t ran = 0;      // positions run so far (the windows' last ones too)
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto [b, e, skip] = windows[w];
    engine.reset(seq);
    for (size_t i = b; i + 1 < e; ++i, ++position) {
      feed_token(engine, seq, i == b, ids[i], logits.data());
      const float* ref = ref_row(position, ids[i], i == b);
      if (hooks.on_logits) hooks.on_logits(logits.data(), 1);
      if (i - b >= skip) {
        r.nll_sum -= log_prob(logits.data(), vocab, ids[i + 1]);
        if (ref) {
          r.ref_nll_sum -= log_prob(ref, vocab, ids[i + 1]);
          r.agree += argmax(logits.data(), vocab) == argmax(ref, vocab);
          r.kl_sum += kl_divergence(ref, logits.data(), vocab);
        }
        ++r.scored;
      }
      if (hooks.on_progress) hooks.on_progress({++ran, w, windows.size(), r.ppl()});
    }
    if (hooks.on_logits) {  // the window's last position: its logits predict past the window
      feed_token(engine, seq, false, ids[e - 1], logits.data());
      hooks.on_logits(logits.data(), 1);
    }
    if (hooks.on_progress) hooks.on_progress({++ran, w, windows.size(), r.ppl()});
  }
  return r;
}

}  // namespace

PerplexityResult score_decode(Engine& engine, Engine* ref, std::span<const int32_t> ids,
                              const std::vector<TokenWindow>& windows, const ScoreHooks& hooks) {
  std::vector<float> ref_logits(ref ? static_cast<size_t>(ref->vocab_size()) : 0);  // [vocab]
  return decode_loop(engine, ids, windows, hooks, ref != nullptr,
                     [&](size_t, int32_t tok, bool first) -> const float* {
                       if (!ref) return nullptr;
                       if (first) ref->reset(0);
                       feed_token(*ref, 0, first, tok, ref_logits.data());
                       return ref_logits.data();
                     });
}

ReferenceLogits reference_logits(Engine& ref, std::span<const int32_t> ids, const std::vector<TokenWindow>& windows) {
  ReferenceLogits out;
  out.vocab = ref.vocab_size();
  const size_t vocab = static_cast<size_t>(out.vocab);
  size_t positions = 0;
  for (const auto& w : windows) positions += w.end - w.begin - 1;
  out.rows.resize(positions * vocab);
  size_t longest = 0;
  for (const auto& w : windows) longest = std::max(longest, w.end - w.begin);
  std::vector<float> logits(longest * vocab);  // [window, vocab]
  size_t at = 0;
  for (const auto& w : windows) {
    const std::span<const int32_t> window = ids.subspan(w.begin, w.end - w.begin);
    ref.reset(0);
    ref.prefill(0, window, nullptr, logits.data());
    for (size_t i = 0; i + 1 < window.size(); ++i, ++at)
      std::copy_n(logits.data() + i * vocab, vocab, out.rows.data() + at * vocab);
  }
  return out;
}

PerplexityResult score_decode(Engine& engine, const ReferenceLogits& ref, std::span<const int32_t> ids,
                              const std::vector<TokenWindow>& windows, const ScoreHooks& hooks) {
  size_t positions = 0;
  for (const auto& w : windows) positions += w.end - w.begin - 1;
  if (ref.vocab != engine.vocab_size() || ref.rows.size() != positions * static_cast<size_t>(ref.vocab))
    throw Error("reference logits do not match the engine's vocabulary and the windows scored");
  return decode_loop(engine, ids, windows, hooks, true, [&](size_t position, int32_t, bool) -> const float* {
    return ref.rows.data() + position * static_cast<size_t>(ref.vocab);
  });
}

PerplexityResult score_tail(Engine& engine, Engine* ref, std::span<const int32_t> ids,
                            const std::vector<TokenWindow>& windows, const ScoreHooks& hooks,
                            SharedPrefillStats* prefills, const PrefillCache* cache) {
  const int vocab = engine.vocab_size();
  if (ref && ref->vocab_size() != vocab) throw Error("the reference engine's vocabulary differs from the policy's");
  // The reference first: where both prefill exactly it records the state and the policy loads
  // it, so every policy scored against one reference starts from the same prefill (the
  // reference's own), whichever policy it is.
  std::vector<Engine*> engines;
  if (ref) engines.push_back(ref);
  engines.push_back(&engine);
  const size_t mine = engines.size() - 1;
  SharedPrefillStats own;
  SharedPrefillStats& stats = prefills ? *prefills : own;
  std::vector<std::vector<float>> rows;  // per engine: [vocab]
  PerplexityResult r;
  r.has_ref = ref != nullptr;
  const int seq = 0;
  int64_t ran = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto [b, e, skip] = windows[w];
    // tokens b .. b + skip in one prefill: its last row predicts token b + skip + 1, the first scored
    shared_prefill(engines, seq, ids.subspan(b, skip + 1), rows, stats, nullptr, cache);
    ran += static_cast<int64_t>(skip);
    for (size_t i = b + skip; i + 1 < e; ++i) {
      if (i > b + skip)
        for (size_t k = 0; k < engines.size(); ++k)
          engines[k]->decode(std::span(&seq, 1), std::span(&ids[i], 1), rows[k].data());
      const float* logits = rows[mine].data();
      r.nll_sum -= log_prob(logits, vocab, ids[i + 1]);
      if (ref) {
        const float* ref_row = rows[0].data();
        r.ref_nll_sum -= log_prob(ref_row, vocab, ids[i + 1]);
        r.agree += argmax(logits, vocab) == argmax(ref_row, vocab);
        r.kl_sum += kl_divergence(ref_row, logits, vocab);
      }
      ++r.scored;
      if (hooks.on_progress) hooks.on_progress({++ran, w, windows.size(), r.ppl()});
    }
    if (hooks.on_progress) hooks.on_progress({++ran, w, windows.size(), r.ppl()});  // the window's last position
  }
  return r;
}

}  // namespace hg::eval
