#include "attention/selectors/keyformer_scores.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include "kernels/cpu/exp_poly.h"
#include "kernels/cpu/gumbel_noise.h"

namespace hg {

float ln_normal(float x) { return cpu::ln_normal_inline(x); }  // kernels/cpu/gumbel_noise.h

namespace {

using cpu::mix64;  // the hashes and the quantile table: kernels/cpu/gumbel_noise.h

// gumbel_noise's hash of everything but the key position: computed once per query row and head.
uint64_t row_hash(uint64_t seed, int layer, int head, int64_t query_pos) {
  uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull);
  h = mix64(h ^ (static_cast<uint64_t>(layer) << 32 | static_cast<uint32_t>(head)));
  return mix64(h ^ static_cast<uint64_t>(query_pos));
}

}  // namespace

float keyformer_tau(float tau_init, float tau_end, int64_t pos, int64_t prompt_len, int64_t ctx) {
  const int64_t span = ctx - 1 - prompt_len;  // generated positions after the first
  if (span <= 0 || pos <= prompt_len) return tau_init;
  const double f = std::min(1.0, static_cast<double>(pos - prompt_len) / static_cast<double>(span));
  return static_cast<float>(tau_init + (tau_end - tau_init) * f);
}

float gumbel_noise(uint64_t seed, int layer, int head, int64_t query_pos, int64_t key_pos) {
  return cpu::gumbel_of_hash(cpu::gumbel_table(),
                             cpu::key_hash(cpu::fold_row(row_hash(seed, layer, head, query_pos)), key_pos));
}

void gumbel_noise_row(uint64_t seed, int layer, int head, int64_t query_pos, const int32_t* key_pos, int64_t n,
                      float* noise) {
  cpu::gumbel_noise_span(row_hash(seed, layer, head, query_pos), key_pos, n, noise);
}

void gumbel_noise_row_add(uint64_t seed, int layer, int head, int64_t query_pos, const int32_t* key_pos, int64_t n,
                          float* x) {
  cpu::gumbel_noise_add_span(row_hash(seed, layer, head, query_pos), key_pos, n, x);
}

void gumbel_softmax(const float* p, const float* noise, int64_t n, float tau, float* y) {
  // p below FLT_MIN (a denormal) weighs nothing against the row's largest term; ln_normal needs a
  // normal argument, so it is taken at FLT_MIN
  constexpr int32_t kFltMinBits = std::bit_cast<int32_t>(FLT_MIN);
  const float inv_tau = 1.0f / tau;
  // branch-free, so that the loops vectorize: GCC keeps a branch where one side of a select needs
  // a division (it may trap) and the other does not, so both sides use it; p >= 0, so p > 0 is
  // its bits > 0
  for (int64_t j = 0; j < n; ++j) {
    const int32_t bits = std::bit_cast<int32_t>(p[j]);
    const float v = (cpu::ln_normal_inline(std::bit_cast<float>(std::max(bits, kFltMinBits))) + noise[j]) * inv_tau;
    y[j] = v + (bits > 0 ? 0.0f : -INFINITY);
  }
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, y[j]);
  if (m == -INFINITY) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const float yj = y[j], e = cpu::exp_nonpositive_elementwise(yj - m);  // -inf - m clamps to e^-87
    const uint32_t keep = std::bit_cast<uint32_t>(yj) == std::bit_cast<uint32_t>(-INFINITY) ? 0u : ~0u;
    y[j] = std::bit_cast<float>(std::bit_cast<uint32_t>(e) & keep);  // masked: 0
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += y[j];
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

}  // namespace hg
