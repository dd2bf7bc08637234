// Shared by the matmul and quant-type tests: the dtypes, random weights of each (random bytes with
// sane scales, so every code pattern is exercised), a double-precision reference and the
// tolerances of the GEMV paths.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_blocks.h"

namespace hg::cpu {

inline const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,   DType::Q4_0,
                                  DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K,
                                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,   DType::IQ4_XS};

inline std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa i : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16})
    if (cpu_isa_supported(i)) out.push_back(i);
  return out;
}

// Random weights of `rows` x `cols` in dtype `wt`: random bytes for the quants with sane f16 scales
// (never NaN / inf), so every bit pattern of the quants is exercised.
inline std::vector<uint8_t> random_weights(DType wt, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> w(dtype_row_bytes(wt, cols) * static_cast<size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), scale(0.002f, 0.05f);
  const int64_t n = rows * cols;
  auto f16 = [&](float v) { return fp32_to_f16(v); };
  switch (wt) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(w.data())[i] = u(rng);
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(w.data())[i] = f16(u(rng));
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(w.data())[i] = fp32_to_bf16(u(rng));
      break;
    case DType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b) reinterpret_cast<BlockQ8_0*>(w.data())[b].d = f16(scale(rng));
      break;
    case DType::Q4_0:
      for (int64_t b = 0; b < n / 32; ++b) reinterpret_cast<BlockQ4_0*>(w.data())[b].d = f16(scale(rng) * 8);
      break;
    case DType::Q4_1:
      for (int64_t b = 0; b < n / 32; ++b) {
        auto& blk = reinterpret_cast<BlockQ4_1*>(w.data())[b];
        blk.d = f16(scale(rng) * 8);
        blk.m = f16(u(rng) * 0.5f);
      }
      break;
    case DType::Q4_K:
      for (int64_t b = 0; b < n / 256; ++b) {
        auto& blk = reinterpret_cast<BlockQ4_K*>(w.data())[b];
        blk.d = f16(scale(rng) * 0.2f);
        blk.dmin = f16(scale(rng) * 0.2f);
      }
      break;
    case DType::Q6_K:
      for (int64_t b = 0; b < n / 256; ++b) reinterpret_cast<BlockQ6_K*>(w.data())[b].d = f16(scale(rng) * 0.02f);
      break;
    case DType::Q5_0:
      for (int64_t b = 0; b < n / 32; ++b) reinterpret_cast<BlockQ5_0*>(w.data())[b].d = f16(scale(rng) * 4);
      break;
    case DType::Q5_1:
      for (int64_t b = 0; b < n / 32; ++b) {
        auto& blk = reinterpret_cast<BlockQ5_1*>(w.data())[b];
        blk.d = f16(scale(rng) * 4);
        blk.m = f16(u(rng) * 0.5f);
      }
      break;
    case DType::IQ4_NL:
      for (int64_t b = 0; b < n / 32; ++b) reinterpret_cast<BlockIQ4_NL*>(w.data())[b].d = f16(scale(rng) * 0.1f);
      break;
    case DType::Q2_K:
      for (int64_t b = 0; b < n / 256; ++b) {
        auto& blk = reinterpret_cast<BlockQ2_K*>(w.data())[b];
        blk.d = f16(scale(rng) * 0.5f);
        blk.dmin = f16(scale(rng) * 0.5f);
      }
      break;
    case DType::Q3_K:
      for (int64_t b = 0; b < n / 256; ++b) reinterpret_cast<BlockQ3_K*>(w.data())[b].d = f16(scale(rng) * 0.05f);
      break;
    case DType::Q5_K:
      for (int64_t b = 0; b < n / 256; ++b) {
        auto& blk = reinterpret_cast<BlockQ5_K*>(w.data())[b];
        blk.d = f16(scale(rng) * 0.1f);
        blk.dmin = f16(scale(rng) * 0.2f);
      }
      break;
    case DType::IQ4_XS:
      for (int64_t b = 0; b < n / 256; ++b) reinterpret_cast<BlockIQ4_XS*>(w.data())[b].d = f16(scale(rng) * 0.003f);
      break;
  }
  return w;
}

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// Double-precision reference from dequantize_row; also returns sum |w x| for the tolerance.
inline void reference(DType wt, const std::vector<uint8_t>& W, int64_t rows, int64_t cols, const std::vector<float>& X,
               int64_t n_tokens, std::vector<double>& ref, std::vector<double>& magnitude) {
  ref.assign(static_cast<size_t>(n_tokens * rows), 0.0);
  magnitude.assign(ref.size(), 0.0);
  std::vector<float> w(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_scalar(wt, W.data(), cols, r, w.data());
    for (int64_t t = 0; t < n_tokens; ++t) {
      double s = 0, m = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(w[c]) * X[t * cols + c];
        s += p;
        m += std::fabs(p);
      }
      ref[t * rows + r] = s;
      magnitude[t * rows + r] = m;
    }
  }
}

