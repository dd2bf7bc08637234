// Per-ISA entry points of the dot kernels (dot.cpp dispatches to them). Row strides in bytes.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "hybridgen/dtype.h"

namespace hg::cpu {

struct DotIsaFns {
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  void (*dot_rows_heads)(DType dt, const uint8_t* K, size_t row_bytes, int64_t n_rows, const float* q,
                         int n_q, int64_t ld_q, int64_t head_dim, float scale, float* out, int64_t ld_out);
  void (*axpy_rows)(DType dt, const uint8_t* V, size_t row_bytes, int64_t n_rows, const float* p,
                    int64_t head_dim, float* out);
  float (*max_value)(const float* p, int64_t n);
  float (*exp_shift_sum)(float* p, int64_t n, float shift);
};

// e^x for x <= 0 (scores minus their maximum), written once for the scalar twin; the vector traits
// repeat it lane-wise: x = k ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, Cody-Waite), a degree-6
// Taylor polynomial in r (relative error < 2e-7), times 2^k. x is clamped at -87 (e^-87 ~ 1.6e-38,
// still a normal float), so no lane underflows to a denormal.
inline float exp_nonpositive_scalar(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float k = std::nearbyint(x * 1.44269504088896341f);
  float r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.0f / 720.0f;
  for (const float c : {1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f}) p = p * r + c;
  return std::ldexp(p, static_cast<int>(k));
}

extern const DotIsaFns kDotAvx2;
extern const DotIsaFns kDotAvx512;

}  // namespace hg::cpu
