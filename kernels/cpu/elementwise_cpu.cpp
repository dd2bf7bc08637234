// Plain loops: GCC vectorizes them (the library is built -O3), and they are a small share of a
// decode step next to the weight reads.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/exp_poly.h"

namespace hg::cpu {

// silu(g) = g · σ(g) with e = e^-|g| from exp_poly.h's branch-free steps (relative error < 2e-7,
// as std::exp's rounding), σ = 1 / (1 + e) for g >= 0 and e / (1 + e) below: a loop GCC
// vectorizes at the baseline ISA. With std::exp it stayed a scalar call per value, 8% of the
// device thread's time at batch 8 (SmolLM2, 12,288 values a layer).
void silu_mul_range(float* gate, const float* up, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float g = gate[i];
    const float e = exp_nonpositive_elementwise(-std::fabs(g));
    const float sigma = (g >= 0.0f ? 1.0f : e) / (1.0f + e);
    gate[i] = g * sigma * up[i];
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
