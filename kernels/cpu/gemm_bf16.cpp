// The host side of the bf16 prefill GEMMs that needs no special instructions: the scratch size.
#include "kernels/cpu/gemm_bf16.h"

namespace hg::cpu {

size_t bf16_gemm_work_bytes(int64_t cols) {
  // 16 dequantized fp32 rows, the bf16 panel (32 rows), the 32 x 32 fp32 write-back block
  return static_cast<size_t>(16 * cols) * sizeof(float) + static_cast<size_t>(32 * cols) * sizeof(uint16_t) +
         32 * 32 * sizeof(float);
}

}  // namespace hg::cpu
