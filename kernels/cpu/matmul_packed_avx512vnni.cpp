// The packed GEMV (matmul_packed.h) with AVX512-VNNI: per quad of four 32-blocks and row, one
// 64-byte code load (Q8_0: two), two vpdpbusd, one conversion of the four scales and of the four
// c's, and two FMAs. R rows x T tokens of accumulators, R * T <= 4, as the GGUF-layout kernels.
// Five-bit codes (Q5_0, Q5_1, Q5_K) add their plane to the nibbles with two masked adds: the
// plane's words are the lo and hi masks of each half (see matmul_packed_ymm.h), so two 64-bit masks
// per quad put 0x10 in every byte whose bit is set; six-bit codes (Q6_K) take their two high bits
// from 32 bytes of crumbs, broadcast to both halves and shifted by 4 / 0 (lo) and 2 / -2 (hi).
// K-quants form each block's d and c from the super-block's D and C and the 8-bit scales (one widening and one conversion of the eight bytes, two multiplies); with half
// scales (Q6_K, Q3_K) the lo and hi dots stay apart, each with its own d, and the c's meet the
// half sums of the activations.

#include <algorithm>

#include "kernels/cpu/avx512_intrin.h"
#include "kernels/cpu/matmul_packed.h"
#include "kernels/cpu/matmul_packed_kscales.h"
#include "kernels/cpu/matmul_packed_rows.h"

namespace hg::cpu {

namespace {

// A quad (or the tail, `blocks` < 4) of one row, decoded: codes in lo / hi order, the scale of
// each int32 lane's block, and the four c's.
struct Quad {
  __m512i lo, hi;
  __m512 d, d_hi;  // d_hi: the hi halves' scales (half scales only; else d serves both)
  __m128 c;        // block and Super scales
  __m256 c8;       // half scales: the lo halves' c of blocks 0..3, then the hi halves'
};

// The lo and hi byte masks of a five-bit group's plane (at `plane`; `halves`: 2 in a quad, the
// tail's (blocks + 1) / 2 otherwise): words lo0, hi0, lo1, hi1.
inline void plane_masks(const uint8_t* plane, int halves, __mmask64& lo, __mmask64& hi) {
  uint32_t w[4] = {0, 0, 0, 0};
  __builtin_memcpy(w, plane, 8 * static_cast<size_t>(halves));
  lo = _cvtu64_mask64(w[0] | static_cast<uint64_t>(w[2]) << 32);
  hi = _cvtu64_mask64(w[1] | static_cast<uint64_t>(w[3]) << 32);
}

template <int kBits, PackedScales kScales, bool kTail>
inline Quad load_quad(const uint8_t* g, int blocks) {
  constexpr bool kNibbles = kBits != 8;
  const int n = kTail ? blocks : 4;
  const size_t codes = PackedWeight::code_bytes_of_width(kBits, n);
  Quad o;
  if constexpr (kNibbles) {
    const __m512i v = kTail ? _mm512_maskz_loadu_epi8((1ull << (16 * n)) - 1, g) : _mm512_loadu_si512(g);
    const __m512i mask = _mm512_set1_epi8(0x0f);
    o.lo = _mm512_and_si512(v, mask);
    o.hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
    if constexpr (kBits == 5) {
      __mmask64 lo, hi;
      plane_masks(g + 16 * n, (n + 1) / 2, lo, hi);
      const __m512i fifth = _mm512_set1_epi8(0x10);
      o.lo = _mm512_mask_add_epi8(o.lo, lo, o.lo, fifth);  // a nibble + 16: the fifth bit set
      o.hi = _mm512_mask_add_epi8(o.hi, hi, o.hi, fifth);
    } else if constexpr (kBits == 6) {  // the crumbs: lo of blocks 0-1 at bit 0, hi at 2, blocks 2-3 at 4, 6
      const __m512i c = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 64)));
      const __m512i high = _mm512_set1_epi8(0x30);
      const __m512i lo_shift = _mm512_set_epi64(0, 0, 0, 0, 0x0004000400040004, 0x0004000400040004,
                                                0x0004000400040004, 0x0004000400040004);
      o.lo = _mm512_or_si512(o.lo, _mm512_and_si512(_mm512_sllv_epi16(c, lo_shift), high));
      const __m512i c2 = _mm512_srli_epi16(c, 2);
      o.hi = _mm512_or_si512(o.hi, _mm512_and_si512(_mm512_sllv_epi16(c2, lo_shift), high));
    }
  } else if constexpr (kTail) {
    const __mmask64 m = (1ull << (16 * n)) - 1;
    o.lo = _mm512_maskz_loadu_epi8(m, g);
    o.hi = _mm512_maskz_loadu_epi8(m, g + 16 * n);
  } else {
    o.lo = _mm512_loadu_si512(g);
    o.hi = _mm512_loadu_si512(g + 64);
  }
  const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  if constexpr (kScales == PackedScales::Block) {
    const __m128i dh = kTail ? _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << n) - 1), g + codes)
                             : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + codes));
    const __m128i ch = kTail ? _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << n) - 1), g + codes + 2 * n)
                             : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + codes + 8));
    o.d = _mm512_permutexvar_ps(spread, _mm512_zextps128_ps512(_mm_cvtph_ps(dh)));
    o.c = _mm_cvtph_ps(ch);
  } else if constexpr (kScales == PackedScales::Super) {  // K-quants: whole quads only
    __m128 d;
    k_scales_super(g + codes, d, o.c);
    o.d = _mm512_permutexvar_ps(spread, _mm512_zextps128_ps512(d));
  } else {
    __m256 d8;
    k_scales_half(g + codes, d8, o.c8);
    o.d = _mm512_permutexvar_ps(spread, _mm512_zextps256_ps512(d8));
    o.d_hi = _mm512_permutexvar_ps(_mm512_add_epi32(spread, _mm512_set1_epi32(4)), _mm512_zextps256_ps512(d8));
  }
  return o;
}

