// Per-position measures of one logits row against a target token or a reference row, shared by
// perplexity, fidelity and passkey. Rows are [vocab] float32; sums run in double.
#pragma once
#include <cstdint>

namespace hg::eval {

// log softmax(logits)[target], computed stably.
double log_prob(const float* logits, int vocab, int32_t target);
// KL(p_ref || p_policy) of two logit rows (>= 0).
double kl_divergence(const float* ref, const float* policy, int vocab);
// The index of the largest logit (the first one on ties).
int argmax(const float* logits, int vocab);

}  // namespace hg::eval
