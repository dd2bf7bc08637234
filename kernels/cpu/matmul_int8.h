// Int8 GEMV written once over a dot-product traits type D, instantiated by matmul_int8_avx2.cpp
// (vpmaddubsw + vpmaddwd), matmul_int8_avxvnni.cpp (AVX-VNNI vpdpbusd) and
// matmul_int8_avx512vnni.cpp (AVX512-VNNI vpdpbusd, EVEX-256). D provides
//   __m256i dot(__m256i u, __m256i s): 8 int32 lanes, lane k = sum of u[4k+i] * s[4k+i] (u8 x s8).
//
// Design: the activation row is quantized to int8 once per matmul (ActQ8), so the weights stay in
// their 4/6/8-bit codes and each 32-block costs one 32-byte decode, one integer dot and one fp32
// FMA of the int32 lanes by (weight scale x activation scale) — instead of widening every weight
// to fp32. 256-bit vectors, one 32-block each: Zen 4 runs 512-bit ops as two halves, and at
// decode the loop is bound by memory, not by the dot. Signed codes (Q8_0, Q6_K) use the sign trick
// (|w| as u8, sign(q, w) as s8), so vpmaddubsw never saturates: |w| <= 128, |q| <= 127, and
// 2 * 128 * 127 < 32768. Unsigned codes (nibbles) go in as they are; their offsets and minimums
// are one scalar FMA per block with the activation block sum s.
//
// Shape of the work as in matmul_gemv.h: R rows x T tokens of accumulators (R * T <= 4); each
// weight block is decoded once for all T tokens.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/bits_avx2.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace hg::cpu {
namespace {

// A decoded 32-block: codes (unsigned, or |w| and w for signed formats), the per-lane weight
// scale and the coefficient of the activation block sum.
struct Int8Block {
  __m256i u;     // unsigned codes, or |w|
  __m256i w;     // signed codes (signed formats only)
  __m256 scale;  // per int32 lane (Q6_K, Q3_K, Q2_K: two scales, lanes 0-3 and 4-7)
  float c;
  __m256 mins;   // per int32 lane, times the lane's sum of q (formats with kLaneMins only)
};

inline float f16_scalar(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

inline __m256i nibbles(const uint8_t* qs) {  // 16 bytes -> low nibbles (0..15), then high (16..31)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), mask), _mm_and_si128(v, mask));
}

// Q5_0 / Q5_1 codes: the nibbles plus 16 where the block's high bit is set.
inline __m256i q5_codes(const uint8_t* qs, const uint8_t* qh) { return _mm256_or_si256(nibbles(qs), fifth_bits(qh)); }

// kIq4nlValues[i] for each byte i (0..15) of idx.
inline __m256i iq4nl_lookup(__m256i idx) {
  const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  return _mm256_shuffle_epi8(grid, idx);
}

// Per format: kGroup 32-blocks per storage block, whether the codes are signed, and whether the
// block has minimums per 16 values (kLaneMins: Q2_K).
template <DType WT>
struct Int8Format;

template <>
struct Int8Format<DType::Q8_0> {
  static constexpr int kGroup = 1;
  static constexpr bool kSigned = true;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[g];
    out->w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
    out->u = _mm256_abs_epi8(out->w);
    out->scale = _mm256_set1_ps(f16_scalar(b.d));
    out->c = 0.0f;
  }
};

template <>
struct Int8Format<DType::Q4_0> {
  static constexpr int kGroup = 1;
  static constexpr bool kSigned = false;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[g];
    const float d = f16_scalar(b.d);
    out->u = nibbles(b.qs);
    out->scale = _mm256_set1_ps(d);
    out->c = -8.0f * d;
  }
};

template <>
struct Int8Format<DType::Q4_1> {
  static constexpr int kGroup = 1;
  static constexpr bool kSigned = false;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[g];
    out->u = nibbles(b.qs);
    out->scale = _mm256_set1_ps(f16_scalar(b.d));
    out->c = f16_scalar(b.m);
  }
};

