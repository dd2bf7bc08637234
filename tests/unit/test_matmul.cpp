// matmul kernels: every weight dtype x every ISA this CPU runs x awkward shapes, against the
// scalar twin and against dequantize_row + a double-precision product; the GGUF block decoders
// against blocks packed the way llama.cpp's quantizers pack them; the half conversions.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_packed.h"
#include "kernels/cpu/quant_blocks.h"
#include "matmul_test_util.h"
#include "device/cpu_info.h"
#include "util/thread_pool.h"

namespace hg::cpu {
namespace {

TEST(Matmul, RowsEveryDtypeIsaShape) {
  std::mt19937 rng(1234);
  MatmulWorkspace ws;
  for (DType wt : kAllTypes)
    for (int64_t rows : {1, 7, 33, 100})
      for (int64_t cols : cols_for(wt)) {
        const auto W = random_weights(wt, rows, cols, rng);
        for (int64_t n_tokens : {1, 2, 3, 5, 17, 40}) {
          const auto X = random_floats(n_tokens * cols, rng);
          std::vector<double> ref, mag;
          reference(wt, W, rows, cols, X, n_tokens, ref, mag);
          const int64_t ldy = rows + 3;  // a stride wider than the row count
          std::vector<float> scalar(static_cast<size_t>(n_tokens * ldy), NAN);
          matmul_rows_scalar(wt, W.data(), cols, X.data(), n_tokens, scalar.data(), ldy, 0, rows);
          const std::string what = std::string(dtype_name(wt)) + " rows=" + std::to_string(rows) +
                                   " cols=" + std::to_string(cols) + " n_tokens=" + std::to_string(n_tokens);
          expect_close(scalar.data(), ldy, ref, mag, rows, n_tokens, cols, what + " scalar twin");
          // Quantized weights take the int8 GEMV in matmul_rows: allow its activation rounding.
          const auto bound = int8_rounding_bound(wt, W, rows, cols, X, n_tokens);
          const std::vector<double>* extra = dtype_is_quantized(wt) ? &bound : nullptr;
          for (CpuIsa isa : supported_isas()) {
            std::vector<float> Y(static_cast<size_t>(n_tokens * ldy), NAN);
            // Two row ranges, as the pool would split them.
            const int64_t mid = rows / 2;
            matmul_rows_isa(isa, ws, wt, W.data(), cols, X.data(), n_tokens, Y.data(), ldy, 0, mid);
            matmul_rows_isa(isa, ws, wt, W.data(), cols, X.data(), n_tokens, Y.data(), ldy, mid, rows);
            expect_close(Y.data(), ldy, ref, mag, rows, n_tokens, cols, what + " " + cpu_isa_label(isa), extra);
            expect_untouched(Y, ldy, rows, n_tokens, what);
          }
        }
      }
}

TEST(Matmul, PoolBothPathsEveryIsa) {
  // Every prefill GEMM the CPU has too: oneDNN's sgemm, and the bf16 GEMMs (vdpbf16ps, AMX tiles).
  for (PrefillGemm gemm : {PrefillGemm::Sgemm, PrefillGemm::Avx512Bf16, PrefillGemm::AmxBf16}) {
    if (!prefill_gemm_supported(gemm)) continue;
    override_prefill_gemm(gemm);
    SCOPED_TRACE(prefill_gemm_label(gemm));
    std::mt19937 rng(99);
    ThreadPool pool(2);
    MatmulWorkspace ws;
    for (DType wt : kAllTypes)
      for (int64_t rows : {1, 33, 300})
        for (int64_t cols : {256, 512}) {
          const auto W = random_weights(wt, rows, cols, rng);
          for (int64_t n_tokens : {1, 3, 16, 40}) {
            const auto X = random_floats(n_tokens * cols, rng);
            std::vector<double> ref, mag;
            reference(wt, W, rows, cols, X, n_tokens, ref, mag);
            // The GEMV path (n_tokens < kMatmulSgemmMinTokens) of quantized weights rounds X to int8.
            // The bf16 prefill GEMMs round X and W to bf16.
            const auto bound = int8_rounding_bound(wt, W, rows, cols, X, n_tokens);
            const auto bf16 = bf16_rounding_bound(mag);
            const bool int8 = dtype_is_quantized(wt) && n_tokens < kMatmulSgemmMinTokens;
            for (CpuIsa isa : supported_isas()) {
              std::vector<float> Y(static_cast<size_t>(n_tokens * rows), NAN);
              matmul_isa(isa, pool, ws, wt, W.data(), rows, cols, X.data(), n_tokens, Y.data(), rows);
              expect_close(Y.data(), rows, ref, mag, rows, n_tokens, cols,
                           std::string(dtype_name(wt)) + " pool " + cpu_isa_label(isa) +
                               " rows=" + std::to_string(rows) + " n_tokens=" + std::to_string(n_tokens),
                           int8                              ? &bound
                           : takes_bf16(isa, n_tokens, cols) ? &bf16
                                                             : nullptr);
            }
          }
        }
  }
  override_prefill_gemm(std::nullopt);
}

TEST(Matmul, PublicEntryPointsAgree) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const int64_t rows = 50, cols = 96;
  const auto W = random_weights(DType::Q4_1, rows, cols, rng);
  for (int64_t n_tokens : {1, 20}) {
    const auto X = random_floats(n_tokens * cols, rng);
    std::vector<float> a(static_cast<size_t>(n_tokens * rows)), b(a.size()), c(a.size());
    matmul(pool, DType::Q4_1, W.data(), rows, cols, X.data(), n_tokens, a.data(), rows);
    matmul_rows(DType::Q4_1, W.data(), cols, X.data(), n_tokens, b.data(), rows, 0, rows);
    matmul_rows_scalar(DType::Q4_1, W.data(), cols, X.data(), n_tokens, c.data(), rows, 0, rows);
    const auto bound = int8_rounding_bound(DType::Q4_1, W, rows, cols, X, n_tokens);
    std::vector<double> ref, mag;
    reference(DType::Q4_1, W, rows, cols, X, n_tokens, ref, mag);
    const auto bf16 = bf16_rounding_bound(mag);
    for (size_t i = 0; i < a.size(); ++i) {
      // n_tokens 1: both round X to int8 (the same way); 20: matmul takes the sgemm path (exact)
      // or a bf16 one (X and W rounded to bf16).
      const double prefill = takes_bf16(active_cpu_isa(), n_tokens, cols) ? bf16[i] : 0.0;
      EXPECT_NEAR(a[i], c[i], 1e-4f * (1.0f + std::fabs(c[i])) + (n_tokens == 1 ? bound[i] : prefill));
      EXPECT_NEAR(b[i], c[i], 1e-4f * (1.0f + std::fabs(c[i])) + bound[i]);
    }
  }
  EXPECT_STRNE(cpu_isa_name(), "?");
  EXPECT_STRNE(dot_int8_name(), "?");
}

// ---- int8 GEMV: every dot instruction set against the scalar twin, on the same int8 X ----

const DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                             DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

std::vector<DotInt8> supported_dots() {
  std::vector<DotInt8> out;
  for (DotInt8 d : {DotInt8::Avx2, DotInt8::AvxVnni, DotInt8::Avx512Vnni})
    if (dot_int8_supported(d)) out.push_back(d);
  return out;
}

using GemvInt8Fn = void (*)(const GemvInt8Args&, int64_t, int64_t);
GemvInt8Fn int8_kernel(DotInt8 d) {
  switch (d) {
    case DotInt8::Avx2:
      return gemv_int8_rows_avx2;
    case DotInt8::AvxVnni:
      return gemv_int8_rows_avxvnni;
    case DotInt8::Avx512Vnni:
      return gemv_int8_rows_avx512vnni;
    case DotInt8::Scalar:
      break;
  }
  return gemv_int8_rows_scalar;
}

struct QuantizedX {
  std::vector<int8_t> q;
  std::vector<float> d, s;
  ActQ8 view() const { return ActQ8{q.data(), d.data(), s.data()}; }
};

QuantizedX quantize_scalar(const std::vector<float>& X, int64_t n_tokens, int64_t cols) {
  QuantizedX o{std::vector<int8_t>(X.size()), std::vector<float>(X.size() / 32), std::vector<float>(X.size() / 32)};
  quantize_act_scalar(X.data(), n_tokens, cols, o.q.data(), o.d.data(), o.s.data());
  return o;
}

TEST(MatmulInt8, DotInstructionsFollowTheIsaLevel) {
  EXPECT_EQ(dot_int8_for(CpuIsa::Scalar), DotInt8::Scalar);
  EXPECT_TRUE(dot_int8_supported(DotInt8::Scalar));
  for (CpuIsa isa : supported_isas()) {
    const DotInt8 d = dot_int8_for(isa);
    EXPECT_TRUE(dot_int8_supported(d)) << cpu_isa_label(isa);
    // AVX512-VNNI only with an AVX-512 level; an AVX2 level gets AVX-VNNI or the maddubs emulation.
    if (isa == CpuIsa::Avx2) {
      EXPECT_TRUE(d == DotInt8::Avx2 || d == DotInt8::AvxVnni) << dot_int8_label(d);
    }
    if (isa != CpuIsa::Scalar) {
      EXPECT_NE(d, DotInt8::Scalar);
    }
  }
  if (dot_int8_supported(DotInt8::Avx512Vnni)) {
    EXPECT_EQ(dot_int8_for(best_cpu_isa()), DotInt8::Avx512Vnni);
  }
}

TEST(MatmulInt8, QuantizerRoundsWithinHalfAStepAndAvx2AgreesBitForBit) {
  std::mt19937 rng(21);
  const int64_t n_tokens = 3, cols = 96;
  auto X = random_floats(n_tokens * cols, rng);
  for (int i = 32; i < 64; ++i) X[static_cast<size_t>(i)] = 0.0f;  // an all-zero block: scale 0, codes 0
  X[70] = 1e-30f;                                                  // a tiny one among normal values
  const QuantizedX a = quantize_scalar(X, n_tokens, cols);
  for (int64_t b = 0; b < n_tokens * cols / 32; ++b) {
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const float x = X[static_cast<size_t>(32 * b + i)], dq = a.d[b] * a.q[32 * b + i];
      EXPECT_LE(std::fabs(x - dq), 0.5f * a.d[b] * 1.0001f + 1e-37f) << "block " << b << " element " << i;
      EXPECT_LE(std::abs(static_cast<int>(a.q[32 * b + i])), 127);
      sum += a.q[32 * b + i];
    }
    EXPECT_EQ(a.s[b], a.d[b] * static_cast<float>(sum));
  }
  EXPECT_EQ(a.d[1], 0.0f);
  if (!cpu_isa_supported(CpuIsa::Avx2)) GTEST_SKIP() << "no AVX2";
  QuantizedX v = a;
  quantize_act_avx2(X.data(), n_tokens, cols, v.q.data(), v.d.data(), v.s.data());
  EXPECT_EQ(v.q, a.q);
  EXPECT_EQ(v.d, a.d);
  EXPECT_EQ(v.s, a.s);
}

