// The tiling every packed GEMV kernel shares (matmul_packed_avx2.cpp, matmul_packed_avx512vnni.cpp):
// rows [row_begin, row_end) for every token in tiles of R rows x T tokens of accumulators, so each
// weight quad is loaded once per tile and reused T times. One token (decode): Kernel::kRows rows
// at a time, the streams the prefetcher follows side by side; two tokens: 2 x 2; more: one row with
// up to Kernel::kTokens tokens (8 with AVX-512's 32 registers, where a batch of 8 is bound by the
// multiply pipes and each quad decoded once for 8 tokens instead of twice for 4 gained 10-15% in
// the GEMV; 4 at AVX2 width, whose 16 registers hold no more), then up to four. Kernel provides
// kRows, kTokens and `template <int R, int T> static void tile(args, r0, t0)`.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/matmul_packed.h"

namespace hg::cpu {
namespace {

template <class Kernel>
void packed_rows(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int kRows = Kernel::kRows;
  int64_t r = row_begin;
  if (a.n_tokens == 1) {
    for (; r + kRows <= row_end; r += kRows) Kernel::template tile<kRows, 1>(a, r, 0);
  } else if (a.n_tokens == 2) {
    for (; r + 2 <= row_end; r += 2) Kernel::template tile<2, 2>(a, r, 0);
  }
  for (; r < row_end; ++r)
    for (int64_t t0 = 0, step = 0; t0 < a.n_tokens; t0 += step) {
      const int64_t n = a.n_tokens - t0;
      step = n >= Kernel::kTokens ? Kernel::kTokens : std::min<int64_t>(n, 4);
      switch (step) {
        case 8:
          if constexpr (Kernel::kTokens == 8) Kernel::template tile<1, 8>(a, r, t0);
          break;
        case 4: Kernel::template tile<1, 4>(a, r, t0); break;
        case 3: Kernel::template tile<1, 3>(a, r, t0); break;
        case 2: Kernel::template tile<1, 2>(a, r, t0); break;
        default: Kernel::template tile<1, 1>(a, r, t0); break;
      }
    }
}

// packed_rows with Kernel<code bits, scale layout> of the weight's format: one instantiation per
// layout the packed formats use (matmul_packed.h), shared by every ISA's kernel.
template <template <int, PackedScales> class Kernel>
void packed_rows_of_format(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.w->source()) {
    case DType::Q4_0:
    case DType::Q4_1: return packed_rows<Kernel<4, PackedScales::Block>>(a, row_begin, row_end);
    case DType::Q5_0:
    case DType::Q5_1: return packed_rows<Kernel<5, PackedScales::Block>>(a, row_begin, row_end);
    case DType::Q4_K: return packed_rows<Kernel<4, PackedScales::Super>>(a, row_begin, row_end);
    case DType::Q5_K: return packed_rows<Kernel<5, PackedScales::Super>>(a, row_begin, row_end);
    case DType::Q6_K: return packed_rows<Kernel<6, PackedScales::SuperHalf>>(a, row_begin, row_end);
    case DType::Q3_K: return packed_rows<Kernel<4, PackedScales::SuperHalf>>(a, row_begin, row_end);
    default: return packed_rows<Kernel<8, PackedScales::Block>>(a, row_begin, row_end);
  }
}

// Weight rows and activations of an R x T tile. The tile's tokens t0 .. t0 + T - 1 lie side by
// side in each quad's entries (ActSplit), so token t of quad q is at a constant offset from the
// quad's first: one pointer per array for the whole tile.
template <int R, int T>
struct PackedTileInputs {
  const uint8_t* rows[R];
  const int8_t* x_q;  // per entry: 128 codes (lo half, hi half)
  const float* x_d;   // per entry: 16 block scales (each over its four int32 lanes)
  const float* x_s;   // per entry: 4 block sums
  const float* x_h;   // per entry: 8 half-block sums (lo halves, then hi halves)
  int64_t per_quad;   // entries per quad (ActSplit::tokens)
  PackedTileInputs(const GemvPackedArgs& a, int64_t r0, int64_t t0)
      : x_q(a.x.q + 128 * t0), x_d(a.x.dx + 16 * t0), x_s(a.x.s + 4 * t0), x_h(a.x.sh + 8 * t0),
        per_quad(a.x.tokens) {
    for (int r = 0; r < R; ++r) rows[r] = a.w->row(r0 + r);
  }
  const int8_t* q(int t, int64_t quad) const { return x_q + 128 * (quad * per_quad + t); }
  const float* d(int t, int64_t quad) const { return x_d + 16 * (quad * per_quad + t); }
  const float* s(int t, int64_t quad) const { return x_s + 4 * (quad * per_quad + t); }
  const float* h(int t, int64_t quad) const { return x_h + 8 * (quad * per_quad + t); }
};

// Y[t, r] = y, or += y when the call accumulates.
inline void packed_store(const GemvPackedArgs& a, int64_t r, int64_t t, float y) {
  float& out = a.Y[t * a.ldy + r];
  out = a.accumulate ? out + y : y;
}

}  // namespace
}  // namespace hg::cpu