// Q4_K and Q5_K: the eight sub-blocks' nibbles (bytes qs[32k .. 32k+31] hold sub-block 2k low,
// 2k+1 high), scales d * scale and offsets -dmin * min.
inline void decode_k4(const uint8_t* qs, const uint8_t* scales, float d, float dmin, Int8Block* out) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int k = 0; k < 4; ++k) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * k));
    out[2 * k].u = _mm256_and_si256(v, mask);
    out[2 * k + 1].u = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
  }
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    q4_k_scale_min(scales, j, scale, min);
    out[j].scale = _mm256_set1_ps(d * static_cast<float>(scale));
    out[j].c = -dmin * static_cast<float>(min);
  }
}

template <>
struct Int8Format<DType::Q4_K> {
  static constexpr int kGroup = 8;
  static constexpr bool kSigned = false;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ4_K*>(row)[g];
    decode_k4(b.qs, b.scales, f16_scalar(b.d), f16_scalar(b.dmin), out);
  }
};

template <>
struct Int8Format<DType::Q6_K> {
  static constexpr int kGroup = 8;
  static constexpr bool kSigned = true;
  // In each half of 128 values, byte l of ql / qh feeds values l, l+32, l+64, l+96: quarter k takes
  // the low (k < 2) or high nibble of ql[32 (k % 2) + l] and bits 2k, 2k+1 of qh[l].
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[g];
    const __m256i low4 = _mm256_set1_epi8(0x0f), high2 = _mm256_set1_epi8(0x30), bias = _mm256_set1_epi8(32);
    for (int half = 0; half < 2; ++half) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * half));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * half + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half));
      const __m256i code[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high2)),
          _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, high2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), high2))};
      for (int k = 0; k < 4; ++k) {
        Int8Block& o = out[4 * half + k];
        o.w = _mm256_sub_epi8(code[k], bias);
        o.u = _mm256_abs_epi8(o.w);
      }
    }
    const float d = f16_scalar(b.d);
    for (int j = 0; j < 8; ++j) {
      out[j].scale = _mm256_set_m128(_mm_set1_ps(d * static_cast<float>(b.scales[2 * j + 1])),
                                     _mm_set1_ps(d * static_cast<float>(b.scales[2 * j])));
      out[j].c = 0.0f;
    }
  }
};

template <>
struct Int8Format<DType::Q5_0> {
  static constexpr int kGroup = 1;
  static constexpr bool kSigned = false;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ5_0*>(row)[g];
    const float d = f16_scalar(b.d);
    out->u = q5_codes(b.qs, b.qh);
    out->scale = _mm256_set1_ps(d);
    out->c = -16.0f * d;
  }
};

template <>
struct Int8Format<DType::Q5_1> {
  static constexpr int kGroup = 1;
  static constexpr bool kSigned = false;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ5_1*>(row)[g];
    out->u = q5_codes(b.qs, b.qh);
    out->scale = _mm256_set1_ps(f16_scalar(b.d));
    out->c = f16_scalar(b.m);
  }
};

template <>
struct Int8Format<DType::IQ4_NL> {
  static constexpr int kGroup = 1;
  static constexpr bool kSigned = true;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockIQ4_NL*>(row)[g];
    out->w = iq4nl_lookup(nibbles(b.qs));
    out->u = _mm256_abs_epi8(out->w);
    out->scale = _mm256_set1_ps(f16_scalar(b.d));
    out->c = 0.0f;
  }
};

// Two scales per 32-block (one per 16 values): lanes 0-3 and 4-7.
inline __m256 half_scales(float lo, float hi) { return _mm256_set_m128(_mm_set1_ps(hi), _mm_set1_ps(lo)); }

template <>
struct Int8Format<DType::Q2_K> {
  static constexpr int kGroup = 8;
  static constexpr bool kSigned = false;
  static constexpr bool kLaneMins = true;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ2_K*>(row)[g];
    const __m256i three = _mm256_set1_epi8(3);
    for (int half = 0; half < 2; ++half) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * half));
      for (int k = 0; k < 4; ++k) out[4 * half + k].u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), three);
    }
    const float d = f16_scalar(b.d), dmin = f16_scalar(b.dmin);
    for (int j = 0; j < 8; ++j) {
      const uint8_t lo = b.scales[2 * j], hi = b.scales[2 * j + 1];
      out[j].scale = half_scales(d * static_cast<float>(lo & 0xf), d * static_cast<float>(hi & 0xf));
      out[j].mins = half_scales(-dmin * static_cast<float>(lo >> 4), -dmin * static_cast<float>(hi >> 4));
      out[j].c = 0.0f;
    }
  }
};

