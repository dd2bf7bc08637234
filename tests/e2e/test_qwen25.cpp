// The second real model: Qwen2.5-Coder-0.5B-Instruct, the Q4_K_M GGUF as llama.cpp's quantizer
// wrote it (Q5_0, Q8_0, Q4_K, Q6_K and F32 tensors; 32K trained context), fetched by
// `tools/fetch_model.sh qwen2.5-0.5b` (make test does). Checked three ways against references
// hybridgen did not write: logits against the numpy forward pass on the gguf package's
// dequantization, perplexity against llama-perplexity's number on the same file and chunks, and
// chat generation.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_isa.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

#define REQUIRE_QWEN()                   \
  const std::string model = qwen_path(); \
  if (model.empty()) GTEST_SKIP() << hg::test::kNoQwenMessage

std::vector<int32_t> tokenize(const std::string& model, const std::string& text) {
  RunResult r = run_hybridgen("tokenize -m '" + model + "' --ids -p '" + text + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out).get<std::vector<int32_t>>() : std::vector<int32_t>{};
}

struct Logits {
  std::vector<float> values;  // [rows, cols]
  int64_t rows = 0, cols = 0;
};

// env: settings for the run, e.g. "HG_PREFILL_GEMM=amx" (the tests run with sgemm: test_env.cpp)
Logits ours(const std::string& model, const fs::path& ids_file, size_t n, const fs::path& out,
            const std::string& env = "HG_PREFILL_GEMM=sgemm") {
  RunResult r = run_hybridgen_env(
      env, "perplexity -m '" + model + "' --ids-file '" + ids_file.string() + "' --ctx " + std::to_string(n) +
               " --kv-dtype f32 -t 2 --json --no-progress --save-logits '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Logits l;
  if (r.exit_code == 0) l.values = read_npy(out, &l.rows, &l.cols);
  return l;
}

struct Comparison {
  double max_diff = INFINITY, mean_diff = INFINITY, max_abs = 0.0;
  double top1_agreement = 0.0;
  double max_kl = INFINITY;  // KL(reference || ours) of the softmaxes, worst position
};

std::vector<double> log_softmax(const float* x, int64_t n) {
  double m = x[0], sum = 0.0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - m);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = x[i] - m - std::log(sum);
  return out;
}

Comparison compare(const Logits& a, const Logits& b) {
  Comparison c;
  if (a.rows != b.rows || a.cols != b.cols || a.values.empty()) return c;
  c.max_diff = c.mean_diff = c.max_kl = 0.0;
  int64_t agree = 0;
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* x = a.values.data() + r * a.cols;
    const float* y = b.values.data() + r * b.cols;
    const std::vector<double> lx = log_softmax(x, a.cols), ly = log_softmax(y, b.cols);
    double kl = 0.0;
    int64_t ax = 0, ay = 0;
    for (int64_t i = 0; i < a.cols; ++i) {
      kl += std::exp(lx[static_cast<size_t>(i)]) * (lx[static_cast<size_t>(i)] - ly[static_cast<size_t>(i)]);
      c.max_diff = std::max(c.max_diff, static_cast<double>(std::fabs(x[i] - y[i])));
      c.mean_diff += std::fabs(x[i] - y[i]);
      c.max_abs = std::max(c.max_abs, static_cast<double>(std::fabs(x[i])));
      if (x[i] > x[ax]) ax = i;
      if (y[i] > y[ay]) ay = i;
    }
    agree += ax == ay;
    c.max_kl = std::max(c.max_kl, kl);
  }
  c.mean_diff /= static_cast<double>(a.values.size());
  c.top1_agreement = static_cast<double>(agree) / static_cast<double>(a.rows);
  return c;
}

