// Scalar twin of the int8 GEMV (matmul_int8.h) and of the activation quantizer: the test oracle,
// and the path on CPUs without AVX2.
//
// Every weight format is read as 32-blocks of small integer codes w with a scale per 16 codes, an
// offset coefficient c per 32 and a minimum m per 16, so that block j of a row contributes
//   sc0 d_j sum_{i<16} w_i q_i + sc1 d_j sum_{i>=16} w_i q_i + c s_j + m0 d_j sum_{i<16} q_i + m1 d_j sum_{i>=16} q_i
// (d_j, s_j: the activation block's scale and sum, see ActQ8). Q6_K, Q3_K and Q2_K have
// sc0 != sc1; only Q2_K has minimums per 16 (m).
#include <cmath>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace hg::cpu {

namespace {

struct CodeBlock {
  int8_t w[32];
  float sc[2];  // scale of codes 0..15 and 16..31
  float c;      // coefficient of the activation block sum s
  float m[2];   // coefficients of the half-block sums of q (times d)
};

template <class Code>
void put_codes(CodeBlock& o, const Code* code) {
  for (int i = 0; i < 32; ++i) o.w[i] = static_cast<int8_t>(code[i]);
}

// Block j (of 32 values) of a row of `wt`.
CodeBlock decode_codes(DType wt, const uint8_t* row, int64_t j) {
  CodeBlock o{};
  switch (wt) {
    case DType::Q8_0: {
      const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[j];
      for (int i = 0; i < 32; ++i) o.w[i] = b.qs[i];
      o.sc[0] = o.sc[1] = f16_to_fp32(b.d);
      break;
    }
    case DType::Q4_0:
    case DType::Q4_1: {
      // Q4_0: (nibble - 8) * d = nibble * d - 8d;  Q4_1: nibble * d + m.
      const uint8_t* qs = wt == DType::Q4_0 ? reinterpret_cast<const BlockQ4_0*>(row)[j].qs
                                            : reinterpret_cast<const BlockQ4_1*>(row)[j].qs;
      unpack_nibbles(qs, o.w);
      if (wt == DType::Q4_0) {
        o.sc[0] = o.sc[1] = f16_to_fp32(reinterpret_cast<const BlockQ4_0*>(row)[j].d);
        o.c = -8.0f * o.sc[0];
      } else {
        const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[j];
        o.sc[0] = o.sc[1] = f16_to_fp32(b.d);
        o.c = f16_to_fp32(b.m);
      }
      break;
    }
    case DType::Q4_K: {
      const auto& b = reinterpret_cast<const BlockQ4_K*>(row)[j / 8];
      const int sub = static_cast<int>(j % 8);
      int scale, min;
      q4_k_scale_min(b.scales, sub, scale, min);
      const uint8_t* qs = b.qs + 32 * (sub / 2);
      for (int i = 0; i < 32; ++i) o.w[i] = static_cast<int8_t>(sub % 2 == 0 ? qs[i] & 0xf : qs[i] >> 4);
      o.sc[0] = o.sc[1] = f16_to_fp32(b.d) * static_cast<float>(scale);
      o.c = -f16_to_fp32(b.dmin) * static_cast<float>(min);
      break;
    }
    case DType::Q6_K: {
      const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[j / 8];
      const int sub = static_cast<int>(j % 8);  // values 32 sub .. 32 sub + 31 of the super-block
      const int half = sub / 4, quarter = sub % 4;
      const uint8_t* ql = b.ql + 64 * half + 32 * (quarter % 2);
      const uint8_t* qh = b.qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        const int low = quarter < 2 ? ql[l] & 0xf : ql[l] >> 4;
        const int high = (qh[l] >> (2 * quarter)) & 3;
        o.w[l] = static_cast<int8_t>((low | (high << 4)) - 32);
      }
      const float d = f16_to_fp32(b.d);
      o.sc[0] = d * static_cast<float>(b.scales[2 * sub]);
      o.sc[1] = d * static_cast<float>(b.scales[2 * sub + 1]);
      break;
    }
    case DType::Q5_0:
    case DType::Q5_1: {
      // Q5_0: (q5 - 16) d = q5 d - 16 d;  Q5_1: q5 d + m.
      uint8_t code[32];
      if (wt == DType::Q5_0) {
        const auto& b = reinterpret_cast<const BlockQ5_0*>(row)[j];
        unpack_q5(b.qs, b.qh, code);
        o.sc[0] = o.sc[1] = f16_to_fp32(b.d);
        o.c = -16.0f * o.sc[0];
      } else {
        const auto& b = reinterpret_cast<const BlockQ5_1*>(row)[j];
        unpack_q5(b.qs, b.qh, code);
        o.sc[0] = o.sc[1] = f16_to_fp32(b.d);
        o.c = f16_to_fp32(b.m);
      }
      put_codes(o, code);
      break;
    }
    case DType::IQ4_NL: {
      const auto& b = reinterpret_cast<const BlockIQ4_NL*>(row)[j];
      uint8_t idx[32];
      unpack_nibbles(b.qs, idx);
      for (int i = 0; i < 32; ++i) o.w[i] = kIq4nlValues[idx[i]];
      o.sc[0] = o.sc[1] = f16_to_fp32(b.d);
      break;
    }
    case DType::Q2_K: {
      const auto& b = reinterpret_cast<const BlockQ2_K*>(row)[j / 8];
      const int sub = static_cast<int>(j % 8);
      uint8_t code[32];
      unpack_q2(b.qs, sub, code);
      put_codes(o, code);
      const float d = f16_to_fp32(b.d), dmin = f16_to_fp32(b.dmin);
      for (int h = 0; h < 2; ++h) {
        o.sc[h] = d * static_cast<float>(b.scales[2 * sub + h] & 0xf);
        o.m[h] = -dmin * static_cast<float>(b.scales[2 * sub + h] >> 4);
      }
      break;
    }
    case DType::Q3_K: {
      const auto& b = reinterpret_cast<const BlockQ3_K*>(row)[j / 8];
      const int sub = static_cast<int>(j % 8);
      int8_t scales[16];
      q3_k_scales(b.scales, scales);
      q3_k_codes(b, sub, o.w);
      const float d = f16_to_fp32(b.d);
      o.sc[0] = d * static_cast<float>(scales[2 * sub]);
      o.sc[1] = d * static_cast<float>(scales[2 * sub + 1]);
      break;
    }
    case DType::Q5_K: {
      const auto& b = reinterpret_cast<const BlockQ5_K*>(row)[j / 8];
      const int sub = static_cast<int>(j % 8);
      int scale, min;
      q4_k_scale_min(b.scales, sub, scale, min);
      uint8_t code[32];
      q5_k_codes(b, sub, code);
      put_codes(o, code);
      o.sc[0] = o.sc[1] = f16_to_fp32(b.d) * static_cast<float>(scale);
      o.c = -f16_to_fp32(b.dmin) * static_cast<float>(min);
      break;
    }
    case DType::IQ4_XS: {
      const auto& b = reinterpret_cast<const BlockIQ4_XS*>(row)[j / 8];
      const int sub = static_cast<int>(j % 8);
      uint8_t idx[32];
      unpack_nibbles(b.qs + 16 * sub, idx);
      for (int i = 0; i < 32; ++i) o.w[i] = kIq4nlValues[idx[i]];
      o.sc[0] = o.sc[1] = f16_to_fp32(b.d) * static_cast<float>(iq4_xs_scale(b, sub));
      break;
    }
    default:
      break;  // plain types never reach the int8 path
  }
  return o;
}

}  // namespace

