// Dispatch of gumbel_noise_span (gumbel_noise.h) and its baseline build.
#include "kernels/cpu/gumbel_noise.h"

namespace hg::cpu {

void gumbel_noise_span_isa(CpuIsa isa, uint64_t row, const int32_t* key_pos, int64_t n, float* noise) {
  switch (isa) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512:
      return gumbel_noise_span_avx512(row, key_pos, n, noise);
    case CpuIsa::Avx2:
      return gumbel_noise_span_avx2(row, key_pos, n, noise);
    case CpuIsa::Scalar:
      break;
  }
  gumbel_noise_loop(row, key_pos, n, noise);
}

void gumbel_noise_span(uint64_t row, const int32_t* key_pos, int64_t n, float* noise) {
  gumbel_noise_span_isa(active_cpu_isa(), row, key_pos, n, noise);
}

}  // namespace hg::cpu
