// Plain loops: GCC vectorizes them (the library is built -O3), and they are a small share of a
// decode step next to the weight reads.
#include <cmath>

#include "kernels/cpu/elementwise.h"

namespace hg::cpu {

void silu_mul_range(float* gate, const float* up, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void relu_range(float* x, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void add_range(float* y, const float* x, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) y[i] += x[i];
}

void add_bias_rows(float* y, const float* bias, int64_t dim, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    float* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] += bias[i];
  }
}

}  // namespace hg::cpu
