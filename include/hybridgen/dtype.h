// Element types of weights and caches, including the GGUF block-quantized ones.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hg {

enum class DType : uint8_t {
  F32, F16, BF16,                               // plain
  Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,         // blocks of 32
  Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS,         // super-blocks of 256
};

// Elements per quantization block (1 for plain types) and bytes per block.
int dtype_block_elems(DType t);
size_t dtype_block_bytes(DType t);
// Bytes of a row of `n` elements; n must be a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);
std::string_view dtype_name(DType t);
bool dtype_is_quantized(DType t);

}  // namespace hg
