// Dot kernels for attention: every KV dtype x every ISA this CPU runs x odd lengths and row
// strides, against double-precision references computed from the same (rounded) cache values.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/channel_scores.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/exp_poly.h"
#include "kernels/cpu/half.h"

namespace hg::cpu {
namespace {

std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa i : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16})
    if (cpu_isa_supported(i)) out.push_back(i);
  return out;
}

const int64_t kLengths[] = {1, 7, 33, 64, 65, 127, 128};

// A KV cache of n_rows x ld values in dtype dt, and the fp32 values it holds.
struct Cache {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

Cache random_cache(DType dt, int64_t n_rows, int64_t ld, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Cache c;
  const size_t n = static_cast<size_t>(n_rows * ld);
  c.values.resize(n);
  c.bytes.resize(n * (dt == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < n; ++i) {
    float v = u(rng);
    if (dt == DType::F16) {
      reinterpret_cast<uint16_t*>(c.bytes.data())[i] = fp32_to_f16(v);
      v = f16_to_fp32(fp32_to_f16(v));
    } else if (dt == DType::BF16) {
      reinterpret_cast<uint16_t*>(c.bytes.data())[i] = fp32_to_bf16(v);
      v = bf16_to_fp32(fp32_to_bf16(v));
    } else {
      reinterpret_cast<float*>(c.bytes.data())[i] = v;
    }
    c.values[i] = v;
  }
  return c;
}

std::vector<float> random_floats(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

TEST(Dot, DotF32OddLengths) {
  std::mt19937 rng(1);
  for (int64_t n : {0, 1, 7, 33, 64, 65, 127, 128, 1000}) {
    const auto a = random_floats(n, rng), b = random_floats(n, rng);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) ref += static_cast<double>(a[i]) * b[i], mag += std::fabs(a[i] * b[i]);
    for (CpuIsa isa : supported_isas())
      EXPECT_NEAR(dot_f32_isa(isa, a.data(), b.data(), n), ref, 1e-6 * (1 + mag)) << n << cpu_isa_label(isa);
    EXPECT_NEAR(dot_f32(a.data(), b.data(), n), ref, 1e-6 * (1 + mag));
  }
}

TEST(Dot, DotRowsEveryDtypeIsaLength) {
  std::mt19937 rng(2);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t head_dim : kLengths)
      for (int64_t n_rows : {1, 3, 4, 9, 50}) {
        const int64_t ld = head_dim + 5;  // rows of a wider [token, heads * head_dim] layout
        const Cache K = random_cache(dt, n_rows, ld, rng);
        const auto q = random_floats(head_dim, rng);
        const float scale = 0.125f;
        for (CpuIsa isa : supported_isas()) {
          std::vector<float> out(static_cast<size_t>(n_rows) + 1, NAN);
          dot_rows_isa(isa, dt, K.bytes.data(), ld, n_rows, q.data(), head_dim, scale, out.data());
          for (int64_t i = 0; i < n_rows; ++i) {
            double ref = 0, mag = 0;
            for (int64_t c = 0; c < head_dim; ++c) {
              const double p = static_cast<double>(K.values[i * ld + c]) * q[c];
              ref += p;
              mag += std::fabs(p);
            }
            ASSERT_NEAR(out[i], scale * ref, 1e-6 * scale * (1 + mag))
                << dtype_name(dt) << " " << cpu_isa_label(isa) << " head_dim=" << head_dim << " i=" << i;
          }
          EXPECT_TRUE(std::isnan(out[n_rows]));
        }
      }
}

TEST(Dot, DotRowsHeadsEveryDtypeIsaGroup) {
  // Every GQA group size the tile split sees (1..3 heads per tile, remainders), odd lengths and
  // row counts that leave a tail of 1..3 rows; outputs in a strided [n_q][ld_out] buffer.
  std::mt19937 rng(5);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int n_q : {1, 2, 3, 4, 7, 8})
      for (int64_t head_dim : {7, 64, 65, 128})
        for (int64_t n_rows : {1, 6, 67}) {
          const int64_t ld = head_dim + 2, ld_q = head_dim + 1, ld_out = n_rows + 3;
          const Cache K = random_cache(dt, n_rows, ld, rng);
          const auto q = random_floats(n_q * ld_q, rng);
          const float scale = 0.125f;
          for (CpuIsa isa : supported_isas()) {
            std::vector<float> out(static_cast<size_t>(n_q * ld_out), NAN);
            dot_rows_heads_isa(isa, dt, K.bytes.data(), ld, n_rows, q.data(), n_q, ld_q, head_dim, scale, out.data(),
                               ld_out);
            for (int h = 0; h < n_q; ++h) {
              for (int64_t i = 0; i < n_rows; ++i) {
                double ref = 0, mag = 0;
                for (int64_t c = 0; c < head_dim; ++c) {
                  const double p = static_cast<double>(K.values[i * ld + c]) * q[h * ld_q + c];
                  ref += p;
                  mag += std::fabs(p);
                }
                ASSERT_NEAR(out[h * ld_out + i], scale * ref, 1e-6 * scale * (1 + mag))
                    << dtype_name(dt) << " " << cpu_isa_label(isa) << " n_q=" << n_q << " head_dim=" << head_dim
                    << " h=" << h << " i=" << i;
              }
              for (int64_t i = n_rows; i < ld_out; ++i) EXPECT_TRUE(std::isnan(out[h * ld_out + i]));  // untouched
            }
          }
        }
}

