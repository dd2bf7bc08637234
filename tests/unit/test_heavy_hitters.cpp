// H2O's and Keyformer's score accumulation and keep rule (attention/selectors/h2o_scores.h,
// keyformer_scores.h) against tools/heavy_hitter_reference.py, an independent numpy version of
// H2O's whole-cache rule, over a prompt and many decode steps; plus hand-made cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "attention/selectors/h2o_scores.h"
#include "attention/selectors/keyformer_scores.h"
#include "kernels/cpu/gumbel_noise.h"
#include "test_util.h"

namespace hg::test {
namespace {

TEST(KeepHeavyHitters, LargestScoresStayTiesToTheRecentToken) {
  const std::vector<float> score = {0.5f, 2.0f, 1.0f, 2.0f, 0.1f, 1.0f};
  std::vector<int32_t> keep, drop, order;
  const std::vector<int32_t> cand = {0, 1, 2, 3, 4, 5};
  keep_heavy_hitters(score.data(), cand, 3, keep, drop, order);
  EXPECT_EQ(keep, (std::vector<int32_t>{1, 3, 5}));  // 2.0, 2.0, then 1.0 at 5 beats 1.0 at 2
  EXPECT_EQ(drop, (std::vector<int32_t>{0, 2, 4}));
  keep_heavy_hitters(score.data(), cand, 0, keep, drop, order);
  EXPECT_TRUE(keep.empty());
  EXPECT_EQ(drop.size(), 6u);
  keep_heavy_hitters(score.data(), std::vector<int32_t>{4, 0}, 5, keep, drop, order);  // heavy >= candidates
  EXPECT_EQ(keep, (std::vector<int32_t>{0, 4}));
  EXPECT_TRUE(drop.empty());
}

TEST(TokenScores, AddsTheGroupsProbabilitiesAtTheirPositions) {
  TokenScores s(2, 8);
  const int32_t pos[3] = {1, 4, 6};
  const float p[2 * 4] = {0.2f, 0.3f, 0.5f, 9.f, 0.6f, 0.1f, 0.3f, 9.f};  // 2 heads, ld 4
  s.add_group(1, pos, 3, p, 2, 4);
  s.add_group(1, pos, 3, p, 1, 4);
  EXPECT_FLOAT_EQ(s.head(1)[1], 0.2f + 0.6f + 0.2f);
  EXPECT_FLOAT_EQ(s.head(1)[4], 0.3f + 0.1f + 0.3f);
  EXPECT_FLOAT_EQ(s.head(1)[6], 0.5f + 0.3f + 0.5f);
  EXPECT_FLOAT_EQ(s.head(0)[1], 0.0f);
  s.forget(1, 4);
  EXPECT_FLOAT_EQ(s.head(1)[4], 0.0f);
  s.clear();
  EXPECT_FLOAT_EQ(s.head(1)[1], 0.0f);
}

TEST(Keyformer, TauRisesLinearlyOverTheGeneratedTokens) {
  EXPECT_FLOAT_EQ(keyformer_tau(1, 2, 5, 10, 21), 1.0f);   // prompt rows
  EXPECT_FLOAT_EQ(keyformer_tau(1, 2, 10, 10, 21), 1.0f);  // first generated token
  EXPECT_FLOAT_EQ(keyformer_tau(1, 2, 15, 10, 21), 1.5f);
  EXPECT_FLOAT_EQ(keyformer_tau(1, 2, 20, 10, 21), 2.0f);  // last position of the context
  EXPECT_FLOAT_EQ(keyformer_tau(1, 2, 30, 10, 21), 2.0f);
  EXPECT_FLOAT_EQ(keyformer_tau(1, 2, 3, 10, 10), 1.0f);  // nothing to generate
}

TEST(Keyformer, GumbelNoiseIsSeededAndGumbelDistributed) {
  EXPECT_EQ(gumbel_noise(7, 1, 2, 30, 4), gumbel_noise(7, 1, 2, 30, 4));
  EXPECT_NE(gumbel_noise(7, 1, 2, 30, 4), gumbel_noise(8, 1, 2, 30, 4));
  EXPECT_NE(gumbel_noise(7, 1, 2, 30, 4), gumbel_noise(7, 1, 2, 30, 5));
  EXPECT_NE(gumbel_noise(7, 1, 2, 30, 4), gumbel_noise(7, 1, 3, 30, 4));
  // Gumbel(0, 1): mean γ ≈ 0.5772, variance π²/6 ≈ 1.645
  double sum = 0, sum2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double g = gumbel_noise(3, i % 7, i % 5, i / 35, i);
    sum += g;
    sum2 += g * g;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5772, 0.02);
  EXPECT_NEAR(var, 1.6449, 0.05);
}

TEST(Keyformer, GumbelNoiseOfARowIsTheScalarNoiseAndCoversTheTails) {
  std::vector<int32_t> keys(1000);
  for (int i = 0; i < 1000; ++i) keys[static_cast<size_t>(i)] = 3 * i + 1;
  std::vector<float> row(keys.size());
  gumbel_noise_row(11, 4, 5, 2999, keys.data(), static_cast<int64_t>(keys.size()), row.data());
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(row[i], gumbel_noise(11, 4, 5, 2999, keys[i])) << i;
  // the row's noise on every ISA this CPU runs (the vectorized hashes and gathers) is the scalar
  // one, for every length's tail
  const float* table = cpu::gumbel_table();
  std::vector<float> per_isa(keys.size() + 1);  // one past: nothing is written there
  for (cpu::CpuIsa isa : test::supported_cpu_isas()) {
    for (int64_t n : {int64_t{1000}, int64_t{15}, int64_t{7}, int64_t{1}}) {
      std::fill(per_isa.begin(), per_isa.end(), -1.0f);
      cpu::gumbel_noise_span_isa(isa, false, 0x1234567890abcdefull, keys.data(), n, per_isa.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(per_isa[static_cast<size_t>(i)],
                  cpu::gumbel_of_hash(
                      table, cpu::key_hash(cpu::fold_row(0x1234567890abcdefull), keys[static_cast<size_t>(i)])))
            << cpu::cpu_isa_label(isa) << " n " << n << " key " << i;
      ASSERT_EQ(per_isa[static_cast<size_t>(n)], -1.0f) << cpu::cpu_isa_label(isa) << " wrote past " << n;
      // the adding form: x + g, with the same g
      std::vector<float> x(per_isa.size(), 0.25f);
      cpu::gumbel_noise_span_isa(isa, true, 0x1234567890abcdefull, keys.data(), n, x.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(x[static_cast<size_t>(i)], 0.25f + per_isa[static_cast<size_t>(i)])
            << cpu::cpu_isa_label(isa) << " " << i;
      ASSERT_EQ(x[static_cast<size_t>(n)], 0.25f);
    }
  }
  // the draws reach both ends of the table: g_0 = -ln(-ln 2^-17) = -2.4667 and g_65535 = 11.7835;
  // P(g > 10) is 3 quantiles of 2^16 (Gumbel's own: 1 - exp(-e^-10) = 4.54e-5)
  double lo = 0, hi = 0;
  int above10 = 0;
  const int n = 1 << 20;
  for (int i = 0; i < n; ++i) {
    const double g = gumbel_noise(5, 0, 0, i >> 10, i & 1023);
    lo = std::min(lo, g), hi = std::max(hi, g);
    above10 += g > 10.0;
  }
  EXPECT_EQ(lo, table[0]);
  EXPECT_EQ(hi, table[(1 << cpu::kGumbelTableBits) - 1]);
  EXPECT_NEAR(table[0], -2.4667, 1e-4);
  EXPECT_NEAR(table[(1 << cpu::kGumbelTableBits) - 1], 11.7835, 1e-4);
  EXPECT_NEAR(above10, n * 3.0 / 65536, 5 * std::sqrt(n * 3.0 / 65536));
}

TEST(Keyformer, GumbelQuantilesAreTheDoublePrecisionOnesAndTheirIndicesAreUniform) {
  // the table against -ln(-ln u) in double: within 2e-6 (its float logarithms are within 2 ulp)
  const float* table = cpu::gumbel_table();
  const int levels = 1 << cpu::kGumbelTableBits;
  for (int i = 0; i < levels; ++i) {
    const double u = (2.0 * i + 1) / (2.0 * levels);
    const double want = -std::log(-std::log(u));
    ASSERT_NEAR(table[i], want, 2e-6 * std::max(1.0, std::fabs(want))) << i;
    if (i > 0) {
      ASSERT_GT(table[i], table[i - 1]) << i;
    }
  }
  // the top 8 bits of a row's key hashes and of one key's hashes over rows: χ² over 256 bins
  // (255 degrees of freedom: mean 255, sd 22.6; 400 is 6.4 sd out)
  auto chi2 = [](const std::vector<int>& bins, int draws) {
    const double expect = static_cast<double>(draws) / static_cast<double>(bins.size());
    double c = 0;
    for (int b : bins) c += (b - expect) * (b - expect) / expect;
    return c;
  };
  const int draws = 1 << 18;
  std::vector<int> along_row(256), along_rows(256);
  for (int i = 0; i < draws; ++i) {
    ++along_row[cpu::key_hash(cpu::fold_row(0x0123456789abcdefull), i) >> 24];
    ++along_rows[cpu::key_hash(cpu::fold_row(cpu::mix64(static_cast<uint64_t>(i))), 17) >> 24];
  }
  EXPECT_LT(chi2(along_row, draws), 400);
  EXPECT_LT(chi2(along_rows, draws), 400);
}

TEST(Keyformer, FloatLogIsWithinTwoUlpOfLibm) {
  // every exponent, mantissas dense near 1 (where ln x is small and its relative error counts)
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  auto check = [](float x) {
    const float want = static_cast<float>(std::log(static_cast<double>(x)));
    const float got = ln_normal(x);
    const float ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
    ASSERT_LE(std::fabs(got - want), 2 * ulp) << x;
  };
  for (uint32_t e = 1; e < 255; ++e)
    for (int i = 0; i < 2000; ++i) check(std::bit_cast<float>(e << 23 | mantissa(rng)));
  for (int i = -4096; i <= 4096; ++i) check(1.0f + static_cast<float>(i) * 0x1.0p-23f);
  check(FLT_MIN);
  check(FLT_MAX);
}

TEST(Keyformer, GumbelSoftmaxOfProbabilitiesIsTheGumbelSoftmaxOfTheLogits) {
  const float logits[4] = {1.0f, -0.5f, 2.0f, 0.25f};
  const float noise[4] = {0.3f, -1.0f, 0.7f, 2.0f};
  float p[4], m = 2.0f, sum = 0;
  for (int j = 0; j < 4; ++j) sum += (p[j] = std::exp(logits[j] - m));
  for (float& x : p) x /= sum;
  float y[4];
  gumbel_softmax(p, noise, 4, 1.5f, y);
  double ref[4], rs = 0;
  for (int j = 0; j < 4; ++j) rs += (ref[j] = std::exp((logits[j] + noise[j]) / 1.5));
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(y[j], ref[j] / rs, 1e-6);
  // random rows with a few dominant tokens and probabilities down to 1e-30 (peaked rows), against
  // the same formula in double
  std::mt19937 rng(3);
  std::normal_distribution<float> z(0.0f, 6.0f);
  std::normal_distribution<float> g(0.5f, 1.3f);
  for (int row = 0; row < 50; ++row) {
    std::vector<float> lg(257), pr(257), nz(257), out(257);
    float mx = -INFINITY;
    for (float& x : lg) mx = std::max(mx, x = z(rng));
    double s = 0;
    for (size_t j = 0; j < lg.size(); ++j) s += std::exp(static_cast<double>(lg[j] - mx));
    for (size_t j = 0; j < lg.size(); ++j) {
      pr[j] = static_cast<float>(std::exp(static_cast<double>(lg[j] - mx)) / s);
      nz[j] = g(rng);
    }
    const float t = 0.5f + 0.05f * static_cast<float>(row);
    gumbel_softmax(pr.data(), nz.data(), 257, t, out.data());
    std::vector<double> want(257);
    double ws = 0, wm = -INFINITY;
    for (size_t j = 0; j < 257; ++j)
      if (pr[j] > 0) wm = std::max(wm, (std::log(static_cast<double>(pr[j])) + nz[j]) / t);
    for (size_t j = 0; j < 257; ++j)
      ws += (want[j] = pr[j] > 0 ? std::exp((std::log(static_cast<double>(pr[j])) + nz[j]) / t - wm) : 0.0);
    for (size_t j = 0; j < 257; ++j) ASSERT_NEAR(out[j], want[j] / ws, 2e-6 + 1e-5 * want[j] / ws) << row << " " << j;
  }
  const float masked[3] = {0.0f, 1.0f, 0.0f};
  gumbel_softmax(masked, noise, 3, 1.0f, y);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 0.0f);
}

struct SimCase {
  std::string mode;
  int n_tokens, prompt_len, n_heads, n_kv_heads, heavy, window;
};
void PrintTo(const SimCase& c, std::ostream* os) {
  *os << c.mode << " tokens " << c.n_tokens << " prompt " << c.prompt_len << " heads " << c.n_heads << "/"
      << c.n_kv_heads << " heavy " << c.heavy << " window " << c.window;
}

// The selectors' incremental form of the rule: per kv-head a heavy set and a window of the last
// `window` positions; a token leaving the window competes with the heavy set.
std::vector<std::vector<std::vector<int32_t>>> simulate(const SimCase& c, const std::vector<float>& logits,
                                                        const std::vector<float>& noise, float tau_init,
                                                        float tau_end) {
  const int n = c.n_tokens, group = c.n_heads / c.n_kv_heads;
  auto logit = [&](int r, int h, int j) { return logits[(static_cast<size_t>(r) * c.n_heads + h) * n + j]; };
  TokenScores scores(c.n_kv_heads, n);
  std::vector<std::vector<int32_t>> heavy(c.n_kv_heads);
  std::vector<std::deque<int32_t>> window(c.n_kv_heads);
  std::vector<int32_t> keep, drop, order;
  std::vector<float> p(static_cast<size_t>(group) * n);
  auto attend = [&](int g, int r, const std::vector<int32_t>& keys) {
    const int64_t m = static_cast<int64_t>(keys.size());
    for (int j = 0; j < group; ++j) {
      const int h = g * group + j;
      float* ph = p.data() + static_cast<size_t>(j) * n;
      float mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < m; ++i) mx = std::max(mx, logit(r, h, keys[static_cast<size_t>(i)]));
      for (int64_t i = 0; i < m; ++i) sum += (ph[i] = std::exp(logit(r, h, keys[static_cast<size_t>(i)]) - mx));
      for (int64_t i = 0; i < m; ++i) ph[i] /= sum;
      if (c.mode == "keyformer") {
        std::vector<float> nz(static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i)
          nz[static_cast<size_t>(i)] =
              noise[(static_cast<size_t>(r) * c.n_heads + h) * n + keys[static_cast<size_t>(i)]];
        gumbel_softmax(ph, nz.data(), m, keyformer_tau(tau_init, tau_end, r, c.prompt_len, n), ph);
      }
    }
    scores.add_group(g, keys.data(), m, p.data(), group, n);
  };
  auto push = [&](int g, int32_t pos) {
    window[g].push_back(pos);
    if (static_cast<int>(window[g].size()) <= c.window) return;
    std::vector<int32_t> cand = heavy[g];
    cand.push_back(window[g].front());
    window[g].pop_front();
    keep_heavy_hitters(scores.head(g), cand, c.heavy, keep, drop, order);
    heavy[g] = keep;
    for (int32_t d : drop) scores.forget(g, d);
  };
  auto kept = [&](int g) {
    std::vector<int32_t> k = heavy[g];
    k.insert(k.end(), window[g].begin(), window[g].end());
    std::sort(k.begin(), k.end());
    return k;
  };
  std::vector<std::vector<std::vector<int32_t>>> out;
  std::vector<std::vector<int32_t>> step(c.n_kv_heads);
  for (int g = 0; g < c.n_kv_heads; ++g) {
    for (int r = 0; r < c.prompt_len; ++r) {
      std::vector<int32_t> keys(static_cast<size_t>(r + 1));
      for (int j = 0; j <= r; ++j) keys[static_cast<size_t>(j)] = j;
      attend(g, r, keys);
    }
    for (int r = 0; r < c.prompt_len; ++r) push(g, r);
    step[g] = kept(g);
  }
  out.push_back(step);
  for (int t = c.prompt_len; t < n; ++t) {
    for (int g = 0; g < c.n_kv_heads; ++g) {
      std::vector<int32_t> keys = kept(g);
      keys.push_back(t);
      attend(g, t, keys);
      push(g, t);
      step[g] = kept(g);
    }
    out.push_back(step);
  }
  return out;
}

class HeavyHitterReference : public ::testing::TestWithParam<SimCase> {};

TEST_P(HeavyHitterReference, KeptTokensEqualNumpyAfterEveryStep) {
  const SimCase& c = GetParam();
  const int n = c.n_tokens;
  std::mt19937 rng(11u + static_cast<uint32_t>(c.heavy * 7 + c.window));
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(n) * c.n_heads * n), noise(logits.size());
  for (float& x : logits) x = normal(rng);
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < c.n_heads; ++h)
      for (int j = 0; j < n; ++j) noise[(static_cast<size_t>(r) * c.n_heads + h) * n + j] = gumbel_noise(5, 0, h, r, j);
  const float tau_init = 1.0f, tau_end = 2.0f;
  const auto got = simulate(c, logits, noise, tau_init, tau_end);

  nlohmann::json j = {{"n_tokens", n},        {"prompt_len", c.prompt_len},
                      {"n_heads", c.n_heads}, {"n_kv_heads", c.n_kv_heads},
                      {"heavy", c.heavy},     {"window", c.window},
                      {"mode", c.mode},       {"tau_init", tau_init},
                      {"tau_end", tau_end},   {"ctx", n}};
  auto cube = [&](const std::vector<float>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (int r = 0; r < n; ++r) {
      nlohmann::json rows = nlohmann::json::array();
      for (int h = 0; h < c.n_heads; ++h)
        rows.push_back(std::vector<float>(v.begin() + (static_cast<size_t>(r) * c.n_heads + h) * n,
                                          v.begin() + (static_cast<size_t>(r) * c.n_heads + h + 1) * n));
      a.push_back(rows);
    }
    return a;
  };
  j["logits"] = cube(logits);
  j["noise"] = cube(noise);
  const auto dir = temp_dir("heavy_hitters");
  const auto path = dir / ("case_" + c.mode + ".json");
  std::ofstream(path) << j.dump();
  const RunResult r =
      run(python() + " '" + (source_dir() / "tools/heavy_hitter_reference.py").string() + "' '" + path.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ref = nlohmann::json::parse(r.out).get<std::vector<std::vector<std::vector<int32_t>>>>();
  ASSERT_EQ(ref.size(), got.size());
  for (size_t s = 0; s < ref.size(); ++s) ASSERT_EQ(ref[s], got[s]) << c.mode << ", step " << s;
  // the budget holds and something was dropped
  for (const auto& g : got.back()) EXPECT_EQ(static_cast<int>(g.size()), std::min(n, c.heavy + c.window));
}

INSTANTIATE_TEST_SUITE_P(Cases, HeavyHitterReference,
                         ::testing::Values(SimCase{"h2o", 48, 20, 4, 2, 5, 6}, SimCase{"h2o", 40, 3, 3, 1, 4, 4},
                                           SimCase{"h2o", 36, 12, 8, 1, 0, 5}, SimCase{"keyformer", 48, 20, 4, 2, 5, 6},
                                           SimCase{"keyformer", 40, 6, 2, 2, 7, 3}),
                         [](const auto& info) {
                           const SimCase& c = info.param;
                           return c.mode + "_heavy" + std::to_string(c.heavy) + "_window" + std::to_string(c.window) +
                                  "_group" + std::to_string(c.n_heads / c.n_kv_heads);
                         });

}  // namespace
}  // namespace hg::test
