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
// value = (q5 - 16) * d; q5 = nibble as in Q4_0 plus a fifth bit: bit i of qh for value i.
struct BlockQ5_0 {
  uint16_t d;  // f16
  uint8_t qh[4];
  uint8_t qs[16];
};
// value = q5 * d + m
struct BlockQ5_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16
  uint8_t qh[4];
  uint8_t qs[16];
};
// 256 values in 16 sub-blocks of 16, each with a 4-bit scale (low nibble of scales[j]) and a
// 4-bit min (high nibble); value = d * scale * q2 - dmin * min. In each half of 128 values, byte l
// of qs[32 half ..] feeds values l, l+32, l+64, l+96 (bits 0-1, 2-3, 4-5, 6-7).
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;     // f16
  uint16_t dmin;  // f16
};
// 256 values in 16 sub-blocks of 16 with 6-bit scales (stored minus 32, packed in 12 bytes);
// value = d * (scale - 32) * (q2 - 4 * !hbit): q2 as in Q2_K, the high bit in hmask (bit k of
// hmask[l] for values 32 k + l).
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;  // f16
};
// Q4_K with a fifth bit per value: bit k of qh[l] for value 32 k + l.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// value = d * kIq4nlValues[nibble]; nibble order as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;  // f16
  uint8_t qs[16];
};
// 256 values in 8 sub-blocks of 32 with 6-bit scales (4 low bits in scales_l, 2 high bits in
// scales_h, stored plus 32); value = d * (scale - 32) * kIq4nlValues[nibble], nibbles as IQ4_NL.
struct BlockIQ4_XS {
  uint16_t d;  // f16
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110 && sizeof(BlockQ5_K) == 176 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);

// The non-linear 4-bit grid of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

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

// Values 32 k .. 32 k + 31 of a Q6_K block as unsigned six-bit codes (value = d * scale * (code -
// 32)); k: 0..7. In half k / 4, byte l of ql / qh feeds values l, l+32, l+64, l+96 (see above).
static inline void q6_k_codes(const BlockQ6_K& b, int k, uint8_t* code) {
  const uint8_t* ql = b.ql + 64 * (k / 4) + 32 * (k % 2);
  const uint8_t* qh = b.qh + 32 * (k / 4);
  const int j = k % 4, low_shift = 4 * (j / 2);
  for (int l = 0; l < 32; ++l)
    code[l] = static_cast<uint8_t>(((ql[l] >> low_shift) & 0xf) | (((qh[l] >> (2 * j)) & 3) << 4));
}
// The 32 five-bit codes of a Q5_0 / Q5_1 block in value order.
static inline void unpack_q5(const uint8_t* qs, const uint8_t* qh_bytes, uint8_t* code) {
  uint32_t qh;
  __builtin_memcpy(&qh, qh_bytes, 4);
  unpack_nibbles(qs, code);
  for (int i = 0; i < 32; ++i) code[i] = static_cast<uint8_t>(code[i] | (((qh >> i) & 1u) << 4));
}

static inline void dequantize_block(const BlockQ5_0& b, float* out) {
  const float d = f16_to_fp32(b.d);
  uint8_t code[32];
  unpack_q5(b.qs, b.qh, code);
  for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(code[i] - 16) * d;
}

static inline void dequantize_block(const BlockQ5_1& b, float* out) {
  const float d = f16_to_fp32(b.d), m = f16_to_fp32(b.m);
  uint8_t code[32];
  unpack_q5(b.qs, b.qh, code);
  for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(code[i]) * d + m;
}

// Values 32 k .. 32 k + 31 of a Q2_K / Q3_K super-block as 2-bit codes (k: 0..7).
static inline void unpack_q2(const uint8_t* qs, int k, uint8_t* code) {
  const uint8_t* q = qs + 32 * (k / 4);
  const int shift = 2 * (k % 4);
  for (int l = 0; l < 32; ++l) code[l] = static_cast<uint8_t>((q[l] >> shift) & 3);
}

static inline void dequantize_block(const BlockQ2_K& b, float* out) {
  const float d = f16_to_fp32(b.d), dmin = f16_to_fp32(b.dmin);
  for (int k = 0; k < 8; ++k) {
    uint8_t code[32];
    unpack_q2(b.qs, k, code);
    for (int h = 0; h < 2; ++h) {
      const uint8_t sc = b.scales[2 * k + h];
      const float dl = d * static_cast<float>(sc & 0xf), ml = dmin * static_cast<float>(sc >> 4);
      for (int l = 0; l < 16; ++l) out[32 * k + 16 * h + l] = dl * static_cast<float>(code[16 * h + l]) - ml;
    }
  }
}

// The 16 six-bit scales of a Q3_K block, minus 32.
static inline void q3_k_scales(const uint8_t* packed, int8_t* scales) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0xf : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// Values 32 k .. 32 k + 31 of a Q3_K block as signed codes (-4..3).
static inline void q3_k_codes(const BlockQ3_K& b, int k, int8_t* code) {
  uint8_t q2[32];
  unpack_q2(b.qs, k, q2);
  for (int l = 0; l < 32; ++l) code[l] = static_cast<int8_t>(q2[l] - ((b.hmask[l] >> k) & 1 ? 0 : 4));
}

