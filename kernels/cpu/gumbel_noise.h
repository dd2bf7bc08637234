// Keyformer's Gumbel noise (src/attention/selectors/keyformer_scores.h) for one query row over
// many keys, the loop every score of a prompt row runs: a counter-based hash of (the row's hash,
// key position) as a pure function, so that the noise of (seed, layer, head, query position, key
// position) is the same whatever the order or the thread split; its top 16 bits pick one of 2^16
// equiprobable Gumbel quantiles, g_i = -ln(-ln u_i) at u_i = (2i + 1) / 2^17, from a table built
// once with the deterministic logarithm below. So every ISA gives the scalar bits
// (tests/unit/test_heavy_hitters.cpp), and a key costs a 32-bit hash and one table load: a 32K
// prompt draws 24 × 14 × 32768² / 2 = 1.8e11 samples per Keyformer policy. The quantiles cover
// g in [-2.47, 11.78] (P(g outside) = 1.5e-5) with steps of ~1e-4 where the density is high; the
// earlier draw, two float logarithms of a 24-bit uniform per key, was about 2.5× slower and the
// largest item of an 8K RULER sample's profile (docs/performance.md). `static` for the same
// reason as half.h (included by per-ISA translation units).
#pragma once
#include <bit>
#include <cstdint>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/exp_poly.h"

namespace hg::cpu {

// SplitMix64's finalizer: a bijective 64-bit mix with full avalanche (the row's hash).
static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// MurmurHash3's finalizer: a bijective 32-bit mix with full avalanche, 16 lanes wide in AVX-512.
static inline uint32_t mix32(uint32_t h) {
  h = (h ^ (h >> 16)) * 0x85EBCA6Bu;
  h = (h ^ (h >> 13)) * 0xC2B2AE35u;
  return h ^ (h >> 16);
}

// The row's 64-bit hash folded to the 32 bits a key's hash starts from.
static inline uint32_t fold_row(uint64_t row) { return static_cast<uint32_t>(row ^ (row >> 32)); }

// A key's hash in its row: keys of a row are distinct inputs of a bijection, so a row's draws are
// distinct 32-bit values.
static inline uint32_t key_hash(uint32_t row32, int64_t key_pos) {
  return mix32(static_cast<uint32_t>(key_pos) * 0x9E3779B9u + row32);
}

constexpr int kGumbelTableBits = 16;

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

// -ln(-ln u) for u in [2^-24, 1 - 2^-24]: u and -ln u are both normal.
static inline float gumbel_of_uniform(float u) { return -ln_normal_inline(-ln_normal_inline(u)); }

// The 2^16 quantiles: gumbel_table()[i] = gumbel_of_uniform((2i + 1) / 2^17), built on first use.
const float* gumbel_table();

// The noise of a key whose hash is h.
static inline float gumbel_of_hash(const float* table, uint32_t h) { return table[h >> (32 - kGumbelTableBits)]; }

// noise[i] = gumbel_of_hash(gumbel_table(), key_hash(fold_row(row), key_pos[i])) for i < n, with
// the active ISA (the same bits on each); the _add forms add it to noise[i] instead (a score row
// that takes the noise in place).
void gumbel_noise_span(uint64_t row, const int32_t* key_pos, int64_t n, float* noise);
void gumbel_noise_add_span(uint64_t row, const int32_t* key_pos, int64_t n, float* x);
void gumbel_noise_span_isa(CpuIsa isa, bool add, uint64_t row, const int32_t* key_pos, int64_t n, float* out);
void gumbel_noise_span_avx2(bool add, const float* table, uint32_t row32, const int32_t* key_pos, int64_t n,
                            float* out);
void gumbel_noise_span_avx512(bool add, const float* table, uint32_t row32, const int32_t* key_pos, int64_t n,
                              float* out);

// The scalar loop: the baseline, and each vector build's tail.
template <bool kAdd>
static inline void gumbel_noise_loop(const float* table, uint32_t row32, const int32_t* key_pos, int64_t n,
                                     float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gumbel_of_hash(table, key_hash(row32, key_pos[i]));
    out[i] = kAdd ? out[i] + g : g;
  }
}

}  // namespace hg::cpu
