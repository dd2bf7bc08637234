// Loads of W consecutive values of a plain element type (F32, F16, BF16) as one fp32 vector of
// the traits type V (vec_avx2.h / vec_avx512.h), with a scalar twin for tails. Included by the
// templated kernel headers, inside their ISA's translation unit.
#pragma once
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/cpu/half.h"

namespace hg::cpu {
namespace {

template <class V, DType DT>
struct PlainLoad {
  static_assert(DT == DType::F32 || DT == DType::F16 || DT == DType::BF16);
  static typename V::F load(const uint8_t* row, int64_t c) {
    if constexpr (DT == DType::F32) return V::load(reinterpret_cast<const float*>(row) + c);
    if constexpr (DT == DType::F16) return V::load_f16(reinterpret_cast<const uint16_t*>(row) + c);
    if constexpr (DT == DType::BF16) return V::load_bf16(reinterpret_cast<const uint16_t*>(row) + c);
  }
  static float scalar(const uint8_t* row, int64_t c) {
    if constexpr (DT == DType::F32) return reinterpret_cast<const float*>(row)[c];
    if constexpr (DT == DType::F16) return f16_to_fp32(reinterpret_cast<const uint16_t*>(row)[c]);
    if constexpr (DT == DType::BF16) return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[c]);
  }
};

}  // namespace
}  // namespace hg::cpu
