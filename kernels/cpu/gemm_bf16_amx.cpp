// The AMX-BF16 prefill GEMM (gemm_bf16.h), compiled with the AMX and AVX-512 BF16 flags.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm_bf16_panel.h"

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

// The 32 x 32 block in `block` (row stride 32) into Y's tokens [t, t + mt) and rows [r, r + n).
void write_block(const Bf16GemmArgs& a, const float* block, int64_t t, int64_t mt, int64_t r, int64_t n) {
  for (int64_t i = 0; i < mt; ++i)
    bf16_store_sums(a, a.Y + (t + i) * a.ldy + r, _mm512_load_ps(block + i * 32), _mm512_load_ps(block + i * 32 + 16), n);
}

}  // namespace

void amx_gemm_rows(const Bf16GemmArgs& a, void* work, int64_t row_begin, int64_t row_end) {
  auto* rows = static_cast<float*>(work);
  auto* panel = reinterpret_cast<uint16_t*>(rows + 16 * a.cols);
  auto* block = reinterpret_cast<float*>(panel + 32 * a.cols);
  const int64_t chunks = a.cols / kBf16Cols;
  const int64_t x_stride = a.cols * 2;  // bytes per token of X
  configure_tiles();
  for (int64_t r = row_begin; r < row_end; r += 32) {
    const int64_t n = std::min<int64_t>(32, row_end - r);
    bf16_pack_panel(a, r, n, rows, panel);
    for (int64_t t = 0; t < a.n_tokens; t += kBf16Tokens) {
      const uint16_t* x0 = a.x + t * a.cols;
      const uint16_t* x1 = x0 + 16 * a.cols;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t c = 0; c < chunks; ++c) {
        _tile_loadd(4, x0 + c * kBf16Cols, x_stride);
        _tile_loadd(5, x1 + c * kBf16Cols, x_stride);
        _tile_loadd(6, panel + (2 * c) * kBf16TileElems, 64);
        _tile_loadd(7, panel + (2 * c + 1) * kBf16TileElems, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      const int64_t mt = std::min<int64_t>(kBf16Tokens, a.n_tokens - t);
      if (mt == kBf16Tokens && n == 32 && !a.accumulate) {  // straight into Y
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
