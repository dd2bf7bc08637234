// Tiled prefill attention (kernels/cpu/prefill_attention.h) against its scalar twin, and the twin
// against a double-precision reference: every ISA this CPU runs, f32/bf16/f16 caches in the host
// store's token-block layout, GQA groups 1-8, head_dim 64/128/odd, query tiles and key tiles
// with remainders, token blocks that cut key tiles, rows that see nothing. The attention mass of
// the prompt's keys (h2o's and keyformer's prompt scores, attention_mass) likewise: tiled against
// its twin with and without noise and a temperature, and PromptScorer the same bits on 1 and 3
// threads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attention/prompt_scores.h"
#include "hybridgen/error.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/prefill_attention.h"
#include "test_util.h"

namespace hg::cpu {
namespace {

// One layer's K or V of n_tokens tokens in token blocks of block_tokens (with a second layer's
// part between blocks, as in the host store), and the fp32 values it holds [g][t][d].
struct BlockCache {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  KvLayout layout;
};

BlockCache random_block_cache(DType dt, int n_kv, int hd, int64_t n_tokens, int64_t block_tokens, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t elem = dt == DType::F32 ? 4 : 2;
  const size_t layer_bytes = static_cast<size_t>(n_kv * block_tokens * hd) * elem;
  const int64_t n_blocks = (n_tokens + block_tokens - 1) / block_tokens;
  BlockCache c;
  c.bytes.assign(static_cast<size_t>(n_blocks) * 2 * layer_bytes + 64, 0xff);
  c.values.resize(static_cast<size_t>(n_kv * n_tokens * hd));
  c.layout = {dt, n_kv, hd, block_tokens, 2 * layer_bytes, reinterpret_cast<const std::byte*>(c.bytes.data()) + layer_bytes};
  for (int g = 0; g < n_kv; ++g)
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int d = 0; d < hd; ++d) {
        uint8_t* row = c.bytes.data() + layer_bytes + static_cast<size_t>(t / block_tokens) * 2 * layer_bytes +
                       static_cast<size_t>((g * block_tokens + t % block_tokens) * hd) * elem;
        float v = u(rng);
        if (dt == DType::F16) {
          reinterpret_cast<uint16_t*>(row)[d] = fp32_to_f16(v);
          v = f16_to_fp32(fp32_to_f16(v));
        } else if (dt == DType::BF16) {
          reinterpret_cast<uint16_t*>(row)[d] = fp32_to_bf16(v);
          v = bf16_to_fp32(fp32_to_bf16(v));
        } else {
          reinterpret_cast<float*>(row)[d] = v;
        }
        c.values[static_cast<size_t>((g * n_tokens + t) * hd + d)] = v;
      }
  return c;
}

struct Problem {
  int n_heads, n_kv, hd;
  int64_t n_rows, n_tokens, block_tokens;
  DType dt;
  BlockCache k, v;
  std::vector<float> q;
  std::vector<int64_t> visible;
  PrefillAttentionArgs args(std::vector<float>& out, std::vector<float>& lse) const {
    out.assign(static_cast<size_t>(n_rows * n_heads * hd), NAN);
    lse.assign(static_cast<size_t>(n_rows * n_heads), NAN);
    PrefillAttentionArgs a;
    a.q = q.data();
    a.ld_q = static_cast<int64_t>(n_heads) * hd;
    a.n_rows = n_rows;
    a.n_heads = n_heads;
    a.n_kv_heads = n_kv;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    a.k = k.layout;
    a.v = v.layout;
    a.n_visible = visible.data();
    a.out = out.data();
    a.ld_out = a.ld_q;
    a.lse = lse.data();
    a.ld_lse = n_heads;
    return a;
  }
};

// Causal rows like a prefill chunk: row i sees offset + i tokens (clamped to [0, n_tokens]).
Problem make_problem(DType dt, int n_heads, int n_kv, int hd, int64_t n_rows, int64_t n_tokens, int64_t block_tokens,
                     int64_t offset, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{n_heads, n_kv, hd, n_rows, n_tokens, block_tokens, dt, {}, {}, {}, {}};
  p.k = random_block_cache(dt, n_kv, hd, n_tokens, block_tokens, rng);
  p.v = random_block_cache(dt, n_kv, hd, n_tokens, block_tokens, rng);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);  // scores spread enough to test the max shift
  p.q.resize(static_cast<size_t>(n_rows * n_heads * hd));
  for (auto& x : p.q) x = u(rng);
  p.visible.resize(static_cast<size_t>(n_rows));
  for (int64_t i = 0; i < n_rows; ++i) p.visible[static_cast<size_t>(i)] = std::clamp<int64_t>(offset + i, 0, n_tokens);
  return p;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i])) {
      ASSERT_EQ(a[i], b[i]) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(a[i], b[i], tol * (1.0f + std::fabs(b[i]))) << what << " at " << i;
  }
}

