// Scalar fp32 <-> f16 / bf16 conversions, shared by kernels, loaders and tests.
//
// Header-only and baseline x86-64 (no F16C): these are used for embedding lookups, cache writes
// of single vectors and test oracles; vector kernels convert in registers instead. Both
// narrowing conversions round to nearest, ties to even, like the hardware instructions
// (vcvtps2ph with imm 0, vcvtneps2bf16), so scalar twins and SIMD kernels agree bit for bit.
// The functions are `static inline` on purpose: this header is included by files built with
// -mavx2 / -mavx512f, and an ordinary inline function would get one out-of-line copy chosen by
// the linker, possibly an AVX-512 one called from baseline code on a CPU without it.
#pragma once
#include <cstdint>
#include <cstring>

namespace hg::cpu {

static inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

static inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// bf16 is the top half of an fp32: widening is a shift.
static inline float bf16_to_fp32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

static inline uint16_t fp32_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// IEEE half -> float, exact for every input (subnormals, inf, NaN included).
static inline float f16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: value = mant * 2^-24, exactly representable in fp32.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return bits_float(sign | float_bits(v));
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float -> IEEE half, round to nearest even; overflow gives inf, underflow gives (signed) zero or
// a subnormal.
static inline uint16_t fp32_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24, rounded to nearest even, fits in 10 bits (or
    // rounds up into the smallest normal, which the bit pattern handles by itself).
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24 for exp in [102, 112]
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry into exponent is correct
  return static_cast<uint16_t>(sign | h);
}

}  // namespace hg::cpu
