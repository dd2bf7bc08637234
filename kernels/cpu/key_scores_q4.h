// The q4 predictor's scan (src/attention/selectors/quant_keys.h): approximate scores of every host
// token of one kv-head from a 4-bit copy of its keys, for the query heads of its GQA group:
//
//   best[t] = max over heads h of  Σ_b  d[t][b]·dq[h][b]·Σ_i n[t][32b+i]·qi[h][32b+i]  +  m[t][b]·sq[h][b]
//
// the keys in GGUF's Q4_1 blocks of 32 (scale d, minimum m, codes n in 0..15: key ≈ d·n + m), the
// query in int8 blocks of 32 as the int8 GEMV quantizes activations (scale dq, codes qi, sq = dq·Σqi).
//
// A key row is 64 dimensions here, not the thousands the GEMV's rows have, so the copy is laid out
// for the scan rather than as Q4_1 rows: tiles of kQ4TileTokens tokens, in which each group of 8
// dimensions is one 32-byte vector (token t's 4 bytes: dimensions 8c..8c+3 in the low nibbles,
// 8c+4..8c+7 in the high ones), followed by the tile's scales and minimums (f16, [block][token]).
// An integer dot over four dimensions (vpdpbusd, or vpmaddubsw + vpmaddwd on AVX2) then adds the
// products of all 8 tokens of a tile at once, one instruction per 4 dimensions and query head,
// the codes decoded once per tile for every head of the group. 40 bytes a 64-dimension key, as
// Q4_1 rows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_isa.h"

namespace hg::cpu {

inline constexpr int kQ4TileTokens = 8;

// A tile of keys of head_dim dimensions (a multiple of 32): the codes of dimension group c (32
// bytes) at 32 c, then the f16 scales of block b ([token]) at q4_tile_scales_at + 16 b, then the
// f16 minimums likewise at q4_tile_mins_at.
constexpr size_t q4_tile_scales_at(int head_dim) { return static_cast<size_t>(head_dim) / 8 * 32; }
constexpr size_t q4_tile_mins_at(int head_dim) {
  return q4_tile_scales_at(head_dim) + static_cast<size_t>(head_dim) / 32 * kQ4TileTokens * 2;
}
constexpr size_t q4_tile_bytes(int head_dim) {
  return q4_tile_mins_at(head_dim) + static_cast<size_t>(head_dim) / 32 * kQ4TileTokens * 2;
}
// Tiles that hold n_tokens tokens.
constexpr int64_t q4_tile_count(int64_t n_tokens) { return (n_tokens + kQ4TileTokens - 1) / kQ4TileTokens; }

// Writes token t of a tiled copy (q4_tile_count(t + 1) tiles at least) from one key row in Q4_1
// (GGUF's block_q4_1 x head_dim / 32), bit for bit: the same codes, scales and minimums.
void q4_put_token(uint8_t* tiles, int64_t t, const uint8_t* q4_1_row, int head_dim);

// The query heads of one group, quantized once per scan.
struct Q4Query {
  int n_q = 0;
  int head_dim = 0;
  std::vector<int8_t> q;  // [n_q][head_dim]
  std::vector<float> d;   // [n_q][head_dim / 32]: block scales
  std::vector<float> s;   // [n_q][head_dim / 32]: scale · Σ codes
};
// q: head h at q[h * head_dim], fp32.
void q4_query(const float* q, int n_q, int head_dim, Q4Query& out);

// best[t] for the kQ4TileTokens · n_tiles tokens of `tiles` (tokens past the keys written score
// whatever their bytes say; callers read the first n).
void q4_key_scores(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best);
void q4_key_scores_isa(DotInt8 dot, const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best);
void q4_key_scores_scalar(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best);
void q4_key_scores_avx2(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best);
void q4_key_scores_avxvnni(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best);
void q4_key_scores_avx512vnni(const uint8_t* tiles, int64_t n_tiles, const Q4Query& q, float* best);

}  // namespace hg::cpu
