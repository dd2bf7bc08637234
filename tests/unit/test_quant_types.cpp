// Every GGUF block type hybridgen computes on, against an oracle it did not write: the gguf
// package (gguf-py, maintained with llama.cpp; tools/gguf_quants.py) dequantizes random blocks,
// extreme scales included, and must agree with our scalar dequantizer bit for bit and with the
// SIMD ones to the rounding of a fused multiply-add; for the types it can write, our quantizers
// must write its bytes. Plus the block decoders against hand-packed blocks, and loading each type
// from a GGUF file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gguf_writer.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "matmul_test_util.h"
#include "model/gguf.h"
#include "model/quantize.h"
#include "test_util.h"

namespace hg::cpu {
namespace {

namespace fs = std::filesystem;

template <class T>
void write_raw(const fs::path& p, const std::vector<T>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

template <class T>
std::vector<T> read_raw(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

// Runs tools/gguf_quants.py; fails the test with its output when it does not succeed.
void gguf_quants(const std::string& args) {
  const test::RunResult r =
      test::run(test::python() + " '" + (test::source_dir() / "tools/gguf_quants.py").string() + "' " + args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << "\n(make test installs the gguf package: scripts/setup.sh)";
}

// Byte offsets of the f16 scale fields (d, and dmin or m) inside one block of `wt`.
std::vector<size_t> scale_fields(DType wt) {
  switch (wt) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS: return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

// Random blocks (random_weights: random codes, sane scales), then the first blocks' scales set to
// the extremes of f16: zero, ±max, the smallest subnormal, ±inf and NaN.
std::vector<uint8_t> blocks_with_extreme_scales(DType wt, int64_t n_blocks, std::mt19937& rng) {
  const int64_t elems = dtype_block_elems(wt);
  std::vector<uint8_t> w = random_weights(wt, 1, n_blocks * elems, rng);
  const uint16_t extremes[] = {0x0000, 0x7bff, 0xfbff, 0x0001, 0x8001, 0x7c00, 0xfc00, 0x7e00};
  const size_t bb = dtype_block_bytes(wt);
  for (size_t e = 0; e < std::size(extremes); ++e)
    for (size_t off : scale_fields(wt)) {
      // Block e: every scale field extreme; block e + 8: only the first (d) extreme.
      std::memcpy(w.data() + e * bb + off, &extremes[e], 2);
      if (off == scale_fields(wt).front()) std::memcpy(w.data() + (e + 8) * bb + off, &extremes[e], 2);
    }
  return w;
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Within the rounding that contracting a*b - c into one FMA may change: one ulp of the products.
bool close_float(float a, float b, float magnitude) {
  if (same_float(a, b)) return true;
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  return std::fabs(a - b) <= 4e-7f * magnitude;
}

using DequantSpanFn = void (*)(DType, const uint8_t*, int64_t, float*);

TEST(GgufPackage, DequantizesEveryTypeAsWeDo) {
  const fs::path dir = test::temp_dir("gguf-quants");
  std::mt19937 rng(2024);
  for (DType wt : kAllTypes) {
    if (!dtype_is_quantized(wt)) continue;
    SCOPED_TRACE(std::string(dtype_name(wt)));
    const int64_t n_blocks = 64, n = n_blocks * dtype_block_elems(wt);
    const std::vector<uint8_t> blocks = blocks_with_extreme_scales(wt, n_blocks, rng);
    write_raw(dir / "in.bin", blocks);
    gguf_quants(std::string("dequantize ") + std::string(dtype_name(wt)) + " '" + (dir / "in.bin").string() +
                "' '" + (dir / "out.f32").string() + "'");
    const std::vector<float> want = read_raw<float>(dir / "out.f32");
    ASSERT_EQ(want.size(), static_cast<size_t>(n));

    std::vector<float> ours(static_cast<size_t>(n));
    dequantize_span(wt, blocks.data(), n, ours.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(same_float(ours[i], want[i])) << "scalar, value " << i << " (block " << i / dtype_block_elems(wt)
                                                << "): ours " << ours[i] << ", gguf " << want[i];
    // The per-ISA dequantizers (prefill tiles) may fuse a multiply and an add.
    std::vector<std::pair<CpuIsa, DequantSpanFn>> simd;
    if (cpu_isa_supported(CpuIsa::Avx2)) simd.emplace_back(CpuIsa::Avx2, dequantize_span_avx2);
    if (cpu_isa_supported(CpuIsa::Avx512)) simd.emplace_back(CpuIsa::Avx512, dequantize_span_avx512);
    for (const auto& [isa, fn] : simd) {
      std::vector<float> v(static_cast<size_t>(n));
      fn(wt, blocks.data(), n, v.data());
      for (int64_t i = 0; i < n; ++i) {
        const int64_t b0 = i / dtype_block_elems(wt) * dtype_block_elems(wt);
        float magnitude = 0.0f;
        for (int64_t k = b0; k < b0 + dtype_block_elems(wt); ++k)
          if (std::isfinite(want[k])) magnitude = std::max(magnitude, std::fabs(want[k]));
        ASSERT_TRUE(close_float(v[i], want[i], magnitude))
            << cpu_isa_label(isa) << ", value " << i << ": ours " << v[i] << ", gguf " << want[i];
      }
    }
  }
}

// Values that stress a block quantizer: normal, all equal, all zero, huge, tiny, one outlier,
// ties at half steps.
std::vector<float> quantizer_inputs(int64_t n_blocks, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_blocks * 32));
  for (int64_t b = 0; b < n_blocks; ++b) {
    float* v = x.data() + 32 * b;
    for (int i = 0; i < 32; ++i) v[i] = g(rng);
    switch (b % 8) {
      case 1: std::fill(v, v + 32, 0.75f); break;
      case 2: std::fill(v, v + 32, 0.0f); break;
      case 3: for (int i = 0; i < 32; ++i) v[i] *= 3e4f; break;
      case 4: for (int i = 0; i < 32; ++i) v[i] *= 1e-6f; break;
      case 5: v[7] = 40.0f; break;
      case 6: for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i - 16) * 0.5f; break;
      default: break;
    }
  }
  return x;
}

TEST(GgufPackage, OurQuantizersWriteItsBytes) {
  const fs::path dir = test::temp_dir("gguf-quantize");
  std::mt19937 rng(77);
  const int64_t n_blocks = 256;
  const std::vector<float> x = quantizer_inputs(n_blocks, rng);
  write_raw(dir / "x.f32", x);
  for (DType wt : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    SCOPED_TRACE(std::string(dtype_name(wt)));
    gguf_quants(std::string("quantize ") + std::string(dtype_name(wt)) + " '" + (dir / "x.f32").string() + "' '" +
                (dir / "q.bin").string() + "'");
    const std::vector<uint8_t> want = read_raw<uint8_t>(dir / "q.bin");
    std::vector<uint8_t> ours(dtype_row_bytes(wt, n_blocks * 32));
    ASSERT_EQ(want.size(), ours.size());
    quantize_row(wt, x.data(), n_blocks * 32, ours.data());
    // Same bytes, or (where the two round a value that sits on a half step differently) the same
    // scales and codes one step apart.
    std::vector<float> a(x.size()), b(x.size());
    dequantize_span(wt, ours.data(), n_blocks * 32, a.data());
    dequantize_span(wt, want.data(), n_blocks * 32, b.data());
    int64_t differing = 0;
    for (int64_t blk = 0; blk < n_blocks; ++blk) {
      const size_t bb = dtype_block_bytes(wt);
      if (std::memcmp(ours.data() + blk * bb, want.data() + blk * bb, bb) == 0) continue;
      ++differing;
      for (size_t off : scale_fields(wt))
        ASSERT_EQ(std::memcmp(ours.data() + blk * bb + off, want.data() + blk * bb + off, 2), 0)
            << "block " << blk << ": scale field at byte " << off << " differs";
      uint16_t d16;
      std::memcpy(&d16, ours.data() + blk * bb, 2);
      const float step = std::fabs(f16_to_fp32(d16));
      for (int i = 0; i < 32; ++i) ASSERT_LE(std::fabs(a[32 * blk + i] - b[32 * blk + i]), step * 1.0001f);
    }
    // Q5_0 / Q5_1 follow ggml's reference quantizers to the letter. Our older Q8_0 / Q4_0 / Q4_1
    // round half away from zero where ggml truncates x + 0.5 (Q4_0: the blocks of exact half
    // steps, one in eight here): codes one step apart, checked above.
    const bool ggml_rounding = wt == DType::Q5_0 || wt == DType::Q5_1;
    EXPECT_LE(differing, ggml_rounding ? 0 : n_blocks / 8) << differing << " of " << n_blocks << " blocks differ";
  }
}

// ---- block decoders against blocks packed by hand, the way llama.cpp's quantizers pack them ----

TEST(Dequantize, Q4_0AndQ4_1NibbleOrder) {
  BlockQ4_0 b0{};
  BlockQ4_1 b1{};
  b0.d = b1.d = fp32_to_f16(0.5f);
  b1.m = fp32_to_f16(-1.0f);
  for (int j = 0; j < 16; ++j) b0.qs[j] = b1.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float o0[32], o1[32];
  dequantize_row_scalar(DType::Q4_0, &b0, 32, 0, o0);
  dequantize_row_scalar(DType::Q4_1, &b1, 32, 0, o1);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(o0[j], (j - 8) * 0.5f);
    EXPECT_EQ(o0[j + 16], (15 - j - 8) * 0.5f);
    EXPECT_EQ(o1[j], j * 0.5f - 1.0f);
    EXPECT_EQ(o1[j + 16], (15 - j) * 0.5f - 1.0f);
  }
  BlockQ8_0 b8{};
  b8.d = fp32_to_f16(0.25f);
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<int8_t>(j * 8 - 128);
  float o8[32];
  dequantize_row_scalar(DType::Q8_0, &b8, 32, 0, o8);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(o8[j], (j * 8 - 128) * 0.25f);
}

TEST(Dequantize, Q4_KMatchesQuantizerPacking) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> six(0, 63), four(0, 15);
  for (int trial = 0; trial < 20; ++trial) {
    int ls[8], lm[8], L[256];
    for (int j = 0; j < 8; ++j) ls[j] = six(rng), lm[j] = six(rng);
    for (int& l : L) l = four(rng);
    BlockQ4_K b{};
    b.d = fp32_to_f16(0.01f);
    b.dmin = fp32_to_f16(0.02f);
    // Packing of the 6-bit scales and mins as in quantize_row_q4_K_ref.
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        b.scales[j] = static_cast<uint8_t>(ls[j]);
        b.scales[j + 4] = static_cast<uint8_t>(lm[j]);
      } else {
        b.scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xf) | ((lm[j] & 0xf) << 4));
        b.scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
        b.scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
      }
    }
    for (int j = 0; j < 256; j += 64)
      for (int l = 0; l < 32; ++l) b.qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    float out[256];
    dequantize_row_scalar(DType::Q4_K, &b, 256, 0, out);
    const float d = f16_to_fp32(b.d), dmin = f16_to_fp32(b.dmin);
    for (int i = 0; i < 256; ++i) {
      const int sub = i / 32;
      EXPECT_NEAR(out[i], d * ls[sub] * L[i] - dmin * lm[sub], 1e-5f) << "i=" << i;
    }
  }
}

