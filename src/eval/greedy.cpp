#include "eval/greedy.h"

#include <algorithm>

#include "eval/logit_metrics.h"
#include "hybridgen/engine.h"
#include "hybridgen/tokenizer.h"

namespace hg::eval {

std::vector<int32_t> greedy_tokens(Engine& engine, int seq, std::span<float> logits, int n,
                                   std::span<const int32_t> stop) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t next = argmax(logits.data(), static_cast<int>(logits.size()));
    if (std::find(stop.begin(), stop.end(), next) != stop.end()) break;
    out.push_back(next);
    if (i + 1 < n) engine.decode(std::span(&seq, 1), std::span(&next, 1), logits.data());
  }
  return out;
}

GreedyReplies::GreedyReplies(std::span<Engine* const> engines, const Tokenizer& tok, const PrefillCache* cache)
    : engines_(engines.begin(), engines.end()), tok_(tok), cache_(cache), stop_(tok.stop_ids()) {}

std::vector<std::string> GreedyReplies::reply(std::span<const int32_t> ids, int n) {
  constexpr int seq = 0;
  shared_prefill(engines_, seq, ids, logits_, stats_, &roles_, cache_);
  std::vector<std::string> replies;
  for (size_t i = 0; i < engines_.size(); ++i)
    replies.push_back(tok_.decode(greedy_tokens(*engines_[i], seq, logits_[i], n, stop_), /*skip_special=*/true));
  return replies;
}

}  // namespace hg::eval
