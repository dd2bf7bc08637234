// The packed GEMV (matmul_packed.h) at AVX2 width, shared by two translation units:
// matmul_packed_avx2.cpp (vpmaddubsw + vpmaddwd: AVX2 CPUs such as Zen 2/3 and Intel before
// Alder Lake) and matmul_packed_avxvnni.cpp (VEX vpdpbusd: Alder Lake and later client cores, Zen 5,
// and every AVX-512 core that has AVX-VNNI). Include only from translation units built with AVX2
// (and -mavxvnni for kVnni).
//
// A quad of four 32-blocks is two 256-bit halves of two blocks each (lanes 0-3: the first block,
// 4-7: the second), so the scales convert once per quad (one vcvtph2ps, two permutes) instead of
// once per block, and there is no scalar work in the loop: ~9 instructions per 32-block and row
// with vpmaddubsw where the GGUF-layout kernel (matmul_int8.h) spends about twice that on scalar
// f16 conversions, broadcasts and the scalar offset FMA. One thread on Zen 3, SmolLM2's Q4_1
// matrices from DRAM: 7.6-8.5 GB/s against 3.1-3.8.
//
// vpmaddubsw saturates at int16, which shapes the AVX2 dot:
//  - nibbles (Q4_0, Q4_1, Q4_K) and five-bit codes (Q5_0, Q5_1, Q5_K: the nibbles plus 16 where
//    the plane's bit is set, 4 broadcasts, shuffles and compares per quad): a pair of products is
//    at most 2 * 31 * 127, so the lo and hi halves' pair sums (<= 15748) add in int16 before one
//    vpmaddwd;
//  - half scales (Q6_K's six-bit codes, their crumbs one shift and mask per register; Q3_K's
//    three-bit ones): each half keeps its own dot (a pair is at most 2 * 63 * 127 = 16002) and
//    its own scale;
//  - Q8_0: codes are q + 128 (the layout serves vpdpbusd), and 255 * 127 * 2 overflows int16, so
//    the codes go back to signed (xor 0x80) and take the sign trick (|w| as u8, sign(x, w) as s8,
//    at most 2 * 128 * 127 per pair); the c = -128 d term is then not needed and skipped.
// vpdpbusd accumulates u8 x s8 in int32 and cannot saturate: two per half for every format, and
// Q8_0's codes stay unsigned with the c term, as in the AVX512-VNNI kernel.
// Each row's quad is prefetched a few tiles ahead: rows of a tile lie back to back, so the tile
// streams one contiguous range and the prefetch only has to cover DRAM latency.
#pragma once
#include <immintrin.h>

#include "kernels/cpu/bits_avx2.h"
#include "kernels/cpu/matmul_packed.h"
#include "kernels/cpu/matmul_packed_kscales.h"
#include "kernels/cpu/matmul_packed_rows.h"

