// Synthetic models from configs/models, the block quantizers behind them, parameter counts of
// the shipped shape configs, and model-path resolution.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "model/quantize.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

fs::path config(const std::string& name) { return test::source_dir() / "configs/models" / (name + ".yaml"); }

using test::expect_error;

TEST(Quantize, RoundTripErrorIsBounded) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n = 256;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = nd(rng);
  x[5] = 0.0f;
  struct Case {
    DType t;
    float tol;  // relative to the block's range
  } cases[] = {{DType::F16, 1e-3f}, {DType::BF16, 1e-2f}, {DType::Q8_0, 1.0f / 127}, {DType::Q4_0, 1.0f / 8},
               {DType::Q4_1, 1.0f / 15}};
  for (const Case& c : cases) {
    std::vector<uint8_t> buf(dtype_row_bytes(c.t, n));
    quantize_row(c.t, x.data(), n, buf.data());
    dequantize_row_ref(c.t, buf.data(), n, y.data());
    for (int b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      for (int j = 0; j < 32; ++j)
        EXPECT_NEAR(y[b * 32 + j], x[b * 32 + j], c.tol * amax * 1.01f) << dtype_name(c.t) << " at " << b * 32 + j;
    }
  }
}

TEST(Quantize, BlockLayouts) {
  // Element j in the low nibble of byte j, element j + 16 in the high nibble.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j);  // min 0, max 31
  uint8_t q41[20];
  quantize_row(DType::Q4_1, x, 32, q41);
  float y[32];
  dequantize_row_ref(DType::Q4_1, q41, 32, y);
  EXPECT_EQ(q41[4] & 0xf, 0);
  EXPECT_EQ(q41[4] >> 4, 8);  // 16 / (31 / 15) = 7.74 -> 8
  EXPECT_NEAR(y[31], 31.0f, 0.05f);
  uint8_t q40[18];
  for (int j = 0; j < 32; ++j) x[j] = j == 3 ? -8.0f : 1.0f;  // the signed extreme maps to -8
  quantize_row(DType::Q4_0, x, 32, q40);
  EXPECT_EQ(q40[2 + 3] & 0xf, 0);  // -8 + 8
  dequantize_row_ref(DType::Q4_0, q40, 32, y);
  EXPECT_FLOAT_EQ(y[3], -8.0f);
  EXPECT_FLOAT_EQ(y[0], 1.0f);
  uint8_t q8[34];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) / 16.0f;
  quantize_row(DType::Q8_0, x, 32, q8);
  EXPECT_EQ(static_cast<int8_t>(q8[2]), -127);
  EXPECT_THROW(quantize_row(DType::Q4_0, x, 20, q40), Error);
}

TEST(Synthetic, SmolLM2ShapesAndDeterminism) {
  auto a = make_synthetic_model(config("smollm2-135m"), DType::Q4_0, 42);
  const ModelSpec& s = a->spec;
  EXPECT_EQ(a->format, "synthetic");
  EXPECT_EQ(s.n_layers, 30);
  EXPECT_EQ(s.d_model, 576);
  EXPECT_EQ(s.n_kv_heads, 3);
  EXPECT_TRUE(s.tied_embeddings);
  EXPECT_EQ(a->weights.lm_head.data, a->weights.tok_embed.data);
  EXPECT_EQ(a->weights.layers[0].wq.dtype, DType::Q4_0);
  EXPECT_EQ(a->weights.layers[0].wk.shape, (std::vector<int64_t>{192, 576}));
  EXPECT_EQ(a->weights.layers[0].wk.nbytes, dtype_row_bytes(DType::Q4_0, 192 * 576));
  EXPECT_EQ(a->weights.layers[0].attn_norm.dtype, DType::F32);  // norms stay float
  EXPECT_EQ(a->n_params(), 134515008);
  EXPECT_EQ(a->n_params(), count_params(s));

  auto b = make_synthetic_model(config("smollm2-135m"), DType::Q4_0, 42);
  auto c = make_synthetic_model(config("smollm2-135m"), DType::Q4_0, 43);
  const TensorView& wa = a->weights.layers[7].w_down;
  EXPECT_EQ(std::memcmp(wa.data, b->weights.layers[7].w_down.data, wa.nbytes), 0);
  EXPECT_NE(std::memcmp(wa.data, c->weights.layers[7].w_down.data, wa.nbytes), 0);
  EXPECT_NE(std::memcmp(wa.data, a->weights.layers[6].w_down.data, wa.nbytes), 0);
}

TEST(Synthetic, ValueScales) {
  auto m = make_synthetic_model(config("smollm2-135m"), DType::F32, 1);
  auto stats = [](const TensorView& t) {
    const float* p = static_cast<const float*>(t.data);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      sum += p[i];
      sq += p[i] * p[i];
    }
    double mean = sum / static_cast<double>(t.numel());
    return std::pair{mean, std::sqrt(sq / static_cast<double>(t.numel()) - mean * mean)};
  };
  auto [wm, ws] = stats(m->weights.layers[3].w_up);
  EXPECT_NEAR(wm, 0.0, 1e-3);
  EXPECT_NEAR(ws, 0.5 / std::sqrt(576.0), 2e-3);
  auto [nm, ns] = stats(m->weights.layers[3].ffn_norm);
  EXPECT_NEAR(nm, 1.0, 0.02);
  EXPECT_LT(ns, 0.1);
}

