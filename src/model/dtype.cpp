#include "hybridgen/dtype.h"

namespace hg {

namespace {

struct DTypeInfo {
  const char* name;
  int block_elems;
  int block_bytes;
};

// Block layouts as ggml defines them (kernels/cpu/quant_blocks.h has the structs).
DTypeInfo info(DType t) {
  switch (t) {
    case DType::F32: return {"f32", 1, 4};
    case DType::F16: return {"f16", 1, 2};
    case DType::BF16: return {"bf16", 1, 2};
    case DType::Q8_0: return {"q8_0", 32, 2 + 32};           // f16 d, int8 q[32]
    case DType::Q4_0: return {"q4_0", 32, 2 + 16};           // f16 d, nibbles[16]
    case DType::Q4_1: return {"q4_1", 32, 2 + 2 + 16};       // f16 d, f16 m, nibbles[16]
    case DType::Q5_0: return {"q5_0", 32, 2 + 4 + 16};       // f16 d, high bits[4], nibbles[16]
    case DType::Q5_1: return {"q5_1", 32, 2 + 2 + 4 + 16};   // f16 d, f16 m, high bits[4], nibbles[16]
    case DType::IQ4_NL: return {"iq4_nl", 32, 2 + 16};       // f16 d, grid indices[16]
    case DType::Q2_K: return {"q2_k", 256, 16 + 64 + 2 + 2};  // scales[16], qs[64], f16 d, f16 dmin
    case DType::Q3_K: return {"q3_k", 256, 32 + 64 + 12 + 2};  // hmask[32], qs[64], scales[12], f16 d
    case DType::Q4_K: return {"q4_k", 256, 2 + 2 + 12 + 128};  // f16 d, f16 dmin, scales[12], qs[128]
    case DType::Q5_K: return {"q5_k", 256, 2 + 2 + 12 + 32 + 128};  // Q4_K + qh[32]
    case DType::Q6_K: return {"q6_k", 256, 128 + 64 + 16 + 2};  // ql[128], qh[64], scales[16], f16 d
    case DType::IQ4_XS: return {"iq4_xs", 256, 2 + 2 + 4 + 128};  // f16 d, scales_h, scales_l[4], qs[128]
  }
  return {"?", 1, 0};
}

}  // namespace

int dtype_block_elems(DType t) { return info(t).block_elems; }

size_t dtype_block_bytes(DType t) { return static_cast<size_t>(info(t).block_bytes); }

size_t dtype_row_bytes(DType t, int64_t n) {
  return static_cast<size_t>(n / dtype_block_elems(t)) * dtype_block_bytes(t);
}

std::string_view dtype_name(DType t) { return info(t).name; }

bool dtype_is_quantized(DType t) { return dtype_block_elems(t) > 1; }

}  // namespace hg