// Two sequences: 25 tokens (prefill takes the exact-activation sgemm path: weights dequantized to
// fp32) and 9 tokens (the decode GEMV path: activations rounded to int8 per 32-block, as
// llama.cpp's CPU backend does with Q8 activations).
TEST(Qwen25, LogitsMatchNumpyReferenceOnTheGgufPackagesDequantization) {
  REQUIRE_QWEN();
  const fs::path dir = temp_dir("qwen-ref");
  const std::vector<int32_t> long_ids =
      tokenize(model, "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:");
  const std::vector<int32_t> short_ids = tokenize(model, "The capital of France is Paris, and");
  ASSERT_GE(long_ids.size(), 16u);
  ASSERT_LT(short_ids.size(), 16u);
  write_ids(dir / "long.json", long_ids);
  write_ids(dir / "short.json", short_ids);
  RunResult ref = run(python() + " '" + (source_dir() / "tools/reference.py").string() + "' '" + model +
                      "' --compute f32 --ids-file '" + (dir / "long.json").string() + "' --out '" +
                      (dir / "ref-long.npy").string() + "' --ids-file '" + (dir / "short.json").string() + "' --out '" +
                      (dir / "ref-short.npy").string() + "'");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  Logits want_long, want_short;
  want_long.values = read_npy(dir / "ref-long.npy", &want_long.rows, &want_long.cols);
  want_short.values = read_npy(dir / "ref-short.npy", &want_short.rows, &want_short.cols);

  const Comparison l = compare(want_long, ours(model, dir / "long.json", long_ids.size(), dir / "long.npy"));
  EXPECT_GT(l.max_abs, 10.0) << "near-uniform logits would hide errors";
  EXPECT_LE(l.max_diff, 2e-3 * l.max_abs) << "prefill path, max |logit| " << l.max_abs;
  EXPECT_EQ(l.top1_agreement, 1.0);

  EXPECT_LE(l.max_kl, 1e-5);

  // Int8 activations through 24 layers: on this sequence (measured) max |diff| 0.47 of 21.7, mean
  // 0.049, KL <= 0.003 nats; an error in a kernel or a layout is orders of magnitude above.
  const Comparison s = compare(want_short, ours(model, dir / "short.json", short_ids.size(), dir / "short.npy"));
  EXPECT_LE(s.max_diff, 0.04 * s.max_abs) << "GEMV path (int8 activations), max |logit| " << s.max_abs;
  EXPECT_LE(s.mean_diff, 0.005 * s.max_abs);
  EXPECT_LE(s.max_kl, 0.01);
  EXPECT_EQ(s.top1_agreement, 1.0);

  // The bf16 prefill GEMMs (X and W rounded to bf16), those the CPU has: the same bounds as the
  // int8 GEMV path (measured on this sequence with AMX: max |diff| 0.14 of 25.1, mean 0.012,
  // KL <= 0.0003). Each GEMM with its HG_PREFILL_GEMM value:
  const std::pair<cpu::PrefillGemm, std::string> gemms[] = {{cpu::PrefillGemm::Avx512Bf16, "avx512_bf16"},
                                                           {cpu::PrefillGemm::AmxBf16, "amx"}};
  for (const auto& [g, gemm] : gemms) {
    if (!cpu::prefill_gemm_supported(g)) continue;
    const Comparison a = compare(want_long, ours(model, dir / "long.json", long_ids.size(), dir / (gemm + ".npy"),
                                                 "HG_PREFILL_GEMM=" + gemm));
    EXPECT_LE(a.max_diff, 0.04 * a.max_abs) << gemm << " prefill GEMM, max |logit| " << a.max_abs;
    EXPECT_LE(a.mean_diff, 0.005 * a.max_abs) << gemm;
    EXPECT_LE(a.max_kl, 0.01) << gemm;
    EXPECT_EQ(a.top1_agreement, 1.0) << gemm;
  }
}

// llama.cpp c392e50 (its CMake Release build, GGML_NATIVE on this AVX2 Zen 3, 2 threads) on the
// same file, text and chunks:
//   llama-perplexity -m qwen2.5-coder-0.5b-instruct-q4_k_m.gguf -f data/text/moby-dick/chapter_1.txt
//                    -c 512 --chunks 4 -t 2
//   [1]149.8615,[2]148.9154,[3]110.1299,[4]93.9857   Final estimate: PPL = 93.9857 +/- 10.55164
// It scores the second half of each 512-token chunk (and adds no BOS for this model).
TEST(Qwen25, PerplexityAgreesWithLlamaPerplexityWithinTwoPercent) {
  REQUIRE_QWEN();
  RunResult r = run_hybridgen("perplexity -m '" + model + "' -f '" +
                              (source_dir() / "data/text/moby-dick/chapter_1.txt").string() +
                              "' --ctx 512 --max-windows 4 --score-second-half -t 2 --json --no-progress");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n_tokens"].get<int>(), 4 * 255);  // tokens 257..511 of each chunk, as llama.cpp scores
  EXPECT_NEAR(j["ppl"].get<double>(), 93.9857, 0.02 * 93.9857);
}

TEST(Qwen25, ChatAnswersAsQwen) {
  REQUIRE_QWEN();
  RunResult r = run_hybridgen("generate -m '" + model +
                              "' --chat -p 'What is the capital of France? Answer in one word.' -n 8 --temp 0 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Paris"), std::string::npos) << r.out;
  RunResult code =
      run_hybridgen("generate -m '" + model +
                    "' --chat -p 'Write a Python function that returns the square of x.' -n 48 --temp 0 -t 2");
  ASSERT_EQ(code.exit_code, 0) << code.err;
  EXPECT_NE(code.out.find("def "), std::string::npos) << code.out;
  EXPECT_NE(code.out.find("return"), std::string::npos) << code.out;
}

TEST(Qwen25, AliasInfoAndTrainedContext) {
  REQUIRE_QWEN();
  const fs::path cache = fs::path(model).parent_path().parent_path();
  RunResult r =
      run("HG_CACHE='" + cache.string() + "' '" + (bin_dir() / "hybridgen").string() + "' info -m qwen2.5-0.5b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("qwen2, 24 layers, d_model 896, 14 heads (2 kv, head_dim 64)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("32768 max positions, rope_theta 1e+06"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("q5_0"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hg::test
