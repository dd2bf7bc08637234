#include "hybridgen/dtype.h"

namespace hg {

int dtype_block_elems(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return 1;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1: return 32;
    case DType::Q4_K:
    case DType::Q6_K: return 256;
  }
  return 1;
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return 2 + 32;       // f16 d, int8 q[32]
    case DType::Q4_0: return 2 + 16;       // f16 d, nibbles[16]
    case DType::Q4_1: return 2 + 2 + 16;   // f16 d, f16 m, nibbles[16]
    case DType::Q4_K: return 2 + 2 + 12 + 128;  // f16 d, f16 dmin, scales[12], qs[128]
    case DType::Q6_K: return 128 + 64 + 16 + 2;  // ql[128], qh[64], scales[16], f16 d
  }
  return 0;
}

size_t dtype_row_bytes(DType t, int64_t n) {
  return static_cast<size_t>(n / dtype_block_elems(t)) * dtype_block_bytes(t);
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
    case DType::Q4_K: return "q4_k";
    case DType::Q6_K: return "q6_k";
  }
  return "?";
}

bool dtype_is_quantized(DType t) { return dtype_block_elems(t) > 1; }

}  // namespace hg
