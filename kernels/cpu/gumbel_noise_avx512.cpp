// gumbel_noise_span (gumbel_noise.h) built for AVX512: the compiler vectorizes the 64-bit hash
// and the logarithms (no FMA contraction: CMakeLists.txt builds gumbel_noise_* with
// -ffp-contract=off, so the bits are the baseline's).
#include "kernels/cpu/gumbel_noise.h"

namespace hg::cpu {

void gumbel_noise_span_avx512(uint64_t row, const int32_t* key_pos, int64_t n, float* noise) {
  gumbel_noise_loop(row, key_pos, n, noise);
}

}  // namespace hg::cpu
