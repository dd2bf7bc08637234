// Greedy continuation through the engine's decode path, shared by the answer-scoring tasks
// (passkey, ruler).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace hg {
class Engine;
}

namespace hg::eval {

// Up to n tokens of sequence `seq`, each the argmax of `logits` ([vocab]: the prompt's last
// logits on entry, the last decoded token's on return), stopping before a token of `stop`. The
// token that ends the reply is not decoded.
std::vector<int32_t> greedy_tokens(Engine& engine, int seq, std::span<float> logits, int n,
                                   std::span<const int32_t> stop);

}  // namespace hg::eval
