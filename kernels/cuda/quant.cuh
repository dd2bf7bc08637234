// GGUF block types as the GPU reads them: the weights stay in their file's blocks in device
// memory and are dequantized in registers, 32 values (one "group") at a time. A group is a whole
// block of the 32-value types (Q4_0, Q4_1, Q5_0, Q8_0) and one of the eight 32-value sub-blocks of
// a 256-value K-quant super-block (Q4_K, Q5_K, Q6_K). The arithmetic is the CPU twin's
// (kernels/cpu/quant_blocks.h, dequantize_block), value for value.
//
// Blocks are read byte by byte or as aligned 16-bit words: 18-, 22-, 34- and 210-byte blocks
// leave nothing wider aligned.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "hybridgen/dtype.h"
#include "hybridgen/error.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/kernels.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

__device__ __forceinline__ float f16_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}

// value = (nibble - 8) * d; byte j: value j (low nibble), value j + 16 (high)
struct QuantQ4_0 {
  static constexpr int kBytes = 18, kGroups = 1;
  __device__ static void group(const uint8_t* b, int, float* v) {
    const float d = f16_at(b);
    const uint8_t* qs = b + 2;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      v[i] = static_cast<float>((qs[i] & 0xf) - 8) * d;
      v[i + 16] = static_cast<float>((qs[i] >> 4) - 8) * d;
    }
  }
};

// value = nibble * d + m
struct QuantQ4_1 {
  static constexpr int kBytes = 20, kGroups = 1;
  __device__ static void group(const uint8_t* b, int, float* v) {
    const float d = f16_at(b), m = f16_at(b + 2);
    const uint8_t* qs = b + 4;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      v[i] = __fadd_rn(__fmul_rn(static_cast<float>(qs[i] & 0xf), d), m);
      v[i + 16] = __fadd_rn(__fmul_rn(static_cast<float>(qs[i] >> 4), d), m);
    }
  }
};

// value = (q5 - 16) * d; q5 = the Q4_0 nibble plus bit i of qh (4 bytes after d) for value i
struct QuantQ5_0 {
  static constexpr int kBytes = 22, kGroups = 1;
  __device__ static void group(const uint8_t* b, int, float* v) {
    const float d = f16_at(b);
    const uint32_t qh = static_cast<uint32_t>(b[2]) | static_cast<uint32_t>(b[3]) << 8 |
                        static_cast<uint32_t>(b[4]) << 16 | static_cast<uint32_t>(b[5]) << 24;
    const uint8_t* qs = b + 6;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int lo = (qs[i] & 0xf) | static_cast<int>(((qh >> i) & 1u) << 4);
      const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
      v[i] = static_cast<float>(lo - 16) * d;
      v[i + 16] = static_cast<float>(hi - 16) * d;
    }
  }
};

// value = q * d, q int8
struct QuantQ8_0 {
  static constexpr int kBytes = 34, kGroups = 1;
  __device__ static void group(const uint8_t* b, int, float* v) {
    const float d = f16_at(b);
    const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(qs[i]) * d;
  }
};

// Sub-block j of a Q4_K / Q5_K block (d, dmin, then 12 bytes of packed 6-bit scales and mins, as
// cpu::q4_k_scale_min unpacks them): its scale d * scale_j and its offset dmin * min_j.
__device__ __forceinline__ void k_scale_min(const uint8_t* b, int j, float& dl, float& ml) {
  const uint8_t* scales = b + 4;
  int scale, min;
  if (j < 4) {
    scale = scales[j] & 63;
    min = scales[j + 4] & 63;
  } else {
    scale = (scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4);
    min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
  dl = __fmul_rn(f16_at(b), static_cast<float>(scale));
  ml = __fmul_rn(f16_at(b + 2), static_cast<float>(min));
}

// Sub-block k: value = d * scale * nibble - dmin * min; bytes qs[32 (k/2) ...], low nibbles for
// even k, high for odd.
struct QuantQ4_K {
  static constexpr int kBytes = 144, kGroups = 8;
  __device__ static void group(const uint8_t* b, int k, float* v) {
    float dl, ml;
    k_scale_min(b, k, dl, ml);
    const uint8_t* q = b + 16 + 32 * (k / 2);
    const int shift = 4 * (k % 2);
#pragma unroll
    for (int l = 0; l < 32; ++l) v[l] = __fsub_rn(__fmul_rn(dl, static_cast<float>((q[l] >> shift) & 0xf)), ml);
  }
};

// Q4_K with a fifth bit: bit k of qh[l] (32 bytes after the scales) for value 32 k + l.
struct QuantQ5_K {
  static constexpr int kBytes = 176, kGroups = 8;
  __device__ static void group(const uint8_t* b, int k, float* v) {
    float dl, ml;
    k_scale_min(b, k, dl, ml);
    const uint8_t* qh = b + 16;
    const uint8_t* q = b + 48 + 32 * (k / 2);
    const int shift = 4 * (k % 2);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int code = ((q[l] >> shift) & 0xf) | (((qh[l] >> k) & 1) << 4);
      v[l] = __fsub_rn(__fmul_rn(dl, static_cast<float>(code)), ml);
    }
  }
};

// value = d * scale * (q6 - 32), one int8 scale per 16 values; values 32 k + l take their low
// four bits from ql (128 bytes) and two high bits from qh (64 bytes), as cpu::q6_k_codes.
struct QuantQ6_K {
  static constexpr int kBytes = 210, kGroups = 8;
  __device__ static void group(const uint8_t* b, int k, float* v) {
    const uint8_t* ql = b + 64 * (k / 4) + 32 * (k % 2);
    const uint8_t* qh = b + 128 + 32 * (k / 4);
    const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = f16_at(b + 208);
    const int j = k % 4, low_shift = 4 * (j / 2);
    const float s0 = __fmul_rn(d, static_cast<float>(scales[2 * k])),
                s1 = __fmul_rn(d, static_cast<float>(scales[2 * k + 1]));
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int code = ((ql[l] >> low_shift) & 0xf) | (((qh[l] >> (2 * j)) & 3) << 4);
      v[l] = __fmul_rn(l < 16 ? s0 : s1, static_cast<float>(code - 32));
    }
  }
};

// Calls f(Q{}) with Q the reader of block type t (held_quantized(t), kernels.h, must hold).
template <typename F>
void dispatch_quant_type(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::Q4_0: f(QuantQ4_0{}); return;
    case DType::Q4_1: f(QuantQ4_1{}); return;
    case DType::Q5_0: f(QuantQ5_0{}); return;
    case DType::Q8_0: f(QuantQ8_0{}); return;
    case DType::Q4_K: f(QuantQ4_K{}); return;
    case DType::Q5_K: f(QuantQ5_K{}); return;
    case DType::Q6_K: f(QuantQ6_K{}); return;
    default:
      throw Error(std::string(what) + ": dtype #" + std::to_string(static_cast<int>(t)) +
                  " is not held quantized on the GPU");
  }
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
