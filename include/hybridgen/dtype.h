// Element types of weights and caches, including the GGUF block-quantized ones.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hg {

enum class DType : uint8_t { F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K };

// Elements per quantization block (1 for plain types) and bytes per block.
int dtype_block_elems(DType t);
size_t dtype_block_bytes(DType t);
// Bytes of a row of `n` elements; n must be a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);
std::string_view dtype_name(DType t);
bool dtype_is_quantized(DType t);

}  // namespace hg