TEST(MatmulInt8, EveryDotIsaMatchesScalarTwinOverAwkwardShapes) {
  std::mt19937 rng(77);
  for (DType wt : kQuantTypes)
    for (int64_t rows : {1, 3, 7, 33})
      for (int64_t cols : cols_for(wt)) {
        const auto W = random_weights(wt, rows, cols, rng);
        for (int64_t n_tokens : {1, 2, 3, 4, 5, 9, 15}) {
          const auto X = random_floats(n_tokens * cols, rng);
          const QuantizedX xq = quantize_scalar(X, n_tokens, cols);
          const int64_t ldy = rows + 2;
          std::vector<float> twin(static_cast<size_t>(n_tokens * ldy), NAN);
          GemvInt8Args a{wt, W.data(), dtype_row_bytes(wt, cols), cols, xq.view(), n_tokens, twin.data(), ldy, false};
          gemv_int8_rows_scalar(a, 0, rows);
          // The twin against the exact product: fp32 rounding plus the int8 rounding of X.
          std::vector<double> ref, mag;
          reference(wt, W, rows, cols, X, n_tokens, ref, mag);
          const auto bound = int8_rounding_bound(wt, W, rows, cols, X, n_tokens);
          const std::string what = std::string(dtype_name(wt)) + " rows=" + std::to_string(rows) +
                                   " cols=" + std::to_string(cols) + " n_tokens=" + std::to_string(n_tokens);
          expect_close(twin.data(), ldy, ref, mag, rows, n_tokens, cols, what + " scalar int8 twin", &bound);
          // The SIMD kernels against the twin on the same int8 X: only the fp32 summation order differs.
          std::vector<double> twin_d(static_cast<size_t>(n_tokens * rows));
          for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t r = 0; r < rows; ++r) twin_d[t * rows + r] = twin[t * ldy + r];
          for (DotInt8 dot : supported_dots()) {
            std::vector<float> Y(twin.size(), NAN);
            a.Y = Y.data();
            const int64_t mid = rows / 2;  // two row ranges, as the pool splits them
            int8_kernel(dot)(a, 0, mid);
            int8_kernel(dot)(a, mid, rows);
            expect_close(Y.data(), ldy, twin_d, mag, rows, n_tokens, cols, what + " " + dot_int8_label(dot));
            expect_untouched(Y, ldy, rows, n_tokens, what);
          }
        }
      }
}

