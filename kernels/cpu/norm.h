// Row normalizations on fp32 rows. Rows [row_begin, row_end) of x[n, dim] -> y (may alias x).
#pragma once
#include <cstdint>

namespace hg::cpu {

// y = x / sqrt(mean(x²) + eps) * weight
void rmsnorm_rows(const float* x, const float* weight, float eps, int64_t dim, float* y,
                  int64_t row_begin, int64_t row_end);
// y = (x - mean) / sqrt(var + eps) * weight + bias
void layernorm_rows(const float* x, const float* weight, const float* bias, float eps, int64_t dim,
                    float* y, int64_t row_begin, int64_t row_end);

}  // namespace hg::cpu