TEST(Dot, AxpyRowsEveryDtypeIsaLength) {
  std::mt19937 rng(3);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t head_dim : kLengths)
      for (int64_t n_rows : {1, 2, 9, 50}) {
        const int64_t ld = head_dim + 3;
        const Cache V = random_cache(dt, n_rows, ld, rng);
        const auto p = random_floats(n_rows, rng);
        const auto init = random_floats(head_dim + 1, rng);
        for (CpuIsa isa : supported_isas()) {
          std::vector<float> out = init;
          axpy_rows_isa(isa, dt, V.bytes.data(), ld, n_rows, p.data(), head_dim, out.data());
          for (int64_t c = 0; c < head_dim; ++c) {
            double ref = init[c], mag = std::fabs(init[c]);
            for (int64_t i = 0; i < n_rows; ++i) {
              ref += static_cast<double>(p[i]) * V.values[i * ld + c];
              mag += std::fabs(p[i] * V.values[i * ld + c]);
            }
            ASSERT_NEAR(out[c], ref, 1e-6 * (1 + mag))
                << dtype_name(dt) << " " << cpu_isa_label(isa) << " head_dim=" << head_dim << " c=" << c;
          }
          EXPECT_EQ(out[head_dim], init[head_dim]);  // past head_dim: untouched
        }
      }
}

TEST(Dot, AxpyRowsHeadsEveryDtypeIsaGroup) {
  // 1-8 heads (groups of three share a pass, then the rest), head_dim with whole-vector chunks,
  // tails of vectors and of scalars, rows 0..50; p and out strided.
  std::mt19937 rng(13);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t head_dim : {64, 128, 80, 24, 7})
      for (int n_p : {1, 2, 3, 4, 5, 8})
        for (int64_t n_rows : {0, 1, 5, 50}) {
          const int64_t ld = head_dim + 5, ld_p = n_rows + 3, ld_out = head_dim + 2;
          const Cache V = random_cache(dt, std::max<int64_t>(n_rows, 1), ld, rng);
          const auto p = random_floats(n_p * ld_p, rng);
          const auto init = random_floats(n_p * ld_out, rng);
          for (CpuIsa isa : supported_isas()) {
            std::vector<float> out = init;
            axpy_rows_heads_isa(isa, dt, V.bytes.data(), ld, n_rows, p.data(), n_p, ld_p, head_dim, out.data(), ld_out);
            for (int h = 0; h < n_p; ++h) {
              for (int64_t c = 0; c < head_dim; ++c) {
                double ref = init[h * ld_out + c], mag = std::fabs(ref);
                for (int64_t i = 0; i < n_rows; ++i) {
                  ref += static_cast<double>(p[h * ld_p + i]) * V.values[i * ld + c];
                  mag += std::fabs(p[h * ld_p + i] * V.values[i * ld + c]);
                }
                ASSERT_NEAR(out[h * ld_out + c], ref, 1e-6 * (1 + mag))
                    << dtype_name(dt) << " " << cpu_isa_label(isa) << " n_p=" << n_p << " head_dim=" << head_dim
                    << " rows=" << n_rows << " h=" << h << " c=" << c;
              }
              for (int64_t c = head_dim; c < ld_out; ++c) EXPECT_EQ(out[h * ld_out + c], init[h * ld_out + c]);
            }
          }
        }
}

