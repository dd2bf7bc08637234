// The q4 predictor's scan (kernels/cpu/key_scores_q4.h): every int8 dot level this CPU runs
// against the scalar twin, bit for bit, and the twin against a reference written from the Q4_1
// rows as the model loader's scalar dequantizer reads them (not through the scan's tile layout)
// and the query's int8 codes, in double precision: the tiles hold the rows' codes, scales and
// minimums, and the score is the largest over the group's heads. Head dims 32-128, groups of 1
// to 16 heads (over 8 takes a second pass over the tile's codes), one tile to several.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/key_scores_q4.h"
#include "kernels/cpu/matmul.h"
#include "model/quantize.h"

namespace hg::cpu {
namespace {

std::vector<DotInt8> supported_dots() {
  std::vector<DotInt8> out;
  for (DotInt8 d : {DotInt8::Avx2, DotInt8::AvxVnni, DotInt8::Avx512Vnni})
    if (dot_int8_supported(d)) out.push_back(d);
  return out;
}

struct Keys {
  int hd = 0;
  int64_t n = 0;
  std::vector<uint8_t> rows;   // [n][Q4_1 row]
  std::vector<uint8_t> tiles;  // the scan's layout of the same rows
};

// Gaussian keys with a few loud channels, as real keys have; a constant row (scale 0) among them.
Keys make_keys(int hd, int64_t n, std::mt19937& rng) {
  Keys k;
  k.hd = hd;
  k.n = n;
  const size_t row_bytes = dtype_row_bytes(DType::Q4_1, hd);
  k.rows.resize(static_cast<size_t>(n) * row_bytes);
  k.tiles.assign(static_cast<size_t>(q4_tile_count(n)) * q4_tile_bytes(hd), 0);
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(hd));
  for (int64_t t = 0; t < n; ++t) {
    for (int d = 0; d < hd; ++d) x[static_cast<size_t>(d)] = t == 3 ? 0.5f : z(rng) * (d % 16 < 2 ? 8.0f : 1.0f);
    uint8_t* row = k.rows.data() + static_cast<size_t>(t) * row_bytes;
    quantize_row(DType::Q4_1, x.data(), hd, row);
    q4_put_token(k.tiles.data(), t, row, hd);
  }
  return k;
}

std::vector<float> make_query(int n_q, int hd, std::mt19937& rng) {
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(n_q) * hd);
  for (auto& v : q) v = z(rng);
  for (int d = 0; d < 32; ++d) q[static_cast<size_t>(d)] = 0.0f;  // head 0's first block all zero: scale 0
  return q;
}

TEST(Q4KeyScores, EveryDotLevelIsTheScalarTwin) {
  std::mt19937 rng(5);
  for (int hd : {32, 64, 128})
    for (int n_q : {1, 3, 7, 8, 9, 16})
      for (int64_t n : {8, 40, 1000}) {
        const Keys k = make_keys(hd, n, rng);
        Q4Query q;
        q4_query(make_query(n_q, hd, rng).data(), n_q, hd, q);
        const int64_t n_tiles = static_cast<int64_t>(k.tiles.size() / q4_tile_bytes(hd));
        std::vector<float> want(static_cast<size_t>(n_tiles * kQ4TileTokens));
        q4_key_scores_scalar(k.tiles.data(), n_tiles, q, want.data());
        for (DotInt8 dot : supported_dots()) {
          std::vector<float> got(want.size(), NAN);
          q4_key_scores_isa(dot, k.tiles.data(), n_tiles, q, got.data());
          for (size_t t = 0; t < got.size(); ++t)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[t]), std::bit_cast<uint32_t>(want[t]))
                << dot_int8_label(dot) << " hd " << hd << " heads " << n_q << " n " << n << " t " << t << ": " << got[t]
                << " vs " << want[t];
        }
      }
}

TEST(Q4KeyScores, TheTwinScoresTheQ4_1RowsWithTheInt8Query) {
  std::mt19937 rng(9);
  for (int hd : {32, 64, 128})
    for (int n_q : {1, 7, 9}) {
      const int64_t n = 203;  // a partial last tile
      const Keys k = make_keys(hd, n, rng);
      Q4Query q;
      q4_query(make_query(n_q, hd, rng).data(), n_q, hd, q);
      const int64_t n_tiles = static_cast<int64_t>(k.tiles.size() / q4_tile_bytes(hd));
      std::vector<float> got(static_cast<size_t>(n_tiles * kQ4TileTokens));
      q4_key_scores_scalar(k.tiles.data(), n_tiles, q, got.data());
      std::vector<float> key(static_cast<size_t>(hd));
      for (int64_t t = 0; t < n; ++t) {
        dequantize_row_scalar(DType::Q4_1, k.rows.data(), hd, t, key.data());
        double best = -INFINITY, magnitude = 0.0;
        for (int h = 0; h < n_q; ++h) {
          double s = 0.0, m = 0.0;
          for (int d = 0; d < hd; ++d) {
            const size_t i = static_cast<size_t>(h) * hd + d;
            const double qd = static_cast<double>(q.q[i]) * q.d[static_cast<size_t>(h) * (hd / 32) + d / 32];
            s += qd * key[static_cast<size_t>(d)];
            m += std::fabs(qd * key[static_cast<size_t>(d)]);
          }
          best = std::max(best, s);
          magnitude = std::max(magnitude, m);
        }
        ASSERT_NEAR(got[static_cast<size_t>(t)], best, 1e-5 * magnitude + 1e-6)
            << "hd " << hd << " heads " << n_q << " token " << t;
      }
    }
}

TEST(Q4KeyScores, TheQueryIsTheInt8GemvsQuantization) {
  std::mt19937 rng(3);
  const std::vector<float> x = make_query(3, 64, rng);
  Q4Query q;
  q4_query(x.data(), 3, 64, q);
  for (int h = 0; h < 3; ++h)
    for (int b = 0; b < 2; ++b) {
      const size_t qb = static_cast<size_t>(h) * 2 + b;
      float amax = 0.0f;
      int sum = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[qb * 32 + i]));
      for (int i = 0; i < 32; ++i) {
        const int8_t code = q.q[qb * 32 + i];
        sum += code;
        if (amax > 0)
          EXPECT_NEAR(code * amax / 127.0f, x[qb * 32 + i], amax / 254.0f + 1e-7f);
        else
          EXPECT_EQ(code, 0);
      }
      EXPECT_FLOAT_EQ(q.d[qb], amax / 127.0f);
      EXPECT_FLOAT_EQ(q.s[qb], amax / 127.0f * static_cast<float>(sum));
    }
}

}  // namespace
}  // namespace hg::cpu
