// The packed GEMV (matmul_packed.h) with AVX512-VNNI: per quad of four 32-blocks and row, one
// 64-byte code load (Q8_0: two), two vpdpbusd, one conversion of the four scales and of the four
// c's, and two FMAs. R rows x T tokens of accumulators, R * T <= 4, as the GGUF-layout kernels.
// Five-bit codes (Q5_0, Q5_1) add their plane to the nibbles with two masked adds: the plane's
// words are the lo and hi masks of each half (see matmul_packed_ymm.h), so two 64-bit masks per
// quad put 0x10 in every byte whose bit is set.

#include <algorithm>

#include "kernels/cpu/avx512_intrin.h"
#include "kernels/cpu/matmul_packed.h"
#include "kernels/cpu/matmul_packed_rows.h"

namespace hg::cpu {

namespace {

// A quad (or the tail, `blocks` < 4) of one row, decoded: codes in lo / hi order, the scale of
// each int32 lane's block, and the four c's.
struct Quad {
  __m512i lo, hi;
  __m512 d;
  __m128 c;
};

// The lo and hi byte masks of a five-bit group's plane (at `plane`; `halves`: 2 in a quad, the
// tail's (blocks + 1) / 2 otherwise): words lo0, hi0, lo1, hi1.
inline void plane_masks(const uint8_t* plane, int halves, __mmask64& lo, __mmask64& hi) {
  uint32_t w[4] = {0, 0, 0, 0};
  __builtin_memcpy(w, plane, 8 * static_cast<size_t>(halves));
  lo = _cvtu64_mask64(w[0] | static_cast<uint64_t>(w[2]) << 32);
  hi = _cvtu64_mask64(w[1] | static_cast<uint64_t>(w[3]) << 32);
}

template <int kBits, bool kTail>
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
    }
  } else if constexpr (kTail) {
    const __mmask64 m = (1ull << (16 * n)) - 1;
    o.lo = _mm512_maskz_loadu_epi8(m, g);
    o.hi = _mm512_maskz_loadu_epi8(m, g + 16 * n);
  } else {
    o.lo = _mm512_loadu_si512(g);
    o.hi = _mm512_loadu_si512(g + 64);
  }
  const __m128i dh = kTail ? _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << n) - 1), g + codes)
                           : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + codes));
  const __m128i ch = kTail ? _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << n) - 1), g + codes + 2 * n)
                           : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + codes + 8));
  const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  o.d = _mm512_permutexvar_ps(spread, _mm512_zextps128_ps512(_mm_cvtph_ps(dh)));
  o.c = _mm_cvtph_ps(ch);
  return o;
}

template <int kBits, int R, int T>
void packed_tile(const GemvPackedArgs& a, int64_t r0, int64_t t0) {
  const PackedWeight& w = *a.w;
  const int64_t n_blocks = w.cols() / 32, n_quads = n_blocks / 4;
  const int tail = static_cast<int>(n_blocks % 4);
  const size_t quad_bytes = PackedWeight::code_bytes(w.source(), 4) + 16;
  const PackedTileInputs<R, T> in(a, r0, t0);
  const auto& rows = in.rows;
  const auto& xq = in.xq;
  const auto& xd = in.xd;
  const auto& xs = in.xs;
  __m512 acc[R][T];
  __m128 acc_c[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm512_setzero_ps();
      acc_c[r][t] = _mm_setzero_ps();
    }
  const auto step = [&](int64_t q, const Quad* quad) {
    for (int t = 0; t < T; ++t) {
      const __m512i xlo = _mm512_loadu_si512(xq[t] + 128 * q), xhi = _mm512_loadu_si512(xq[t] + 128 * q + 64);
      const __m512 dx = _mm512_loadu_ps(xd[t] + 16 * q);
      const __m128 s = _mm_loadu_ps(xs[t] + 4 * q);
      for (int r = 0; r < R; ++r) {
        const __m512i p =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), quad[r].lo, xlo), quad[r].hi, xhi);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(quad[r].d, dx), acc[r][t]);
        acc_c[r][t] = _mm_fmadd_ps(quad[r].c, s, acc_c[r][t]);
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
    for (int r = 0; r < R; ++r) quad[r] = load_quad<kBits, false>(rows[r] + quad_bytes * q, 4);
    step(q, quad);
  }
  if (tail) {
    for (int r = 0; r < R; ++r) quad[r] = load_quad<kBits, true>(rows[r] + quad_bytes * n_quads, tail);
    step(n_quads, quad);
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      __m128 c = acc_c[r][t];
      c = _mm_add_ps(c, _mm_movehl_ps(c, c));
      c = _mm_add_ss(c, _mm_movehdup_ps(c));
      packed_store(a, r0 + r, t0 + t, _mm512_reduce_add_ps(acc[r][t]) + _mm_cvtss_f32(c));
    }
}

template <int kBits>
struct Avx512VnniKernel {
  static constexpr int kRows = 4;
  template <int R, int T>
  static void tile(const GemvPackedArgs& a, int64_t r0, int64_t t0) {
    packed_tile<kBits, R, T>(a, r0, t0);
  }
};

}  // namespace

void gemv_packed_rows_avx512vnni(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.w->code_bits()) {
    case 4: return packed_rows<Avx512VnniKernel<4>>(a, row_begin, row_end);
    case 5: return packed_rows<Avx512VnniKernel<5>>(a, row_begin, row_end);
    default: return packed_rows<Avx512VnniKernel<8>>(a, row_begin, row_end);
  }
}

}  // namespace hg::cpu
