#include "eval/passkey.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "eval/greedy.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"

namespace hg::eval {

namespace {

constexpr std::string_view kIntro =
    "There is an important piece of information hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important information there.\n\n";
constexpr std::string_view kQuestion = "\n\nWhat is the pass key?";
constexpr std::string_view kAnswer = " The pass key is";

std::string needle(const std::string& key) {
  return "\nThe pass key is " + key + ". Remember it. " + key + " is the pass key.\n";
}

std::string depth_name(double depth) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", depth);
  return buf;
}

struct TrialDraw {
  std::string key;
  uint64_t offset_draw = 0;  // reduced modulo the room the filler leaves
};

TrialDraw draw_trial(uint64_t seed, int trial) {
  std::mt19937_64 rng(seed + static_cast<uint64_t>(trial));
  TrialDraw d;
  d.key = std::to_string(10000 + rng() % 90000);
  d.offset_draw = rng();
  return d;
}

}  // namespace

void PasskeyConfig::validate() const {
  if (ctx < 64) throw Error("--ctx: a passkey prompt needs at least 64 tokens, got " + std::to_string(ctx));
  if (depths.empty()) throw Error("--depths: give at least one depth");
  for (double d : depths)
    if (!(d >= 0.0 && d <= 1.0)) throw Error("--depths: " + depth_name(d) + " is not a fraction in [0, 1]");
  if (trials < 1) throw Error("--trials must be >= 1, got " + std::to_string(trials));
  if (n_gen < 5) throw Error("--n-gen: the answer needs at least 5 tokens, got " + std::to_string(n_gen));
}

PasskeyPrompt make_passkey_prompt(const Tokenizer& tok, std::span<const int32_t> filler, const PasskeyConfig& c,
                                  int trial, double depth) {
  const TrialDraw d = draw_trial(c.seed, trial);
  // With the chat template the task is the user's message and the answer starts the assistant's:
  // the template's text before and after a marker message wraps the pieces.
  std::string before, after = std::string(kAnswer);
  if (c.chat) {
    constexpr std::string_view kMarker = "\x01PASSKEY\x01";
    const std::string wrapped = format_chat(tok, ChatTemplate::Auto, kMarker);
    const size_t at = wrapped.find(kMarker);
    before = wrapped.substr(0, at);
    after = wrapped.substr(at + kMarker.size()) + std::string(kAnswer).substr(1);
  }
  const std::vector<int32_t> intro = tok.encode(before + std::string(kIntro), /*add_special=*/true);
  const std::vector<int32_t> key = tok.encode(needle(d.key), false);
  const std::vector<int32_t> question = tok.encode(std::string(kQuestion) + after, false);
  const int fixed = static_cast<int>(intro.size() + key.size() + question.size());
  const int n_filler = c.ctx - fixed;
  if (n_filler < 16)
    throw Error("--ctx " + std::to_string(c.ctx) + " leaves no room for filler text (the instructions take " +
                std::to_string(fixed) + " tokens)");
  if (static_cast<size_t>(n_filler) > filler.size())
    throw Error("-f: the filler text has " + std::to_string(filler.size()) + " tokens, --ctx " + std::to_string(c.ctx) +
                " needs " + std::to_string(n_filler));
  const size_t room = filler.size() - static_cast<size_t>(n_filler) + 1;
  const std::span<const int32_t> text = filler.subspan(d.offset_draw % room, static_cast<size_t>(n_filler));
  const size_t at = static_cast<size_t>(std::lround(depth * n_filler));

  PasskeyPrompt p;
  p.key = d.key;
  p.ids.reserve(static_cast<size_t>(c.ctx));
  p.ids.insert(p.ids.end(), intro.begin(), intro.end());
  p.ids.insert(p.ids.end(), text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at));
  p.key_pos = p.ids.size();
  p.ids.insert(p.ids.end(), key.begin(), key.end());
  p.ids.insert(p.ids.end(), text.begin() + static_cast<std::ptrdiff_t>(at), text.end());
  p.ids.insert(p.ids.end(), question.begin(), question.end());
  return p;
}

double PasskeyResult::accuracy() const {
  if (trials.empty()) return 0.0;
  const auto found = std::count_if(trials.begin(), trials.end(), [](const PasskeyTrial& t) { return t.found; });
  return static_cast<double>(found) / static_cast<double>(trials.size());
}

double PasskeyResult::accuracy_at(double depth) const {
  int n = 0, found = 0;
  for (const auto& t : trials)
    if (t.depth == depth) {
      ++n;
      found += t.found;
    }
  return n > 0 ? static_cast<double>(found) / n : 0.0;
}

nlohmann::json PasskeyResult::to_json(const PasskeyConfig& c) const {
  nlohmann::json per_depth = nlohmann::json::object();
  for (double d : c.depths) per_depth[depth_name(d)] = accuracy_at(d);
  nlohmann::json answers = nlohmann::json::array();
  for (const auto& t : trials)
    answers.push_back(
        {{"trial", t.trial}, {"depth", t.depth}, {"key", t.key}, {"answer", t.answer}, {"found", t.found}});
  return {{"accuracy", accuracy()},   {"per_depth", per_depth},         {"trials", c.trials},
          {"prompt_tokens", prompt_tokens}, {"seconds", seconds},     {"prefills", prefills},
          {"prefill_cache_hits", cache_hits}, {"answers", answers}};
}

PasskeyResult run_passkey(Engine& engine, const Tokenizer& tok, std::string_view filler_text, const PasskeyConfig& c,
                          const std::function<void(int, int)>& on_trial) {
  c.validate();
  const std::vector<int32_t> filler = tok.encode(filler_text, /*add_special=*/false);
  Engine* const engines[] = {&engine};
  GreedyReplies replies(engines, tok, c.prefill_cache);
  PasskeyResult r;
  const int total = c.trials * static_cast<int>(c.depths.size());
  const auto t0 = std::chrono::steady_clock::now();
  for (int trial = 0; trial < c.trials; ++trial) {
    for (double depth : c.depths) {
      const PasskeyPrompt p = make_passkey_prompt(tok, filler, c, trial, depth);
      r.prompt_tokens = static_cast<int>(p.ids.size());
      PasskeyTrial t;
      t.trial = trial;
      t.depth = depth;
      t.key = p.key;
      t.answer = replies.reply(p.ids, c.n_gen).front();
      t.found = t.answer.find(p.key) != std::string::npos;
      r.trials.push_back(std::move(t));
      if (on_trial) on_trial(static_cast<int>(r.trials.size()), total);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.prefills = replies.stats().prefills;
  r.cache_hits = replies.stats().cache_hits;
  return r;
}

}  // namespace hg::eval
