// Keyformer's Gumbel noise (src/attention/selectors/keyformer_scores.h) for one query row over
// many keys, the loop every score of a prompt row runs: a counter-based hash gives a uniform in
// (0, 1) per key position from the row's hash, as a pure function, so that the noise of (seed,
// layer, head, query position, key position) is the same whatever the order or the thread split;
// then g = -ln(-ln u). The hash is 64-bit integer arithmetic (SplitMix64's finalizer), the
// logarithm a polynomial; the per-ISA builds vectorize both (8 lanes of 64-bit multiplies with
// AVX-512) and are compiled without FMA contraction, so that every ISA gives the scalar bits
// (tests/unit/test_heavy_hitters.cpp). `static` for the same reason as half.h (included by
// per-ISA translation units).
#pragma once
#include <bit>
#include <cstdint>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/exp_poly.h"

namespace hg::cpu {

// SplitMix64's finalizer: a bijective 64-bit mix with full avalanche.
static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// u in (0, 1) from the hash's top 24 bits, made odd: (2m + 1) / 2^24 is exact in a float and
// reaches neither end, so -ln u >= 2^-24 > 0.
static inline float uniform_open(uint64_t row, int64_t key_pos) {
  const uint64_t h = mix64(row ^ static_cast<uint64_t>(key_pos) * 0xD6E8FEB86659FD93ull);
  return static_cast<float>(static_cast<int32_t>((h >> 40) | 1)) * 0x1.0p-24f;
}

// ln x for a normal, finite x > 0 (keyformer_scores.h's ln_normal): x = 2^k f with f in [√½, √2)
// (0x3f3504f3 is √½'s bits: adding 1.0's bits minus them carries into the exponent exactly when the
// mantissa is at least √2's), then ln f = 2 atanh(s) = 2s (1 + s²/3 + s⁴/5 + …) with s = (f - 1) /
// (f + 1), |s| <= 0.172, to s⁹ (truncation < 1e-9 relative). f - 1 is exact, so x near 1 keeps its
// relative precision. Within 2 ulp of std::log (tests/unit/test_heavy_hitters.cpp).
static inline float ln_normal_inline(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x) + (0x3f800000u - 0x3f3504f3u);
  const float k = static_cast<float>(static_cast<int32_t>(bits >> 23) - 127);
  const float f = std::bit_cast<float>((bits & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  const float s = f / (2.0f + f), z = s * s;
  const float odd = (((z * (1.0f / 9) + 1.0f / 7) * z + 1.0f / 5) * z + 1.0f / 3) * z;
  const float two_s = s + s;
  return k * kLn2Hi + (two_s + (two_s * odd + k * kLn2Lo));
}

// -ln(-ln u): u >= 2^-24 and -ln u >= 2^-24 are both normal.
static inline float gumbel_of_uniform(float u) { return -ln_normal_inline(-ln_normal_inline(u)); }

// noise[i] = gumbel_of_uniform(uniform_open(row, key_pos[i])) for i < n, with the active ISA (the
// same bits on each).
void gumbel_noise_span(uint64_t row, const int32_t* key_pos, int64_t n, float* noise);
void gumbel_noise_span_isa(CpuIsa isa, uint64_t row, const int32_t* key_pos, int64_t n, float* noise);
void gumbel_noise_span_avx2(uint64_t row, const int32_t* key_pos, int64_t n, float* noise);
void gumbel_noise_span_avx512(uint64_t row, const int32_t* key_pos, int64_t n, float* noise);

// The loops each ISA's translation unit compiles with its own flags.
static inline void gumbel_noise_loop(uint64_t row, const int32_t* key_pos, int64_t n, float* noise) {
  for (int64_t i = 0; i < n; ++i) noise[i] = uniform_open(row, key_pos[i]);
  for (int64_t i = 0; i < n; ++i) noise[i] = gumbel_of_uniform(noise[i]);
}

}  // namespace hg::cpu
