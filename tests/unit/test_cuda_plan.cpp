// The hybrid attention kernel's launch plan (kernels/cuda/hybrid_attention.cu), host code that both
// CUDA builds compile alike, tested through the emulated build: on an H100-class GPU (132 SMs) a
// decode layer launches at least two waves of blocks from a union (window + host K) of 1K tokens
// for the model shapes the engine serves, no split shorter than 8 tokens, head subgroups that
// cover the group, and a plan that stays one block per (kv head, split) where the union is small.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/kernels.h"

namespace hg::test {
namespace {

constexpr int kH100Sms = 132;

struct Shape {
  const char* name;
  int n_heads, n_kv_heads, head_dim;
};

const Shape kShapes[] = {
    {"smollm2-135m", 9, 3, 64},  {"qwen2.5-0.5b", 14, 2, 64}, {"qwen2.5-1.5b", 12, 2, 128},
    {"qwen2.5-7b", 28, 4, 128},  {"llama-3-8b", 32, 8, 128},  {"llama-2-7b", 32, 32, 128},
    {"opt-1.3b", 32, 32, 64},
};

HybridAttentionArgs decode_args(const Shape& s, int device_tokens, int host_k) {
  HybridAttentionArgs a;
  a.n = 1;
  a.n_heads = s.n_heads;
  a.n_kv_heads = s.n_kv_heads;
  a.head_dim = s.head_dim;
  a.capacity = device_tokens;
  a.tokens.count = device_tokens;
  a.tokens.n_lead = 4;
  a.host.kind = HostPart::Kind::Logits;
  a.host.K = host_k;
  return a;
}

TEST(HybridLaunchPlan, TwoWavesOnAnH100FromOneThousandTokens) {
  for (const Shape& s : kShapes)
    for (const auto& [device, host] : {std::pair{1024, 0}, {1028, 256}, {1028, 1024}, {2052, 4096}, {1028, 30000}}) {
      SCOPED_TRACE(std::string(s.name) + " device " + std::to_string(device) + " host " + std::to_string(host));
      const HybridAttentionArgs a = decode_args(s, device, host);
      const cuda::HybridLaunch plan = cuda::hybrid_attention_plan(a, kH100Sms);
      const int group = s.n_heads / s.n_kv_heads;
      EXPECT_GE(plan.blocks(a), 2 * kH100Sms);
      EXPECT_GE((device + host) / plan.splits, 8) << "splits of at least 8 tokens";
      EXPECT_LE(plan.splits, 65535);
      EXPECT_GE(plan.sub_heads, 1);
      EXPECT_LE(plan.sub_heads, 8);
      EXPECT_EQ(plan.n_sub(a), (group + plan.sub_heads - 1) / plan.sub_heads);
    }
}

TEST(HybridLaunchPlan, KeepsWholeGroupsWhileTokenSplitsSuffice) {
  // Qwen2.5-0.5B at window 1024 + 4 sinks + K 256: 132 token splits of ~10 tokens, the group whole.
  const cuda::HybridLaunch qwen = cuda::hybrid_attention_plan(decode_args(kShapes[1], 1028, 256), kH100Sms);
  EXPECT_EQ(qwen.sub_heads, 7);
  EXPECT_EQ(qwen.splits, 132);
  // At exactly 1K tokens 128 splits of 8 are short of two waves: two subgroups of 4 and 3 heads.
  const HybridAttentionArgs a_1k = decode_args(kShapes[1], 1024, 0);
  const cuda::HybridLaunch at_1k = cuda::hybrid_attention_plan(a_1k, kH100Sms);
  EXPECT_EQ(at_1k.sub_heads, 4);
  EXPECT_EQ(at_1k.n_sub(a_1k), 2);
  EXPECT_EQ(at_1k.splits, 66);
}

TEST(HybridLaunchPlan, SmallUnionsAndPrefillRows) {
  // 40 tokens: at most 5 splits; the heads split down to one a block to add blocks.
  const cuda::HybridLaunch small = cuda::hybrid_attention_plan(decode_args(kShapes[1], 40, 0), kH100Sms);
  EXPECT_EQ(small.splits, 5);
  EXPECT_EQ(small.sub_heads, 1);
  // One token: one split.
  EXPECT_EQ(cuda::hybrid_attention_plan(decode_args(kShapes[4], 1, 0), kH100Sms).splits, 1);
  // 512 prefill rows already fill the GPU: one split, whole groups.
  HybridAttentionArgs prefill = decode_args(kShapes[4], 1024, 0);
  prefill.n = 512;
  const cuda::HybridLaunch p = cuda::hybrid_attention_plan(prefill, kH100Sms);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.sub_heads, 4);
}

}  // namespace
}  // namespace hg::test