template <>
struct Int8Format<DType::Q3_K> {
  static constexpr int kGroup = 8;
  static constexpr bool kSigned = true;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ3_K*>(row)[g];
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
    for (int half = 0; half < 2; ++half) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * half));
      for (int k = 0; k < 4; ++k) {
        const int sub = 4 * half + k;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), three);
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(hmask, sub), one);  // 1: no -4
        Int8Block& o = out[sub];
        o.w = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 2)), four);
        o.u = _mm256_abs_epi8(o.w);
      }
    }
    int8_t scales[16];
    q3_k_scales(b.scales, scales);
    const float d = f16_scalar(b.d);
    for (int j = 0; j < 8; ++j) {
      out[j].scale = half_scales(d * static_cast<float>(scales[2 * j]), d * static_cast<float>(scales[2 * j + 1]));
      out[j].c = 0.0f;
    }
  }
};

template <>
struct Int8Format<DType::Q5_K> {
  static constexpr int kGroup = 8;
  static constexpr bool kSigned = false;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockQ5_K*>(row)[g];
    decode_k4(b.qs, b.scales, f16_scalar(b.d), f16_scalar(b.dmin), out);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)), one = _mm256_set1_epi8(1);
    for (int j = 0; j < 8; ++j)  // sub-block j's fifth bits: bit j of qh[l]
      out[j].u = _mm256_or_si256(out[j].u, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, j), one), 4));
  }
};

template <>
struct Int8Format<DType::IQ4_XS> {
  static constexpr int kGroup = 8;
  static constexpr bool kSigned = true;
  static void decode(const uint8_t* row, int64_t g, Int8Block* out) {
    const auto& b = reinterpret_cast<const BlockIQ4_XS*>(row)[g];
    const float d = f16_scalar(b.d);
    for (int k = 0; k < 8; ++k) {
      Int8Block& o = out[k];
      o.w = iq4nl_lookup(nibbles(b.qs + 16 * k));
      o.u = _mm256_abs_epi8(o.w);
      o.scale = _mm256_set1_ps(d * static_cast<float>(iq4_xs_scale(b, k)));
      o.c = 0.0f;
    }
  }
};

template <class Fmt>
constexpr bool has_lane_mins() {
  if constexpr (requires { Fmt::kLaneMins; })
    return Fmt::kLaneMins;
  else
    return false;
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class D, DType WT, int T, int R>
void gemv_int8_tile(const GemvInt8Args& a, int64_t r0, int64_t t0) {
  using Fmt = Int8Format<WT>;
  constexpr int G = Fmt::kGroup;
  const int64_t n_blocks = a.cols / 32;
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = a.W + static_cast<size_t>(r0 + r) * a.row_bytes;
  const int8_t* xq[T];
  const float* xd[T];
  const float* xs[T];
  for (int t = 0; t < T; ++t) {
    xq[t] = a.x.q + (t0 + t) * a.cols;
    xd[t] = a.x.d + (t0 + t) * n_blocks;
    xs[t] = a.x.s + (t0 + t) * n_blocks;
  }
  __m256 acc[R][T];
  float offset[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm256_setzero_ps();
      offset[r][t] = 0.0f;
    }
  Int8Block blk[R][G];
  for (int64_t g = 0; g < n_blocks / G; ++g) {
    for (int r = 0; r < R; ++r) Fmt::decode(rows[r], g, blk[r]);
    for (int k = 0; k < G; ++k) {
      const int64_t j = g * G + k;
      for (int t = 0; t < T; ++t) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + 32 * j));
        const __m256 dx = _mm256_set1_ps(xd[t][j]);
        for (int r = 0; r < R; ++r) {
          const Int8Block& b = blk[r][k];
          const __m256i p = Fmt::kSigned ? D::dot(b.u, _mm256_sign_epi8(x, b.w)) : D::dot(b.u, x);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(b.scale, dx), acc[r][t]);
          if constexpr (has_lane_mins<Fmt>()) {
            const __m256i sums = D::dot(_mm256_set1_epi8(1), x);  // sum of q per lane
            acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(b.mins, dx), acc[r][t]);
          } else if constexpr (!Fmt::kSigned) {
            offset[r][t] += b.c * xs[t][j];
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float& out = a.Y[(t0 + t) * a.ldy + r0 + r];
      const float y = hsum8(acc[r][t]) + offset[r][t];
      out = a.accumulate ? out + y : y;
    }
}