TEST(MatmulInt8, GroupAndAccumulateEqualSeparateMatmulsOnBothPaths) {
  std::mt19937 rng(31);
  ThreadPool pool(2);
  MatmulWorkspace ws;
  const int64_t cols = 256;
  const DType types[3] = {DType::Q4_1, DType::Q6_K, DType::BF16};  // mixed, as q/k/v may be
  const int64_t rows[3] = {37, 16, 5};
  std::vector<uint8_t> W[3];
  for (int i = 0; i < 3; ++i) W[i] = random_weights(types[i], rows[i], cols, rng);
  for (int64_t n_tokens : {1, 2, 20}) {
    const auto X = random_floats(n_tokens * cols, rng);
    for (CpuIsa isa : supported_isas()) {
      std::vector<float> grouped[3], separate[3], before;
      MatmulTarget targets[3];
      for (int i = 0; i < 3; ++i) {
        grouped[i] = random_floats(n_tokens * rows[i], rng);  // what accumulate adds to
        separate[i] = grouped[i];
        if (i == 1) before = grouped[i];
        const bool acc = i == 1;
        targets[i] = MatmulTarget{types[i], W[i].data(), rows[i], grouped[i].data(), rows[i], acc};
        matmul_isa(isa, pool, ws, types[i], W[i].data(), rows[i], cols, X.data(), n_tokens, separate[i].data(), rows[i],
                   acc);
      }
      matmul_group_isa(isa, pool, ws, targets, 3, cols, X.data(), n_tokens);
      for (int i = 0; i < 3; ++i)
        for (size_t k = 0; k < grouped[i].size(); ++k)
          ASSERT_NEAR(grouped[i][k], separate[i][k], 1e-5f * (1.0f + std::fabs(separate[i][k])))
              << cpu_isa_label(isa) << " target " << i << " n_tokens " << n_tokens;
      // accumulate really adds: target 1 minus a fresh product is what it held before.
      std::vector<float> fresh(separate[1].size());
      matmul_isa(isa, pool, ws, types[1], W[1].data(), rows[1], cols, X.data(), n_tokens, fresh.data(), rows[1]);
      for (size_t k = 0; k < fresh.size(); ++k)
        ASSERT_NEAR(separate[1][k] - fresh[k], before[k], 1e-5f * (1.0f + std::fabs(separate[1][k])));
    }
  }
}

