// Greedy continuation through the engine's decode path, shared by the answer-scoring tasks
// (passkey, ruler): one engine's tokens, and every policy's reply to a prompt prefilled once.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "eval/shared_prefill.h"

namespace hg {
class Engine;
class Tokenizer;
}  // namespace hg

namespace hg::eval {

// Up to n tokens of sequence `seq`, each the argmax of `logits` ([vocab]: the prompt's last
// logits on entry, the last decoded token's on return), stopping before a token of `stop`. The
// token that ends the reply is not decoded.
std::vector<int32_t> greedy_tokens(Engine& engine, int seq, std::span<float> logits, int n,
                                   std::span<const int32_t> stop);

// An engine under the name its policy was given (a --policy entry as written).
struct PolicyEngine {
  std::string label;
  Engine* engine = nullptr;
};

// Prompts answered greedily by several engines (one per policy) in their sequence 0: each prompt
// is prefilled once for the engines that share their prefill (shared_prefill), then every engine
// replies until a stop token of the tokenizer or n tokens.
class GreedyReplies {
 public:
  // cache: as shared_prefill's (may be null).
  GreedyReplies(std::span<Engine* const> engines, const Tokenizer& tok, const PrefillCache* cache);
  // Each engine's reply to `ids`, as text (special tokens skipped).
  std::vector<std::string> reply(std::span<const int32_t> ids, int n);
  // How each engine came to hold the last prompt.
  const std::vector<PrefillRole>& roles() const { return roles_; }
  const SharedPrefillStats& stats() const { return stats_; }  // of every prompt so far

 private:
  std::vector<Engine*> engines_;
  const Tokenizer& tok_;
  const PrefillCache* cache_;
  std::vector<int32_t> stop_;
  std::vector<std::vector<float>> logits_;  // [engine][vocab]
  std::vector<PrefillRole> roles_;
  SharedPrefillStats stats_;
};

}  // namespace hg::eval