TEST(Dot, PublicEntryPointsAndBadDtype) {
  std::mt19937 rng(4);
  const Cache K = random_cache(DType::F16, 8, 64, rng);
  const auto q = random_floats(64, rng);
  std::vector<float> a(8), b(8);
  dot_rows(DType::F16, K.bytes.data(), 64, 8, q.data(), 64, 1.0f, a.data());
  dot_rows_isa(CpuIsa::Scalar, DType::F16, K.bytes.data(), 64, 8, q.data(), 64, 1.0f, b.data());
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(a[i], b[i], 1e-4f);
  std::vector<float> out(64, 0.0f);
  axpy_rows(DType::F16, K.bytes.data(), 64, 8, a.data(), 64, out.data());
  EXPECT_THROW(dot_rows(DType::Q4_0, K.bytes.data(), 64, 1, q.data(), 64, 1.0f, a.data()), std::exception);
  EXPECT_THROW(axpy_rows(DType::Q8_0, K.bytes.data(), 64, 1, q.data(), 64, out.data()), std::exception);
}

TEST(Dot, MaxAndExpShiftSumEveryIsaLength) {
  std::mt19937 rng(17);
  for (int64_t n : {0, 1, 7, 16, 33, 100, 1000})
    for (CpuIsa isa : supported_isas()) {
      auto p = random_floats(n, rng);
      for (auto& x : p) x *= 40.0f;  // scores far below the max too: e^-80 stays positive, no denormal
      if (n > 2) p[static_cast<size_t>(n / 2)] = -1e30f;
      const float m = max_value_isa(isa, p.data(), n);
      EXPECT_EQ(m, n == 0 ? -INFINITY : *std::max_element(p.begin(), p.end())) << cpu_isa_label(isa);
      const auto before = p;
      const float sum = exp_shift_sum_isa(isa, p.data(), n, m);
      double want_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float x = before[i] - m;  // the kernel's argument, rounded as it rounds it
        const double want = std::exp(static_cast<double>(std::max(x, -87.0f)));
        // relative 2e-7 from the polynomial; arguments below -87 are clamped (e^-87, not 0)
        ASSERT_NEAR(p[i], want, 4e-7 * want) << cpu_isa_label(isa) << " n=" << n << " i=" << i;
        ASSERT_GT(p[i], 0.0f);
        want_sum += want;
      }
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum + 1e-30) << cpu_isa_label(isa);
    }
}

// The partial predictor's scan against a double-precision sum over a channel-major bf16 tile:
// every ISA, groups of 1 to 8 heads, tails shorter than a vector and a whole tile.
TEST(ChannelScores, EveryIsaMatchesADirectSum) {
  std::mt19937 rng(31);
  const int hd = 64, ld = kChannelTile;
  std::vector<uint16_t> cols(static_cast<size_t>(hd) * ld);
  for (auto& c : cols) c = fp32_to_bf16(std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng));
  const std::vector<int32_t> dims = {5, 63, 0, 17, 40, 41, 2, 33};
  for (const int n_q : {1, 3, 7, 8})
    for (const int64_t n : {int64_t{1}, int64_t{15}, int64_t{17}, int64_t{100}, int64_t{200}, int64_t{kChannelTile}}) {
      const auto q = random_floats(static_cast<int64_t>(n_q) * hd, rng);
      std::vector<double> want(static_cast<size_t>(n), -INFINITY);
      for (int h = 0; h < n_q; ++h)
        for (int64_t t = 0; t < n; ++t) {
          double acc = 0;
          for (int32_t d : dims)
            acc += double{q[static_cast<size_t>(h * hd + d)]} * bf16_to_fp32(cols[static_cast<size_t>(d * ld + t)]);
          want[static_cast<size_t>(t)] = std::max(want[static_cast<size_t>(t)], acc);
        }
      for (CpuIsa isa : supported_isas()) {
        std::vector<float> best(static_cast<size_t>(n), NAN), wide(dims.size() * kChannelTile);
        channel_scores_isa(isa, cols.data(), ld, n, dims.data(), static_cast<int>(dims.size()), q.data(), n_q, hd,
                           best.data(), wide.data());
        for (int64_t t = 0; t < n; ++t)
          ASSERT_NEAR(best[static_cast<size_t>(t)], want[static_cast<size_t>(t)], 1e-5)
              << cpu_isa_label(isa) << " heads " << n_q << " n " << n << " t " << t;
      }
    }
}

