// AVX2 dot kernels: dot_kernels.h instantiated with the AVX2 traits.
#include "kernels/cpu/vec_avx2.h"
#include "kernels/cpu/dot_kernels.h"

namespace hg::cpu {

const DotIsaFns kDotAvx2 = {dot_f32_t<Avx2>, dot_rows_heads_dispatch<Avx2>, axpy_rows_heads_dispatch<Avx2>, max_value_t<Avx2>,
                            exp_shift_sum_t<Avx2>};

}  // namespace hg::cpu
