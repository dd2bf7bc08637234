// InfiniGen's skew, channel choice and speculation (attention/selectors/infinigen_skew.h,
// infinigen_speculation.h): against tools/infinigen_reference.py (numpy's SVD), and the
// properties that make it right: A is orthogonal and diagonalizes QᵀQ, skewed scores over all
// channels are Q·Kᵀ, and the fetch count follows InfiniGen's alpha rule.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "attention/selectors/infinigen_skew.h"
#include "attention/selectors/infinigen_speculation.h"
#include "test_util.h"

namespace hg::test {
namespace {

// n rows of head_dim values with a decaying spectrum in a random basis (queries have a few
// dominant directions, which is what InfiniGen exploits), plus a mean offset.
std::vector<float> structured_rows(int n, int head_dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> mix(static_cast<size_t>(head_dim) * head_dim);
  for (float& x : mix) x = normal(rng);
  std::vector<float> out(static_cast<size_t>(n) * head_dim, 0.0f);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < head_dim; ++i) {
      const float z = normal(rng) * std::pow(0.7f, static_cast<float>(i)) + (i == 1 ? 0.5f : 0.0f);
      for (int d = 0; d < head_dim; ++d)
        out[static_cast<size_t>(r) * head_dim + d] += z * mix[static_cast<size_t>(i) * head_dim + d];
    }
  return out;
}

double dot_rows(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(InfinigenSkew, SkewIsOrthogonalAndDiagonalizesTheQueries) {
  for (int head_dim : {8, 17, 64}) {
    for (int n : {5, 200}) {  // fewer rows than head_dim too: A is still a full basis
      const auto q = structured_rows(n, head_dim, 3u + static_cast<uint32_t>(n));
      const auto a = skew_matrix(q.data(), n, head_dim);
      std::vector<double> qa(static_cast<size_t>(n) * head_dim, 0.0);
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < head_dim; ++c)
          for (int d = 0; d < head_dim; ++d)
            qa[static_cast<size_t>(r) * head_dim + c] += static_cast<double>(q[static_cast<size_t>(r) * head_dim + d]) *
                                                         a[static_cast<size_t>(d) * head_dim + c];
      auto at = [&](const auto& m, int r, int c) {
        return static_cast<double>(m[static_cast<size_t>(r) * head_dim + c]);
      };
      std::vector<double> gram(static_cast<size_t>(head_dim) * head_dim, 0.0);  // (QA)ᵀ(QA)
      for (int i = 0; i < head_dim; ++i)
        for (int j = 0; j < head_dim; ++j) {
          double aa = 0;
          for (int d = 0; d < head_dim; ++d) aa += at(a, d, i) * at(a, d, j);
          EXPECT_NEAR(aa, i == j ? 1.0 : 0.0, 1e-5) << "AᵀA, head_dim " << head_dim;
          for (int r = 0; r < n; ++r) gram[static_cast<size_t>(i) * head_dim + j] += at(qa, r, i) * at(qa, r, j);
        }
      const double top = gram[0];
      for (int i = 0; i < head_dim; ++i) {
        if (i > 0) {
          EXPECT_LE(at(gram, i, i), at(gram, i - 1, i - 1) * (1 + 1e-5) + 1e-9 * top) << "σ decreasing";
        }
        for (int j = 0; j < head_dim; ++j)
          if (i != j) {
            EXPECT_NEAR(at(gram, i, j), 0.0, 1e-5 * top) << "(QA)ᵀ(QA) is diagonal, head_dim " << head_dim;
          }
      }
    }
  }
}

TEST(InfinigenSkew, AllChannelsGiveTheExactLogits) {
  const int head_dim = 16, n = 40;
  const auto q = structured_rows(n, head_dim, 9), k = structured_rows(n, head_dim, 10);
  const PartialProjection p = make_partial_projection(q.data(), n, head_dim, head_dim);
  ASSERT_EQ(p.n_partial(), head_dim);
  std::vector<float> pq(static_cast<size_t>(head_dim)), pk(static_cast<size_t>(head_dim));
  for (int i = 0; i < n; i += 7)
    for (int j = 0; j < n; j += 5) {
      p.project(q.data() + i * head_dim, pq.data());
      p.project(k.data() + j * head_dim, pk.data());
      EXPECT_NEAR(dot_rows(pq.data(), pk.data(), head_dim),
                  dot_rows(q.data() + i * head_dim, k.data() + j * head_dim, head_dim), 1e-3);
    }
}

TEST(InfinigenSkew, ChannelCount) {
  EXPECT_EQ(partial_channel_count(64, 0.2f), 12);  // InfiniGen: int(64 · 0.2)
  EXPECT_EQ(partial_channel_count(128, 0.2f), 25);
  EXPECT_EQ(partial_channel_count(8, 0.01f), 1);
  EXPECT_EQ(partial_channel_count(8, 1.0f), 8);
}

class InfinigenReference : public ::testing::TestWithParam<int> {};

TEST_P(InfinigenReference, PartialScoresEqualNumpy) {
  const int head_dim = GetParam(), n_q = 3 * 24, n_k = 30;
  const int n_partial = partial_channel_count(head_dim, 0.25f);
  const auto q = structured_rows(n_q, head_dim, 21u + static_cast<uint32_t>(head_dim));
  const auto k = structured_rows(n_k, head_dim, 22u + static_cast<uint32_t>(head_dim));
  const PartialProjection p = make_partial_projection(q.data(), n_q, head_dim, n_partial);

  // the speculation path: partial keys in the store, partial queries dotted with them
  PartialKeys keys;
  keys.resize(1, n_k, n_partial);
  for (int t = 0; t < n_k; ++t) keys.append(k.data() + t * head_dim, {p});
  std::vector<float> pq(static_cast<size_t>(n_q) * n_partial), scores(static_cast<size_t>(n_q) * n_k);
  for (int i = 0; i < n_q; ++i) p.project(q.data() + i * head_dim, pq.data() + i * n_partial);
  // every query row as one head of a single kv-head (group n_q)
  partial_scores(keys, pq.data(), n_q, 1.0f, 0, 1, scores.data(), n_k);

  nlohmann::json j = {{"n_partial", n_partial}};
  auto rows = [&](const std::vector<float>& v, int n) {
    nlohmann::json a = nlohmann::json::array();
    for (int r = 0; r < n; ++r)
      a.push_back(std::vector<float>(v.begin() + r * head_dim, v.begin() + (r + 1) * head_dim));
    return a;
  };
  j["q"] = rows(q, n_q);
  j["k"] = rows(k, n_k);
  const auto path = temp_dir("infinigen") / ("case_" + std::to_string(head_dim) + ".json");
  std::ofstream(path) << j.dump();
  const RunResult r =
      run(python() + " '" + (source_dir() / "tools/infinigen_reference.py").string() + "' '" + path.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ref = nlohmann::json::parse(r.out);
  EXPECT_EQ(ref["channels"].get<std::vector<int32_t>>(), p.channels);
  const auto ref_scores = ref["scores"].get<std::vector<std::vector<double>>>();
  for (int i = 0; i < n_q; ++i)
    for (int t = 0; t < n_k; ++t)
      EXPECT_NEAR(scores[static_cast<size_t>(i) * n_k + t], ref_scores[static_cast<size_t>(i)][static_cast<size_t>(t)],
                  1e-4 * (1.0 + std::fabs(ref_scores[static_cast<size_t>(i)][static_cast<size_t>(t)])))
          << "row " << i << ", token " << t;
}

INSTANTIATE_TEST_SUITE_P(HeadDims, InfinigenReference, ::testing::Values(8, 20, 64));

TEST(InfinigenSpeculation, FetchCountIsTheMeanAlphaCountCappedByMaxKv) {
  // 2 heads over 5 tokens, ld 6
  const float s[2 * 6] = {5.0f, 1.5f,  4.0f,  0.9f,  4.5f,  99.f,   // > 5 - 4 = 1: 5, 1.5, 4, 4.5 -> 4
                          0.0f, -3.0f, -1.0f, -4.5f, -2.0f, 99.f};  // > 0 - 4: all but -4.5 -> 4
  EXPECT_EQ(fetch_count(s, 2, 5, 6, 4.0f, 100), 4);
  EXPECT_EQ(fetch_count(s, 2, 5, 6, 4.0f, 3), 3);
  EXPECT_EQ(fetch_count(s, 2, 5, 6, 0.75f, 100), 1);  // head 0: 5, 4.5 -> 2; head 1: 0 -> 1; ⌊1.5⌋
  EXPECT_EQ(fetch_count(s, 2, 5, 6, 1e30f, 100), 5);  // alpha huge: every token
  EXPECT_EQ(fetch_count(s, 2, 0, 6, 4.0f, 100), 0);
}

TEST(InfinigenSpeculation, PartialKeysKeepEveryKvHeadApart) {
  const int head_dim = 4;
  std::vector<PartialProjection> proj(2);
  for (int g = 0; g < 2; ++g) {
    proj[static_cast<size_t>(g)].head_dim = head_dim;
    proj[static_cast<size_t>(g)].channels = {g};
    proj[static_cast<size_t>(g)].basis = {0, 0, 0, 0};
    proj[static_cast<size_t>(g)].basis[static_cast<size_t>(g + 1)] = 1.0f;  // picks component g + 1
  }
  PartialKeys keys;
  keys.resize(2, 3, 1);
  const float k0[8] = {0, 1, 2, 3, 10, 11, 12, 13}, k1[8] = {0, 5, 6, 7, 20, 21, 22, 23};
  keys.append(k0, proj);
  keys.append(k1, proj);
  EXPECT_EQ(keys.n_tokens(), 2);
  EXPECT_FLOAT_EQ(keys.row(0, 0)[0], 1.0f);
  EXPECT_FLOAT_EQ(keys.row(0, 1)[0], 5.0f);
  EXPECT_FLOAT_EQ(keys.row(1, 0)[0], 12.0f);
  EXPECT_FLOAT_EQ(keys.row(1, 1)[0], 22.0f);
  const float pq[4] = {2.0f, -1.0f, 0.5f, 1.0f};  // 4 heads, group 2
  float scores[4 * 2];
  partial_scores(keys, pq, 4, 0.5f, 0, 2, scores, 2);
  EXPECT_FLOAT_EQ(scores[0 * 2 + 1], 0.5f * 2.0f * 5.0f);
  EXPECT_FLOAT_EQ(scores[1 * 2 + 0], 0.5f * -1.0f * 1.0f);
  EXPECT_FLOAT_EQ(scores[2 * 2 + 0], 0.5f * 0.5f * 12.0f);
  EXPECT_FLOAT_EQ(scores[3 * 2 + 1], 0.5f * 1.0f * 22.0f);
}

}  // namespace
}  // namespace hg::test