// The prefill GEMM (and with it the prefill attention's products: prefill_attention_bf16.h) for
// a scope; outside one, what the CPU has (bf16 products over a bf16 cache at the AVX512_BF16 level).
class ScopedPrefillGemm {
 public:
  explicit ScopedPrefillGemm(PrefillGemm g) { override_prefill_gemm(g); }
  ~ScopedPrefillGemm() { override_prefill_gemm(std::nullopt); }
  ScopedPrefillGemm(const ScopedPrefillGemm&) = delete;
  ScopedPrefillGemm& operator=(const ScopedPrefillGemm&) = delete;
};

// fp32 products, and bf16 ones where this CPU runs them.
std::vector<PrefillGemm> bf16_product_choices() {
  std::vector<PrefillGemm> g{PrefillGemm::Sgemm};
  if (prefill_gemm_supported(PrefillGemm::Avx512Bf16)) g.push_back(PrefillGemm::Avx512Bf16);
  return g;
}

// Runs the tiled kernel with every ISA, in two item ranges with separate scratch (as two pool
// threads would), and compares with the scalar twin.
void check_against_twin(const Problem& p, const std::string& name) {
  const ScopedPrefillGemm fp32(PrefillGemm::Sgemm);  // the fp32 products the scalar twin computes
  std::vector<float> ref_out, ref_lse, out, lse;
  PrefillAttentionScratch scratch, scratch2;
  const PrefillAttentionArgs ra = p.args(ref_out, ref_lse);
  const int64_t items = prefill_attention_items(ra);
  prefill_attention_scalar(ra, 0, items, scratch);
  for (CpuIsa isa : test::supported_cpu_isas()) {
    const PrefillAttentionArgs a = p.args(out, lse);
    const int64_t mid = items / 2;
    prefill_attention_isa(isa, a, 0, mid, scratch);
    prefill_attention_isa(isa, a, mid, items, scratch2);
    const std::string what = name + " isa " + cpu_isa_label(isa);
    expect_close(out, ref_out, 2e-5f, what + " out");
    expect_close(lse, ref_lse, 2e-5f, what + " lse");
  }
}

TEST(PrefillAttention, TiledMatchesScalarTwinOverShapes) {
  struct Heads {
    int n_heads, n_kv;
  };
  uint32_t seed = 1;
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (const Heads& h : {Heads{2, 2}, Heads{4, 2}, Heads{9, 3}, Heads{8, 2}, Heads{10, 2}, Heads{8, 1}})
      for (int hd : {64, 128, 33}) {
        // 70 rows: a query-tile remainder for every group; 300 tokens in blocks of 256 and 37
        // cut key tiles at the block edges; the first rows see nothing (offset < 0).
        const int64_t block_tokens = seed % 2 ? 256 : 37;
        const Problem p = make_problem(dt, h.n_heads, h.n_kv, hd, 70, 300, block_tokens, 300 - 90, seed++);
        check_against_twin(p, std::string(dtype_name(dt)) + " heads " + std::to_string(h.n_heads) + "/" +
                                  std::to_string(h.n_kv) + " hd " + std::to_string(hd));
      }
}

TEST(PrefillAttention, RowsSeeingNothingOrEverything) {
  for (int64_t offset : {-100, -10, 0}) {
    const Problem p = make_problem(DType::BF16, 9, 3, 64, 65, 129, 64, offset, 7);
    check_against_twin(p, "offset " + std::to_string(offset));
  }
  // every row sees every token (the first chunk after a window fills the host store)
  const Problem all = make_problem(DType::F16, 6, 2, 64, 33, 513, 256, 10000, 8);
  check_against_twin(all, "all visible");
}

TEST(PrefillAttention, UnorderedVisibility) {
  Problem p = make_problem(DType::BF16, 8, 1, 128, 41, 200, 256, 0, 9);
  std::mt19937 rng(10);
  for (auto& v : p.visible) v = std::uniform_int_distribution<int64_t>(0, 200)(rng);
  check_against_twin(p, "random visibility");
}