// ---- packed GEMV (matmul_packed.h): the layout, its scalar twin, the AVX512-VNNI kernel ----

struct SplitX {
  std::vector<int8_t> q;
  std::vector<float> dx, s, sh;
  int64_t tokens;
  ActSplit view() const { return ActSplit{q.data(), dx.data(), s.data(), sh.data(), tokens}; }
};

SplitX split_scalar(const QuantizedX& xq, int64_t n_tokens, int64_t cols) {
  const int64_t quads = act_split_quads(cols);
  const auto n = static_cast<size_t>(n_tokens * quads);
  SplitX o{std::vector<int8_t>(n * 128), std::vector<float>(n * 16), std::vector<float>(n * 4),
           std::vector<float>(n * 8), n_tokens};
  split_act(xq.view(), n_tokens, cols, o.q.data(), o.dx.data(), o.s.data(), o.sh.data());
  return o;
}

TEST(MatmulPacked, TwinEqualsGgufTwinAndKernelEqualsTwinOverAwkwardShapes) {
  std::mt19937 rng(505);
  // Every packed kernel this CPU can run, whatever the dispatch would pick (so an AVX-512 machine
  // tests the AVX2 kernel too).
  struct Kernel {
    const char* name;
    void (*fn)(const GemvPackedArgs&, int64_t, int64_t);
  };
  std::vector<Kernel> kernels;
  if (dot_int8_supported(DotInt8::Avx512Vnni)) kernels.push_back({"avx512_vnni", gemv_packed_rows_avx512vnni});
  if (dot_int8_supported(DotInt8::AvxVnni)) kernels.push_back({"avx_vnni", gemv_packed_rows_avxvnni});
  if (cpu_isa_supported(CpuIsa::Avx2)) kernels.push_back({"avx2", gemv_packed_rows_avx2});
  // cols: whole quads, and tails of 1, 2, 3 blocks (576 = SmolLM2's width: 4 quads + 2 blocks);
  // the K-quants' rows are whole super-blocks of 256 (4864 = Qwen2.5-0.5B's ffn_down).
  const std::vector<int64_t> block_cols = {32, 64, 96, 128, 160, 576}, k_cols = {256, 512, 768, 4864};
  for (DType wt : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K,
                   DType::Q6_K, DType::Q3_K})
    for (int64_t rows : {1, 3, 4, 6, 33})
      for (int64_t cols : dtype_block_elems(wt) == 256 ? k_cols : block_cols) {
        if (cols > 1000 && rows > 6) continue;  // the wide shape once per row count that tiles differently
        const auto W = random_weights(wt, rows, cols, rng);
        const auto packed = pack_weight(wt, W.data(), rows, cols);
        ASSERT_TRUE(packed) << dtype_name(wt);
        for (int64_t n_tokens : {1, 2, 3, 4, 5, 8, 9, 13}) {
          const auto X = random_floats(n_tokens * cols, rng);
          const QuantizedX xq = quantize_scalar(X, n_tokens, cols);
          const SplitX xs = split_scalar(xq, n_tokens, cols);
          const int64_t ldy = rows + 2;
          std::vector<float> gguf(static_cast<size_t>(n_tokens * ldy), NAN);
          const GemvInt8Args g{wt,  W.data(), dtype_row_bytes(wt, cols), cols, xq.view(), n_tokens, gguf.data(),
                               ldy, false};
          gemv_int8_rows_scalar(g, 0, rows);
          std::vector<double> gguf_d(static_cast<size_t>(n_tokens * rows)), ref, mag;
          for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t r = 0; r < rows; ++r) gguf_d[t * rows + r] = gguf[t * ldy + r];
          reference(wt, W, rows, cols, X, n_tokens, ref, mag);
          const std::string what = std::string(dtype_name(wt)) + " rows=" + std::to_string(rows) +
                                   " cols=" + std::to_string(cols) + " n_tokens=" + std::to_string(n_tokens);
          // Same int8 X, same integer dots: only the fp32 order differs, and for Q8_0 the offset
          // -128 d s is subtracted from a product 128 d s larger than the result.
          std::vector<float> twin(gguf.size(), NAN);
          GemvPackedArgs a{packed.get(), xs.view(), n_tokens, twin.data(), ldy, false};
          gemv_packed_rows_scalar(a, 0, rows);
          expect_close(twin.data(), ldy, gguf_d, mag, rows, n_tokens, cols, what + " packed twin");
          expect_untouched(twin, ldy, rows, n_tokens, what);
          for (const Kernel& kernel : kernels)
            for (bool accumulate : {false, true}) {
              std::vector<float> Y(twin.size(), NAN), want = twin;
              if (accumulate)
                for (int64_t t = 0; t < n_tokens; ++t)
                  for (int64_t r = 0; r < rows; ++r) Y[t * ldy + r] = 1.0f, want[t * ldy + r] += 1.0f;
              a.Y = Y.data();
              a.accumulate = accumulate;
              const int64_t mid = rows / 2;  // two row ranges, as the pool splits them
              kernel.fn(a, 0, mid);
              kernel.fn(a, mid, rows);
              std::vector<double> want_d(gguf_d.size());
              for (int64_t t = 0; t < n_tokens; ++t)
                for (int64_t r = 0; r < rows; ++r) want_d[t * rows + r] = want[t * ldy + r];
              expect_close(Y.data(), ldy, want_d, mag, rows, n_tokens, cols, what + " packed " + kernel.name);
              expect_untouched(Y, ldy, rows, n_tokens, what);
            }
          // A token's products do not depend on the batch it is decoded in: alone, each token
          // gives the same bits as in the batch, whatever tile shape either took.
          for (const Kernel& kernel : kernels) {
            std::vector<float> batch(twin.size(), NAN);
            kernel.fn(GemvPackedArgs{packed.get(), xs.view(), n_tokens, batch.data(), ldy, false}, 0, rows);
            for (int64_t t = 0; t < n_tokens; ++t) {
              const std::vector<float> Xt(X.begin() + t * cols, X.begin() + (t + 1) * cols);
              const SplitX st = split_scalar(quantize_scalar(Xt, 1, cols), 1, cols);
              std::vector<float> alone(static_cast<size_t>(rows), NAN);
              kernel.fn(GemvPackedArgs{packed.get(), st.view(), 1, alone.data(), rows, false}, 0, rows);
              for (int64_t r = 0; r < rows; ++r)
                ASSERT_EQ(alone[r], batch[t * ldy + r]) << what << " " << kernel.name << " token " << t << " row " << r;
            }
          }
        }
      }
}

