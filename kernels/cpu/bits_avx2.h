// Bit fields widened to byte masks with AVX2, shared by the int8 GEMV (matmul_int8.h: Q5_0/Q5_1
// blocks as stored) and the packed GEMV (matmul_packed_avx2.cpp: the fifth-bit plane). Include
// only from translation units built with AVX2.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace hg::cpu {
namespace {

// Byte i = 0xff where bit i of `bits` is set (i < 32), else 0.
inline __m256i bit_mask_bytes(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// 0x10 in byte i where bit i of the little-endian 32-bit word at p is set: the fifth bit of five-bit
// codes whose low nibbles are already in place.
inline __m256i fifth_bits(const uint8_t* p) {
  uint32_t word;
  __builtin_memcpy(&word, p, 4);
  return _mm256_and_si256(bit_mask_bytes(word), _mm256_set1_epi8(0x10));
}

}  // namespace
}  // namespace hg::cpu