// The branch-free exp (Keyformer's Gumbel-softmax) is the softmax's scalar exp, bit for bit, in a
// translation unit without FMA contraction (this one: the baseline ISA).
TEST(Dot, ElementwiseExpIsTheScalarExp) {
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -100.0f * static_cast<float>(i) / 2000000.0f;
    ASSERT_EQ(std::bit_cast<uint32_t>(exp_nonpositive_elementwise(x)),
              std::bit_cast<uint32_t>(exp_nonpositive_scalar(x)))
        << x;
  }
  for (const float x : {0.0f, -0.0f, -87.0f, -87.5f, -1e30f, -INFINITY, -0.5f * 0.693359375f})
    ASSERT_EQ(std::bit_cast<uint32_t>(exp_nonpositive_elementwise(x)),
              std::bit_cast<uint32_t>(exp_nonpositive_scalar(x)))
        << x;
}

// A peaked row (one logit far above thousands of others) has probabilities below FLT_MIN: they are
// 0, not denormals (which cost the P·V pass a microcode assist per FMA); the others keep their values.
TEST(Dot, SoftmaxHasNoDenormals) {
  const int64_t n = 5000;
  std::vector<float> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i == 7 ? 0.0f : (i % 2 ? -100.0f : -1.0f);
  const float lse = softmax_inplace(p.data(), n);
  const double sum = 1.0 + 2500.0 * std::exp(-1.0);  // the 0 at i = 7 and the 2500 even i at -1
  EXPECT_NEAR(lse, std::log(sum), 1e-5);
  for (int64_t i = 0; i < n; ++i) {
    const float v = p[static_cast<size_t>(i)];
    EXPECT_TRUE(v == 0.0f || std::isnormal(v)) << i << ": " << v;
    if (i == 7)
      EXPECT_NEAR(v, 1.0 / sum, 1e-5 / sum);
    else if (i % 2)
      EXPECT_EQ(v, 0.0f) << i;  // e^-100 / sum < FLT_MIN
    else
      EXPECT_NEAR(v, std::exp(-1.0) / sum, 1e-5 / sum) << i;
  }
}

// Split (flash-decoding) attention against attention_items: chunk boundaries inside, at and past
// the context, GQA groups of 1 and 3, rows that see different numbers of slots.
TEST(SplitAttention, MatchesAttentionItemsOverChunkBoundaries) {
  std::mt19937 rng(23);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int group : {1, 3})
      for (int64_t past : {0, 1, 62, 63, 64, 200})
        for (int n : {1, 2, 4})
          for (int64_t chunk : {16, 64}) {
            const int n_kv = 2, n_heads = n_kv * group, head_dim = 40;
            const int64_t capacity = past + n + 3;
            const Cache k = random_cache(dt, n_kv * capacity, head_dim, rng);
            const Cache v = random_cache(dt, n_kv * capacity, head_dim, rng);
            const auto q = random_floats(static_cast<int64_t>(n) * n_heads * head_dim, rng);
            const float scale = 0.3f;
            std::vector<float> want(q.size()), got(q.size(), NAN);
            std::vector<float> scores(static_cast<size_t>((past + n) * group + chunk * group));
            attention_items(q.data(), n_heads, n_kv, head_dim, dt, k.bytes.data(), v.bytes.data(), capacity, past,
                            scale, want.data(), scores.data(), 0, static_cast<int64_t>(n) * n_heads);
            SplitAttentionArgs a{q.data(),       n,        n_heads, n_kv,  head_dim, dt,      k.bytes.data(),
                                 v.bytes.data(), capacity, past,    scale, chunk,    nullptr, got.data()};
            EXPECT_EQ(split_attention_chunks(a), (past + n + chunk - 1) / chunk);
            std::vector<float> partial(static_cast<size_t>(split_attention_items(a) * group * (head_dim + 2)));
            a.partial = partial.data();
            const int64_t items = split_attention_items(a);
            split_attention_partials(a, scores.data(), 0, items / 2);  // two ranges, as the pool splits them
            split_attention_partials(a, scores.data(), items / 2, items);
            split_attention_combine(a, 0, static_cast<int64_t>(n) * n_heads);
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 2e-5f) << dtype_name(dt) << " group=" << group << " past=" << past
                                                  << " n=" << n << " chunk=" << chunk << " i=" << i;
          }
}

}  // namespace
}  // namespace hg::cpu
