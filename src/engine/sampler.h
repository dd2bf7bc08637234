// Token sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty. Seeded per
// sequence, so the same seed and settings give the same tokens.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace hg {

struct SamplerOptions {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off (llama.cpp semantics: divide positive logits, multiply negative)
  int repeat_last_n = 64;
  uint64_t seed = 42;
};

class Sampler {
 public:
  Sampler(const SamplerOptions& options, int vocab_size);
  // logits are modified (penalty, temperature). `history`: tokens so far (for the penalty).
  int32_t sample(float* logits, std::span<const int32_t> history);

 private:
  SamplerOptions opt_;
  std::mt19937_64 rng_;
  // Reused across tokens: no allocation per token.
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<double> probs_;
  std::vector<int32_t> recent_;
};

int32_t argmax(const float* logits, int n);

}  // namespace hg
