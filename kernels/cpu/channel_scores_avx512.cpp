// channel_scores (channel_scores.h) for AVX-512: channel_scores_kernel.h with the AVX-512 traits.
#include "kernels/cpu/channel_scores_kernel.h"
#include "kernels/cpu/vec_avx512.h"

namespace hg::cpu {

void channel_scores_avx512(const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims, const float* q,
                           int n_q, int64_t ld_q, float* best, float* wide) {
  channel_scores_t<Avx512>(cols, ld, n, dims, n_dims, q, n_q, ld_q, best, wide);
}

}  // namespace hg::cpu
