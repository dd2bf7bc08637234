// Whole models on the GPU against the CPU device: every tiny HF checkpoint
// (tools/make_tiny_model.py --all), prefill in chunks then decode, with f32 and bf16 KV caches;
// a 1100-token prompt (several prefill chunks, split-K decode); and synthetic models of real
// shapes (SmolLM2-135M: 9/3 heads; Llama-3.2-1B: head_dim 64, GQA 4, llama3 RoPE) in bf16.
// fp32 checkpoints run fp32 GEMMs on the GPU, so they agree closely; 16-bit weights take
// activations rounded to bf16/f16 into the GEMM, so those compare by a looser relative bound
// and by top-1 agreement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "hybridgen/engine.h"
#include "hybridgen/model.h"
#include "test_cuda_common.h"
#include "test_util.h"

namespace hg::test {
namespace {

// Logits of a prefill of `prompt` tokens (every position) followed by `decode` single steps.
std::vector<float> run_logits(const Model& model, EngineOptions o, const std::vector<int32_t>& ids, int prompt) {
  Engine engine(model, o);
  const size_t vocab = static_cast<size_t>(engine.vocab_size());
  std::vector<float> logits(ids.size() * vocab);
  engine.prefill(0, std::span(ids.data(), static_cast<size_t>(prompt)), nullptr, logits.data());
  const int seq = 0;
  for (size_t i = static_cast<size_t>(prompt); i < ids.size(); ++i)
    engine.decode(std::span(&seq, 1), std::span(ids.data() + i, 1), logits.data() + i * vocab);
  return logits;
}

struct Comparison {
  double max_diff = 0.0, max_abs = 0.0, top1 = 0.0;
};

Comparison compare(const std::vector<float>& gpu, const std::vector<float>& cpu, size_t vocab) {
  Comparison c;
  c.max_diff = max_abs_diff(gpu, cpu);
  for (float x : cpu) c.max_abs = std::max(c.max_abs, static_cast<double>(std::fabs(x)));
  const size_t rows = cpu.size() / vocab;
  size_t same = 0;
  for (size_t r = 0; r < rows; ++r) {
    const auto a = std::max_element(gpu.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                                    gpu.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab));
    const auto b = std::max_element(cpu.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                                    cpu.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab));
    same += (a - gpu.begin()) - static_cast<std::ptrdiff_t>(r * vocab) == (b - cpu.begin()) - static_cast<std::ptrdiff_t>(r * vocab);
  }
  c.top1 = static_cast<double>(same) / static_cast<double>(rows);
  return c;
}

EngineOptions options(const std::string& device, DType kv, int ctx) {
  EngineOptions o;
  o.device = device;
  o.threads = 4;
  o.kv_dtype = kv;
  o.ctx = ctx;
  o.ubatch = 32;  // several prefill chunks, each over a growing cache
  return o;
}

class CudaTinyModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaTinyModel, LogitsMatchCpuDevice) {
  HG_REQUIRE_CUDA_GPU();
  auto model = load_model(tiny_model(GetParam()).string());
  const bool fp32_weights = GetParam().find("bf16") == std::string::npos && GetParam().find("f16") == std::string::npos;
  for (DType kv : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(std::string("kv ") + std::string(dtype_name(kv)));
    const auto ids = random_ids(80, 11);
    const auto gpu = run_logits(*model, options("cuda", kv, 96), ids, 70);
    const auto cpu = run_logits(*model, options("cpu", kv, 96), ids, 70);
    const Comparison c = compare(gpu, cpu, static_cast<size_t>(model->spec.vocab_size));
    if (fp32_weights) {
      EXPECT_LE(c.max_diff, 1e-3 * std::max(1.0, c.max_abs));
      EXPECT_EQ(c.top1, 1.0);
    } else {
      EXPECT_LE(c.max_diff, 3e-2 * std::max(1.0, c.max_abs));
      EXPECT_GE(c.top1, 0.9);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, CudaTinyModel,
                         ::testing::Values("llama-mha", "llama-gqa", "llama3-rope", "qwen2", "qwen2-untied", "opt",
                                           "opt-proj", "opt-postln", "opt-postln-proj", "llama-gqa-bf16", "qwen2-f16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(CudaEngine, LongPromptThenSplitDecode) {
  HG_REQUIRE_CUDA_GPU();
  auto model = load_model(tiny_model("llama-gqa").string());
  const auto ids = random_ids(1110, 12);
  EngineOptions o = options("cuda", DType::F32, 1120);
  o.ubatch = 256;
  const auto gpu = run_logits(*model, o, ids, 1100);
  o.device = "cpu";
  const auto cpu = run_logits(*model, o, ids, 1100);
  const Comparison c = compare(gpu, cpu, static_cast<size_t>(model->spec.vocab_size));
  EXPECT_LE(c.max_diff, 1e-3 * std::max(1.0, c.max_abs));
}

TEST(CudaEngine, AutoPicksTheGpu) {
  HG_REQUIRE_CUDA_GPU();
  auto model = load_model(tiny_model("llama-gqa").string());
  EngineOptions o;
  o.device = "auto";
  o.ctx = 16;
  Engine engine(*model, o);
  EXPECT_EQ(engine.device().name().rfind("cuda:", 0), 0u) << engine.device().name();
}

class CudaSyntheticModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSyntheticModel, Bf16LogitsTrackCpuDevice) {
  HG_REQUIRE_CUDA_GPU();
  auto model = make_synthetic_model(source_dir() / "configs/models" / (GetParam() + ".yaml"), DType::BF16, 7);
  const auto ids = random_ids(40, 13, model->spec.vocab_size);
  EngineOptions o = options("cuda", DType::BF16, 48);
  o.threads = 0;
  const auto gpu = run_logits(*model, o, ids, 32);
  o.device = "cpu";
  const auto cpu = run_logits(*model, o, ids, 32);
  const Comparison c = compare(gpu, cpu, static_cast<size_t>(model->spec.vocab_size));
  RecordProperty("max_diff", std::to_string(c.max_diff));
  RecordProperty("top1", std::to_string(c.top1));
  EXPECT_LE(c.max_diff, 5e-2 * std::max(1.0, c.max_abs));
  EXPECT_GE(c.top1, 0.8);
}

INSTANTIATE_TEST_SUITE_P(RealShapes, CudaSyntheticModel, ::testing::Values("smollm2-135m", "llama-3.2-1b"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (ch == '-' || ch == '.') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace hg::test
