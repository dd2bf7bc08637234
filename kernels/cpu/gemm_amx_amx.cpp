// The AMX-BF16 prefill GEMM (gemm_amx.h), compiled with the AMX and AVX-512 BF16 flags.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/avx512_intrin.h"
#include "kernels/cpu/gemm_amx.h"

namespace hg::cpu {

namespace {

// Tiles 0-3 accumulate (tokens 0-15 | 16-31) x (rows 0-15 | 16-31) of a block, 4-5 hold X's
// two 16-token halves, 6-7 W's two 16-row halves; every tile is 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig c;
  for (int i = 0; i < 8; ++i) {
    c.colsb[i] = 64;
    c.rows[i] = 16;
  }
  _tile_loadconfig(&c);
}

// Rows r[0..15] of 16 32-bit lanes become their columns: r[c][i] = old r[i][c].
inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + j], 128-bit lane L: column 4L + j of rows 4g .. 4g + 3
  __m512i u[16];
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i s0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), s1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i s2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44),
                  s3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[j] = _mm512_shuffle_i32x4(s0, s2, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
  }
}

// 32 floats -> 32 bf16 (round to nearest even) as 16 lanes of (element 2i, element 2i + 1).
inline __m512i to_bf16_pairs(const float* p) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p)));
}

// Rows [r0, r0 + n) of W (n <= 32; rows past n are zero) into `panel` in the tile unit's order:
// the tile of chunk c, half h (rows 16h .. 16h + 15) at panel + (2c + h) * 512, its row kk holding
// for each of the 16 rows the pair of columns 32c + 2kk, 32c + 2kk + 1.
void pack_panel(const AmxGemmArgs& a, int64_t r0, int64_t n, float* rows, uint16_t* panel) {
  const int64_t chunks = a.cols / kAmxCols;
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 16; ++i) {
      float* dst = rows + i * a.cols;
      const int64_t row = 16 * h + i;
      if (row < n)
        a.dequant(a.wt, a.W + static_cast<size_t>(r0 + row) * a.row_bytes, a.cols, dst);
      else
        std::memset(dst, 0, static_cast<size_t>(a.cols) * sizeof(float));
    }
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i v[16];
      for (int i = 0; i < 16; ++i) v[i] = to_bf16_pairs(rows + i * a.cols + c * kAmxCols);
      transpose16(v);
      uint16_t* tile = panel + (2 * c + h) * 512;
      for (int kk = 0; kk < 16; ++kk) _mm512_store_si512(tile + kk * 32, v[kk]);
    }
  }
}

// The 32 x 32 block in `block` (row stride 32) into Y's tokens [t, t + mt) and rows [r, r + n).
void write_block(const AmxGemmArgs& a, const float* block, int64_t t, int64_t mt, int64_t r, int64_t n) {
  const __mmask16 lo = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
  const __mmask16 hi = static_cast<__mmask16>(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
  for (int64_t i = 0; i < mt; ++i) {
    float* y = a.Y + (t + i) * a.ldy + r;
    __m512 v0 = _mm512_load_ps(block + i * 32), v1 = _mm512_load_ps(block + i * 32 + 16);
    if (a.accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(lo, y));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(hi, y + 16));
    }
    _mm512_mask_storeu_ps(y, lo, v0);
    _mm512_mask_storeu_ps(y + 16, hi, v1);
  }
}

}  // namespace

void amx_pack_x(const float* X, int64_t n_tokens, int64_t cols, uint16_t* out) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t c = 0; c < cols; c += kAmxCols)
      _mm512_storeu_si512(out + t * cols + c, to_bf16_pairs(X + t * cols + c));
  std::memset(out + n_tokens * cols, 0, static_cast<size_t>((amx_padded_tokens(n_tokens) - n_tokens) * cols) * 2);
}

void amx_gemm_rows(const AmxGemmArgs& a, void* work, int64_t row_begin, int64_t row_end) {
  auto* rows = static_cast<float*>(work);
  auto* panel = reinterpret_cast<uint16_t*>(rows + 16 * a.cols);
  auto* block = reinterpret_cast<float*>(panel + 32 * a.cols);
  const int64_t chunks = a.cols / kAmxCols;
  const int64_t x_stride = a.cols * 2;  // bytes per token of X
  configure_tiles();
  for (int64_t r = row_begin; r < row_end; r += 32) {
    const int64_t n = std::min<int64_t>(32, row_end - r);
    pack_panel(a, r, n, rows, panel);
    for (int64_t t = 0; t < a.n_tokens; t += kAmxTokens) {
      const uint16_t* x0 = a.x + t * a.cols;
      const uint16_t* x1 = x0 + 16 * a.cols;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t c = 0; c < chunks; ++c) {
        _tile_loadd(4, x0 + c * kAmxCols, x_stride);
        _tile_loadd(5, x1 + c * kAmxCols, x_stride);
        _tile_loadd(6, panel + (2 * c) * 512, 64);
        _tile_loadd(7, panel + (2 * c + 1) * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      const int64_t mt = std::min<int64_t>(kAmxTokens, a.n_tokens - t);
      if (mt == kAmxTokens && n == 32 && !a.accumulate) {  // straight into Y
        float* y = a.Y + t * a.ldy + r;
        const int64_t y_stride = a.ldy * static_cast<int64_t>(sizeof(float));
        _tile_stored(0, y, y_stride);
        _tile_stored(1, y + 16, y_stride);
        _tile_stored(2, y + 16 * a.ldy, y_stride);
        _tile_stored(3, y + 16 * a.ldy + 16, y_stride);
        continue;
      }
      _tile_stored(0, block, 128);
      _tile_stored(1, block + 16, 128);
      _tile_stored(2, block + 16 * 32, 128);
      _tile_stored(3, block + 16 * 32 + 16, 128);
      write_block(a, block, t, mt, r, n);
    }
  }
  _tile_release();
}

}  // namespace hg::cpu