constexpr int kInt8MaxTokens = 4;

// All token groups for R rows starting at r0 (R * T <= 4).
template <class D, DType WT, int R>
void gemv_int8_row_group(const GemvInt8Args& a, int64_t r0) {
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kInt8MaxTokens) {
    const int64_t n = a.n_tokens - t0;
    if constexpr (R == 1) {
      if (n >= 4)
        gemv_int8_tile<D, WT, 4, 1>(a, r0, t0);
      else if (n == 3)
        gemv_int8_tile<D, WT, 3, 1>(a, r0, t0);
      else if (n == 2)
        gemv_int8_tile<D, WT, 2, 1>(a, r0, t0);
      else
        gemv_int8_tile<D, WT, 1, 1>(a, r0, t0);
    } else if constexpr (R == 2) {
      if (n >= 2)
        gemv_int8_tile<D, WT, 2, 2>(a, r0, t0);
      else
        gemv_int8_tile<D, WT, 1, 2>(a, r0, t0);
    } else {
      gemv_int8_tile<D, WT, 1, R>(a, r0, t0);  // R == 4 only with one token
    }
  }
}

// Rows per one-token tile. Q4_K and Q6_K decode eight 32-blocks per row at once, so four rows
// spill: D may set kSuperBlockRows (AVX2: 1; on Zen 3, one thread, SmolLM2-sized matrices from
// DRAM: Q4_K 3.8-4.0 GB/s against 2.1-2.5 with 4 rows, Q6_K 3.9 against 1.7-2.0); the VNNI
// kernels keep 4 (not measured here).
template <class D, DType WT>
constexpr int one_token_rows() {
  if constexpr (Int8Format<WT>::kGroup > 1 && requires { D::kSuperBlockRows; })
    return D::kSuperBlockRows;
  else
    return 4;
}

template <class D, DType WT>
void gemv_int8_rows_of(const GemvInt8Args& a, int64_t row_begin, int64_t row_end) {
  constexpr int kRows = one_token_rows<D, WT>();
  int64_t r = row_begin;
  if (a.n_tokens == 1)
    for (; r + kRows <= row_end; r += kRows) gemv_int8_row_group<D, WT, kRows>(a, r);
  else if (a.n_tokens == 2)
    for (; r + 2 <= row_end; r += 2) gemv_int8_row_group<D, WT, 2>(a, r);
  for (; r < row_end; ++r) gemv_int8_row_group<D, WT, 1>(a, r);
}

template <class D>
void gemv_int8_dispatch(const GemvInt8Args& a, int64_t row_begin, int64_t row_end) {
  switch (a.wt) {
    case DType::Q8_0: return gemv_int8_rows_of<D, DType::Q8_0>(a, row_begin, row_end);
    case DType::Q4_0: return gemv_int8_rows_of<D, DType::Q4_0>(a, row_begin, row_end);
    case DType::Q4_1: return gemv_int8_rows_of<D, DType::Q4_1>(a, row_begin, row_end);
    case DType::Q4_K: return gemv_int8_rows_of<D, DType::Q4_K>(a, row_begin, row_end);
    case DType::Q6_K: return gemv_int8_rows_of<D, DType::Q6_K>(a, row_begin, row_end);
    case DType::Q5_0: return gemv_int8_rows_of<D, DType::Q5_0>(a, row_begin, row_end);
    case DType::Q5_1: return gemv_int8_rows_of<D, DType::Q5_1>(a, row_begin, row_end);
    case DType::IQ4_NL: return gemv_int8_rows_of<D, DType::IQ4_NL>(a, row_begin, row_end);
    case DType::Q2_K: return gemv_int8_rows_of<D, DType::Q2_K>(a, row_begin, row_end);
    case DType::Q3_K: return gemv_int8_rows_of<D, DType::Q3_K>(a, row_begin, row_end);
    case DType::Q5_K: return gemv_int8_rows_of<D, DType::Q5_K>(a, row_begin, row_end);
    case DType::IQ4_XS: return gemv_int8_rows_of<D, DType::IQ4_XS>(a, row_begin, row_end);
    default: return;  // plain types take the fp32 GEMV (matmul.cpp never sends them here)
  }
}

}  // namespace
}  // namespace hg::cpu
