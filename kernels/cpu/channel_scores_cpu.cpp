// Dispatch of channel_scores (channel_scores.h) and its baseline build.
#include "kernels/cpu/channel_scores.h"

namespace hg::cpu {

void channel_scores_isa(CpuIsa isa, const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims,
                        const float* q, int n_q, int64_t ld_q, float* best, float* wide) {
  switch (isa) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512:
      return channel_scores_avx512(cols, ld, n, dims, n_dims, q, n_q, ld_q, best, wide);
    case CpuIsa::Avx2:
      return channel_scores_avx2(cols, ld, n, dims, n_dims, q, n_q, ld_q, best, wide);
    case CpuIsa::Scalar:
      break;
  }
  channel_scores_loop(cols, ld, n, dims, n_dims, q, n_q, ld_q, best);
}

void channel_scores(const uint16_t* cols, int64_t ld, int64_t n, const int32_t* dims, int n_dims, const float* q,
                    int n_q, int64_t ld_q, float* best, float* wide) {
  channel_scores_isa(active_cpu_isa(), cols, ld, n, dims, n_dims, q, n_q, ld_q, best, wide);
}

}  // namespace hg::cpu
