// Passkey retrieval (Landmark Attention / LongLoRA style): a random 5-digit key is hidden at a
// chosen depth of filler text cut to a target context, and the model, asked at the end, has to
// repeat it. Greedy decoding through the engine's policy shows whether the tokens around the key
// still take part in attention: with SmolLM2 at ~1.5K tokens full attention finds the key, a
// 512-token streaming window loses it once it falls out of the window.
//
// The generator is deterministic per seed: trial t draws its key and its filler offset from
// mt19937_64(seed + t) (whose output the C++ standard fixes), and every depth of a trial uses the
// same key and filler, so depths differ only in where the key sits.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hg {
class Engine;
class Tokenizer;
}  // namespace hg

namespace hg::eval {

class PrefillCache;

struct PasskeyConfig {
  int ctx = 1536;                                // prompt tokens (the filler is cut to fit)
  std::vector<double> depths = {0.1, 0.5, 0.9};  // where the key sits, as a fraction of the filler
  int trials = 4;                                // keys per depth
  uint64_t seed = 1;
  int n_gen = 8;      // answer tokens generated (greedy)
  bool chat = false;  // wrap the task in the model's chat template (the answer starts "The pass key is")
  const PrefillCache* prefill_cache = nullptr;  // keeps each trial's prefill between runs (not owned)

  void validate() const;  // hg::Error naming the option
};

struct PasskeyPrompt {
  std::vector<int32_t> ids;  // the whole prompt, BOS included where the tokenizer adds one
  std::string key;           // the 5 digits
  size_t key_pos = 0;        // index in ids of the first token of the sentence holding the key
};

// The prompt of trial `trial` with the key at `depth`. filler: token ids of the filler text (at
// least enough for ctx tokens); hg::Error when ctx is too short for the instructions.
PasskeyPrompt make_passkey_prompt(const Tokenizer& tok, std::span<const int32_t> filler, const PasskeyConfig& c,
                                  int trial, double depth);

struct PasskeyTrial {
  int trial = 0;
  double depth = 0.0;
  std::string key, answer;  // answer: the generated text
  bool found = false;       // the key appears in the answer
};

struct PasskeyResult {
  std::vector<PasskeyTrial> trials;
  int prompt_tokens = 0;
  double seconds = 0.0;
  int prefills = 0, cache_hits = 0;  // prompts prefilled, and loaded from the prefill cache

  double accuracy() const;
  double accuracy_at(double depth) const;
  // {"accuracy", "per_depth": {"0.1": ...}, "trials", "prompt_tokens", "prefills", "prefill_cache_hits",
  //  "answers": [...]}.
  nlohmann::json to_json(const PasskeyConfig& c) const;
};

// Runs every depth × trial; on_trial (optional) is called after each with trials done and in all.
PasskeyResult run_passkey(Engine& engine, const Tokenizer& tok, std::string_view filler_text, const PasskeyConfig& c,
                          const std::function<void(int done, int total)>& on_trial = {});

}  // namespace hg::eval
