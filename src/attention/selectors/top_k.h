// The K largest scores of a row, shared by the selectors that rank tokens (Post-QKᵀ top-K, H2O,
// Partial): indices in increasing order; ties go to the more recent token.
#pragma once
#include <cstdint>
#include <vector>

namespace hg {

// out[0..K) = indices of the K largest of scores[0..n), increasing. order: scratch (2n ints).
void top_k_indices(const float* scores, int64_t n, int K, int32_t* out, std::vector<int32_t>& order);

// A kv-head's score of each of n tokens: the largest over its group's query heads.
// logits: [group][n] (row h at logits + h * n); scores: [n].
void group_max_scores(const float* logits, int group, int64_t n, float* scores);

}  // namespace hg
