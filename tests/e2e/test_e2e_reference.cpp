// End to end against an independent reference: tiny random HF checkpoints of every architecture
// (tools/make_tiny_model.py) run through `hybridgen perplexity --save-logits`, compared at every
// position with tools/reference.py (a numpy forward pass written from the HF model code).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include "kernels/cpu/cpu_isa.h"
#include "test_util.h"
#include "unit/test_cuda_common.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string variant;
  double tolerance;  // max abs diff of logits
};

struct Logits {
  std::vector<float> values;  // [rows, cols]
  int64_t rows = 0, cols = 0;
};

// tools/reference.py on an HF directory.
Logits reference_logits(const fs::path& hf_dir, const fs::path& ids_file, const fs::path& out) {
  RunResult r = run(python() + " '" + (source_dir() / "tools/reference.py").string() + "' '" + hf_dir.string() +
                    "' --ids-file '" + ids_file.string() + "' --out '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Logits l;
  if (r.exit_code == 0) l.values = read_npy(out, &l.rows, &l.cols);
  return l;
}

// hybridgen perplexity --save-logits over the whole id file as one window, f32 KV cache. env:
// settings for the run (none: the arithmetic a user gets, or the CpuLevel.* run's level).
Logits our_logits(const fs::path& model, const fs::path& ids_file, size_t n_ids, const fs::path& out,
                  const std::string& extra = "", const std::string& env = "") {
  RunResult r = run_hybridgen_env(env, "perplexity -m '" + model.string() + "' --ids-file '" + ids_file.string() +
                                           "' --ctx " + std::to_string(n_ids) +
                                           " --kv-dtype f32 -t 2 --json --save-logits '" + out.string() + "' " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Logits l;
  if (r.exit_code == 0) l.values = read_npy(out, &l.rows, &l.cols);
  return l;
}

// Max abs difference over every position and vocabulary entry (infinity when the shapes differ).
double max_diff(const Logits& a, const Logits& b) {
  if (a.rows != b.rows || a.cols != b.cols || a.values.empty()) return INFINITY;
  double d = 0.0;
  for (size_t i = 0; i < a.values.size(); ++i)
    d = std::max(d, static_cast<double>(std::fabs(a.values[i] - b.values[i])));
  return d;
}

double max_abs(const Logits& a) {
  double m = 0.0;
  for (float v : a.values) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// The bound of the bf16 GEMMs' logits, relative to the largest logit. Derived: rounding X and W to
// bf16 (8 significant bits) moves each product by at most 2·2^-9 of it, so each GEMM's output by
// about 2^-8 ≈ 0.4% of its scale where the terms' signs do not cancel; the random weights of these
// 2-3 layer models pass that on at up to ~3x per layer (their measured 1-3%, below), so the
// logits may move by ~3·2^-8·3 ≈ 3.5%: 5% holds it with a margin, and a layout error in a kernel
// moves the logits by their own size (100%).
constexpr double kBf16Bound = 0.05;

class ReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceTest, LogitsMatchNumpyReferenceAtEveryPosition) {
  const Case& c = GetParam();
  const fs::path model = tiny_model(c.variant);
  const fs::path dir = temp_dir("ref");
  const std::vector<int32_t> ids = random_ids(70, 7);
  write_ids(dir / "ids.json", ids);

  const Logits expect = reference_logits(model, dir / "ids.json", dir / "ref.npy");
  const Logits got = our_logits(model, dir / "ids.json", ids.size(), dir / "ours.npy");
  ASSERT_EQ(expect.rows, static_cast<int64_t>(ids.size()));
  // The default arithmetic: fp32 for the f32 and f16 checkpoints on every CPU; a bf16 checkpoint
  // takes the bf16 GEMMs where the CPU (or the CpuLevel.* run) has them, held to their bound.
  const bool bf16_gemm = c.variant.find("bf16") != std::string::npos &&
                         cpu::prefill_gemm_for(cpu::active_cpu_isa()) != cpu::PrefillGemm::Sgemm;
  const double bound = bf16_gemm ? kBf16Bound * max_abs(expect) : c.tolerance;
  EXPECT_LE(max_diff(expect, got), bound) << c.variant << ": max |logit| " << max_abs(expect);
  // The fp32 path of every checkpoint keeps its tight bound.
  const Logits fp32 = our_logits(model, dir / "ids.json", ids.size(), dir / "f32.npy", "--precision f32");
  EXPECT_LE(max_diff(expect, fp32), c.tolerance) << c.variant << " --precision f32";
  EXPECT_GT(max_abs(expect), 2.0) << "logits are near-uniform: the test would not see errors";
}


// The bf16 prefill GEMMs (kernels/cpu/gemm_bf16.h), those the CPU has: X and W rounded to bf16,
// so the logits move by the roundings: measured 0.07-0.21 on logits up to 6.7 on AMX (1-3%; the
// random weights of these models pass errors on undamped, Qwen2.5-0.5B moves by 0.14 of 25,
// tests/e2e/test_qwen25.cpp), against 2e-5 for the fp32 sgemm; a layout error in a kernel moves
// them by the logits' own size. The kernels themselves are checked exactly against a bf16-rounded
// twin in tests/unit/test_matmul.cpp.
TEST(ReferenceBf16, EveryArchitectureThroughEveryBf16PrefillGemm) {
  if (std::getenv("HG_TEST_CPU_LEVEL")) GTEST_SKIP() << "runs every level itself";
  std::vector<std::pair<cpu::PrefillGemm, std::string>> gemms;  // and its HG_PREFILL_GEMM value
  if (cpu::prefill_gemm_supported(cpu::PrefillGemm::Avx512Bf16))
    gemms.emplace_back(cpu::PrefillGemm::Avx512Bf16, "avx512_bf16");
  if (cpu::prefill_gemm_supported(cpu::PrefillGemm::AmxBf16)) gemms.emplace_back(cpu::PrefillGemm::AmxBf16, "amx");
  if (gemms.empty()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const std::vector<int32_t> ids = random_ids(70, 7);
  for (const std::string variant : {"llama-gqa", "llama3-rope", "qwen2", "opt-proj", "llama-gqa-bf16"}) {
    SCOPED_TRACE(variant);
    const fs::path model = tiny_model(variant);
    const fs::path dir = temp_dir("ref-bf16");
    write_ids(dir / "ids.json", ids);
    const Logits expect = reference_logits(model, dir / "ids.json", dir / "ref.npy");
    const Logits sgemm = our_logits(model, dir / "ids.json", ids.size(), dir / "sgemm.npy", "", "HG_PREFILL_GEMM=sgemm");
    for (const auto& [gemm, env] : gemms) {
      SCOPED_TRACE(cpu::prefill_gemm_label(gemm));
      const Logits bf16 = our_logits(model, dir / "ids.json", ids.size(), dir / (env + ".npy"), "--precision bf16",
                                     "HG_PREFILL_GEMM=" + env);
      EXPECT_LE(max_diff(expect, bf16), kBf16Bound * max_abs(expect)) << "max |logit| " << max_abs(expect);
      EXPECT_GT(max_diff(sgemm, bf16), 0.0) << "the bf16 GEMM did not run";
    }
  }
}

// Precision follows the weights (EngineOptions::precision): an f32 checkpoint computes in f32 on
// every CPU by default, bit for bit the fp32 sgemm's logits even where the bf16 GEMMs are there
// and asked for; `--precision bf16` takes them; a bf16 checkpoint takes them by default.
TEST(ReferenceBf16, PrecisionFollowsTheWeights) {
  std::string env;  // a bf16 GEMM this run can take (none at the AVX2 level, HG_CPU_ISA=avx2)
  if (cpu::active_cpu_isa() == cpu::CpuIsa::Avx512Bf16) {
    if (cpu::prefill_gemm_supported(cpu::PrefillGemm::Avx512Bf16)) env = "HG_PREFILL_GEMM=avx512_bf16";
    if (cpu::prefill_gemm_supported(cpu::PrefillGemm::AmxBf16)) env = "HG_PREFILL_GEMM=amx";
  }
  const std::vector<int32_t> ids = random_ids(70, 7);
  const fs::path dir = temp_dir("ref-precision");
  write_ids(dir / "ids.json", ids);
  const fs::path f32_model = tiny_model("llama-gqa");
  const Logits expect = reference_logits(f32_model, dir / "ids.json", dir / "ref.npy");
  const Logits sgemm = our_logits(f32_model, dir / "ids.json", ids.size(), dir / "sgemm.npy", "", "HG_PREFILL_GEMM=sgemm");
  const Logits by_default = our_logits(f32_model, dir / "ids.json", ids.size(), dir / "auto.npy", "",
                                       env.empty() ? "HG_PREFILL_GEMM=amx" : env);
  EXPECT_EQ(max_diff(sgemm, by_default), 0.0) << "an f32 checkpoint ran a bf16 GEMM by default";
  EXPECT_LE(max_diff(expect, by_default), 1e-3);
  if (env.empty()) GTEST_SKIP() << "no AVX512_BF16 at this CPU level: f32 is all it computes in";
  const Logits asked = our_logits(f32_model, dir / "ids.json", ids.size(), dir / "bf16.npy", "--precision bf16", env);
  EXPECT_GT(max_diff(sgemm, asked), 0.0) << "--precision bf16 did not take the bf16 GEMM";
  const fs::path bf16_model = tiny_model("llama-gqa-bf16");
  const Logits bf16_f32 =
      our_logits(bf16_model, dir / "ids.json", ids.size(), dir / "b-f32.npy", "--precision f32", env);
  const Logits bf16_auto = our_logits(bf16_model, dir / "ids.json", ids.size(), dir / "b-auto.npy", "", env);
  EXPECT_GT(max_diff(bf16_f32, bf16_auto), 0.0) << "a bf16 checkpoint did not take the bf16 GEMM by default";
}

// The CUDA device (the GPU, or the emulated device where there is none: tests/unit/
// test_cuda_common.h) against the numpy reference, through the CLI: fp32 checkpoints run fp32
// GEMMs and fp32 attention on the device, so they hold the CPU device's bound; a bf16 checkpoint
// takes activations rounded to bf16 into its GEMMs, held to the bf16 GEMMs' bound above.
TEST(ReferenceCuda, TinyModelsOnTheCudaDeviceMatchNumpyReference) {
  const std::string device = cuda_test_device();
  const std::vector<int32_t> ids = random_ids(70, 9);
  for (const std::string variant : {"llama-gqa", "llama3-rope", "qwen2", "opt-proj", "opt-postln", "llama-gqa-bf16"}) {
    SCOPED_TRACE(variant + " on " + device);
    const fs::path model = tiny_model(variant);
    const fs::path dir = temp_dir("ref-cuda");
    write_ids(dir / "ids.json", ids);
    const Logits expect = reference_logits(model, dir / "ids.json", dir / "ref.npy");
    const Logits got = our_logits(model, dir / "ids.json", ids.size(), dir / "cuda.npy", "--device " + device);
    const double bound = variant.find("bf16") != std::string::npos ? 0.05 * max_abs(expect) : 1e-3;
    EXPECT_LE(max_diff(expect, got), bound) << "max |logit| " << max_abs(expect);
  }
}

// Llama 3.x GGUF files carry llama3 rope scaling as rope_freqs.weight (one divisor per rotary pair)
// and Wq/Wk permuted for interleaved RoPE. One tiny llama3-scaled checkpoint, converted to GGUF the
// way llama.cpp's converter does (tools/hf_to_gguf.py), must give the numpy reference's logits on
// both paths, at every position of a context 4.7x the original_max_position_embeddings (64).
TEST(ReferenceGguf, Llama3RopeFreqsMatchHfConfigScalingAtEveryPosition) {
  const fs::path hf = tiny_model("llama3-rope");
  const fs::path dir = temp_dir("ref-gguf");
  const fs::path gguf = dir / "llama3-rope.gguf";
  RunResult conv = run(python() + " '" + (source_dir() / "tools/hf_to_gguf.py").string() + "' '" + hf.string() + "' '" +
                       gguf.string() + "'");
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  RunResult info = run_hybridgen("info -m '" + gguf.string() + "'");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("rope_freqs.weight"), std::string::npos) << info.out;

  const std::vector<int32_t> ids = random_ids(300, 11);
  write_ids(dir / "ids.json", ids);
  const Logits expect = reference_logits(hf, dir / "ids.json", dir / "ref.npy");
  ASSERT_EQ(expect.rows, static_cast<int64_t>(ids.size()));
  EXPECT_LE(max_diff(expect, our_logits(hf, dir / "ids.json", ids.size(), dir / "hf.npy")), 1e-3) << "HF path";
  EXPECT_LE(max_diff(expect, our_logits(gguf, dir / "ids.json", ids.size(), dir / "gguf.npy")), 1e-3) << "GGUF path";
  // The host attention path (keys beyond the window rotated on the device, stored on the host).
  EXPECT_LE(max_diff(expect, our_logits(gguf, dir / "ids.json", ids.size(), dir / "gguf-hybrid.npy",
                                        "--policy hybrid --window 32 --sinks 4 --k -1 --query exact")),
            1e-3)
      << "GGUF path, hybrid policy";

  // The scaling must matter here, or the test would pass with rope_freqs ignored.
  const fs::path plain = dir / "no-scaling";
  fs::create_directories(plain);
  for (const auto& e : fs::directory_iterator(hf)) fs::copy(e.path(), plain / e.path().filename());
  std::string config = read_file(plain / "config.json");
  const size_t at = config.find("\"rope_scaling\"");
  ASSERT_NE(at, std::string::npos);
  config.replace(at, config.find('}', at) + 1 - at, "\"rope_scaling\": null");
  { std::ofstream(plain / "config.json", std::ios::trunc) << config; }
  const Logits unscaled = reference_logits(plain, dir / "ids.json", dir / "ref-plain.npy");
  EXPECT_GT(max_diff(expect, unscaled), 0.1) << "llama3 scaling changes nothing at these positions";
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, ReferenceTest,
    ::testing::Values(Case{"llama-mha", 1e-3}, Case{"llama-gqa", 1e-3}, Case{"llama3-rope", 1e-3}, Case{"qwen2", 1e-3},
                      Case{"qwen2-untied", 1e-3}, Case{"opt", 1e-3}, Case{"opt-proj", 1e-3}, Case{"opt-postln", 1e-3},
                      Case{"opt-postln-proj", 1e-3}, Case{"llama-mha-sharded", 1e-3}, Case{"opt-sharded", 1e-3},
                      // bf16/f16 weights are exact in both; only fp32 rounding of the activations differs
                      Case{"llama-gqa-bf16", 2e-3}, Case{"qwen2-f16", 2e-3}),
    [](const auto& info) {
      std::string n = info.param.variant;
      for (auto& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

}  // namespace
}  // namespace hg::test
