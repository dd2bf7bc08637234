// The AVX512_BF16 prefill GEMM (gemm_bf16.h) and what it shares with the AMX one: X packed to bf16,
// W's panels in the tile layout. Compiled with the AVX-512 BF16 flags.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm_bf16_panel.h"

namespace hg::cpu {

namespace {

// Tokens per register block of the vector kernel: kBlockTokens x 32 rows are 24 zmm sums, beside
// W's two zmm of the current column pair and the broadcast of X's, 27 of the 32 registers.
constexpr int kBlockTokens = 12;

// Y's tokens [t, t + M) (those below a.n_tokens) and rows [r, r + n) from the panel: each column
// pair k adds, for every token, its broadcast pair times W's 16-row halves of pair k.
template <int M>
void gemm_block(const Bf16GemmArgs& a, const uint16_t* panel, int64_t t, int64_t r, int64_t n) {
  __m512 acc[2 * M];
  for (int i = 0; i < 2 * M; ++i) acc[i] = _mm512_setzero_ps();
  const uint16_t* x = a.x + t * a.cols;
  const int64_t chunks = a.cols / kBf16Cols;
  for (int64_t c = 0; c < chunks; ++c) {
    const uint16_t* lo = panel + (2 * c) * kBf16TileElems;
    const uint16_t* hi = lo + kBf16TileElems;
    const uint16_t* xc = x + c * kBf16Cols;
    for (int kk = 0; kk < 16; ++kk) {
      const __m512bh w0 = reinterpret_cast<__m512bh>(_mm512_load_si512(lo + kk * 32));
      const __m512bh w1 = reinterpret_cast<__m512bh>(_mm512_load_si512(hi + kk * 32));
#pragma GCC unroll 16
      for (int i = 0; i < M; ++i) {
        int32_t pair;
        std::memcpy(&pair, xc + i * a.cols + 2 * kk, sizeof(pair));
        const __m512bh xb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
        acc[2 * i] = _mm512_dpbf16_ps(acc[2 * i], xb, w0);
        acc[2 * i + 1] = _mm512_dpbf16_ps(acc[2 * i + 1], xb, w1);
      }
    }
  }
  const int64_t mt = std::min<int64_t>(M, a.n_tokens - t);
  for (int64_t i = 0; i < mt; ++i) bf16_store_sums(a, a.Y + (t + i) * a.ldy + r, acc[2 * i], acc[2 * i + 1], n);
}

}  // namespace

void bf16_pack_panel(const Bf16GemmArgs& a, int64_t r0, int64_t n, float* rows, uint16_t* panel) {
  const int64_t chunks = a.cols / kBf16Cols;
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
      for (int i = 0; i < 16; ++i) v[i] = to_bf16_pairs(rows + i * a.cols + c * kBf16Cols);
      store_transposed_tile(v, panel + (2 * c + h) * kBf16TileElems);
    }
  }
}

void bf16_pack_x(const float* X, int64_t n_tokens, int64_t cols, uint16_t* out) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t c = 0; c < cols; c += kBf16Cols)
      _mm512_storeu_si512(out + t * cols + c, to_bf16_pairs(X + t * cols + c));
  std::memset(out + n_tokens * cols, 0, static_cast<size_t>((bf16_padded_tokens(n_tokens) - n_tokens) * cols) * 2);
}

void avx512_bf16_gemm_rows(const Bf16GemmArgs& a, void* work, int64_t row_begin, int64_t row_end) {
  auto* rows = static_cast<float*>(work);
  auto* panel = reinterpret_cast<uint16_t*>(rows + 16 * a.cols);
  for (int64_t r = row_begin; r < row_end; r += 32) {
    const int64_t n = std::min<int64_t>(32, row_end - r);
    bf16_pack_panel(a, r, n, rows, panel);
    avx512_bf16_gemm_panel(a, panel, r, n);
  }
}

void avx512_bf16_gemm_panel(const Bf16GemmArgs& a, const uint16_t* panel, int64_t r, int64_t n) {
  // Blocks of 12 tokens, the last of 4 or 8 where fewer remain: the packed X's zero rows reach
  // a multiple of 32 tokens, so a block may read past n_tokens but never past the padding.
  int64_t t = 0;
  for (; a.n_tokens - t >= kBlockTokens; t += kBlockTokens) gemm_block<kBlockTokens>(a, panel, t, r, n);
  const int64_t left = a.n_tokens - t;
  if (left > 8)
    gemm_block<12>(a, panel, t, r, n);
  else if (left > 4)
    gemm_block<8>(a, panel, t, r, n);
  else if (left > 0)
    gemm_block<4>(a, panel, t, r, n);
}

}  // namespace hg::cpu