TEST(PrefillAttention, EmptyRowGivesZeroAndMinusInfinity) {
  const Problem p = make_problem(DType::F32, 4, 2, 64, 5, 10, 256, -100, 11);
  std::vector<float> out, lse;
  PrefillAttentionScratch scratch;
  const PrefillAttentionArgs a = p.args(out, lse);
  prefill_attention(a, 0, prefill_attention_items(a), scratch);
  for (float x : out) EXPECT_EQ(x, 0.0f);
  for (float x : lse) EXPECT_EQ(x, -INFINITY);
}

TEST(PrefillAttention, ScalarTwinMatchesDoubleReference) {
  const Problem p = make_problem(DType::BF16, 6, 2, 33, 9, 40, 16, 30, 12);
  std::vector<float> out, lse;
  PrefillAttentionScratch scratch;
  const PrefillAttentionArgs a = p.args(out, lse);
  prefill_attention_scalar(a, 0, prefill_attention_items(a), scratch);
  const int group = p.n_heads / p.n_kv;
  for (int64_t i = 0; i < p.n_rows; ++i)
    for (int h = 0; h < p.n_heads; ++h) {
      const int g = h / group;
      const int64_t n = p.visible[static_cast<size_t>(i)];
      std::vector<double> s(static_cast<size_t>(n));
      double mx = -INFINITY;
      for (int64_t t = 0; t < n; ++t) {
        double dot = 0;
        for (int d = 0; d < p.hd; ++d)
          dot += static_cast<double>(p.q[static_cast<size_t>((i * p.n_heads + h) * p.hd + d)]) *
                 p.k.values[static_cast<size_t>((g * p.n_tokens + t) * p.hd + d)];
        s[static_cast<size_t>(t)] = dot * a.scale;
        mx = std::max(mx, s[static_cast<size_t>(t)]);
      }
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - mx));
      EXPECT_NEAR(lse[static_cast<size_t>(i * p.n_heads + h)], mx + std::log(sum), 1e-5);
      for (int d = 0; d < p.hd; ++d) {
        double o = 0;
        for (int64_t t = 0; t < n; ++t)
          o += s[static_cast<size_t>(t)] / sum * p.v.values[static_cast<size_t>((g * p.n_tokens + t) * p.hd + d)];
        EXPECT_NEAR(out[static_cast<size_t>((i * p.n_heads + h) * p.hd + d)], o, 1e-5);
      }
    }
}

// The bf16 products (prefill_attention_bf16.h) against a double reference that multiplies what
// they multiply: the scaled queries rounded to bf16, the cache's bf16 keys and values. What is left
// is P's rounding to bf16 before P·V, at most 2^-9 of each weight: |out - ref| <= 2^-9 max|v|
// (values in [-1, 1] here), and far less on average, as the roundings are independent; lse sees
// no rounding but fp32 sums. A wrong pairing of keys and weights moves outputs by the weights'
// size: `spread` makes some softmaxes peaked (scores up to ±20), where that is O(1).
void check_bf16_against_reference(const Problem& p, const std::string& name) {
  std::vector<float> out, lse;
  PrefillAttentionScratch scratch, scratch2;
  const PrefillAttentionArgs a = p.args(out, lse);
  const int64_t items = prefill_attention_items(a);
  prefill_attention_isa(CpuIsa::Avx512Bf16, a, 0, items / 2, scratch);
  prefill_attention_isa(CpuIsa::Avx512Bf16, a, items / 2, items, scratch2);
  const int group = p.n_heads / p.n_kv;
  double err_sum = 0, worst = 0;
  int64_t n_out = 0;
  for (int64_t i = 0; i < p.n_rows; ++i)
    for (int h = 0; h < p.n_heads; ++h) {
      const int g = h / group;
      const int64_t n = p.visible[static_cast<size_t>(i)];
      const size_t o0 = static_cast<size_t>((i * p.n_heads + h) * p.hd);
      if (n == 0) {
        EXPECT_EQ(lse[static_cast<size_t>(i * p.n_heads + h)], -INFINITY) << name;
        continue;
      }
      std::vector<double> s(static_cast<size_t>(n));
      double mx = -INFINITY;
      for (int64_t t = 0; t < n; ++t) {
        double dot = 0;
        for (int d = 0; d < p.hd; ++d)
          dot += static_cast<double>(bf16_to_fp32(fp32_to_bf16(p.q[o0 + static_cast<size_t>(d)] * a.scale))) *
                 p.k.values[static_cast<size_t>((g * p.n_tokens + t) * p.hd + d)];
        mx = std::max(mx, s[static_cast<size_t>(t)] = dot);
      }
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - mx));
      ASSERT_NEAR(lse[static_cast<size_t>(i * p.n_heads + h)], mx + std::log(sum), 2e-5 * (1 + std::fabs(mx)))
          << name << " row " << i << " head " << h;
      for (int d = 0; d < p.hd; ++d) {
        double o = 0;
        for (int64_t t = 0; t < n; ++t)
          o += s[static_cast<size_t>(t)] / sum * p.v.values[static_cast<size_t>((g * p.n_tokens + t) * p.hd + d)];
        const double err = std::fabs(out[o0 + static_cast<size_t>(d)] - o);
        ASSERT_LE(err, 0.002 + 1e-5) << name << " row " << i << " head " << h << " dim " << d;
        err_sum += err;
        worst = std::max(worst, err);
        ++n_out;
      }
    }
  if (n_out > 0) {
    EXPECT_LT(err_sum / static_cast<double>(n_out), 2e-4) << name << " (worst " << worst << ")";
  }
}

