// GEMV kernels of the plain types (F32, F16, BF16; the quantized ones take matmul_int8.h) and the
// prefill tiles' dequantizers, written once over a vector-traits type V, instantiated by
// matmul_avx2.cpp and matmul_avx512.cpp (each includes this header after its intrinsics, so everything here is
// compiled with that file's ISA flags; the anonymous namespace keeps the copies apart).
//
// V provides: F (fp32 vector of V::W lanes), zero, load (W floats), set1, fmadd, mul, hsum,
// load_f16 / load_bf16 (W halves -> W floats), and per 32-block decoders
// q8 (32 int8), q4 (16 bytes of nibbles, minus `offset`) that fill F[32 / W] in element order.
//
// Shape of the work: R rows x T tokens of accumulators (R * T <= 4, see kMaxAccumulators), so a
// weight vector is decoded once and used T times, and an activation vector loaded once is used
// R times. Rows are streamed once from DRAM for all tokens: token groups after the first re-read
// the same R rows, which are still in L1/L2.
#pragma once
#include <cstdint>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/vec_load.h"

namespace hg::cpu {
namespace {

constexpr int kMaxTokensPerPass = 4;
constexpr int kMaxAccumulators = 4;

// Plain types: F32, F16, BF16 (W elements per step, scalar tail for cols % W).
template <class V, DType WT, int T, int R>
void gemv_plain(const GemvArgs& a, int64_t r0, int64_t t0) {
  using F = typename V::F;
  using Wt = PlainLoad<V, WT>;
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = a.W + static_cast<size_t>(r0 + r) * a.row_bytes;
  const float* x[T];
  for (int t = 0; t < T; ++t) x[t] = a.X + (t0 + t) * a.cols;
  F acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = V::zero();
  int64_t c = 0;
  for (; c + V::W <= a.cols; c += V::W) {
    F w[R];
    for (int r = 0; r < R; ++r) w[r] = Wt::load(rows[r], c);
    for (int t = 0; t < T; ++t) {
      const F xv = V::load(x[t] + c);
      for (int r = 0; r < R; ++r) acc[r][t] = V::fmadd(w[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float s = V::hsum(acc[r][t]);
      for (int64_t k = c; k < a.cols; ++k) s += Wt::scalar(rows[r], k) * x[t][k];
      float& out = a.Y[(t0 + t) * a.ldy + r0 + r];
      out = a.accumulate ? out + s : s;
    }
}

// All token groups for R rows starting at r0.
template <class V, DType WT, int R>
void gemv_row_group(const GemvArgs& a, int64_t r0) {
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kMaxTokensPerPass) {
    const int64_t n = a.n_tokens - t0;
    if (n >= 4 && R * 4 <= kMaxAccumulators) {
      if constexpr (R * 4 <= kMaxAccumulators) gemv_plain<V, WT, 4, R>(a, r0, t0);
    } else if (n == 3 && R * 3 <= kMaxAccumulators) {
      if constexpr (R * 3 <= kMaxAccumulators) gemv_plain<V, WT, 3, R>(a, r0, t0);
    } else if (n == 2 && R * 2 <= kMaxAccumulators) {
      if constexpr (R * 2 <= kMaxAccumulators) gemv_plain<V, WT, 2, R>(a, r0, t0);
    } else {
      // Only reached with n == 1, or when R is too wide for n tokens (never: see gemv_rows_of).
      for (int64_t t = t0; t < a.n_tokens && t < t0 + kMaxTokensPerPass; ++t) gemv_plain<V, WT, 1, R>(a, r0, t);
    }
  }
}

template <class V, DType WT>
void gemv_rows_of(const GemvArgs& a, int64_t row_begin, int64_t row_end) {
  // Wider row groups when there are few tokens, so R * T accumulators stay about constant.
  const int64_t tokens = a.n_tokens < kMaxTokensPerPass ? a.n_tokens : kMaxTokensPerPass;
  int64_t r = row_begin;
  if (tokens == 1)
    for (; r + 4 <= row_end; r += 4) gemv_row_group<V, WT, 4>(a, r);
  else if (tokens == 2)
    for (; r + 2 <= row_end; r += 2) gemv_row_group<V, WT, 2>(a, r);
  for (; r < row_end; ++r) gemv_row_group<V, WT, 1>(a, r);
}

template <class V>
void gemv_rows_dispatch(const GemvArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.wt) {
    case DType::F32: return gemv_rows_of<V, DType::F32>(a, row_begin, row_end);
    case DType::F16: return gemv_rows_of<V, DType::F16>(a, row_begin, row_end);
    case DType::BF16: return gemv_rows_of<V, DType::BF16>(a, row_begin, row_end);
    default: return;  // quantized types take the int8 GEMV (matmul_int8.h)
  }
}

// Dequantization to fp32 for the prefill tiles, with the same decoders as the GEMV kernels.
template <class V, DType WT>
void dequantize_plain(const uint8_t* row, int64_t n, float* out) {
  int64_t c = 0;
  for (; c + V::W <= n; c += V::W) V::store(out + c, PlainLoad<V, WT>::load(row, c));
  for (; c < n; ++c) out[c] = PlainLoad<V, WT>::scalar(row, c);
}

template <class V>
void dequantize_span_simd(DType wt, const uint8_t* row, int64_t n, float* out) {
  using F = typename V::F;
  constexpr int NV = 32 / V::W;
  F q[NV];
  switch (wt) {
    case DType::F32: return dequantize_plain<V, DType::F32>(row, n, out);
    case DType::F16: return dequantize_plain<V, DType::F16>(row, n, out);
    case DType::BF16: return dequantize_plain<V, DType::BF16>(row, n, out);
    case DType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
        V::q8(blk.qs, q);
        const F d = V::set1(V::f16_scalar(blk.d));
        for (int k = 0; k < NV; ++k) V::store(out + 32 * b + k * V::W, V::mul(q[k], d));
      }
      return;
    case DType::Q4_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
        V::q4(blk.qs, 8, q);
        const F d = V::set1(V::f16_scalar(blk.d));
        for (int k = 0; k < NV; ++k) V::store(out + 32 * b + k * V::W, V::mul(q[k], d));
      }
      return;
    case DType::Q4_1:
      for (int64_t b = 0; b < n / 32; ++b) {
        const auto& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
        V::q4(blk.qs, 0, q);
        const F d = V::set1(V::f16_scalar(blk.d)), m = V::set1(V::f16_scalar(blk.m));
        for (int k = 0; k < NV; ++k) V::store(out + 32 * b + k * V::W, V::fmadd(q[k], d, m));
      }
      return;
    default:  // the other block types: the scalar code, compiled for this ISA
      return dequantize_block_row(wt, row, n, out);
  }
}

}  // namespace
}  // namespace hg::cpu
