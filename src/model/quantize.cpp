#include "model/quantize.h"

#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstring>
#include <string>

#include "hybridgen/error.h"
#include "kernels/cpu/half.h"

namespace hg {

namespace {

constexpr int kBlock = 32;

// Round half away from zero, like lroundf, without the libm call (this loop quantizes GBs).
inline int round_int(float v) { return static_cast<int>(v + (v >= 0.0f ? 0.5f : -0.5f)); }

void quantize_q8_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  float d = amax / 127.0f;
  float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint16_t dh = cpu::fp32_to_f16(d);
  std::memcpy(out, &dh, 2);
  auto* q = reinterpret_cast<int8_t*>(out + 2);
  for (int j = 0; j < kBlock; ++j) q[j] = static_cast<int8_t>(round_int(x[j] * id));
}

void quantize_q4_0(const float* x, uint8_t* out) {
  // The signed extreme maps to -8, so the full range [-8, 7] is used on the larger side.
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  float d = max / -8.0f;
  float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint16_t dh = cpu::fp32_to_f16(d);
  std::memcpy(out, &dh, 2);
  uint8_t* qs = out + 2;
  for (int j = 0; j < kBlock / 2; ++j) {
    int lo = std::clamp(round_int(x[j] * id) + 8, 0, 15);
    int hi = std::clamp(round_int(x[j + 16] * id) + 8, 0, 15);
    qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void quantize_q4_1(const float* x, uint8_t* out) {
  float min = x[0], max = x[0];
  for (int j = 1; j < kBlock; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  float d = (max - min) / 15.0f;
  float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint16_t dh = cpu::fp32_to_f16(d), mh = cpu::fp32_to_f16(min);
  std::memcpy(out, &dh, 2);
  std::memcpy(out + 2, &mh, 2);
  uint8_t* qs = out + 4;
  for (int j = 0; j < kBlock / 2; ++j) {
    int lo = std::clamp(round_int((x[j] - min) * id), 0, 15);
    int hi = std::clamp(round_int((x[j + 16] - min) * id), 0, 15);
    qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Q5_0 / Q5_1 as ggml's reference quantizers write them (quantize_row_q5_{0,1}_ref): codes
// truncated after adding 16.5 (Q5_0) or 0.5 (Q5_1), the fifth bits gathered in qh.
void pack_q5(const int* code, uint8_t* qh_out, uint8_t* qs) {
  uint32_t qh = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    qs[j] = static_cast<uint8_t>((code[j] & 0xf) | ((code[j + 16] & 0xf) << 4));
    qh |= static_cast<uint32_t>((code[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((code[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

void quantize_q5_0(const float* x, uint8_t* out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = cpu::fp32_to_f16(d);
  std::memcpy(out, &dh, 2);
  int code[kBlock];
  for (int j = 0; j < kBlock; ++j) code[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
  pack_q5(code, out + 2, out + 6);
}

void quantize_q5_1(const float* x, uint8_t* out) {
  float min = x[0], max = x[0];
  for (int j = 1; j < kBlock; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = cpu::fp32_to_f16(d), mh = cpu::fp32_to_f16(min);
  std::memcpy(out, &dh, 2);
  std::memcpy(out + 2, &mh, 2);
  int code[kBlock];
  for (int j = 0; j < kBlock; ++j) code[j] = static_cast<int>(static_cast<uint8_t>((x[j] - min) * id + 0.5f));
  pack_q5(code, out + 4, out + 8);
}

float read_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return cpu::f16_to_fp32(h);
}

}  // namespace

bool dtype_writable(DType t) {
  return std::find(std::begin(kWritableDTypes), std::end(kWritableDTypes), t) != std::end(kWritableDTypes);
}

std::string writable_dtype_names() {
  std::string out;
  const size_t n = std::size(kWritableDTypes);
  for (size_t i = 0; i < n; ++i)
    out += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + std::string(dtype_name(kWritableDTypes[i]));
  return out;
}

void quantize_row(DType t, const float* x, int64_t n, void* out) {
  auto* o = static_cast<uint8_t*>(out);
  switch (t) {
    case DType::F32: std::memcpy(out, x, static_cast<size_t>(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = cpu::fp32_to_f16(x[i]);
        std::memcpy(o + 2 * i, &h, 2);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = cpu::fp32_to_bf16(x[i]);
        std::memcpy(o + 2 * i, &h, 2);
      }
      return;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1: {
      if (n % kBlock != 0)
        throw Error("quantize: row of " + std::to_string(n) + " elements is not a multiple of 32 for " +
                    std::string(dtype_name(t)));
      size_t bb = dtype_block_bytes(t);
      for (int64_t b = 0; b < n / kBlock; ++b) {
        const float* xb = x + b * kBlock;
        uint8_t* ob = o + static_cast<size_t>(b) * bb;
        if (t == DType::Q8_0) quantize_q8_0(xb, ob);
        else if (t == DType::Q4_0) quantize_q4_0(xb, ob);
        else if (t == DType::Q4_1) quantize_q4_1(xb, ob);
        else if (t == DType::Q5_0) quantize_q5_0(xb, ob);
        else quantize_q5_1(xb, ob);
      }
      return;
    }
    default: break;
  }
  throw Error("quantize: writing " + std::string(dtype_name(t)) + " is not supported (use " + writable_dtype_names() +
              ")");
}

void dequantize_row_ref(DType t, const void* in, int64_t n, float* out) {
  const auto* p = static_cast<const uint8_t*>(in);
  switch (t) {
    case DType::F32: std::memcpy(out, in, static_cast<size_t>(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = read_f16(p + 2 * i);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = cpu::bf16_to_fp32(h);
      }
      return;
    case DType::Q8_0:
      for (int64_t b = 0; b < n / kBlock; ++b, p += 34) {
        float d = read_f16(p);
        for (int j = 0; j < kBlock; ++j) out[b * kBlock + j] = d * static_cast<float>(static_cast<int8_t>(p[2 + j]));
      }
      return;
    case DType::Q4_0:
      for (int64_t b = 0; b < n / kBlock; ++b, p += 18) {
        float d = read_f16(p);
        for (int j = 0; j < 16; ++j) {
          out[b * kBlock + j] = d * static_cast<float>((p[2 + j] & 0xf) - 8);
          out[b * kBlock + j + 16] = d * static_cast<float>((p[2 + j] >> 4) - 8);
        }
      }
      return;
    case DType::Q4_1:
      for (int64_t b = 0; b < n / kBlock; ++b, p += 20) {
        float d = read_f16(p), m = read_f16(p + 2);
        for (int j = 0; j < 16; ++j) {
          out[b * kBlock + j] = d * static_cast<float>(p[4 + j] & 0xf) + m;
          out[b * kBlock + j + 16] = d * static_cast<float>(p[4 + j] >> 4) + m;
        }
      }
      return;
    default: break;
  }
  throw Error("dequantize_row_ref: " + std::string(dtype_name(t)) + " is not supported");
}

}  // namespace hg