TEST(PrefillAttentionBf16, MatchesReferenceWithRoundedQueries) {
  if (!prefill_gemm_supported(PrefillGemm::Avx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const ScopedPrefillGemm products(PrefillGemm::Avx512Bf16);
  struct Heads {
    int n_heads, n_kv;
  };
  uint32_t seed = 40;
  for (const Heads& h : {Heads{2, 2}, Heads{9, 3}, Heads{14, 2}, Heads{8, 1}})
    for (int hd : {64, 128})
      for (float spread : {1.0f, 8.0f}) {
        // key tiles cut at token blocks of 37 (tiles of 37, 74 keys: panels of fewer than 32, P
        // padded to 64 or 96 columns) or whole in blocks of 256; rows seeing 0 to 299 keys
        const int64_t block_tokens = seed % 2 ? 256 : 37;
        Problem p =
            make_problem(DType::BF16, h.n_heads, h.n_kv, hd, 70, 300, block_tokens, 300 - 69 - seed % 3 * 100, seed);
        ++seed;
        for (float& x : p.q) x *= spread;
        check_bf16_against_reference(p, "heads " + std::to_string(h.n_heads) + "/" + std::to_string(h.n_kv) + " hd " +
                                            std::to_string(hd) + " spread " + std::to_string(spread));
      }
  Problem uneven = make_problem(DType::BF16, 8, 1, 64, 41, 200, 256, 0, 9);
  std::mt19937 rng(10);
  for (auto& v : uneven.visible) v = std::uniform_int_distribution<int64_t>(0, 200)(rng);
  check_bf16_against_reference(uneven, "random visibility");
}

TEST(PrefillAttentionBf16, EqualWeightsAverageEveryValue) {
  // q = 0: every score is 0 and every weight exactly 1 in bf16, so out is the mean of the values a
  // row sees to fp32's sums: a key dropped, doubled, or a padding key let in is far outside 1e-5
  if (!prefill_gemm_supported(PrefillGemm::Avx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const ScopedPrefillGemm products(PrefillGemm::Avx512Bf16);
  for (int64_t block_tokens : {37, 256}) {
    Problem p = make_problem(DType::BF16, 6, 2, 64, 70, 300, block_tokens, 300 - 69, 21);
    std::fill(p.q.begin(), p.q.end(), 0.0f);
    std::vector<float> out, lse;
    PrefillAttentionScratch scratch;
    const PrefillAttentionArgs a = p.args(out, lse);
    prefill_attention_isa(CpuIsa::Avx512Bf16, a, 0, prefill_attention_items(a), scratch);
    for (int64_t i = 0; i < p.n_rows; ++i)
      for (int h = 0; h < p.n_heads; ++h) {
        const int g = h / (p.n_heads / p.n_kv);
        const int64_t n = p.visible[static_cast<size_t>(i)];
        EXPECT_NEAR(lse[static_cast<size_t>(i * p.n_heads + h)], std::log(static_cast<double>(n)), 1e-5);
        for (int d = 0; d < p.hd; ++d) {
          double mean = 0;
          for (int64_t t = 0; t < n; ++t) mean += p.v.values[static_cast<size_t>((g * p.n_tokens + t) * p.hd + d)];
          mean /= static_cast<double>(n);
          ASSERT_NEAR(out[static_cast<size_t>((i * p.n_heads + h) * p.hd + d)], mean, 1e-5)
              << "blocks of " << block_tokens << ", row " << i << ", head " << h << ", dim " << d;
        }
      }
  }
}

TEST(PrefillAttentionBf16, OtherCachesAndHeadDimsKeepTheFp32Products) {
  // bf16 products need bf16 keys (for S) or values (for P·V) and head_dim a multiple of 32: an f16
  // or f32 cache, or head_dim 33, gets the sgemm path's bits with bf16 products asked for
  if (!prefill_gemm_supported(PrefillGemm::Avx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  struct Case {
    DType dt;
    int hd;
  };
  for (const Case& c : {Case{DType::F16, 64}, Case{DType::F32, 64}, Case{DType::BF16, 33}}) {
    const Problem p = make_problem(c.dt, 9, 3, c.hd, 70, 300, 37, 231, 31);
    std::vector<std::vector<float>> outs, lses;
    for (PrefillGemm g : {PrefillGemm::Sgemm, PrefillGemm::Avx512Bf16}) {
      const ScopedPrefillGemm products(g);
      std::vector<float>& out = outs.emplace_back();
      std::vector<float>& lse = lses.emplace_back();
      PrefillAttentionScratch scratch;
      const PrefillAttentionArgs a = p.args(out, lse);
      prefill_attention_isa(CpuIsa::Avx512Bf16, a, 0, prefill_attention_items(a), scratch);
    }
    EXPECT_EQ(outs[0], outs[1]) << dtype_name(c.dt) << " hd " << c.hd;
    EXPECT_EQ(lses[0], lses[1]) << dtype_name(c.dt) << " hd " << c.hd;
  }
}

// Row-major fp32 keys [n_tokens][n_kv * hd] (the forward pass's layout), queries and causal
// visibility from position pos0: one prefill chunk's attention mass problem.
struct MassProblem {
  int n_heads, n_kv, hd;
  int64_t n_rows, pos0;
  std::vector<float> q, k;
  std::vector<int64_t> visible;
  std::vector<MassSoftmax> softmax{MassSoftmax{}};
  AttentionMassArgs args() const {
    AttentionMassArgs a;
    a.q = q.data();
    a.ld_q = static_cast<int64_t>(n_heads) * hd;
    a.n_rows = n_rows;
    a.n_heads = n_heads;
    a.n_kv_heads = n_kv;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    a.k = k.data();
    a.ld_k = static_cast<int64_t>(n_kv) * hd;
    a.n_visible = visible.data();
    a.softmax = softmax;
    return a;
  }
};

// A noisy softmax with a temperature, as Keyformer's (the noise a smooth function of row, head and key).
MassSoftmax noisy_softmax(float tau) {
  MassSoftmax sm;
  sm.inv_tau = 1.0f / tau;
  sm.noise = [](const void*, int64_t row, int head, int64_t n, float* x) {
    for (int64_t t = 0; t < n; ++t) x[t] += 0.37f * std::sin(static_cast<float>(row * 31 + head * 7 + t));
  };
  return sm;
}

// Each item's sums of every softmax of the call: [item][softmax][keys].
std::vector<std::vector<std::vector<float>>> item_masses(const AttentionMassArgs& a, CpuIsa isa) {
  std::vector<std::vector<std::vector<float>>> out;
  AttentionMassScratch scratch;
  for (int64_t item = 0; item < attention_mass_items(a); ++item) {
    auto& sums = out.emplace_back(a.softmax.size(),
                                  std::vector<float>(static_cast<size_t>(attention_mass_keys(a, item)), -1.0f));
    std::vector<float*> mass;
    for (auto& v : sums) mass.push_back(v.data());
    attention_mass_isa(isa, a, item, mass.data(), scratch);
  }
  return out;
}

MassProblem mass_problem(int n_heads, int n_kv, int hd, int64_t n_rows, int64_t pos0, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  MassProblem p{n_heads, n_kv, hd, n_rows, pos0, {}, {}, {}};
  p.q.resize(static_cast<size_t>(n_rows * n_heads * hd));
  p.k.resize(static_cast<size_t>((pos0 + n_rows) * n_kv * hd));
  for (auto& x : p.q) x = u(rng);
  for (auto& x : p.k) x = u(rng);
  for (int64_t i = 0; i < n_rows; ++i) p.visible.push_back(pos0 + i + 1);
  return p;
}

TEST(AttentionMass, TiledMatchesScalarTwinOverShapes) {
  struct Shape {
    int n_heads, n_kv, hd;
    int64_t n_rows, pos0;
  };
  for (const Shape& sh : {Shape{4, 4, 64, 5, 0}, Shape{14, 2, 64, 70, 300}, Shape{9, 3, 33, 130, 17},
                          Shape{8, 1, 128, 64, 0}, Shape{6, 2, 16, 1, 999}})
    for (int variant = 0; variant < 2; ++variant) {
      MassProblem p = mass_problem(sh.n_heads, sh.n_kv, sh.hd, sh.n_rows, sh.pos0, 7u + static_cast<uint32_t>(sh.hd));
      const bool noisy = variant == 1;
      if (noisy) p.softmax = {noisy_softmax(0.7f)};
      const AttentionMassArgs a = p.args();
      const int64_t items = attention_mass_items(a);
      const std::string what = std::to_string(sh.n_heads) + "/" + std::to_string(sh.n_kv) + " heads, hd " +
                               std::to_string(sh.hd) + ", rows " + std::to_string(sh.n_rows) + " at " +
                               std::to_string(sh.pos0) + (noisy ? ", noise and tau" : "");
      for (int64_t item = 0; item < items; ++item) {
        const int64_t keys = attention_mass_keys(a, item);
        std::vector<float> ref(static_cast<size_t>(keys)), got(static_cast<size_t>(keys), -1.0f);
        float* ref_out = ref.data();
        float* got_out = got.data();
        attention_mass_scalar(a, item, &ref_out);
        double total = 0;
        for (float x : ref) total += x;
        // every (row, head) of the item contributes a softmax that sums to 1
        const int group = sh.n_heads / sh.n_kv;
        const int64_t tile = prefill_query_tile_rows(group);
        const int64_t rows = std::min(tile, sh.n_rows - item / sh.n_kv * tile);
        EXPECT_NEAR(total, static_cast<double>(rows * group), 1e-4 * rows * group) << what;
        for (CpuIsa isa : test::supported_cpu_isas()) {
          AttentionMassScratch scratch;
          attention_mass_isa(isa, a, item, &got_out, scratch);
          expect_close(got, ref, 2e-5f, what + ", item " + std::to_string(item) + ", isa " + cpu_isa_label(isa));
        }
      }
    }
}

TEST(AttentionMass, Bf16ScoresMatchTheTwin) {
  // Over bf16 keys with bf16 products on, the scores' Q·Kᵀ runs in bf16 (prefill_attention_bf16.h).
  // Queries and keys bf16 values and head_dim 64 or 256 (scale 1/8, 1/16): the rounding of the
  // scaled queries is exact, and the sums match the twin's to fp32 order
  if (!prefill_gemm_supported(PrefillGemm::Avx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const ScopedPrefillGemm products(PrefillGemm::Avx512Bf16);
  for (int hd : {64, 256}) {
    MassProblem p = mass_problem(14, 2, hd, 70, 300, 3u + static_cast<uint32_t>(hd));
    for (auto* v : {&p.q, &p.k})
      for (float& x : *v) x = bf16_to_fp32(fp32_to_bf16(x));
    p.softmax = {MassSoftmax{}, noisy_softmax(0.7f)};
    AttentionMassArgs a = p.args();
    a.k_dtype = DType::BF16;
    const auto got = item_masses(a, CpuIsa::Avx512Bf16);
    for (int64_t item = 0; item < attention_mass_items(a); ++item) {
      const int64_t keys = attention_mass_keys(a, item);
      std::vector<std::vector<float>> ref(p.softmax.size(), std::vector<float>(static_cast<size_t>(keys)));
      std::vector<float*> out;
      for (auto& v : ref) out.push_back(v.data());
      attention_mass_scalar(a, item, out.data());
      for (size_t v = 0; v < ref.size(); ++v)
        expect_close(got[static_cast<size_t>(item)][v], ref[v], 2e-5f,
                     "hd " + std::to_string(hd) + ", softmax " + std::to_string(v) + ", item " + std::to_string(item));
    }
  }
}

TEST(AttentionMass, SoftmaxesOfOneCallGiveTheBitsOfEachAlone) {
  // h2o's plain softmax and two Keyformer-like ones share one Q·Kᵀ; each one's sums are those of a
  // call of it alone, on every ISA, and the scalar twin's within its tolerance
  MassProblem p = mass_problem(14, 2, 64, 90, 200, 5);
  const std::vector<MassSoftmax> each{MassSoftmax{}, noisy_softmax(0.7f), noisy_softmax(1.3f)};
  p.softmax = each;
  const AttentionMassArgs fused = p.args();
  for (CpuIsa isa : test::supported_cpu_isas()) {
    const auto together = item_masses(fused, isa);
    for (size_t v = 0; v < each.size(); ++v) {
      AttentionMassArgs alone = fused;
      alone.softmax = std::span<const MassSoftmax>(&each[v], 1);
      const auto by_itself = item_masses(alone, isa);
      ASSERT_EQ(together.size(), by_itself.size());
      for (size_t item = 0; item < together.size(); ++item)
        EXPECT_EQ(together[item][v], by_itself[item][0])
            << "softmax " << v << ", item " << item << ", isa " << cpu_isa_label(isa);
    }
  }
  for (int64_t item = 0; item < attention_mass_items(fused); ++item) {
    const int64_t keys = attention_mass_keys(fused, item);
    std::vector<std::vector<float>> ref(each.size(), std::vector<float>(static_cast<size_t>(keys)));
    std::vector<float*> out;
    for (auto& v : ref) out.push_back(v.data());
    attention_mass_scalar(fused, item, out.data());
    const auto got = item_masses(fused, active_cpu_isa());
    for (size_t v = 0; v < each.size(); ++v)
      expect_close(got[static_cast<size_t>(item)][v], ref[v], 2e-5f,
                   "softmax " + std::to_string(v) + ", item " + std::to_string(item));
  }
}

TEST(AttentionMass, PrefillAttentionKeepsItsScoresForThem) {
  // With the mass fields set, the tiled prefill gives the prompt scores of its rows from its own
  // score tiles: the bits attention_mass gives over the keys its cache holds (f32, or bf16 rounded),
  // on every ISA, while its output and lse keep their bits; with its products in fp32 and, on a
  // CPU with AVX512_BF16, in bf16 (the Q·Kᵀ of both in bf16 over a bf16 cache)
  for (const PrefillGemm gemm : bf16_product_choices()) {
    const ScopedPrefillGemm products(gemm);
    const std::vector<MassSoftmax> softmax{MassSoftmax{}, noisy_softmax(0.7f)};
    struct Shape {
      int n_heads, n_kv, hd;
      int64_t n_rows, n_tokens, block_tokens, offset;
    };
    for (DType dt : {DType::F32, DType::BF16})
      for (const Shape& sh :
           {Shape{14, 2, 64, 70, 370, 4096, 301}, Shape{9, 3, 33, 130, 150, 48, 21}, Shape{4, 4, 16, 5, 5, 4096, 0}}) {
        const Problem p = make_problem(dt, sh.n_heads, sh.n_kv, sh.hd, sh.n_rows, sh.n_tokens, sh.block_tokens,
                                       sh.offset, 11u + static_cast<uint32_t>(sh.hd));
        const std::string what = std::string(dtype_name(dt)) + ", " + std::to_string(sh.n_heads) + "/" +
                                 std::to_string(sh.n_kv) + " heads, hd " + std::to_string(sh.hd) + ", rows " +
                                 std::to_string(sh.n_rows) + " at " + std::to_string(sh.offset);
        // the same problem for attention_mass: the cache's values as the forward pass's key rows
        MassProblem m{sh.n_heads, sh.n_kv, sh.hd, sh.n_rows, 0, p.q, {}, p.visible, softmax};
        m.k.resize(static_cast<size_t>(sh.n_tokens * sh.n_kv * sh.hd));
        for (int g = 0; g < sh.n_kv; ++g)
          for (int64_t t = 0; t < sh.n_tokens; ++t)
            for (int d = 0; d < sh.hd; ++d)
              m.k[static_cast<size_t>((t * sh.n_kv + g) * sh.hd + d)] =
                  p.k.values[static_cast<size_t>((g * sh.n_tokens + t) * sh.hd + d)];
        AttentionMassArgs ma = m.args();
        ma.k_dtype = dt;
        for (CpuIsa isa : test::supported_cpu_isas()) {
          std::vector<float> plain_out, plain_lse, out, lse;
          PrefillAttentionScratch scratch;
          const PrefillAttentionArgs plain = p.args(plain_out, plain_lse);
          const int64_t items = prefill_attention_items(plain);
          prefill_attention_isa(isa, plain, 0, items, scratch);
          PrefillAttentionArgs a = p.args(out, lse);
          std::vector<std::vector<float>> mass(softmax.size(),
                                               std::vector<float>(static_cast<size_t>(items * sh.n_tokens), -1.0f));
          std::vector<float*> bases;
          for (auto& v : mass) bases.push_back(v.data());
          a.mass_softmax = softmax;
          a.mass = bases.data();
          a.ld_mass = sh.n_tokens;
          prefill_attention_isa(isa, a, 0, items, scratch);
          EXPECT_EQ(out, plain_out) << what;
          EXPECT_EQ(lse, plain_lse) << what;
          const auto want = item_masses(ma, isa);
          ASSERT_EQ(static_cast<int64_t>(want.size()), items);
          for (int64_t item = 0; item < items; ++item)
            for (size_t v = 0; v < softmax.size(); ++v) {
              const auto& w = want[static_cast<size_t>(item)][v];
              const std::vector<float> got(mass[v].begin() + item * sh.n_tokens,
                                           mass[v].begin() + item * sh.n_tokens + static_cast<int64_t>(w.size()));
              EXPECT_EQ(got, w) << what << ", item " << item << ", softmax " << v << ", isa " << cpu_isa_label(isa)
                                << ", products " << prefill_gemm_label(gemm);
            }
        }
      }
  }
}

TEST(AttentionMass, PromptScorerGivesTheSameBitsOnAnyPool) {
  ModelSpec m;
  m.n_heads = 14;
  m.n_kv_heads = 2;
  m.head_dim = 64;
  const MassProblem p = mass_problem(14, 2, 64, 200, 150, 99);
  const std::vector<std::string> names{"h2o", "keyformer seed=3 tau=1.5"};
  std::vector<PromptScoreSpec> specs;
  for (const std::string& name : names) {
    specs.push_back(PromptScoreSpec::parse(name));
    EXPECT_EQ(specs.back().name(), name);
  }
  // the earlier chunks' sums are 0.5; returns the specs' scores after the chunk
  auto score = [&](std::span<const PromptScoreSpec> these, int threads) {
    ThreadPool pool(threads);
    PromptScorer scorer;
    std::vector<std::vector<float>> s(these.size(),
                                      std::vector<float>(static_cast<size_t>(p.pos0 * m.n_kv_heads), 0.5f));
    scorer.add_chunk(pool, these, m, 4, p.q.data(), static_cast<int>(p.n_rows), p.pos0, p.k.data(), DType::F32, s);
    return s;
  };
  const auto together = score(specs, 3);
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<std::vector<float>> alone;
    for (int threads : {1, 3}) alone.push_back(score(std::span(&specs[i], 1), threads)[0]);
    ASSERT_EQ(alone[0].size(), static_cast<size_t>((p.pos0 + p.n_rows) * m.n_kv_heads));
    EXPECT_EQ(alone[0], alone[1]) << names[i] << ": 1 and 3 threads";
    EXPECT_EQ(together[i], alone[0]) << names[i] << ": with the other spec and alone";
    double total = 0;
    for (float x : alone[0]) total += x;
    EXPECT_NEAR(total, 0.5 * p.pos0 * m.n_kv_heads + static_cast<double>(p.n_rows) * m.n_heads, 1e-3 * total);
  }
  // two temperatures that differ only past %g's 6 digits get names of their own
  PromptScoreSpec fine;
  fine.kind = PromptScoreSpec::Kind::Gumbel;
  fine.tau = 0.12345671f;
  EXPECT_EQ(PromptScoreSpec::parse(fine.name()).tau, fine.tau);
  EXPECT_THROW(PromptScoreSpec::parse("keyformer seed=3"), Error);
  EXPECT_THROW(PromptScoreSpec::parse("h2o "), Error);
}

}  // namespace
}  // namespace hg::cpu
