#include "attention/selectors/keyformer_scores.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include "kernels/cpu/exp_poly.h"

namespace hg {

using cpu::kLn2Hi;  // ln 2 in two parts, as the softmax exp splits it (kernels/cpu/exp_poly.h)
using cpu::kLn2Lo;

// ln_normal (keyformer_scores.h): x = 2^k f with f in [√½, √2) (0x3f3504f3 is √½'s bits: adding
// 1.0's bits minus them carries into the exponent exactly when the mantissa is at least √2's),
// then ln f = 2 atanh(s) = 2s (1 + s²/3 + s⁴/5 + …) with s = (f - 1) / (f + 1), |s| <= 0.172, to
// s⁹ (truncation < 1e-9 relative). f - 1 is exact, so x near 1 keeps its relative precision.
// Within 2 ulp of std::log (tests/unit/test_heavy_hitters.cpp).
float ln_normal(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x) + (0x3f800000u - 0x3f3504f3u);
  const float k = static_cast<float>(static_cast<int32_t>(bits >> 23) - 127);
  const float f = std::bit_cast<float>((bits & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  const float s = f / (2.0f + f), z = s * s;
  const float odd = (((z * (1.0f / 9) + 1.0f / 7) * z + 1.0f / 5) * z + 1.0f / 3) * z;
  const float two_s = s + s;
  return k * kLn2Hi + (two_s + (two_s * odd + k * kLn2Lo));
}

namespace {

// SplitMix64's finalizer: a bijective 64-bit mix with full avalanche.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// gumbel_noise's hash of everything but the key position: computed once per query row and head.
uint64_t row_hash(uint64_t seed, int layer, int head, int64_t query_pos) {
  uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull);
  h = mix64(h ^ (static_cast<uint64_t>(layer) << 32 | static_cast<uint32_t>(head)));
  return mix64(h ^ static_cast<uint64_t>(query_pos));
}

// u in (0, 1) from the hash's top 24 bits, made odd: (2m + 1) / 2^24 is exact in a float and
// reaches neither end, so -ln u >= 2^-24 > 0.
float uniform_open(uint64_t row, int64_t key_pos) {
  const uint64_t h = mix64(row ^ static_cast<uint64_t>(key_pos) * 0xD6E8FEB86659FD93ull);
  return static_cast<float>((h >> 40) | 1) * 0x1.0p-24f;
}

// -ln(-ln u): u >= 2^-24 and -ln u >= 2^-24 are both normal.
inline float gumbel_of_uniform(float u) { return -ln_normal(-ln_normal(u)); }

}  // namespace

float keyformer_tau(float tau_init, float tau_end, int64_t pos, int64_t prompt_len, int64_t ctx) {
  const int64_t span = ctx - 1 - prompt_len;  // generated positions after the first
  if (span <= 0 || pos <= prompt_len) return tau_init;
  const double f = std::min(1.0, static_cast<double>(pos - prompt_len) / static_cast<double>(span));
  return static_cast<float>(tau_init + (tau_end - tau_init) * f);
}

float gumbel_noise(uint64_t seed, int layer, int head, int64_t query_pos, int64_t key_pos) {
  return gumbel_of_uniform(uniform_open(row_hash(seed, layer, head, query_pos), key_pos));
}

void gumbel_noise_row(uint64_t seed, int layer, int head, int64_t query_pos, const int32_t* key_pos, int64_t n,
                      float* noise) {
  const uint64_t row = row_hash(seed, layer, head, query_pos);
  for (int64_t i = 0; i < n; ++i) noise[i] = uniform_open(row, key_pos[i]);  // 64-bit products: scalar
  for (int64_t i = 0; i < n; ++i) noise[i] = gumbel_of_uniform(noise[i]);    // vectorizes
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
    const float v = (ln_normal(std::bit_cast<float>(std::max(bits, kFltMinBits))) + noise[j]) * inv_tau;
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
