// The packed GEMV with AVX2's vpmaddubsw + vpmaddwd (matmul_packed_ymm.h).
#include "kernels/cpu/matmul_packed_ymm.h"

namespace hg::cpu {

void gemv_packed_rows_avx2(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  packed_rows_ymm<false>(a, row_begin, row_end);
}

}  // namespace hg::cpu