namespace hg::cpu {

namespace {

// Each row prefetches its quad this many tiles ahead, so a prefetch never lands in the tile being
// read (a fixed 2 KiB did, for Q8_0's 648-byte rows: 4 rows x 648 > 2 KiB). 1, 2, 4 and 8 tiles
// were within the noise of the shared machine this was measured on (Q8_0: 4.8-6.2 GB/s, one thread).
constexpr size_t kPrefetchTiles = 2;

// A quad (or a tail padded with zeros to a quad) of one row: codes of blocks (0, 1) in [0] and
// (2, 3) in [1], lo = values 0..15 of each block, hi = values 16..31; each lane's block scale; c.
struct QuadAvx2 {
  __m256i lo[2], hi[2];
  __m256 d[2];
  __m256 d_hi[2];  // half scales: the hi halves' (else d serves both)
  __m128 c;        // block and Super scales
  __m256 c8;       // half scales: the lo halves' c of blocks 0..3, then the hi halves'
};

// Lanes 0-3 of `v` spread as block 2h's four lanes and block 2h + 1's (h = 0, 1), from lane
// `first`.
inline __m256 spread_pair(__m256 v, int first) {
  return _mm256_permutevar8x32_ps(
      v, _mm256_setr_epi32(first, first, first, first, first + 1, first + 1, first + 1, first + 1));
}

template <int kBits, PackedScales kScales, bool kUsesC>
inline QuadAvx2 load_quad(const uint8_t* g) {
  constexpr bool kNibbles = kBits != 8;
  QuadAvx2 o;
  constexpr size_t codes = PackedWeight::code_bytes_of_width(kBits, 4);
  if constexpr (kNibbles) {
    const __m256i mask = _mm256_set1_epi8(0x0f);
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32 * h));
      o.lo[h] = _mm256_and_si256(v, mask);
      o.hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
      if constexpr (kBits == 5) {
        o.lo[h] = _mm256_or_si256(o.lo[h], fifth_bits(g + 64 + 8 * h));
        o.hi[h] = _mm256_or_si256(o.hi[h], fifth_bits(g + 64 + 8 * h + 4));
      }
    }
    if constexpr (kBits == 6) {  // the crumbs: lo[0] at bit 0, hi[0] at 2, lo[1] at 4, hi[1] at 6
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 64)), high = _mm256_set1_epi8(0x30);
      o.lo[0] = _mm256_or_si256(o.lo[0], _mm256_and_si256(_mm256_slli_epi16(c, 4), high));
      o.hi[0] = _mm256_or_si256(o.hi[0], _mm256_and_si256(_mm256_slli_epi16(c, 2), high));
      o.lo[1] = _mm256_or_si256(o.lo[1], _mm256_and_si256(c, high));
      o.hi[1] = _mm256_or_si256(o.hi[1], _mm256_and_si256(_mm256_srli_epi16(c, 2), high));
    }
  } else {
    for (int h = 0; h < 2; ++h) {
      o.lo[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32 * h));
      o.hi[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 64 + 32 * h));
    }
  }
  if constexpr (kScales == PackedScales::Block) {
    const __m256 d = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + codes))));
    o.d[0] = spread_pair(d, 0);
    o.d[1] = spread_pair(d, 2);
    o.c = kUsesC ? _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + codes + 8))) : _mm_setzero_ps();
  } else if constexpr (kScales == PackedScales::Super) {  // K-quants: from D, C and the 8-bit scales
    __m128 d;
    k_scales_super(g + codes, d, o.c);
    o.d[0] = spread_pair(_mm256_castps128_ps256(d), 0);
    o.d[1] = spread_pair(_mm256_castps128_ps256(d), 2);
  } else {
    __m256 d8;
    k_scales_half(g + codes, d8, o.c8);
    o.d[0] = spread_pair(d8, 0);
    o.d[1] = spread_pair(d8, 2);
    o.d_hi[0] = spread_pair(d8, 4);
    o.d_hi[1] = spread_pair(d8, 6);
  }
  return o;
}

// 32 bytes of codes when both blocks of a half are there, 16 (zero-extended) for one, else zero.
inline __m256i load_half(const uint8_t* p, int blocks_in_half) {
  if (blocks_in_half >= 2) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if (blocks_in_half == 1) return _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_setzero_si256();
}

