// Per-ISA entry points of the dot kernels (dot.cpp dispatches to them). Row strides in bytes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/cpu/exp_poly.h"

namespace hg::cpu {

struct DotIsaFns {
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  void (*dot_rows_heads)(DType dt, const uint8_t* K, size_t row_bytes, int64_t n_rows, const float* q, int n_q,
                         int64_t ld_q, int64_t head_dim, float scale, float* out, int64_t ld_out);
  void (*axpy_rows_heads)(DType dt, const uint8_t* V, size_t row_bytes, int64_t n_rows, const float* p, int n_p,
                          int64_t ld_p, int64_t head_dim, float* out, int64_t ld_out);
  float (*max_value)(const float* p, int64_t n);
  float (*exp_shift_sum)(float* p, int64_t n, float shift);
};

extern const DotIsaFns kDotAvx2;
extern const DotIsaFns kDotAvx512;

}  // namespace hg::cpu
