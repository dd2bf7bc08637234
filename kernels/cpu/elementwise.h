// Elementwise activations and residual adds on fp32 ranges [begin, end).
#pragma once
#include <cstdint>

namespace hg::cpu {

void silu_mul_range(float* gate, const float* up, int64_t begin, int64_t end);  // gate = silu(gate)·up
void relu_range(float* x, int64_t begin, int64_t end);
void add_range(float* y, const float* x, int64_t begin, int64_t end);           // y += x
// y[r, :] += bias for rows [row_begin, row_end)
void add_bias_rows(float* y, const float* bias, int64_t dim, int64_t row_begin, int64_t row_end);

}  // namespace hg::cpu
