// Reference quantizers for the GGUF block types we write (synthetic weights): Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, with ggml's block layouts, and dequantizers of the first three (used by tests as an
// oracle; the others are checked against the gguf package's, tools/gguf_quants.py).
//   Q8_0: f16 d, int8 q[32];            x = d * q
//   Q4_0: f16 d, u8 nibbles[16];        x = d * (q - 8)
//   Q4_1: f16 d, f16 m, u8 nibbles[16]; x = d * q + m
// Nibble layout: byte j holds element j in its low nibble and element j + 16 in its high nibble.
#pragma once
#include <cstdint>
#include <string>

#include "hybridgen/dtype.h"

namespace hg {

// The types quantize_row writes (synthetic weights, converted HF weights), and their names as a
// list for error messages: "f32, f16, …, q5_0 or q5_1".
inline constexpr DType kWritableDTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                            DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1};
bool dtype_writable(DType t);
std::string writable_dtype_names();

// Writes n elements of x (n a multiple of dtype_block_elems(t)) as type t into out
// (dtype_row_bytes(t, n) bytes). Plain types convert; the K-quants and IQ4 types are not written (throws).
void quantize_row(DType t, const float* x, int64_t n, void* out);
void dequantize_row_ref(DType t, const void* in, int64_t n, float* out);

}  // namespace hg
