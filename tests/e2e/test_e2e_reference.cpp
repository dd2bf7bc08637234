// End to end against an independent reference: tiny random HF checkpoints of every architecture
// (tools/make_tiny_model.py) run through `hybridgen perplexity --save-logits`, compared at every
// position with tools/reference.py (a numpy forward pass written from the HF model code).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string variant;
  double tolerance;  // max abs diff of logits
};

class ReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceTest, LogitsMatchNumpyReferenceAtEveryPosition) {
  const Case& c = GetParam();
  const fs::path model = tiny_model(c.variant);
  const fs::path dir = temp_dir("ref");
  const std::vector<int32_t> ids = random_ids(70, 7);
  write_ids(dir / "ids.json", ids);

  RunResult ref = run(python() + " '" + (source_dir() / "tools/reference.py").string() + "' '" + model.string() +
                      "' --ids-file '" + (dir / "ids.json").string() + "' --out '" + (dir / "ref.npy").string() + "'");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  RunResult ours = run_hybridgen("perplexity -m '" + model.string() + "' --ids-file '" + (dir / "ids.json").string() +
                                 "' --ctx 70 --kv-dtype f32 -t 2 --json --save-logits '" + (dir / "ours.npy").string() + "'");
  ASSERT_EQ(ours.exit_code, 0) << ours.err;

  int64_t rr, rc, orow, ocol;
  const auto expect = read_npy(dir / "ref.npy", &rr, &rc);
  const auto got = read_npy(dir / "ours.npy", &orow, &ocol);
  ASSERT_EQ(rr, static_cast<int64_t>(ids.size()));
  ASSERT_EQ(orow, rr);
  ASSERT_EQ(ocol, rc);
  double max_diff = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < expect.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(expect[i] - got[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(expect[i])));
  }
  EXPECT_LE(max_diff, c.tolerance) << c.variant << ": max |logit| " << max_abs;
  EXPECT_GT(max_abs, 2.0) << "logits are near-uniform: the test would not see errors";
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
