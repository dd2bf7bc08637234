// `eval --task fidelity --tail N` (and `perplexity --tail N`): long-context fidelity that prefills
// each window's context once, shared by the policy and the reference where both prefill exactly,
// and runs only the last N positions token by token.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "test_expect.h"
#include "test_util.h"

namespace hg::test {
namespace {

TEST(FidelityTail, OnePrefillPerWindowForSharingPoliciesAndOneEachOtherwise) {
  const auto dir = temp_dir("fidelity_tail");
  write_ids(dir / "ids.json", random_ids(140, 5));
  const std::string base = "eval --task fidelity -m '" + tiny_model("llama-gqa").string() + "' --ids-file '" +
                           (dir / "ids.json").string() + "' --ctx 64 --kv-dtype f32 -t 2 --json ";
  const std::string run = base + "--tail 8 ";
  const auto eval = [&](const std::string& policy) {
    const RunResult r = run_hybridgen(run + "--policy " + policy);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto hybrid = eval("hybrid --window 16 --sched fixed --k 4");
  EXPECT_EQ(hybrid["path"], "tail");
  EXPECT_EQ(hybrid["tail"], 8);
  EXPECT_EQ(hybrid["windows"], 2);
  EXPECT_EQ(hybrid["n_tokens"], 16);  // 8 scored predictions in each of the two whole windows
  EXPECT_EQ(hybrid["prefills"], 2);   // the reference's, placed into the policy's engine
  EXPECT_EQ(hybrid["prefill_loads"], 2);
  EXPECT_GT(hybrid["kl_mean"].get<double>(), 0.0);
  // The tail path places full's prefill into the policy's engine: with every host token and the
  // exact query, hybrid then measures as full does (what kl_mean > 0 above cannot tell: on these
  // random tiny models attention moves the logits by ~1e-6, so any K gives a KL near 0).
  const auto exact = eval("hybrid --window 16 --sched fixed --select all --k -1 --query exact");
  EXPECT_EQ(exact["prefill_loads"], 2);
  EXPECT_EQ(exact["top1_agreement"], 1.0);
  EXPECT_NEAR(exact["kl_mean"].get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(exact["ppl"].get<double>(), exact["ref_ppl"].get<double>(), 1e-6 * exact["ppl"].get<double>());
  EXPECT_LT(exact["kl_mean"].get<double>(), hybrid["kl_mean"].get<double>());
  const auto streaming = eval("streaming --window 16");
  EXPECT_EQ(streaming["prefills"], 2);  // streaming evicts after an exact prefill: full's serves it
  EXPECT_EQ(streaming["prefill_loads"], 2);
  const auto pruning = eval("streaming --window 16 --exact-prefill false");
  EXPECT_EQ(pruning["prefills"], 4);  // dropping tokens as it prefills: its own, beside full's
  EXPECT_EQ(pruning["prefill_loads"], 0);
  const auto full = eval("full");
  EXPECT_EQ(full["top1_agreement"], 1.0);
  EXPECT_NEAR(full["kl_mean"].get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(full["ppl"].get<double>(), full["ref_ppl"].get<double>(), 1e-6 * full["ppl"].get<double>());

  // --prefill-cache: the second run of a point loads the first one's prefill and measures the same
  const std::string cache = " --prefill-cache '" + (dir / "cache").string() + "'";
  const auto cached = [&](const std::string& policy) {
    const RunResult r = run_hybridgen(run + "--policy " + policy + cache);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto h1 = cached("hybrid --window 16 --sched fixed --k 4");
  EXPECT_EQ(h1["prefills"], 2);
  EXPECT_EQ(h1["prefill_cache_hits"], 0);
  const auto h2 = cached("hybrid --window 16 --sched fixed --k 4");
  const auto q = cached("quest --window 16 --k 4");
  EXPECT_EQ(h2["prefills"], 0);
  EXPECT_EQ(h2["prefill_cache_hits"], 2);
  EXPECT_EQ(q["prefills"], 0);
  for (const char* key : {"ppl", "ref_ppl", "kl_mean", "top1_agreement"}) {
    EXPECT_EQ(h2[key], h1[key]) << key;
    EXPECT_EQ(h1[key], hybrid[key]) << key;
  }
  EXPECT_EQ(q["ref_ppl"], h1["ref_ppl"]);
  expect_one_error_line(run_hybridgen(base + "--prefill-cache '" + (dir / "cache").string() + "'"),
                        "--prefill-cache keeps the prefill of --tail's context");

  expect_one_error_line(run_hybridgen(base + "--tail 63"), "--tail 63");
  expect_one_error_line(run_hybridgen(run + "--save-logits '" + (dir / "l.npy").string() + "'"), "--save-logits");
  expect_one_error_line(run_hybridgen(run + "--score-second-half"), "--tail and --score-second-half");
}

}  // namespace
}  // namespace hg::test
