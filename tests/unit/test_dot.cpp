// Dot kernels for attention: every KV dtype x every ISA this CPU runs x odd lengths and row
// strides, against double-precision references computed from the same (rounded) cache values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/dot.h"
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

}  // namespace
}  // namespace hg::cpu