// The tail group (1..3 blocks, its own layout: matmul_packed.h; block scales only) as a quad whose
// missing blocks have zero codes and d = c = 0; their activations are zero too (ActSplit pads), so they add
// exactly 0. The 8-byte scale loads may read past the group: the next row, or the 64 bytes of
// padding after the last one (PackedWeight), masked off here.
template <int kBits, bool kUsesC>
inline QuadAvx2 load_tail(const uint8_t* g, int blocks) {
  constexpr bool kNibbles = kBits != 8;
  QuadAvx2 o;
  const size_t half_bytes = 16 * static_cast<size_t>(blocks);  // Q8_0: lo codes, then hi codes
  for (int h = 0; h < 2; ++h) {
    const int in_half = blocks - 2 * h;
    if constexpr (kNibbles) {
      const __m256i mask = _mm256_set1_epi8(0x0f), v = load_half(g + 32 * h, in_half);
      o.lo[h] = _mm256_and_si256(v, mask);
      o.hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
      if (kBits == 5 && in_half > 0) {  // the plane: two words per half the tail has
        o.lo[h] = _mm256_or_si256(o.lo[h], fifth_bits(g + half_bytes + 8 * h));
        o.hi[h] = _mm256_or_si256(o.hi[h], fifth_bits(g + half_bytes + 8 * h + 4));
      }
    } else {
      o.lo[h] = load_half(g + 32 * h, in_half);
      o.hi[h] = load_half(g + half_bytes + 32 * h, in_half);
    }
  }
  const uint8_t* scales = g + PackedWeight::code_bytes_of_width(kBits, blocks);
  const __m128 live = _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32(blocks), _mm_setr_epi32(0, 1, 2, 3)));
  const __m128 d4 = _mm_and_ps(live, _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales))));
  const __m256 d = _mm256_castps128_ps256(d4);
  o.d[0] = spread_pair(d, 0);
  o.d[1] = spread_pair(d, 2);
  o.c = kUsesC ? _mm_and_ps(live, _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 2 * blocks))))
               : _mm_setzero_ps();
  return o;
}

// int32 lanes: lane k sums the products of the codes and activations of pairs 4k..4k+3 (lo and hi).
template <bool kNibbles, bool kVnni>
inline __m256i quad_dot(__m256i lo, __m256i hi, const int8_t* x_lo, const int8_t* x_hi) {
  const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_lo));
  const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_hi));
  if constexpr (kVnni) {
#ifdef __AVXVNNI__
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, xl), hi, xh);
#else
    static_assert(!kVnni, "the VNNI kernel needs -mavxvnni");
#endif
  } else if constexpr (kNibbles) {
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)), ones);
  } else {
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i wl = _mm256_xor_si256(lo, flip), wh = _mm256_xor_si256(hi, flip);
    const __m256i pl = _mm256_maddubs_epi16(_mm256_abs_epi8(wl), _mm256_sign_epi8(xl, wl));
    const __m256i ph = _mm256_maddubs_epi16(_mm256_abs_epi8(wh), _mm256_sign_epi8(xh, wh));
    return _mm256_add_epi32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones));
  }
}

// int32 lanes of one half (lo or hi) of a pair of blocks: codes u8 (< 64) times activations.
template <bool kVnni>
inline __m256i half_dot(__m256i w, const int8_t* x) {
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  if constexpr (kVnni) {
#ifdef __AVXVNNI__
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, xv);
#else
    static_assert(!kVnni, "the VNNI kernel needs -mavxvnni");
#endif
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, xv), _mm256_set1_epi16(1));
  }
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// acc[t] += the quad `quad` of one row times token t's activations at quad index q (`halves`: 2,
// or fewer for a tail). Inlined into the tile so that acc stays in registers.
template <bool kNibbles, bool kVnni, bool kHalves, int R, int T>
__attribute__((always_inline)) inline void quad_step(const QuadAvx2& quad, int halves, const PackedTileInputs<R, T>& in,
                                                     int64_t q, __m256* acc) {
  for (int t = 0; t < T; ++t) {
    const int8_t* x = in.q(t, q);
    const float* dx = in.d(t, q);
    for (int h = 0; h < halves; ++h) {
      const __m256 dxh = _mm256_loadu_ps(dx + 8 * h);
      if constexpr (kHalves) {
        const __m256i plo = half_dot<kVnni>(quad.lo[h], x + 32 * h), phi = half_dot<kVnni>(quad.hi[h], x + 64 + 32 * h);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(plo), _mm256_mul_ps(quad.d[h], dxh), acc[t]);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(phi), _mm256_mul_ps(quad.d_hi[h], dxh), acc[t]);
      } else {
        const __m256i p = quad_dot<kNibbles, kVnni>(quad.lo[h], quad.hi[h], x + 32 * h, x + 64 + 32 * h);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(quad.d[h], dxh), acc[t]);
      }
    }
    if constexpr (kHalves) {  // the eight half c's times the eight half sums
      acc[t] = _mm256_fmadd_ps(quad.c8, _mm256_loadu_ps(in.h(t, q)), acc[t]);
    } else if constexpr (kNibbles || kVnni) {
      // c * s in lanes 0-3 of the same accumulator (the upper lanes add zeros): a register per row
      // fewer, which is what keeps a 4-row tile free of spills.
      acc[t] =
          _mm256_fmadd_ps(_mm256_zextps128_ps256(quad.c), _mm256_zextps128_ps256(_mm_loadu_ps(in.s(t, q))), acc[t]);
    }
  }
}