TEST(Dequantize, Q6_KMatchesQuantizerPacking) {
  std::mt19937 rng(6);
  std::uniform_int_distribution<int> q6(0, 63), sc(-128, 127);
  BlockQ6_K b{};
  int L[256], scales[16];
  for (int& l : L) l = q6(rng);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(scales[j] = sc(rng));
  b.d = fp32_to_f16(0.003f);
  // Packing of ql / qh as in quantize_row_q6_K_ref.
  uint8_t* ql = b.ql;
  uint8_t* qh = b.qh;
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((L[j + l] & 0xf) | ((L[j + l + 64] & 0xf) << 4));
      ql[l + 32] = static_cast<uint8_t>((L[j + l + 32] & 0xf) | ((L[j + l + 96] & 0xf) << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                   ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
  float out[256];
  dequantize_row_scalar(DType::Q6_K, &b, 256, 0, out);
  const float d = f16_to_fp32(b.d);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(out[i], d * scales[i / 16] * (L[i] - 32), 1e-4f) << i;
}

TEST(Dequantize, RowOffsetsAndPlainTypes) {
  const float vals[3] = {1.5f, -2.25f, 3.0f};
  uint16_t h[6], bf[6];
  for (int i = 0; i < 6; ++i) {
    h[i] = fp32_to_f16(vals[i % 3] * (i + 1));
    bf[i] = fp32_to_bf16(vals[i % 3] * (i + 1));
  }
  float out[3];
  dequantize_row_scalar(DType::F16, h, 3, 1, out);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], vals[i] * (i + 4));
  dequantize_row_scalar(DType::BF16, bf, 3, 1, out);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], vals[i] * (i + 4));
}