TEST(MatmulPacked, StoreSlicesAreAlignedDisjointAndHoldWhatIsWritten) {
  PackedStore store;
  std::vector<std::pair<uint8_t*, size_t>> slices;
  // small slices share a chunk; one above half a chunk gets its own, and small ones go on after it
  for (size_t bytes : std::vector<size_t>{100, 4096, 7, size_t{20} << 20, 64, 3000, size_t{40} << 20, 1})
    slices.emplace_back(store.allocate(bytes), bytes);
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slices[i].first) % 64, 0u) << i;
    std::memset(slices[i].first, static_cast<int>(i + 1), slices[i].second);
  }
  for (size_t i = 0; i < slices.size(); ++i) {
    for (size_t j = 0; j < slices.size(); ++j) {
      if (i == j) continue;
      EXPECT_TRUE(slices[i].first + slices[i].second <= slices[j].first ||
                  slices[j].first + slices[j].second <= slices[i].first)
          << i << " overlaps " << j;
    }
    EXPECT_EQ(slices[i].first[slices[i].second - 1], static_cast<uint8_t>(i + 1)) << i;
  }
  // a packed weight in the store computes what an owned one does
  std::mt19937 rng(3);
  const auto W = random_weights(DType::Q4_1, 5, 576, rng);
  const auto a = pack_weight(DType::Q4_1, W.data(), 5, 576), b = pack_weight(DType::Q4_1, W.data(), 5, 576, &store);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(std::memcmp(a->row(0), b->row(0), a->bytes()), 0);
}