template <int kBits, PackedScales kScales, bool kVnni>
struct Avx2Kernel {
  static constexpr bool kNibbles = kBits != 8;
  static constexpr bool kHalves = kScales == PackedScales::SuperHalf;
  static constexpr bool kUsesC = kNibbles || kVnni;  // Q8_0's c = -128 d: see the top
  // One token: Q8_0 one row at a time, nibbles four. One thread on Zen 3, SmolLM2's shapes from
  // DRAM, three alternating rounds: Q8_0 9.8-10.7 GB/s with one row against 4.9-5.4 with four;
  // Q4_1 8.1-8.5 against 7.0-9.3 (no difference beyond the noise).
  static constexpr int kRows = kNibbles ? 4 : 1;
  static constexpr int kTokens = 4;
  static constexpr size_t kQuadBytes = PackedWeight::quad_bytes(kBits, kScales);

  template <int R, int T>
  static void tile(const GemvPackedArgs& a, int64_t r0, int64_t t0) {
    const int64_t n_blocks = a.w->cols() / 32, n_quads = n_blocks / 4;
    const int tail = static_cast<int>(n_blocks % 4);
    const PackedTileInputs<R, T> in(a, r0, t0);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const size_t ahead = kPrefetchTiles * R * a.w->row_bytes();
    // Unrolled over rows and prefetch lines, or GCC keeps acc in memory.
    for (int64_t q = 0; q < n_quads; ++q) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const char* g = reinterpret_cast<const char*>(in.rows[r] + kQuadBytes * q);
#pragma GCC unroll 3
        for (size_t line = 0; line < kQuadBytes; line += 64) _mm_prefetch(g + ahead + line, _MM_HINT_T0);
        quad_step<kNibbles, kVnni, kHalves>(load_quad<kBits, kScales, kUsesC>(in.rows[r] + kQuadBytes * q), 2, in, q,
                                            acc[r]);
      }
    }
    if constexpr (kScales == PackedScales::Block) {
      if (tail)
        for (int r = 0; r < R; ++r)
          quad_step<kNibbles, kVnni, kHalves>(load_tail<kBits, kUsesC>(in.rows[r] + kQuadBytes * n_quads, tail),
                                              (tail + 1) / 2, in, n_quads, acc[r]);
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) packed_store(a, r0 + r, t0 + t, hsum8(acc[r][t]));
  }
};

template <bool kVnni>
struct Avx2Kernels {
  template <int kBits, PackedScales kScales>
  using Kernel = Avx2Kernel<kBits, kScales, kVnni>;
};

// Rows [row_begin, row_end) of a packed GEMV with this file's kernel for the weight's format.
template <bool kVnni>
void packed_rows_ymm(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  packed_rows_of_format<Avx2Kernels<kVnni>::template Kernel>(a, row_begin, row_end);
}

}  // namespace
}  // namespace hg::cpu
