// The q4 scan's tile layout, its query, its dispatch and its scalar twin (key_scores_q4.h).
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/cpu/half.h"
#include "kernels/cpu/key_scores_q4.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace hg::cpu {

namespace {

// Where a tile's pieces are (key_scores_q4.h): the codes of dimension group c, block b's scales
// and minimums.
constexpr size_t codes_at(int c) { return static_cast<size_t>(c) * 32; }
constexpr size_t scales_at(int head_dim, int b) { return q4_tile_scales_at(head_dim) + static_cast<size_t>(b) * 16; }
constexpr size_t mins_at(int head_dim, int b) { return q4_tile_mins_at(head_dim) + static_cast<size_t>(b) * 16; }

}  // namespace

void q4_put_token(uint8_t* tiles, int64_t token, const uint8_t* q4_1_row, int head_dim) {
  assert(head_dim % 32 == 0 && token >= 0);
  uint8_t* tile = tiles + static_cast<size_t>(token / kQ4TileTokens) * q4_tile_bytes(head_dim);
  const int t = static_cast<int>(token % kQ4TileTokens);
  const auto* blocks = reinterpret_cast<const BlockQ4_1*>(q4_1_row);
  for (int b = 0; b < head_dim / 32; ++b) {
    const BlockQ4_1& blk = blocks[b];
    std::memcpy(tile + scales_at(head_dim, b) + 2 * t, &blk.d, 2);
    std::memcpy(tile + mins_at(head_dim, b) + 2 * t, &blk.m, 2);
    // Q4_1's byte j holds value j (low nibble) and value j + 16 (high nibble).
    uint8_t code[32];
    for (int j = 0; j < 16; ++j) {
      code[j] = blk.qs[j] & 0x0f;
      code[j + 16] = blk.qs[j] >> 4;
    }
    for (int c = 0; c < 4; ++c) {  // dimension group 4b + c: dimensions 8c .. 8c + 7 of the block
      uint8_t* lane = tile + codes_at(4 * b + c) + 4 * t;
      for (int i = 0; i < 4; ++i) lane[i] = static_cast<uint8_t>(code[8 * c + i] | code[8 * c + 4 + i] << 4);
    }
  }
}

void q4_query(const float* q, int n_q, int head_dim, Q4Query& out) {
  assert(head_dim % 32 == 0);
  out.n_q = n_q;
  out.head_dim = head_dim;
  const size_t blocks = static_cast<size_t>(n_q) * (head_dim / 32);
  out.q.resize(static_cast<size_t>(n_q) * head_dim);
  out.d.resize(blocks);
  out.s.resize(blocks);
  // The int8 GEMV's quantizer (every level computes the scalar one's arithmetic).
  quantize_act_fn(dot_int8_for(active_cpu_isa()))(q, n_q, head_dim, out.q.data(), out.d.data(), out.s.data());
}

// Per token of a tile and head, per block: the integer dot, then
//   score = fma(d·dq, dot, score); score = fma(m, sq, score)
// in block order, as the vector kernels (key_scores_q4_kernel.h) do lane by lane.
void q4_key_scores_scalar(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best) {
  const int hd = q.head_dim, nb = hd / 32;
  const size_t tile_bytes = q4_tile_bytes(hd);
  for (int64_t i = 0; i < n_tiles; ++i) {
    const uint8_t* tile = tiles + static_cast<size_t>(i) * tile_bytes;
    for (int t = 0; t < kQ4TileTokens; ++t) {
      float top = -INFINITY;
      for (int h = 0; h < q.n_q; ++h) {
        const int8_t* qh = q.q.data() + static_cast<size_t>(h) * hd;
        float score = 0.0f;
        for (int b = 0; b < nb; ++b) {
          int32_t dot = 0;
          for (int c = 4 * b; c < 4 * b + 4; ++c) {
            const uint8_t* lane = tile + codes_at(c) + 4 * t;
            for (int j = 0; j < 4; ++j) {
              dot += (lane[j] & 0x0f) * qh[8 * c + j];
              dot += (lane[j] >> 4) * qh[8 * c + 4 + j];
            }
          }
          uint16_t d16, m16;
          std::memcpy(&d16, tile + scales_at(hd, b) + 2 * t, 2);
          std::memcpy(&m16, tile + mins_at(hd, b) + 2 * t, 2);
          const size_t qb = static_cast<size_t>(h) * nb + b;
          score = std::fma(f16_to_fp32(d16) * q.d[qb], static_cast<float>(dot), score);
          score = std::fma(f16_to_fp32(m16), q.s[qb], score);
        }
        top = std::fmax(top, score);
      }
      best[i * kQ4TileTokens + t] = top;
    }
  }
}

void q4_key_scores_isa(DotInt8 dot, const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best) {
  switch (dot) {
    case DotInt8::Avx512Vnni:
      return q4_key_scores_avx512vnni(tiles, n_tiles, q, best);
    case DotInt8::AvxVnni:
      return q4_key_scores_avxvnni(tiles, n_tiles, q, best);
    case DotInt8::Avx2:
      return q4_key_scores_avx2(tiles, n_tiles, q, best);
    case DotInt8::Scalar:
      break;
  }
  q4_key_scores_scalar(tiles, n_tiles, q, best);
}

void q4_key_scores(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best) {
  q4_key_scores_isa(dot_int8_for(active_cpu_isa()), tiles, n_tiles, q, best);
}

}  // namespace hg::cpu