TEST(MatmulPacked, OnlyTheBlockFormatsItKnowsAndScalesThatFit) {
  std::mt19937 rng(9);
  for (DType wt : {DType::F32, DType::BF16, DType::Q2_K, DType::IQ4_NL, DType::IQ4_XS}) {
    const auto W = random_weights(wt, 2, 256, rng);
    EXPECT_FALSE(pack_weight(wt, W.data(), 2, 256)) << dtype_name(wt);
    EXPECT_FALSE(packing_pays(wt)) << dtype_name(wt);
  }
  // Q8_0's offset is -128 d, Q4_0's -8 d, stored as f16: a scale past 65504 / 128 cannot be packed.
  auto W = random_weights(DType::Q8_0, 1, 64, rng);
  reinterpret_cast<BlockQ8_0*>(W.data())[1].d = fp32_to_f16(1000.0f);
  EXPECT_FALSE(pack_weight(DType::Q8_0, W.data(), 1, 64));
  reinterpret_cast<BlockQ8_0*>(W.data())[1].d = fp32_to_f16(500.0f);
  EXPECT_TRUE(pack_weight(DType::Q8_0, W.data(), 1, 64));
  // Q6_K's C = -32 D, Q3_K's -4 D: the same limit (65504 / 32 for Q6_K).
  auto K = random_weights(DType::Q6_K, 1, 256, rng);
  reinterpret_cast<BlockQ6_K*>(K.data())[0].d = fp32_to_f16(4000.0f);
  EXPECT_FALSE(pack_weight(DType::Q6_K, K.data(), 1, 256));
  reinterpret_cast<BlockQ6_K*>(K.data())[0].d = fp32_to_f16(1000.0f);
  EXPECT_TRUE(pack_weight(DType::Q6_K, K.data(), 1, 256));
  const DotInt8 dot = dot_int8_for(active_cpu_isa());
  for (DType wt : {DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K})
    EXPECT_EQ(packing_pays(wt), dot != DotInt8::Scalar) << dtype_name(wt);
}