// ---- half.h ----

TEST(Dequantize, Q5_0HighBitsAndQ3_KSignedCodes) {
  BlockQ5_0 b{};
  b.d = fp32_to_f16(0.5f);
  const uint32_t qh = 0xa5a5f00fu;
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  dequantize_span(DType::Q5_0, &b, 32, out);
  for (int i = 0; i < 32; ++i) {
    const int nibble = i < 16 ? i : 15 - (i - 16);
    const int code = nibble | static_cast<int>(((qh >> i) & 1u) << 4);
    EXPECT_EQ(out[i], static_cast<float>(code - 16) * 0.5f) << i;
  }
  // Q3_K: all scales 32 + 1 (so 1 after the -32), d = 1; code = q2 - 4 where the hmask bit is clear.
  BlockQ3_K k{};
  k.d = fp32_to_f16(1.0f);
  for (int j = 0; j < 8; ++j) k.scales[j] = 0x11;        // low nibbles of scales 0..15: 1
  for (int j = 8; j < 12; ++j) k.scales[j] = 0xaa;       // high bits: 2 -> 1 | 2 << 4 = 33
  for (int l = 0; l < 32; ++l) k.hmask[l] = static_cast<uint8_t>(l % 2 ? 0xff : 0x00);
  for (int l = 0; l < 64; ++l) k.qs[l] = 0xe4;           // values 0, 1, 2, 3 in the four 2-bit slots
  float y[256];
  dequantize_span(DType::Q3_K, &k, 256, y);
  for (int sub = 0; sub < 8; ++sub)
    for (int l = 0; l < 32; ++l) {
      const int q2 = sub % 4;
      EXPECT_EQ(y[32 * sub + l], static_cast<float>(q2 - (l % 2 ? 0 : 4))) << "sub " << sub << " l " << l;
    }
}

TEST(GgufFile, EveryComputedTypeLoadsAndOthersFailNamingTensorAndType) {
  const fs::path dir = test::temp_dir("gguf-types");
  test::GgufWriter w;
  for (DType t : kAllTypes) {
    const int64_t cols = 256;
    w.tensor(std::string(dtype_name(t)), gguf::ggml_type_from_dtype(t), {3, cols},
             std::string(dtype_row_bytes(t, cols) * 3, '\0'));
  }
  const auto f = gguf::File::open(w.write(dir / "types.gguf"));
  for (DType t : kAllTypes) {
    const TensorView v = f->tensor(std::string(dtype_name(t)));
    EXPECT_EQ(v.dtype, t) << dtype_name(t);
    EXPECT_EQ(v.nbytes, dtype_row_bytes(t, 256) * 3) << dtype_name(t);
  }
  EXPECT_EQ(gguf::supported_ggml_types(),
            "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs");
}

}  // namespace
}  // namespace hg::cpu
