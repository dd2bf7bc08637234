// Dot kernels written once over a vector-traits type V (vec_avx2.h / vec_avx512.h), instantiated
// by dot_avx2.cpp and dot_avx512.cpp.
//
// dot_rows_heads: tiles of 4 rows x up to 3 query heads; each K vector is widened once per tile
// and feeds every head's FMA, so a GQA group's heads cost one pass over the keys.
// axpy_rows_heads: the outputs of up to 3 heads (a GQA group's) are kept in registers, at most 12
// vectors in all, while the rows stream past, so each V vector is read and widened once for every
// head of the group, and `out` is loaded and stored once per chunk.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/dot_internal.h"
#include "kernels/cpu/vec_load.h"

namespace hg::cpu {
namespace {

template <class V>
float dot_f32_t(const float* a, const float* b, int64_t n) {
  using F = typename V::F;
  F acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  int64_t i = 0;
  for (; i + 4 * V::W <= n; i += 4 * V::W)
    for (int k = 0; k < 4; ++k) acc[k] = V::fmadd(V::load(a + i + k * V::W), V::load(b + i + k * V::W), acc[k]);
  for (; i + V::W <= n; i += V::W) acc[0] = V::fmadd(V::load(a + i), V::load(b + i), acc[0]);
  float s = V::hsum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Prefetch distance: dot_tile reads its rows as one contiguous span and prefetches bytes ahead;
// axpy_chunk reads a column chunk of strided rows and prefetches rows ahead.
constexpr size_t kPrefetchBytes = 1024;
constexpr int64_t kPrefetchRows = 8;

// One tile of R rows x H query heads: every K vector is widened once and feeds H FMAs, and the
// R x H accumulators are independent chains. Rows are reduced four at a time (V::hsum4).
// HD > 0 fixes head_dim at compile time (64 and 128 are most models'): the column loop unrolls and
// the accumulators stay in registers through the reduction.
template <class V, DType DT, int R, int H, int HD>
void dot_tile(const uint8_t* K, size_t row_bytes, const float* q, int64_t ld_q, int64_t head_dim_rt, float scale,
              float* out, int64_t ld_out) {
  const int64_t head_dim = HD > 0 ? HD : head_dim_rt;
  using F = typename V::F;
  using L = PlainLoad<V, DT>;
  for (size_t off = 0; off < R * row_bytes; off += 64) __builtin_prefetch(K + kPrefetchBytes + off);
  F acc[H][R];
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) acc[h][r] = V::zero();
  int64_t c = 0;
  for (; c + V::W <= head_dim; c += V::W)
    for (int r = 0; r < R; ++r) {
      const F kv = L::load(K + r * row_bytes, c);
      for (int h = 0; h < H; ++h) acc[h][r] = V::fmadd(kv, V::load(q + h * ld_q + c), acc[h][r]);
    }
  for (int h = 0; h < H; ++h) {
    float s[R];
    if constexpr (R == 4) {
      V::hsum4(acc[h], s);
    } else {
      for (int r = 0; r < R; ++r) s[r] = V::hsum(acc[h][r]);
    }
    if constexpr (HD == 0 || HD % V::W != 0)
      for (int r = 0; r < R; ++r)
        for (int64_t k = c; k < head_dim; ++k) s[r] += L::scalar(K + r * row_bytes, k) * q[h * ld_q + k];
    for (int r = 0; r < R; ++r) out[h * ld_out + r] = scale * s[r];
  }
}

// Query heads per tile: 4 rows x 3 heads = 12 accumulators fit AVX2's 16 registers.
constexpr int kTileHeads = 3;

// Calls fn(h, std::integral_constant<int, H>{}) for the tiles of kTileHeads heads (and one last
// smaller tile) over n heads: the tile width is a compile-time constant inside fn.
template <class Fn>
void for_head_tiles(int n, Fn&& fn) {
  for (int h = 0; h < n; h += kTileHeads) switch (std::min(kTileHeads, n - h)) {
      case 3:
        fn(h, std::integral_constant<int, 3>{});
        break;
      case 2:
        fn(h, std::integral_constant<int, 2>{});
        break;
      default:
        fn(h, std::integral_constant<int, 1>{});
        break;
    }
}

template <class V, DType DT, int R, int HD>
void dot_tile_heads(const uint8_t* K, size_t row_bytes, const float* q, int n_q, int64_t ld_q, int64_t head_dim,
                    float scale, float* out, int64_t ld_out) {
  for_head_tiles(n_q, [&](int h, auto H) {
    dot_tile<V, DT, R, decltype(H)::value, HD>(K, row_bytes, q + h * ld_q, ld_q, head_dim, scale, out + h * ld_out,
                                               ld_out);
  });
}

// Rows outer, heads inner: a tile of rows is read from memory once and stays in L1 while every
// query head of the group uses it.
template <class V, DType DT, int HD>
void dot_rows_heads_hd(const uint8_t* K, size_t row_bytes, int64_t n_rows, const float* q, int n_q, int64_t ld_q,
                       int64_t head_dim, float scale, float* out, int64_t ld_out) {
  int64_t i = 0;
  for (; i + 4 <= n_rows; i += 4)
    dot_tile_heads<V, DT, 4, HD>(K + i * row_bytes, row_bytes, q, n_q, ld_q, head_dim, scale, out + i, ld_out);
  for (; i < n_rows; ++i)
    dot_tile_heads<V, DT, 1, HD>(K + i * row_bytes, row_bytes, q, n_q, ld_q, head_dim, scale, out + i, ld_out);
}

template <class V, DType DT>
void dot_rows_heads_t(const uint8_t* K, size_t row_bytes, int64_t n_rows, const float* q, int n_q, int64_t ld_q,
                      int64_t head_dim, float scale, float* out, int64_t ld_out) {
  switch (head_dim) {
    case 64:
      return dot_rows_heads_hd<V, DT, 64>(K, row_bytes, n_rows, q, n_q, ld_q, head_dim, scale, out, ld_out);
    case 128:
      return dot_rows_heads_hd<V, DT, 128>(K, row_bytes, n_rows, q, n_q, ld_q, head_dim, scale, out, ld_out);
    default:
      return dot_rows_heads_hd<V, DT, 0>(K, row_bytes, n_rows, q, n_q, ld_q, head_dim, scale, out, ld_out);
  }
}

// out[h * ld_out + c .. + NV*W) += sum_i p[h * ld_p + i] * V[i, c ..]   for h < H
template <class V, DType DT, int NV, int H>
void axpy_chunk(const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p, int64_t ld_p, int64_t c,
                float* out, int64_t ld_out) {
  using F = typename V::F;
  using L = PlainLoad<V, DT>;
  constexpr int64_t kElemBytes = DT == DType::F32 ? 4 : 2;
  F acc[H][NV];
  for (int h = 0; h < H; ++h)
    for (int k = 0; k < NV; ++k) acc[h][k] = V::load(out + h * ld_out + c + k * V::W);
  for (int64_t i = 0; i < n_rows; ++i) {
    const uint8_t* row = Vm + i * row_bytes;
    __builtin_prefetch(row + kPrefetchRows * row_bytes + c * kElemBytes);
    F pv[H];
    for (int h = 0; h < H; ++h) pv[h] = V::set1(p[h * ld_p + i]);
    for (int k = 0; k < NV; ++k) {
      const F v = L::load(row, c + k * V::W);
      for (int h = 0; h < H; ++h) acc[h][k] = V::fmadd(pv[h], v, acc[h][k]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int k = 0; k < NV; ++k) V::store(out + h * ld_out + c + k * V::W, acc[h][k]);
}

// The last n < NV whole vectors of a row: axpy_chunk with NV = n.
template <class V, DType DT, int H, int NV>
void axpy_tail(int n, const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p, int64_t ld_p, int64_t c,
               float* out, int64_t ld_out) {
  if constexpr (NV > 0) {
    if (n == NV) return axpy_chunk<V, DT, NV, H>(Vm, row_bytes, n_rows, p, ld_p, c, out, ld_out);
    axpy_tail<V, DT, H, NV - 1>(n, Vm, row_bytes, n_rows, p, ld_p, c, out, ld_out);
  }
}

template <class V, DType DT, int H>
void axpy_rows_group(const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p, int64_t ld_p,
                     int64_t head_dim, float* out, int64_t ld_out) {
  constexpr int NV = H == 1 ? 8 : 12 / H;  // accumulators: 8 (one head), 12 (2-3 heads)
  int64_t c = 0;
  for (; c + NV * V::W <= head_dim; c += NV * V::W)
    axpy_chunk<V, DT, NV, H>(Vm, row_bytes, n_rows, p, ld_p, c, out, ld_out);
  const int rest = static_cast<int>((head_dim - c) / V::W);
  axpy_tail<V, DT, H, NV - 1>(rest, Vm, row_bytes, n_rows, p, ld_p, c, out, ld_out);
  for (c += rest * V::W; c < head_dim; ++c)
    for (int h = 0; h < H; ++h) {
      float s = out[h * ld_out + c];
      for (int64_t i = 0; i < n_rows; ++i) s += p[h * ld_p + i] * PlainLoad<V, DT>::scalar(Vm + i * row_bytes, c);
      out[h * ld_out + c] = s;
    }
}

template <class V, DType DT>
void axpy_rows_heads_t(const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p, int n_p, int64_t ld_p,
                       int64_t head_dim, float* out, int64_t ld_out) {
  for_head_tiles(n_p, [&](int h, auto H) {
    axpy_rows_group<V, DT, decltype(H)::value>(Vm, row_bytes, n_rows, p + h * ld_p, ld_p, head_dim, out + h * ld_out,
                                               ld_out);
  });
}

template <class V>
float max_value_t(const float* p, int64_t n) {
  using F = typename V::F;
  F m = V::set1(-INFINITY);
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) m = V::max(m, V::load(p + i));
  float r = V::hmax(m);
  for (; i < n; ++i) r = std::max(r, p[i]);
  return r;
}

// p[i] = e^(p[i] - shift) for i < n (shift >= every p[i]); returns the sum.
template <class V>
float exp_shift_sum_t(float* p, int64_t n, float shift) {
  using F = typename V::F;
  const F minus_shift = V::set1(-shift);
  F acc = V::zero();
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) {
    const F e = V::exp_nonpositive(V::add(V::load(p + i), minus_shift));
    V::store(p + i, e);
    acc = V::add(acc, e);
  }
  float s = V::hsum(acc);
  for (; i < n; ++i) s += (p[i] = exp_nonpositive_scalar(p[i] - shift));
  return s;
}

template <class V>
void dot_rows_heads_dispatch(DType dt, const uint8_t* K, size_t row_bytes, int64_t n_rows, const float* q, int n_q,
                             int64_t ld_q, int64_t head_dim, float scale, float* out, int64_t ld_out) {
  switch (dt) {
    case DType::F32:
      return dot_rows_heads_t<V, DType::F32>(K, row_bytes, n_rows, q, n_q, ld_q, head_dim, scale, out, ld_out);
    case DType::F16:
      return dot_rows_heads_t<V, DType::F16>(K, row_bytes, n_rows, q, n_q, ld_q, head_dim, scale, out, ld_out);
    case DType::BF16:
      return dot_rows_heads_t<V, DType::BF16>(K, row_bytes, n_rows, q, n_q, ld_q, head_dim, scale, out, ld_out);
    default:
      return;  // rejected by dot.cpp
  }
}

template <class V>
void axpy_rows_heads_dispatch(DType dt, const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p, int n_p,
                              int64_t ld_p, int64_t head_dim, float* out, int64_t ld_out) {
  switch (dt) {
    case DType::F32:
      return axpy_rows_heads_t<V, DType::F32>(Vm, row_bytes, n_rows, p, n_p, ld_p, head_dim, out, ld_out);
    case DType::F16:
      return axpy_rows_heads_t<V, DType::F16>(Vm, row_bytes, n_rows, p, n_p, ld_p, head_dim, out, ld_out);
    case DType::BF16:
      return axpy_rows_heads_t<V, DType::BF16>(Vm, row_bytes, n_rows, p, n_p, ld_p, head_dim, out, ld_out);
    default:
      return;
  }
}

}  // namespace
}  // namespace hg::cpu