static inline void dequantize_block(const BlockQ3_K& b, float* out) {
  const float d = f16_to_fp32(b.d);
  int8_t scales[16];
  q3_k_scales(b.scales, scales);
  for (int k = 0; k < 8; ++k) {
    int8_t code[32];
    q3_k_codes(b, k, code);
    for (int h = 0; h < 2; ++h) {
      const float dl = d * static_cast<float>(scales[2 * k + h]);
      for (int l = 0; l < 16; ++l) out[32 * k + 16 * h + l] = dl * static_cast<float>(code[16 * h + l]);
    }
  }
}

// Values 32 k .. 32 k + 31 of a Q5_K block as five-bit codes.
static inline void q5_k_codes(const BlockQ5_K& b, int k, uint8_t* code) {
  const uint8_t* q = b.qs + 32 * (k / 2);
  const int shift = 4 * (k % 2);
  for (int l = 0; l < 32; ++l)
    code[l] = static_cast<uint8_t>(((q[l] >> shift) & 0xf) | (((b.qh[l] >> k) & 1) << 4));
}

static inline void dequantize_block(const BlockQ5_K& b, float* out) {
  const float d = f16_to_fp32(b.d), dmin = f16_to_fp32(b.dmin);
  for (int k = 0; k < 8; ++k) {
    int sc, m;
    q4_k_scale_min(b.scales, k, sc, m);
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
    uint8_t code[32];
    q5_k_codes(b, k, code);
    for (int l = 0; l < 32; ++l) out[32 * k + l] = dl * static_cast<float>(code[l]) - ml;
  }
}

static inline void dequantize_block(const BlockIQ4_NL& b, float* out) {
  const float d = f16_to_fp32(b.d);
  uint8_t code[32];
  unpack_nibbles(b.qs, code);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(kIq4nlValues[code[i]]);
}

// Sub-block k's scale of an IQ4_XS block, minus 32.
static inline int iq4_xs_scale(const BlockIQ4_XS& b, int k) {
  const int low = (b.scales_l[k / 2] >> (4 * (k % 2))) & 0xf;
  const int high = (b.scales_h >> (2 * k)) & 3;
  return (low | (high << 4)) - 32;
}

static inline void dequantize_block(const BlockIQ4_XS& b, float* out) {
  const float d = f16_to_fp32(b.d);
  for (int k = 0; k < 8; ++k) {
    const float dl = d * static_cast<float>(iq4_xs_scale(b, k));
    uint8_t code[32];
    unpack_nibbles(b.qs + 16 * k, code);
    for (int i = 0; i < 32; ++i) out[32 * k + i] = dl * static_cast<float>(kIq4nlValues[code[i]]);
  }
}

// Dequantizes `n` elements (whole blocks) of a row of blocks B.
template <class B>
static inline void dequantize_blocks(const void* row, int64_t n, float* out, int64_t block_elems) {
  const auto* b = static_cast<const B*>(row);
  for (int64_t i = 0; i < n / block_elems; ++i) dequantize_block(b[i], out + block_elems * i);
}

// Dequantizes `n` elements (whole blocks) of a row of any block type; compiled in each ISA's
// translation unit, so the compiler vectorizes the loops it can for that ISA.
static inline void dequantize_block_row(DType wt, const void* row, int64_t n, float* out) {
  switch (wt) {
    case DType::Q8_0: return dequantize_blocks<BlockQ8_0>(row, n, out, 32);
    case DType::Q4_0: return dequantize_blocks<BlockQ4_0>(row, n, out, 32);
    case DType::Q4_1: return dequantize_blocks<BlockQ4_1>(row, n, out, 32);
    case DType::Q5_0: return dequantize_blocks<BlockQ5_0>(row, n, out, 32);
    case DType::Q5_1: return dequantize_blocks<BlockQ5_1>(row, n, out, 32);
    case DType::IQ4_NL: return dequantize_blocks<BlockIQ4_NL>(row, n, out, 32);
    case DType::Q2_K: return dequantize_blocks<BlockQ2_K>(row, n, out, 256);
    case DType::Q3_K: return dequantize_blocks<BlockQ3_K>(row, n, out, 256);
    case DType::Q4_K: return dequantize_blocks<BlockQ4_K>(row, n, out, 256);
    case DType::Q5_K: return dequantize_blocks<BlockQ5_K>(row, n, out, 256);
    case DType::Q6_K: return dequantize_blocks<BlockQ6_K>(row, n, out, 256);
    case DType::IQ4_XS: return dequantize_blocks<BlockIQ4_XS>(row, n, out, 256);
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;  // plain types: dequantize_span
  }
}

// Dequantizes the first n elements of a row starting at `row` (n: whole blocks) to fp32.
void dequantize_span(DType wt, const void* row, int64_t n, float* out);

}  // namespace hg::cpu
