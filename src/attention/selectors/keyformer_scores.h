// Keyformer's token score (Adnan et al., MLSys 2024; d-matrix-ai/keyformer-llm
// models/keyformer-lib/attention.py): instead of H2O's softmax probabilities, each query row adds
// a Gumbel-softmax of its attention logits, softmax((logits + g) / τ) with g ~ Gumbel(0, 1), to the
// key tokens' accumulated scores; τ rises linearly over the generated tokens (τ_init at the first,
// τ_end at the last), so early steps score sharply and later ones more evenly. The keep rule is
// H2O's (attention/selectors/h2o_scores.h).
#pragma once
#include <cstdint>

namespace hg {

// τ for the token at position `pos` of a sequence whose prompt had `prompt_len` tokens and whose
// context holds `ctx`: τ_init for the prompt and the first generated token, τ_end at position ctx-1.
float keyformer_tau(float tau_init, float tau_end, int64_t pos, int64_t prompt_len, int64_t ctx);

// Gumbel(0, 1) noise for one (layer, query head, query position, key position) as a pure function
// of the seed (a counter-based hash, not a stream): the same seed gives the same scores whatever
// the thread split, the batch or the order in which heads are visited. The draw is one of 2^16
// equiprobable quantiles (kernels/cpu/gumbel_noise.h).
float gumbel_noise(uint64_t seed, int layer, int head, int64_t query_pos, int64_t key_pos);

// noise[i] = gumbel_noise(seed, layer, head, query_pos, key_pos[i]) for one query row, bit for bit,
// with the row's part of the hash computed once and the keys' hashes and table loads vectorized.
void gumbel_noise_row(uint64_t seed, int layer, int head, int64_t query_pos, const int32_t* key_pos, int64_t n,
                      float* noise);
// x[i] += the same noise: a prompt row's scores take it in place.
void gumbel_noise_row_add(uint64_t seed, int layer, int head, int64_t query_pos, const int32_t* key_pos, int64_t n,
                          float* x);

// ln x for a normal, finite x > 0 in float, branch-free and elementwise so that loops of it
// vectorize (libm's scalar calls were most of keyformer's prefill); within 2 ulp of std::log.
float ln_normal(float x);

// y = softmax((log p + noise) / τ) over n tokens, from one query head's attention probabilities p
// (log p and the logits differ by a constant, which the softmax ignores). Tokens with p = 0
// (masked) get 0. p and y may alias.
void gumbel_softmax(const float* p, const float* noise, int64_t n, float tau, float* y);

}  // namespace hg
