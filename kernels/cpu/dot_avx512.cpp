// AVX512 dot kernels: dot_kernels.h instantiated with the AVX512 traits.
#include "kernels/cpu/vec_avx512.h"
#include "kernels/cpu/dot_kernels.h"

namespace hg::cpu {

const DotIsaFns kDotAvx512 = {dot_f32_t<Avx512>, dot_rows_heads_dispatch<Avx512>, axpy_rows_heads_dispatch<Avx512>,
                              max_value_t<Avx512>, exp_shift_sum_t<Avx512>};

}  // namespace hg::cpu
