// The bf16 products of the prefill attention (prefill_attention_bf16.h): panels of keys and values
// in gemm_bf16.h's layout, multiplied by the vector kernel of the bf16 prefill GEMM.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm_bf16_panel.h"
#include "kernels/cpu/prefill_attention_bf16.h"

namespace hg::cpu {

namespace {

constexpr int64_t kPanelRows = 32;  // keys (S) or head dims (P·V) per panel

inline int64_t round_up32(int64_t n) { return (n + 31) / 32 * 32; }

// Y (+)= X · Wᵀ over W's `rows` rows, 32 at a time: pack(r, n, panel) builds the panel of rows
// [r, r + n), whose outputs go to y's columns [r, r + n). X: bf16, `cols` wide, m_rows rows padded
// with zero rows to a multiple of 32.
template <class Pack>
void over_panels(const uint16_t* x, int64_t m_rows, int64_t cols, int64_t rows, float* y, int64_t ldy, bool accumulate,
                 uint16_t* panel, Pack pack) {
  Bf16GemmArgs a{};
  a.cols = cols;
  a.x = x;
  a.n_tokens = m_rows;
  a.Y = y;
  a.ldy = ldy;
  a.accumulate = accumulate;
  for (int64_t r = 0; r < rows; r += kPanelRows) {
    const int64_t n = std::min(kPanelRows, rows - r);
    pack(r, n, panel);
    avx512_bf16_gemm_panel(a, panel, r, n);
  }
}

// 32 bf16 of a key row at column c as 16 pairs: a bf16 row as it is, an fp32 row rounded (exact
// for values a bf16 cache holds).
inline __m512i key_pairs(const uint16_t* row, int64_t c) { return _mm512_loadu_si512(row + c); }
inline __m512i key_pairs(const float* row, int64_t c) { return to_bf16_pairs(row + c); }

// Keys [j0, j0 + n) (n <= 32, the rest zero) as a panel: chunk c of head dims, half h (keys
// 16h .. 16h + 15) at (2c + h) * kBf16TileElems, its row kk holding each key's pair of dims
// 32c + 2kk, + 1.
template <class T>
void pack_keys(const T* k, int64_t ld_k, int hd, int64_t j0, int64_t n, uint16_t* panel) {
  for (int64_t c = 0; c < hd / 32; ++c)
    for (int64_t h = 0; h < 2; ++h) {
      __m512i v[16];
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t j = 16 * h + i;
        v[i] = j < n ? key_pairs(k + (j0 + j) * ld_k, 32 * c) : _mm512_setzero_si512();
      }
      store_transposed_tile(v, panel + (2 * c + h) * kBf16TileElems);
    }
}

template <class T>
void scores(const uint16_t* q, int64_t m_rows, int hd, const T* k, int64_t ld_k, int64_t n, float* s, int64_t ld_s,
            Bf16AttentionScratch& scratch) {
  uint16_t* panel = scratch.panel.get(static_cast<size_t>(hd / 32 * 2 * kBf16TileElems));
  over_panels(q, m_rows, hd, n, s, ld_s, false, panel,
              [&](int64_t j0, int64_t nj, uint16_t* pn) { pack_keys(k, ld_k, hd, j0, nj, pn); });
}

}  // namespace

const uint16_t* bf16_attention_query(const float* q, int64_t m_rows, int hd, Bf16AttentionScratch& s) {
  uint16_t* out = s.q.get(static_cast<size_t>(bf16_padded_tokens(m_rows) * hd));
  bf16_pack_x(q, m_rows, hd, out);
  return out;
}

void bf16_attention_scores(const uint16_t* q, int64_t m_rows, int hd, const uint16_t* k, int64_t ld_k, int64_t n,
                           float* s, int64_t ld_s, Bf16AttentionScratch& scratch) {
  scores(q, m_rows, hd, k, ld_k, n, s, ld_s, scratch);
}

void bf16_attention_scores(const uint16_t* q, int64_t m_rows, int hd, const float* k, int64_t ld_k, int64_t n, float* s,
                           int64_t ld_s, Bf16AttentionScratch& scratch) {
  scores(q, m_rows, hd, k, ld_k, n, s, ld_s, scratch);
}

void bf16_attention_values(const float* p, int64_t ld_p, int64_t m_rows, int64_t n, const uint16_t* v, int64_t ld_v,
                           int hd, float* acc, int64_t ld_acc, Bf16AttentionScratch& scratch) {
  // P [m_rows][n] -> bf16 [m_rows rounded up to 32][cols], keys past n and rows past m_rows zero
  const int64_t cols = round_up32(n);
  const int64_t padded = bf16_padded_tokens(m_rows);
  uint16_t* pb = scratch.p.get(static_cast<size_t>(padded * cols));
  for (int64_t i = 0; i < m_rows; ++i)
    for (int64_t c = 0; c < cols; c += 32) {
      const int64_t left = n - c;
      const auto lo = static_cast<__mmask16>(left >= 16 ? 0xFFFF : left <= 0 ? 0 : (1u << left) - 1);
      const auto hi = static_cast<__mmask16>(left >= 32 ? 0xFFFF : left <= 16 ? 0 : (1u << (left - 16)) - 1);
      const float* src = p + i * ld_p + c;
      const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, src + 16), _mm512_maskz_loadu_ps(lo, src));
      _mm512_storeu_si512(pb + i * cols + c, reinterpret_cast<__m512i>(b));
    }
  std::memset(pb + m_rows * cols, 0, static_cast<size_t>((padded - m_rows) * cols) * sizeof(uint16_t));
  // Panels of 32 head dims: chunk c of keys, half h (dims d0 + 16h ..), row kk holding each dim's
  // pair of keys 32c + 2kk, + 1 (one 16-bit interleave of two value rows).
  uint16_t* panel = scratch.panel.get(static_cast<size_t>(cols / 32 * 2 * kBf16TileElems));
  over_panels(pb, m_rows, cols, hd, acc, ld_acc, true, panel, [&](int64_t d0, int64_t nd, uint16_t* pn) {
    for (int64_t c = 0; c < cols / 32; ++c)
      for (int64_t h = 0; h < 2; ++h) {
        uint16_t* tile = pn + (2 * c + h) * kBf16TileElems;
        const int64_t dims = std::clamp<int64_t>(nd - 16 * h, 0, 16);
        const auto dmask = static_cast<__mmask16>(dims >= 16 ? 0xFFFF : (1u << dims) - 1);
        for (int kk = 0; kk < 16; ++kk) {
          const int64_t j = 32 * c + 2 * kk;
          const uint16_t* row = v + j * ld_v + d0 + 16 * h;
          const __m256i r0 = j < n ? _mm256_maskz_loadu_epi16(dmask, row) : _mm256_setzero_si256();
          const __m256i r1 = j + 1 < n ? _mm256_maskz_loadu_epi16(dmask, row + ld_v) : _mm256_setzero_si256();
          const __m512i pair =
              _mm512_or_si512(_mm512_cvtepu16_epi32(r0), _mm512_slli_epi32(_mm512_cvtepu16_epi32(r1), 16));
          _mm512_store_si512(tile + kk * 32, pair);
        }
      }
  });
}

}  // namespace hg::cpu
