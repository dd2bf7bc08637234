// e^x for x <= 0 (softmax numerators: scores minus their maximum), the constants shared by the
// scalar twin (exp_nonpositive_scalar below) and the vector traits (vec_avx2.h, vec_avx512.h),
// which evaluate the same steps lane by lane:
//   x = max(x, kExpMin); k = round(x log2 e); r = x - k ln2 (ln2 in two parts, Cody-Waite, so
//   |r| <= ln2 / 2 exactly enough); p = Taylor polynomial of e^r to degree 6 (relative error
//   < 2e-7 on that range); e^x = p · 2^k.
// x is clamped at -87 (e^-87 ~ 1.6e-38, still a normal float): no lane underflows to a denormal
// (softmax_inplace's division by the sum would make one: it flushes those to 0).
// `static` for the same reason as half.h (included by per-ISA translation units).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace hg::cpu {

constexpr float kExpMin = -87.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;  // exact in 9 bits: k * kLn2Hi is exact
constexpr float kLn2Lo = -2.12194440e-4f;
// Horner coefficients of 1 + r + r²/2 + … + r⁶/720, highest degree first.
constexpr float kExpPoly[7] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};

static inline float exp_nonpositive_scalar(float x) {
  x = x < kExpMin ? kExpMin : x;
  const float k = std::nearbyint(x * kLog2e);
  const float r = (x - k * kLn2Hi) - k * kLn2Lo;
  float p = kExpPoly[0];
  for (int i = 1; i < 7; ++i) p = p * r + kExpPoly[i];
  return std::ldexp(p, static_cast<int>(k));
}

// The same steps without library calls, branch-free, so that a loop of it vectorizes in a
// translation unit built for the baseline ISA (std::nearbyint and std::ldexp keep GCC from it):
// k is rounded by adding and subtracting 1.5 · 2^23, the clamp is a min on the bits (x <= 0: the
// larger magnitude has the larger bits), and 2^k is built in the exponent bits (k >= -126).
// Bit for bit exp_nonpositive_scalar where x * kLog2e is rounded before the addition, i.e.
// without FMA contraction (tests/unit/test_dot.cpp). Keyformer's Gumbel-softmax uses it.
static inline float exp_nonpositive_elementwise(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 · 2^23
  constexpr uint32_t kMinBits = std::bit_cast<uint32_t>(kExpMin);
  x = std::bit_cast<float>(std::min(std::bit_cast<uint32_t>(x), kMinBits));
  const float k = (x * kLog2e + kRound) - kRound;
  const float r = (x - k * kLn2Hi) - k * kLn2Lo;
  float p = kExpPoly[0];
  for (int i = 1; i < 7; ++i) p = p * r + kExpPoly[i];
  return p * std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23);
}

}  // namespace hg::cpu