TEST(Synthetic, BF16QwenAndOpt) {
  // Cut the big shapes down to a few layers so the test stays fast.
  fs::path dir = test::temp_dir("syn");
  std::ofstream(dir / "qwen.yaml") << "name: q\narch: qwen2\nn_layers: 2\nd_model: 128\nn_heads: 4\nn_kv_heads: 2\n"
                                      "d_ff: 256\nvocab_size: 1000\nmax_ctx: 512\ntied: false\n";
  auto q = make_synthetic_model(dir / "qwen.yaml", DType::BF16, 3);
  EXPECT_EQ(q->spec.arch, Arch::Qwen2);
  EXPECT_TRUE(q->spec.qkv_bias);
  EXPECT_FLOAT_EQ(q->spec.rope_theta, 1e6f);
  EXPECT_EQ(q->weights.layers[1].bk.shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(q->weights.layers[1].bk.dtype, DType::BF16);
  EXPECT_EQ(q->weights.lm_head.shape, (std::vector<int64_t>{1000, 128}));
  EXPECT_NE(q->weights.lm_head.data, q->weights.tok_embed.data);
  EXPECT_EQ(q->weight_bytes(), static_cast<size_t>(q->n_params()) * 2);

  std::ofstream(dir / "opt.yaml") << "arch: opt\nn_layers: 2\nd_model: 64\nn_heads: 4\nd_ff: 128\nvocab_size: 100\n"
                                     "max_ctx: 32\ndo_layer_norm_before: false\nword_embed_proj_dim: 32\n";
  auto o = make_synthetic_model(dir / "opt.yaml", DType::Q8_0, 3);
  EXPECT_EQ(o->spec.name, "opt");
  EXPECT_EQ(o->weights.pos_embed.shape, (std::vector<int64_t>{34, 64}));
  EXPECT_EQ(o->weights.project_in.shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(o->weights.project_in.dtype, DType::Q8_0);
  EXPECT_FALSE(o->weights.final_norm.present());
  EXPECT_TRUE(o->weights.layers[0].b_up.present());
  EXPECT_EQ(o->weights.lm_head.data, o->weights.tok_embed.data);
}

TEST(Synthetic, ConfigErrors) {
  fs::path dir = test::temp_dir("synerr");
  std::ofstream(dir / "a.yaml") << "arch: llama\nn_layers: 2\nd_model: 64\nn_heads: 4\nd_ff: 128\nvocab_size: 100\n";
  expect_error([&] { make_synthetic_model(dir / "a.yaml", DType::F32, 1); }, {"a.yaml", "missing field 'max_ctx'"});
  std::ofstream(dir / "b.yaml") << "arch: llama\nn_layers: 2\nd_model: 64\nn_heads: 4\nd_ff: 128\nvocab_size: 100\n"
                                   "max_ctx: 8\nd_fff: 3\n";
  expect_error([&] { load_shape_config(dir / "b.yaml"); }, {"b.yaml:8", "unknown field 'd_fff'"});
  std::ofstream(dir / "c.yaml") << "arch: gptj\n";
  expect_error([&] { load_shape_config(dir / "c.yaml"); }, {"c.yaml", "'gptj'"});
  std::ofstream(dir / "d.yaml") << "arch: llama\nn_layers: two\n";
  expect_error([&] { load_shape_config(dir / "d.yaml"); }, {"d.yaml:2", "n_layers"});
  std::ofstream(dir / "e.yaml") << "arch: llama\nn_layers: 1\nd_model: 48\nn_heads: 4\nd_ff: 64\nvocab_size: 10\nmax_ctx: 8\n";
  expect_error([&] { make_synthetic_model(dir / "e.yaml", DType::Q4_1, 1); }, {"e.yaml", "48", "q4_1", "32"});
  expect_error([&] { make_synthetic_model(dir / "missing.yaml", DType::F32, 1); }, {"missing.yaml"});
}

TEST(ShapeConfigs, PublishedParameterCounts) {
  struct Known {
    const char* name;
    double billions;
  } known[] = {{"opt-1.3b", 1.316},     {"opt-2.7b", 2.652},     {"opt-6.7b", 6.658},     {"opt-13b", 12.853},
               {"llama-3.2-1b", 1.236}, {"llama-3.2-3b", 3.213}, {"llama-3.1-8b", 8.030}, {"qwen2.5-0.5b", 0.494},
               {"qwen2.5-1.5b", 1.544}, {"qwen2.5-3b", 3.086},   {"qwen2.5-7b", 7.616},   {"qwen2.5-14b", 14.770},
               {"smollm2-135m", 0.1345}};
  for (const Known& k : known) {
    ModelSpec s = load_shape_config(config(k.name));
    double b = static_cast<double>(count_params(s)) / 1e9;
    EXPECT_NEAR(b, k.billions, k.billions * 0.005) << k.name;
  }
}

TEST(ResolvePath, SmolLM2AliasNeedsFetch) {
  fs::path dir = test::temp_dir("cache");
  const char* old = std::getenv("HG_CACHE");
  std::string saved = old ? old : "";
  setenv("HG_CACHE", dir.c_str(), 1);
  expect_error([] { resolve_model_path("smollm2"); }, {"tools/fetch_model.sh", "SmolLM2-135M-Instruct.Q4_1.gguf"});
  expect_error([] { load_model("smollm2"); }, {"fetch_model.sh"});
  EXPECT_EQ(resolve_model_path("some/dir"), fs::path("some/dir"));
  if (old) setenv("HG_CACHE", saved.c_str(), 1);
  else unsetenv("HG_CACHE");
  EXPECT_EQ(parse_weight_dtype("Q4_0"), DType::Q4_0);
  EXPECT_EQ(parse_weight_dtype("q5_1"), DType::Q5_1);
  expect_error([] { parse_weight_dtype("q5_k"); }, {"q5_k", "not supported"});
}

}  // namespace
}  // namespace hg
