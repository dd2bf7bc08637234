// GGUF block layouts (bit-compatible with ggml's block_q8_0 … block_q6_K) and their scalar
// dequantization. A row of a quantized tensor is a run of whole blocks.
// Functions are `static inline` for the same reason as in half.h (per-ISA translation units).
#pragma once
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/cpu/half.h"

namespace hg::cpu {

// value = q * d
struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[32];
};
// value = (nibble - 8) * d; byte j holds element j (low nibble) and element j + 16 (high nibble)
struct BlockQ4_0 {
  uint16_t d;  // f16
  uint8_t qs[16];
};
// value = nibble * d + m; same nibble order as Q4_0
struct BlockQ4_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16
  uint8_t qs[16];
};
// 256 values in 8 sub-blocks of 32; each sub-block has a 6-bit scale and a 6-bit min, packed in
// `scales`; value = d * scale * nibble - dmin * min. Bytes qs[32k .. 32k+31] hold sub-block 2k
// (low nibbles) and 2k+1 (high nibbles).
struct BlockQ4_K {
  uint16_t d;     // f16, scale of the sub-block scales
  uint16_t dmin;  // f16, scale of the sub-block mins
  uint8_t scales[12];
  uint8_t qs[128];
};
// 256 values in 16 sub-blocks of 16 with int8 scales; value = d * scale * (q6 - 32), q6 = 4 low
// bits from ql and 2 high bits from qh.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // f16
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

// The 32 codes of a Q4_0 / Q4_1 block in value order (byte i: value i low, value i + 16 high).
template <class T>
static inline void unpack_nibbles(const uint8_t* qs, T* code) {
  for (int i = 0; i < 16; ++i) {
    code[i] = static_cast<T>(qs[i] & 0xf);
    code[i + 16] = static_cast<T>(qs[i] >> 4);
  }
}

static inline void dequantize_block(const BlockQ8_0& b, float* out) {
  const float d = f16_to_fp32(b.d);
  for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(b.qs[i]) * d;
}

static inline void dequantize_block(const BlockQ4_0& b, float* out) {
  const float d = f16_to_fp32(b.d);
  for (int i = 0; i < 16; ++i) {
    out[i] = static_cast<float>((b.qs[i] & 0xf) - 8) * d;
    out[i + 16] = static_cast<float>((b.qs[i] >> 4) - 8) * d;
  }
}

static inline void dequantize_block(const BlockQ4_1& b, float* out) {
  const float d = f16_to_fp32(b.d);
  const float m = f16_to_fp32(b.m);
  for (int i = 0; i < 16; ++i) {
    out[i] = static_cast<float>(b.qs[i] & 0xf) * d + m;
    out[i + 16] = static_cast<float>(b.qs[i] >> 4) * d + m;
  }
}

// Sub-block j's 6-bit scale and min: j < 4 keep them in the low 6 bits of bytes j and j+4; the
// others split them into a low nibble (byte j+4) and two high bits (top of bytes j-4 and j).
static inline void q4_k_scale_min(const uint8_t* scales, int j, int& scale, int& min) {
  if (j < 4) {
    scale = scales[j] & 63;
    min = scales[j + 4] & 63;
  } else {
    scale = (scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4);
    min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

static inline void dequantize_block(const BlockQ4_K& b, float* out) {
  const float d = f16_to_fp32(b.d);
  const float dmin = f16_to_fp32(b.dmin);
  for (int k = 0; k < 4; ++k) {
    int sc0, m0, sc1, m1;
    q4_k_scale_min(b.scales, 2 * k, sc0, m0);
    q4_k_scale_min(b.scales, 2 * k + 1, sc1, m1);
    const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
    const uint8_t* q = b.qs + 32 * k;
    for (int l = 0; l < 32; ++l) {
      out[64 * k + l] = d0 * static_cast<float>(q[l] & 0xf) - min0;
      out[64 * k + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - min1;
    }
  }
}

static inline void dequantize_block(const BlockQ6_K& b, float* out) {
  const float d = f16_to_fp32(b.d);
  // First the 6-bit values as bytes, then one scale per 16: two simple loops the compiler
  // vectorizes, where a fused loop mixing both stays scalar (~10x slower).
  // In each half of 128 values, byte l of ql / qh feeds values l, l+32, l+64, l+96.
  int8_t q[256];
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql + 64 * half;
    const uint8_t* qh = b.qh + 32 * half;
    int8_t* y = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      y[l] = static_cast<int8_t>(((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32);
      y[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  for (int j = 0; j < 16; ++j) {
    const float scale = d * static_cast<float>(b.scales[j]);
    for (int l = 0; l < 16; ++l) out[16 * j + l] = scale * static_cast<float>(q[16 * j + l]);
  }
}

// Dequantizes the first n elements of a row starting at `row` (n: whole blocks) to fp32.
void dequantize_span(DType wt, const void* row, int64_t n, float* out);

}  // namespace hg::cpu
