// The quantile table and the dispatch of gumbel_noise_span (gumbel_noise.h), with its baseline.
// Built with -ffp-contract=off (CMakeLists.txt): the table is gumbel_of_uniform's bits everywhere.
#include <vector>

#include "kernels/cpu/gumbel_noise.h"

namespace hg::cpu {

const float* gumbel_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(size_t{1} << kGumbelTableBits);
    for (size_t i = 0; i < t.size(); ++i) {
      // (2i + 1) / 2^17 is exact in a float
      const float u = static_cast<float>(2 * i + 1) * (1.0f / static_cast<float>(2u << kGumbelTableBits));
      t[i] = gumbel_of_uniform(u);
    }
    return t;
  }();
  return table.data();
}

void gumbel_noise_span_isa(CpuIsa isa, bool add, uint64_t row, const int32_t* key_pos, int64_t n, float* out) {
  const float* table = gumbel_table();
  const uint32_t row32 = fold_row(row);
  switch (isa) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512:
      return gumbel_noise_span_avx512(add, table, row32, key_pos, n, out);
    case CpuIsa::Avx2:
      return gumbel_noise_span_avx2(add, table, row32, key_pos, n, out);
    case CpuIsa::Scalar:
      break;
  }
  add ? gumbel_noise_loop<true>(table, row32, key_pos, n, out)
      : gumbel_noise_loop<false>(table, row32, key_pos, n, out);
}

void gumbel_noise_span(uint64_t row, const int32_t* key_pos, int64_t n, float* noise) {
  gumbel_noise_span_isa(active_cpu_isa(), false, row, key_pos, n, noise);
}

void gumbel_noise_add_span(uint64_t row, const int32_t* key_pos, int64_t n, float* x) {
  gumbel_noise_span_isa(active_cpu_isa(), true, row, key_pos, n, x);
}

}  // namespace hg::cpu
