#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/sampler.h"

namespace hg {
namespace {

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Sampler, GreedyIsArgmax) {
  SamplerOptions o;
  o.temperature = 0.0f;
  Sampler s(o, 100);
  auto logits = random_logits(100, 1);
  const int32_t expect = argmax(logits.data(), 100);
  EXPECT_EQ(s.sample(logits.data(), {}), expect);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplerOptions o;
  o.temperature = 1.5f;
  o.top_k = 1;
  Sampler s(o, 50);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    auto logits = random_logits(50, seed);
    const int32_t expect = argmax(logits.data(), 50);
    EXPECT_EQ(s.sample(logits.data(), {}), expect);
  }
}

TEST(Sampler, SameSeedSameTokens) {
  SamplerOptions o;
  o.temperature = 1.0f;
  o.seed = 99;
  Sampler a(o, 64), b(o, 64);
  for (uint32_t step = 0; step < 50; ++step) {
    auto la = random_logits(64, step), lb = la;
    EXPECT_EQ(a.sample(la.data(), {}), b.sample(lb.data(), {}));
  }
}

TEST(Sampler, TopPKeepsOnlyTheNucleus) {
  // Probabilities ~ {0.7, 0.2, 0.1·rest}: top_p 0.6 keeps only the first.
  std::vector<float> logits = {std::log(0.7f), std::log(0.2f), std::log(0.05f), std::log(0.05f)};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.min_p = 0.0f;
  o.top_p = 0.6f;
  Sampler s(o, 4);
  for (int i = 0; i < 200; ++i) {
    auto l = logits;
    EXPECT_EQ(s.sample(l.data(), {}), 0);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.4f), std::log(0.1f)};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.5f;  // keeps tokens with p >= 0.25
  Sampler s(o, 3);
  std::map<int, int> counts;
  for (int i = 0; i < 2000; ++i) {
    auto l = logits;
    counts[s.sample(l.data(), {})]++;
  }
  EXPECT_EQ(counts[2], 0);
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_GT(counts[1], 500);
}

TEST(Sampler, TemperatureFollowsTheDistribution) {
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = {0.25, 0.75}
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  Sampler s(o, 2);
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    ones += s.sample(l.data(), {}) == 1;
  }
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.02);
}

TEST(Sampler, RepeatPenaltyDemotesRecentTokens) {
  std::vector<float> logits = {2.0f, 1.9f, -1.0f};
  SamplerOptions o;
  o.temperature = 0.0f;
  o.repeat_penalty = 1.5f;
  Sampler s(o, 3);
  const std::vector<int32_t> history = {0, 0, 2};
  EXPECT_EQ(s.sample(logits.data(), history), 1);
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 1.5f);
  EXPECT_FLOAT_EQ(logits[2], -1.5f);  // negative logits are multiplied
}

}  // namespace
}  // namespace hg
