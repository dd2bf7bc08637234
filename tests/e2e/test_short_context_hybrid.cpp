// A hybrid policy whose window (+ sinks) covers the whole context keeps every token on the
// device. That is not an error: it runs, equals `full`, and says so once in the log, in the
// engine and from generate, bench and perplexity. A context explicitly smaller than the prompt
// stays an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "attention/layer_attention.h"
#include "hybridgen/engine.h"
#include "hybridgen/model.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

// Prefill `prompt`, then decode the rest of `ids`; the logits of every step.
std::vector<float> run_engine(const Model& model, const Policy& policy, const std::vector<int32_t>& ids, int prompt,
                              std::string* description) {
  EngineOptions o;
  o.threads = 2;
  o.kv_dtype = DType::F32;
  o.ctx = static_cast<int>(ids.size());  // sized to the work, as the CLI does
  o.policy = policy;
  Engine engine(model, o);
  *description = engine.describe_attention();
  // A window that covers the context runs as `full`: no split cache, no host stage.
  if (policy.splits_kv()) {
    EXPECT_EQ(engine.attention().split_kv(), nullptr) << *description;
  }
  std::vector<float> logits(static_cast<size_t>(engine.vocab_size())), out;
  engine.prefill(0, std::span(ids.data(), static_cast<size_t>(prompt)), logits.data());
  out = logits;
  const int seq = 0;
  for (size_t i = static_cast<size_t>(prompt); i + 1 < ids.size(); ++i) {
    engine.decode(std::span(&seq, 1), std::span(&ids[i], 1), logits.data());
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

TEST(ShortContextHybrid, EnginePresetsEqualFull) {
  auto model = load_model(tiny_model("llama-gqa").string());
  const std::vector<int32_t> ids = random_ids(40, 11);
  std::string full_text;
  const auto ref = run_engine(*model, Policy{}, ids, 9, &full_text);
  for (const std::string preset : {"hybrid", "hgca", "streaming"}) {
    std::string text;
    const auto got = run_engine(*model, policy_preset(preset), ids, 9, &text);  // window 1024 > ctx 40
    EXPECT_EQ(got, ref) << preset;                                              // the same computation, bit for bit
    EXPECT_NE(text.find("cover the context of 40 tokens"), std::string::npos) << text;
  }
}

TEST(ShortContextHybrid, GenerateEqualsFullAndLogsOnce) {
  const std::string args =
      "generate -m '" + tiny_model("llama-gqa").string() + "' --ids '[5, 17, 3, 99, 42]' -n 12 --temp 0 -t 2";
  const RunResult full = run_hybridgen(args + " --policy full");
  const RunResult hybrid = run_hybridgen(args + " --policy hybrid -v");
  ASSERT_EQ(full.exit_code, 0) << full.err;
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.err;
  EXPECT_EQ(hybrid.out, full.out);
  const std::string note = "every token stays on the device";
  size_t count = 0;
  for (size_t at = hybrid.err.find(note); at != std::string::npos; at = hybrid.err.find(note, at + 1)) ++count;
  EXPECT_EQ(count, 1u) << hybrid.err;
}

TEST(ShortContextHybrid, GenerateSmolLM2TheIssueCommand) {
  if (smollm2_path().empty()) GTEST_SKIP() << hg::test::kNoSmolLM2Message;
  const std::string args = "generate -m smollm2 -p 'The capital of France is' -n 16 --temp 0 -t 2";
  const RunResult full = run_hybridgen(args);
  const RunResult hybrid = run_hybridgen(args + " --policy hybrid");
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.err;
  EXPECT_EQ(hybrid.out, full.out);
}

TEST(ShortContextHybrid, BenchRunsHybridOnAShortContext) {
  const RunResult r = run_hybridgen("bench -m '" + tiny_model("llama-gqa").string() +
                                    "' -p 512 -n 4 -r 1 -t 2 --policy full,hybrid -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u);
  int hybrid_rows = 0;
  for (const auto& row : rows) {
    if (row["policy"] != "hybrid") continue;
    ++hybrid_rows;
    EXPECT_NE(row["attention"].get<std::string>().find("every token stays on the device"), std::string::npos) << row;
  }
  EXPECT_EQ(hybrid_rows, 2);
}

TEST(ShortContextHybrid, PerplexityEqualsTheFullReference) {
  const fs::path ids = temp_dir("shortctx") / "ids.json";
  write_ids(ids, random_ids(96, 3));
  const RunResult r = run_hybridgen("perplexity -m '" + tiny_model("llama-gqa").string() + "' --ids-file '" +
                                    ids.string() + "' --ctx 48 --policy hybrid --ref full --json -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["windows"], 2);
  EXPECT_EQ(j["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(j["kl_mean"].get<double>(), 0.0);
  EXPECT_EQ(j["ppl"].get<double>(), j["ref_ppl"].get<double>());
}

TEST(ShortContextHybrid, ExplicitContextSmallerThanThePromptIsStillAnError) {
  const RunResult r = run_hybridgen("generate -m '" + tiny_model("llama-gqa").string() +
                                    "' --ids '[1, 2, 3, 4, 5, 6]' -n 2 --ctx 4 --policy hybrid");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("longer than the context (4 tokens)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hg::test