TEST(MatmulPacked, GroupWithPackedTargetsEqualsTheGgufPathOnEveryIsa) {
  // matmul_group with packed targets (as the CPU device passes them at decode, and at prefill where
  // the sgemm path reads the GGUF weights) against the same call without them.
  std::mt19937 rng(41);
  ThreadPool pool(2);
  MatmulWorkspace ws;
  const int64_t cols = 576;
  const DType types[3] = {DType::Q5_0, DType::Q8_0, DType::BF16};  // the last one stays unpacked
  const int64_t rows[3] = {37, 20, 9};
  std::vector<uint8_t> W[3];
  std::unique_ptr<PackedWeight> P[3];
  for (int i = 0; i < 3; ++i) {
    W[i] = random_weights(types[i], rows[i], cols, rng);
    P[i] = pack_weight(types[i], W[i].data(), rows[i], cols);
  }
  for (int64_t n_tokens : {1, 2, 3, 20}) {
    const auto X = random_floats(n_tokens * cols, rng);
    for (CpuIsa isa : supported_isas()) {
      std::vector<float> with[3], without[3];
      MatmulTarget tw[3], to[3];
      for (int i = 0; i < 3; ++i) {
        with[i] = random_floats(n_tokens * rows[i], rng);
        without[i] = with[i];
        const bool acc = i == 0;
        to[i] = MatmulTarget{types[i], W[i].data(), rows[i], without[i].data(), rows[i], acc};
        tw[i] = MatmulTarget{types[i], W[i].data(), rows[i], with[i].data(), rows[i], acc, P[i].get()};
      }
      matmul_group_isa(isa, pool, ws, to, 3, cols, X.data(), n_tokens);
      matmul_group_isa(isa, pool, ws, tw, 3, cols, X.data(), n_tokens);
      for (int i = 0; i < 3; ++i)
        for (size_t k = 0; k < with[i].size(); ++k)
          ASSERT_NEAR(with[i][k], without[i][k], 2e-5f * (1.0f + std::fabs(without[i][k])))
              << cpu_isa_label(isa) << " target " << i << " n_tokens " << n_tokens;
    }
  }
}

// ---- the bf16 prefill GEMMs against a twin that rounds X and W to bf16 the same way ----

using Bf16GemmFn = void (*)(const Bf16GemmArgs&, void*, int64_t, int64_t);

