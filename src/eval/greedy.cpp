#include "eval/greedy.h"

#include <algorithm>

#include "eval/logit_metrics.h"
#include "hybridgen/engine.h"

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

}  // namespace hg::eval
