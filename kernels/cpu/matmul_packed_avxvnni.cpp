// The packed GEMV with AVX-VNNI's vpdpbusd on 256-bit vectors (matmul_packed_ymm.h).
#include "kernels/cpu/matmul_packed_ymm.h"

namespace hg::cpu {

void gemv_packed_rows_avxvnni(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  packed_rows_ymm<true>(a, row_begin, row_end);
}

}  // namespace hg::cpu