// Each kernel over row ranges that split a panel, token counts that end every register block of
// the vector kernel (12, then 4 or 8) and of the tile kernel (32) part way, several dtypes, both
// write modes, a Y stride wider than the rows.
void expect_bf16_gemm_equals_rounded_product(Bf16GemmFn kernel, const char* name) {
  std::mt19937 rng(31);
  const DequantSpanFn dequant = dequantize_span_avx512;
  std::vector<uint8_t> work_bytes;
  for (DType wt : {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q6_K})
    for (int64_t rows : {1, 17, 32, 45, 100})
      for (int64_t cols : {32, 96, 256, 512}) {
        if (cols % dtype_block_elems(wt) != 0) continue;
        const auto W = random_weights(wt, rows, cols, rng);
        // the twin's inputs: W dequantized, then both rounded to bf16 (fp32_to_bf16: nearest even)
        std::vector<float> w(static_cast<size_t>(rows * cols));
        for (int64_t r = 0; r < rows; ++r) dequantize_row_scalar(wt, W.data(), cols, r, w.data() + r * cols);
        for (auto& v : w) v = bf16_to_fp32(fp32_to_bf16(v));
        for (int64_t n_tokens : {16, 31, 32, 33, 70}) {
          const auto X = random_floats(n_tokens * cols, rng);
          std::vector<uint16_t> x(static_cast<size_t>(bf16_padded_tokens(n_tokens) * cols), 0xFFFF);
          bf16_pack_x(X.data(), n_tokens, cols, x.data());
          for (int64_t i = 0; i < n_tokens * cols; ++i) ASSERT_EQ(x[i], fp32_to_bf16(X[i])) << i;
          for (size_t i = static_cast<size_t>(n_tokens * cols); i < x.size(); ++i) ASSERT_EQ(x[i], 0) << "padding";
          std::vector<double> ref(static_cast<size_t>(n_tokens * rows)), mag(ref.size());
          for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t r = 0; r < rows; ++r) {
              double s = 0, m = 0;
              for (int64_t c = 0; c < cols; ++c) {
                const double p = static_cast<double>(w[r * cols + c]) * bf16_to_fp32(x[t * cols + c]);
                s += p;
                m += std::fabs(p);
              }
              ref[t * rows + r] = s;
              mag[t * rows + r] = m;
            }
          work_bytes.resize(bf16_gemm_work_bytes(cols) + 64);
          void* work = work_bytes.data() + (64 - reinterpret_cast<uintptr_t>(work_bytes.data()) % 64) % 64;
          for (bool accumulate : {false, true}) {
            const int64_t ldy = rows + 5;  // a stride wider than the rows
            std::vector<float> Y(static_cast<size_t>(n_tokens * ldy), NAN);
            if (accumulate)
              for (int64_t t = 0; t < n_tokens; ++t)
                for (int64_t r = 0; r < rows; ++r) Y[t * ldy + r] = 1.0f;
            const Bf16GemmArgs a{wt,  W.data(),  dtype_row_bytes(wt, cols), cols, dequant, x.data(), n_tokens, Y.data(),
                                 ldy, accumulate};
            // two row ranges, the first not a whole number of 32-row panels
            const int64_t mid = rows / 3;
            kernel(a, work, 0, mid);
            kernel(a, work, mid, rows);
            std::vector<double> want = ref;
            if (accumulate)
              for (auto& v : want) v += 1.0;
            expect_close(Y.data(), ldy, want, mag, rows, n_tokens, cols,
                         std::string(dtype_name(wt)) + " " + name + " rows=" + std::to_string(rows) +
                             " cols=" + std::to_string(cols) + " n_tokens=" + std::to_string(n_tokens) +
                             (accumulate ? " accumulate" : ""));
            expect_untouched(Y, ldy, rows, n_tokens, name);
          }
        }
      }
}

TEST(MatmulBf16, Avx512Bf16GemmEqualsTheBf16RoundedProductOverAwkwardShapes) {
  if (!prefill_gemm_supported(PrefillGemm::Avx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  expect_bf16_gemm_equals_rounded_product(avx512_bf16_gemm_rows, "avx512_bf16");
}

TEST(MatmulBf16, AmxTileGemmEqualsTheBf16RoundedProductOverAwkwardShapes) {
  if (!amx_bf16_supported()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS refused the tile state)";
  expect_bf16_gemm_equals_rounded_product(amx_gemm_rows, "amx");
}

TEST(Matmul, RejectsColsNotWholeBlocks) {
  std::vector<uint8_t> W(1024);
  std::vector<float> X(64), Y(4);
  EXPECT_THROW(matmul_rows(DType::Q4_0, W.data(), 48, X.data(), 1, Y.data(), 1, 0, 1), std::exception);
}

// ---- block decoders vs blocks packed like llama.cpp's quantize_row_*_ref ----

__attribute__((target("f16c"))) uint16_t hw_fp32_to_f16(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), 0), 0));
}
__attribute__((target("f16c"))) float hw_f16_to_fp32(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

TEST(Half, F16MatchesF16cExhaustively) {
  // From CPUID (device/cpu_info): clang 14's __builtin_cpu_supports does not know "f16c".
  const auto& features = hg::cpu_info().features;
  if (std::find(features.begin(), features.end(), "f16c") == features.end()) GTEST_SKIP() << "no F16C to compare with";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = f16_to_fp32(static_cast<uint16_t>(h)), b = hw_f16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(b)) {
      ASSERT_TRUE(std::isnan(a)) << h;
      continue;
    }
    ASSERT_EQ(float_bits(a), float_bits(b)) << h;
    ASSERT_EQ(fp32_to_f16(a), h) << h;  // round trip
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = bits(rng);
    if (i % 2) u = (u & 0x8fffffffu) | 0x30000000u;  // concentrate near the half range
    const float f = bits_float(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_f16(f), hw_fp32_to_f16(f)) << std::hex << u;
  }
}

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(bits_float(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(bits_float(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(fp32_to_bf16(bits_float(0x3f808001u)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(bits_float(0x7f7fffffu)), 0x7f80);  // max float rounds to inf
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), h);
  }
}

}  // namespace
}  // namespace hg::cpu
