// InfiniGen's query/key skew (Lee et al., OSDI 2024; snu-comparch/InfiniGen
// speedup/infinigen/infinigen/skewing_controller.py and partial_weight_generation_controller.py).
//
// Per layer and kv-head, once after prefill: the SVD Q = U Σ Vᵀ of the prefill queries (the
// group's query heads stacked, after RoPE, as InfiniGen's Llama code takes them) gives an
// orthogonal A = V. Rotating both sides leaves every logit unchanged, (qA)·(kA) = q·k, but
// concentrates the queries' energy in a few channels of the rotated basis, so that the top
// `ratio` channels by Σ|QA| (summed over the prompt rows) predict the attention well. InfiniGen
// folds A into Wq and Wk (OPT has no RoPE between them); with RoPE the rotation has to follow it,
// so here it is applied to the roped q and k, which is the same product. The reference also takes
// the SVD of K and permutes A's columns by σ_Q·σ_K; a permutation changes neither the scores nor
// the chosen set of channels, so A keeps V's column order.
#pragma once
#include <cstdint>
#include <vector>

namespace hg {

// Channels kept for speculation out of head_dim (InfiniGen: int(head_dim · ratio)), at least 1.
int partial_channel_count(int head_dim, float ratio);

// A = V of the SVD of q ([n_rows][head_dim], row-major), as [head_dim][head_dim] row-major:
// A[d * head_dim + c] is component d of basis vector c. Columns are ordered by decreasing
// singular value.
std::vector<float> skew_matrix(const float* q, int64_t n_rows, int head_dim);

// The n_partial channels c of the rotated basis with the largest Σ_rows |(q A)[row][c]|, in
// increasing channel order (ties to the lower channel).
std::vector<int32_t> choose_channels(const float* q, int64_t n_rows, const std::vector<float>& a, int head_dim,
                                     int n_partial);

// The speculation side of one layer's kv-head: x ↦ (x A)[channels].
struct PartialProjection {
  int head_dim = 0;
  std::vector<int32_t> channels;  // [n_partial], increasing
  std::vector<float> basis;       // [n_partial][head_dim]: row c = column channels[c] of A

  int n_partial() const { return static_cast<int>(channels.size()); }
  // out[c] = Σ_d x[d] · A[d][channels[c]]  (x: [head_dim], out: [n_partial])
  void project(const float* x, float* out) const;
};

// skew_matrix + choose_channels + the rows of A they pick.
PartialProjection make_partial_projection(const float* q, int64_t n_rows, int head_dim, int n_partial);

}  // namespace hg