// Lane j of the result: the sum of v[j]'s sixteen lanes, by a tree of 128-bit shuffles (24
// instructions for the eight, against 8 reductions of 8 each): on rows as short as SmolLM2's 576
// values (four quads and a tail) the per-row reductions are a fifth of an 8-token tile's work.
inline __m256 sum_lanes_8(const __m512* v) {
  __m512 s[4];  // v[2i]'s 128-bit lanes 0+2 and 1+3 in s[i]'s lanes 0 and 1, v[2i + 1]'s in 2 and 3
  for (int i = 0; i < 4; ++i)
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 u[2];  // 128-bit lane k of u[i]: four partial sums of v[4i + k]
  for (int i = 0; i < 2; ++i)
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane k: u[0].k0 + u[0].k2, u[1].k0 + u[1].k2, u[0].k1 + u[0].k3, u[1].k1 + u[1].k3.
  const __m512 w = _mm512_add_ps(_mm512_unpacklo_ps(u[0], u[1]), _mm512_unpackhi_ps(u[0], u[1]));
  const __m512 x = _mm512_add_ps(w, _mm512_permute_ps(w, _MM_SHUFFLE(1, 0, 3, 2)));  // lane k: v[k], v[k + 4]
  const __m512i order = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, x));
}

template <int kBits, PackedScales kScales, int R, int T>
void packed_tile(const GemvPackedArgs& a, int64_t r0, int64_t t0) {
  constexpr bool kHalves = kScales == PackedScales::SuperHalf;
  const PackedWeight& w = *a.w;
  const int64_t n_blocks = w.cols() / 32, n_quads = n_blocks / 4;
  const int tail = static_cast<int>(n_blocks % 4);
  const size_t quad_bytes = PackedWeight::quad_bytes(kBits, kScales);
  const PackedTileInputs<R, T> in(a, r0, t0);
  const auto& rows = in.rows;
  __m512 acc[R][T];
  __m128 acc_c[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm512_setzero_ps();
      acc_c[r][t] = _mm_setzero_ps();
    }
  const auto step = [&](int64_t q, const Quad* quad) {
    for (int t = 0; t < T; ++t) {
      const __m512i xlo = _mm512_loadu_si512(in.q(t, q)), xhi = _mm512_loadu_si512(in.q(t, q) + 64);
      const __m512 dx = _mm512_loadu_ps(in.d(t, q));
      for (int r = 0; r < R; ++r) {
        if constexpr (kHalves) {  // each half its own d; c8 x the half sums in lanes 0-7 of acc
          const __m512i plo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), quad[r].lo, xlo);
          const __m512i phi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), quad[r].hi, xhi);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(plo), _mm512_mul_ps(quad[r].d, dx), acc[r][t]);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(phi), _mm512_mul_ps(quad[r].d_hi, dx), acc[r][t]);
          acc[r][t] = _mm512_fmadd_ps(_mm512_zextps256_ps512(quad[r].c8),
                                      _mm512_zextps256_ps512(_mm256_loadu_ps(in.h(t, q))), acc[r][t]);
        } else {
          const __m512i p =
              _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), quad[r].lo, xlo), quad[r].hi, xhi);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(quad[r].d, dx), acc[r][t]);
          acc_c[r][t] = _mm_fmadd_ps(quad[r].c, _mm_loadu_ps(in.s(t, q)), acc_c[r][t]);
        }
      }
    }
  };
  Quad quad[R];
  const size_t ahead = std::max<size_t>(w.row_bytes() * R, 4096);  // at least the next tile
  for (int64_t q = 0; q < n_quads; ++q) {
    for (int r = 0; r < R; ++r) {
      const char* next = reinterpret_cast<const char*>(rows[r] + quad_bytes * q + ahead);
      for (size_t line = 0; line < quad_bytes; line += 64) _mm_prefetch(next + line, _MM_HINT_T0);
    }
    for (int r = 0; r < R; ++r) quad[r] = load_quad<kBits, kScales, false>(rows[r] + quad_bytes * q, 4);
    step(q, quad);
  }
  if constexpr (kScales == PackedScales::Block) {
    if (tail) {
      for (int r = 0; r < R; ++r) quad[r] = load_quad<kBits, kScales, true>(rows[r] + quad_bytes * n_quads, tail);
      step(n_quads, quad);
    }
  }
  // The c's join their lanes 0-3, then one sum of the sixteen lanes, in the same order for every
  // tile shape (sum_lanes_8 adds as _mm512_reduce_add_ps does), so a token's logits do not depend
  // on the batch it is decoded in.
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_add_ps(acc[r][t], _mm512_zextps128_ps512(acc_c[r][t]));
  if constexpr (R == 1 && T == 8) {
    alignas(32) float y[8];
    _mm256_store_ps(y, sum_lanes_8(acc[0]));
    for (int t = 0; t < T; ++t) packed_store(a, r0, t0 + t, y[t]);
  } else {
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) packed_store(a, r0 + r, t0 + t, _mm512_reduce_add_ps(acc[r][t]));
  }
}

template <int kBits, PackedScales kScales>
struct Avx512VnniKernel {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 8;
  template <int R, int T>
  static void tile(const GemvPackedArgs& a, int64_t r0, int64_t t0) {
    packed_tile<kBits, kScales, R, T>(a, r0, t0);
  }
};

}  // namespace

void gemv_packed_rows_avx512vnni(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  packed_rows_of_format<Avx512VnniKernel>(a, row_begin, row_end);
}

}  // namespace hg::cpu
