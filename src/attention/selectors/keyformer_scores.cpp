#include "attention/selectors/keyformer_scores.h"

#include <algorithm>
#include <cmath>

namespace hg {

namespace {

// SplitMix64's finalizer: a bijective 64-bit mix with full avalanche.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

float keyformer_tau(float tau_init, float tau_end, int64_t pos, int64_t prompt_len, int64_t ctx) {
  const int64_t span = ctx - 1 - prompt_len;  // generated positions after the first
  if (span <= 0 || pos <= prompt_len) return tau_init;
  const double f = std::min(1.0, static_cast<double>(pos - prompt_len) / static_cast<double>(span));
  return static_cast<float>(tau_init + (tau_end - tau_init) * f);
}

float gumbel_noise(uint64_t seed, int layer, int head, int64_t query_pos, int64_t key_pos) {
  uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull);
  h = mix64(h ^ (static_cast<uint64_t>(layer) << 32 | static_cast<uint32_t>(head)));
  h = mix64(h ^ static_cast<uint64_t>(query_pos));
  h = mix64(h ^ static_cast<uint64_t>(key_pos) * 0xD6E8FEB86659FD93ull);
  // u in (0, 1): 53 random bits, offset by half a step so that neither end is reached
  const double u = (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
  return static_cast<float>(-std::log(-std::log(u)));
}

void gumbel_softmax(const float* p, const float* noise, int64_t n, float tau, float* y) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = p[j] > 0.0f ? (std::log(p[j]) + noise[j]) / tau : -INFINITY;
    m = std::max(m, y[j]);
  }
  if (m == -INFINITY) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (y[j] = y[j] == -INFINITY ? 0.0f : std::exp(y[j] - m));
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

}  // namespace hg