// What the int8 GEMV's activation rounding may cost, output by output: X is quantized in
// 32-blocks with step d = max|x| / 127 and each element moves by at most d / 2, so
//   |W·x - W·x̂| <= sum over blocks of (d / 2) * sum |w| over the block.
// Computed from X alone (not from the quantizer under test).
inline std::vector<double> int8_rounding_bound(DType wt, const std::vector<uint8_t>& W, int64_t rows, int64_t cols,
                                        const std::vector<float>& X, int64_t n_tokens) {
  std::vector<double> bound(static_cast<size_t>(n_tokens * rows), 0.0);
  std::vector<float> w(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_scalar(wt, W.data(), cols, r, w.data());
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t b = 0; b < cols / 32; ++b) {
        double amax = 0, wsum = 0;
        for (int64_t i = 32 * b; i < 32 * b + 32; ++i) {
          amax = std::max(amax, static_cast<double>(std::fabs(X[t * cols + i])));
          wsum += std::fabs(w[i]);
        }
        bound[t * rows + r] += amax / 127.0 / 2.0 * wsum;
      }
  }
  return bound;
}

// What the bf16 prefill GEMMs' rounding of X and W to bf16 may cost, output by output: both are
// rounded to nearest with 8 significant bits, so each product moves by at most
// (2 * 2^-9 + 2^-18) |w x|.
inline std::vector<double> bf16_rounding_bound(const std::vector<double>& magnitude) {
  std::vector<double> bound(magnitude.size());
  for (size_t i = 0; i < bound.size(); ++i) bound[i] = magnitude[i] * (2.0 / 512.0 + 1.0 / 262144.0);
  return bound;
}

// True where matmul at `isa` runs n_tokens x cols through a bf16 GEMM (gemm_bf16.h).
inline bool takes_bf16(CpuIsa isa, int64_t n_tokens, int64_t cols) {
  return n_tokens >= kMatmulSgemmMinTokens && cols % 32 == 0 && prefill_gemm_for(isa) != PrefillGemm::Sgemm;
}

// fp32 accumulation over `cols` terms: error grows ~ cols * eps * sum|w x|; allow a margin.
// `extra` (optional): a further allowance per output (the int8 activation rounding).
inline void expect_close(const float* Y, int64_t ldy, const std::vector<double>& ref, const std::vector<double>& magnitude,
                  int64_t rows, int64_t n_tokens, int64_t cols, const std::string& what,
                  const std::vector<double>* extra = nullptr) {
  const double tol_rel = 4e-7 * std::sqrt(static_cast<double>(cols)) + 2e-6;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const double want = ref[t * rows + r];
      const double tol = tol_rel * magnitude[t * rows + r] + (extra ? 1.001 * (*extra)[t * rows + r] : 0.0) + 1e-30;
      ASSERT_NEAR(Y[t * ldy + r], want, tol) << what << " t=" << t << " r=" << r;
    }
}

// Columns beyond `rows` in each Y row (filled with NaN) are not the kernel's: untouched.
inline void expect_untouched(const std::vector<float>& Y, int64_t ldy, int64_t rows, int64_t n_tokens,
                      const std::string& what) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = rows; r < ldy; ++r) ASSERT_TRUE(std::isnan(Y[t * ldy + r])) << what << " t=" << t << " r=" << r;
}

inline std::vector<int64_t> cols_for(DType wt) {
  if (dtype_block_elems(wt) == 256) return {256, 512};
  if (dtype_is_quantized(wt)) return {32, 64, 96, 256, 512};
  return {1, 7, 32, 33, 96, 100, 512};
}

}  // namespace hg::cpu