void quantize_act_scalar(const float* X, int64_t n_tokens, int64_t cols, int8_t* q, float* d, float* s) {
  const int64_t n_blocks = cols / 32;
  for (int64_t b = 0; b < n_tokens * n_blocks; ++b) {
    const float* x = X + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float scale = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int v = static_cast<int>(std::nearbyint(x[i] * inv));
      q[32 * b + i] = static_cast<int8_t>(v);
      sum += v;
    }
    d[b] = scale;
    s[b] = scale * static_cast<float>(sum);
  }
}

void gemv_int8_rows_scalar(const GemvInt8Args& a, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = a.cols / 32;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = a.W + static_cast<size_t>(r) * a.row_bytes;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const int8_t* xq = a.x.q + t * a.cols;
      float y = 0.0f;
      for (int64_t j = 0; j < n_blocks; ++j) {
        const CodeBlock blk = decode_codes(a.wt, row, j);
        int32_t lo = 0, hi = 0, sum_lo = 0, sum_hi = 0;
        for (int i = 0; i < 16; ++i) {
          lo += blk.w[i] * xq[32 * j + i];
          hi += blk.w[i + 16] * xq[32 * j + 16 + i];
          sum_lo += xq[32 * j + i];
          sum_hi += xq[32 * j + 16 + i];
        }
        const float dx = a.x.d[t * n_blocks + j];
        y += blk.sc[0] * dx * static_cast<float>(lo) + blk.sc[1] * dx * static_cast<float>(hi) +
             blk.c * a.x.s[t * n_blocks + j] + blk.m[0] * dx * static_cast<float>(sum_lo) +
             blk.m[1] * dx * static_cast<float>(sum_hi);
      }
      float& out = a.Y[t * a.ldy + r];
      out = a.accumulate ? out + y : y;
    }
  }
}

}  // namespace hg::cpu
