// The CPU twin of hybrid attention (the CUDA kernel's oracle) over slot tables against a direct
// reference: per-kv-head tables of scattered slots (what a pruning policy keeps), a shared table,
// lead tokens before the host's logits, rows that see only part of the table (causal), and every
// host kind (KeyValue: the fetched K rows are scored with the row's own query). Unused cache slots hold NaN, so a read
// of a token the row must not see shows up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "kernels/cpu/hybrid_attention.h"

namespace hg::test {
namespace {

struct Setup {
  int n_heads, n_kv, hd, capacity, count, stride, n_lead, K, n, pos0;
  HostPart::Kind kind;
};

void check_against_reference(const Setup& c, const std::vector<float>& out, const std::vector<int32_t>& slot,
                             const std::vector<int32_t>& pos, const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<float>& q, const std::vector<float>& logits,
                             const std::vector<float>& hk, const std::vector<float>& hv, const std::vector<float>& hout,
                             const std::vector<float>& hlse);

void check(const Setup& c, uint32_t seed) {
  SCOPED_TRACE("heads " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv) + " count " +
               std::to_string(c.count) + " stride " + std::to_string(c.stride) + " rows " + std::to_string(c.n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int rows_of_table = c.stride == 0 ? 1 : c.n_kv;
  // table rows: distinct random slots, increasing random positions (the first n_lead at 0..)
  std::vector<int32_t> slot, pos;
  for (int r = 0; r < rows_of_table; ++r) {
    std::vector<int32_t> s(static_cast<size_t>(c.capacity));
    std::iota(s.begin(), s.end(), 0);
    std::shuffle(s.begin(), s.end(), rng);
    std::vector<int32_t> p(static_cast<size_t>(c.pos0 + c.n - c.n_lead));
    std::iota(p.begin(), p.end(), c.n_lead);
    std::shuffle(p.begin(), p.end(), rng);
    p.resize(static_cast<size_t>(c.count - c.n_lead));
    std::sort(p.begin(), p.end());
    for (int j = 0; j < c.count; ++j) {
      slot.push_back(s[static_cast<size_t>(j)]);
      pos.push_back(j < c.n_lead ? j : p[static_cast<size_t>(j - c.n_lead)]);
    }
    for (int j = c.count; j < c.stride; ++j) {  // padding past the count: never read
      slot.push_back(-1);
      pos.push_back(-1);
    }
  }
  const auto row_of = [&](int g) { return static_cast<size_t>(c.stride == 0 ? 0 : g * c.stride); };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> k(static_cast<size_t>(c.n_kv) * c.capacity * c.hd, nan), v(k.size(), nan);
  for (int g = 0; g < c.n_kv; ++g)
    for (int j = 0; j < c.count; ++j)
      for (int d = 0; d < c.hd; ++d) {
        const size_t at = (static_cast<size_t>(g) * c.capacity + slot[row_of(g) + j]) * c.hd + d;
        k[at] = u(rng);
        v[at] = u(rng);
      }
  std::vector<float> q(static_cast<size_t>(c.n) * c.n_heads * c.hd);
  for (auto& x : q) x = 2.0f * u(rng);
  std::vector<float> logits(static_cast<size_t>(c.n_heads) * c.K), hv(static_cast<size_t>(c.n_kv) * c.K * c.hd);
  std::vector<float> hk(hv.size()), hout(q.size()), hlse(static_cast<size_t>(c.n) * c.n_heads);
  for (auto* vec : {&logits, &hk, &hv, &hout})
    for (auto& x : *vec) x = u(rng);
  for (auto& x : hlse) x = 3.0f * u(rng);

  HybridAttentionArgs a;
  a.q = q.data();
  std::vector<float> out(q.size());
  a.out = out.data();
  a.k_cache = k.data();
  a.v_cache = v.data();
  a.capacity = c.capacity;
  a.n = c.n;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv;
  a.head_dim = c.hd;
  a.pos0 = c.pos0;
  a.tokens = {slot.data(), pos.data(), c.count, c.stride, c.n_lead};
  a.host.kind = c.kind;
  a.host.K = c.K;
  a.host.logits = logits.data();
  a.host.k = hk.data();
  a.host.v = hv.data();
  a.host.out = hout.data();
  a.host.lse = hlse.data();
  a.scale = 0.25f;
  // Every split of a GQA group into items (one head each, ..., the whole group): the same result.
  const int group = c.n_heads / c.n_kv;
  for (int H = 1; H <= std::min(group, cpu::kMaxItemHeads); ++H) {
    if (group % H != 0) continue;
    SCOPED_TRACE("heads per item " + std::to_string(H));
    std::vector<float> scores(static_cast<size_t>(H * cpu::hybrid_attention_scores_per_head(a)));
    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    cpu::hybrid_attention_items(a, H, scores.data(), 0, static_cast<int64_t>(c.n) * (c.n_heads / H));
    check_against_reference(c, out, slot, pos, k, v, q, logits, hk, hv, hout, hlse);
  }
}

// reference: softmax over (visible device tokens, host tokens) in doubles
void check_against_reference(const Setup& c, const std::vector<float>& out, const std::vector<int32_t>& slot,
                             const std::vector<int32_t>& pos, const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<float>& q, const std::vector<float>& logits,
                             const std::vector<float>& hk, const std::vector<float>& hv, const std::vector<float>& hout,
                             const std::vector<float>& hlse) {
  const int group = c.n_heads / c.n_kv;
  const auto row_of = [&](int g) { return static_cast<size_t>(c.stride == 0 ? 0 : g * c.stride); };
  for (int i = 0; i < c.n; ++i)
    for (int h = 0; h < c.n_heads; ++h) {
      const int g = h / group;
      const float* qh = q.data() + (static_cast<size_t>(i) * c.n_heads + h) * c.hd;
      const auto score = [&](const float* key) {
        double dot = 0;
        for (int d = 0; d < c.hd; ++d) dot += static_cast<double>(qh[d]) * key[d];
        return 0.25 * dot;
      };
      std::vector<double> s;
      std::vector<const float*> rows;
      for (int j = 0; j < c.count; ++j) {
        if (pos[row_of(g) + j] > c.pos0 + i) continue;
        const size_t at = (static_cast<size_t>(g) * c.capacity + slot[row_of(g) + j]) * c.hd;
        s.push_back(score(k.data() + at));
        rows.push_back(v.data() + at);
      }
      const bool host_tokens = c.kind == HostPart::Kind::Logits || c.kind == HostPart::Kind::KeyValue;
      for (int j = 0; host_tokens && j < c.K; ++j) {
        const size_t row = (static_cast<size_t>(g) * c.K + j) * c.hd;
        s.push_back(c.kind == HostPart::Kind::Logits ? logits[static_cast<size_t>(h * c.K + j)]
                                                     : score(hk.data() + row));
        rows.push_back(hv.data() + row);
      }
      std::vector<double> o(static_cast<size_t>(c.hd), 0.0);
      double lse = -INFINITY;
      if (!s.empty()) {
        const double m = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double x : s) sum += std::exp(x - m);
        lse = m + std::log(sum);
        for (size_t t = 0; t < s.size(); ++t)
          for (int d = 0; d < c.hd; ++d) o[static_cast<size_t>(d)] += std::exp(s[t] - lse) * rows[t][d];
      }
      const size_t item = static_cast<size_t>(i) * c.n_heads + h;
      if (c.kind == HostPart::Kind::Partial) {
        const double hl = hlse[item], mm = std::max(lse, hl);
        const double wd = std::exp(lse - mm), wh = std::exp(hl - mm);
        for (int d = 0; d < c.hd; ++d)
          o[static_cast<size_t>(d)] = (wd * o[static_cast<size_t>(d)] + wh * hout[item * c.hd + d]) / (wd + wh);
      }
      for (int d = 0; d < c.hd; ++d)
        ASSERT_NEAR(out[item * c.hd + d], o[static_cast<size_t>(d)], 2e-5)
            << "row " << i << " head " << h << " d " << d;
    }
}

TEST(DeviceTokens, CpuTwinOverScatteredPerKvHeadTables) {
  uint32_t seed = 1;
  for (HostPart::Kind kind :
       {HostPart::Kind::None, HostPart::Kind::Logits, HostPart::Kind::KeyValue, HostPart::Kind::Partial})
    for (const auto& [heads, kv] : {std::pair{4, 4}, std::pair{6, 2}, std::pair{8, 1}}) {
      const bool host_tokens = kind == HostPart::Kind::Logits || kind == HostPart::Kind::KeyValue;
      check({heads, kv, 16, 50, 30, 30, 3, host_tokens ? 7 : 0, 1, 200, kind}, seed++);
      check({heads, kv, 16, 50, 30, 32, 0, host_tokens ? 1 : 0, 9, 100, kind}, seed++);
      check({heads, kv, 8, 20, 20, 0, 4, host_tokens ? 5 : 0, 5, 40, kind}, seed++);
      check({heads, kv, 8, 20, 0, 0, 0, host_tokens ? 5 : 0, 2, 40, kind}, seed++);  // no device tokens
    }
}

}  // namespace
}  // namespace hg::test
