// Dot kernels written once over a vector-traits type V (vec_avx2.h / vec_avx512.h), instantiated
// by dot_avx2.cpp and dot_avx512.cpp.
//
// dot_rows: 4 rows at a time share each q vector load and give 4 independent FMA chains.
// axpy_rows: the output is kept in registers 8 vectors (64 or 128 columns) at a time while all
// rows stream past, so each V element is read once and `out` is loaded and stored once per chunk.
#pragma once
#include <cstddef>
#include <cstdint>

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

// Rows ahead to prefetch: the rows are strided, and a few hundred bytes each.
constexpr int64_t kPrefetchRows = 8;

template <class V, DType DT, int R>
void dot_row_group(const uint8_t* K, size_t row_bytes, const float* q, int64_t head_dim,
                   float scale, float* out) {
  using F = typename V::F;
  using L = PlainLoad<V, DT>;
  F acc[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = V::zero();
    __builtin_prefetch(K + (kPrefetchRows + r) * row_bytes);
  }
  int64_t c = 0;
  for (; c + V::W <= head_dim; c += V::W) {
    const F qv = V::load(q + c);
    for (int r = 0; r < R; ++r) acc[r] = V::fmadd(L::load(K + r * row_bytes, c), qv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = V::hsum(acc[r]);
    for (int64_t k = c; k < head_dim; ++k) s += L::scalar(K + r * row_bytes, k) * q[k];
    out[r] = scale * s;
  }
}

template <class V, DType DT>
void dot_rows_t(const uint8_t* K, size_t row_bytes, int64_t n_rows, const float* q, int64_t head_dim,
                float scale, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n_rows; i += 4) dot_row_group<V, DT, 4>(K + i * row_bytes, row_bytes, q, head_dim, scale, out + i);
  for (; i < n_rows; ++i) dot_row_group<V, DT, 1>(K + i * row_bytes, row_bytes, q, head_dim, scale, out + i);
}

// out[c .. c + NV*W) += sum_i p[i] * V[i, c ..]
template <class V, DType DT, int NV>
void axpy_chunk(const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p, int64_t c,
                float* out) {
  using F = typename V::F;
  using L = PlainLoad<V, DT>;
  constexpr int64_t kElemBytes = DT == DType::F32 ? 4 : 2;
  F acc[NV];
  for (int k = 0; k < NV; ++k) acc[k] = V::load(out + c + k * V::W);
  for (int64_t i = 0; i < n_rows; ++i) {
    const uint8_t* row = Vm + i * row_bytes;
    __builtin_prefetch(row + kPrefetchRows * row_bytes + c * kElemBytes);
    const F pv = V::set1(p[i]);
    for (int k = 0; k < NV; ++k) acc[k] = V::fmadd(pv, L::load(row, c + k * V::W), acc[k]);
  }
  for (int k = 0; k < NV; ++k) V::store(out + c + k * V::W, acc[k]);
}

template <class V, DType DT>
void axpy_rows_t(const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p, int64_t head_dim,
                 float* out) {
  int64_t c = 0;
  for (; c + 8 * V::W <= head_dim; c += 8 * V::W) axpy_chunk<V, DT, 8>(Vm, row_bytes, n_rows, p, c, out);
  switch ((head_dim - c) / V::W) {
    case 7: axpy_chunk<V, DT, 7>(Vm, row_bytes, n_rows, p, c, out); break;
    case 6: axpy_chunk<V, DT, 6>(Vm, row_bytes, n_rows, p, c, out); break;
    case 5: axpy_chunk<V, DT, 5>(Vm, row_bytes, n_rows, p, c, out); break;
    case 4: axpy_chunk<V, DT, 4>(Vm, row_bytes, n_rows, p, c, out); break;
    case 3: axpy_chunk<V, DT, 3>(Vm, row_bytes, n_rows, p, c, out); break;
    case 2: axpy_chunk<V, DT, 2>(Vm, row_bytes, n_rows, p, c, out); break;
    case 1: axpy_chunk<V, DT, 1>(Vm, row_bytes, n_rows, p, c, out); break;
    default: break;
  }
  c += (head_dim - c) / V::W * V::W;
  for (; c < head_dim; ++c) {
    float s = out[c];
    for (int64_t i = 0; i < n_rows; ++i) s += p[i] * PlainLoad<V, DT>::scalar(Vm + i * row_bytes, c);
    out[c] = s;
  }
}

template <class V>
void dot_rows_dispatch(DType dt, const uint8_t* K, size_t row_bytes, int64_t n_rows, const float* q,
                       int64_t head_dim, float scale, float* out) {
  switch (dt) {
    case DType::F32: return dot_rows_t<V, DType::F32>(K, row_bytes, n_rows, q, head_dim, scale, out);
    case DType::F16: return dot_rows_t<V, DType::F16>(K, row_bytes, n_rows, q, head_dim, scale, out);
    case DType::BF16: return dot_rows_t<V, DType::BF16>(K, row_bytes, n_rows, q, head_dim, scale, out);
    default: return;  // rejected by dot.cpp
  }
}

template <class V>
void axpy_rows_dispatch(DType dt, const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p,
                        int64_t head_dim, float* out) {
  switch (dt) {
    case DType::F32: return axpy_rows_t<V, DType::F32>(Vm, row_bytes, n_rows, p, head_dim, out);
    case DType::F16: return axpy_rows_t<V, DType::F16>(Vm, row_bytes, n_rows, p, head_dim, out);
    case DType::BF16: return axpy_rows_t<V, DType::BF16>(Vm, row_bytes, n_rows, p, head_dim, out);
    default: return;
  }
}

}  // namespace
}  // namespace hg::cpu
