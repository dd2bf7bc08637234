#include "attention/prompt_scores.h"

#include <cmath>
#include <cstdio>
#include <numeric>

#include "attention/selectors/keyformer_scores.h"
#include "hybridgen/error.h"

namespace hg {

std::string PromptScoreSpec::name() const {
  if (kind == Kind::Attention) return "h2o";
  char tau_text[32];
  std::snprintf(tau_text, sizeof tau_text, "%.9g", static_cast<double>(tau));  // round-trips a float
  return "keyformer seed=" + std::to_string(seed) + " tau=" + tau_text;
}

PromptScoreSpec PromptScoreSpec::parse(const std::string& name) {
  PromptScoreSpec s;
  if (name == "h2o") return s;
  unsigned long long seed = 0;
  float tau = 0;
  char tail = 0;
  if (std::sscanf(name.c_str(), "keyformer seed=%llu tau=%f%c", &seed, &tau, &tail) == 2 && tau > 0 &&
      std::isfinite(tau)) {
    s.kind = Kind::Gumbel;
    s.seed = seed;
    s.tau = tau;
    if (s.name() == name) return s;
  }
  throw Error("prompt scores: '" + name + "' is not 'h2o' or 'keyformer seed=S tau=T'");
}

void PromptScorer::add_chunk(ThreadPool& pool, std::span<const PromptScoreSpec> specs, const ModelSpec& m, int layer,
                             const float* q, int n_rows, int64_t pos0, const float* k, DType k_dtype,
                             std::span<std::vector<float>> scores) {
  if (specs.empty()) return;
  begin_chunk(specs, m, layer, n_rows, pos0, k_dtype);
  compute_chunk(pool, q, k);
  end_chunk(pool, scores);
}

PromptMassSink PromptScorer::begin_chunk(std::span<const PromptScoreSpec> specs, const ModelSpec& m, int layer,
                                         int n_rows, int64_t pos0, DType k_dtype, bool bf16) {
  const int64_t n_keys = pos0 + n_rows;
  visible_.resize(static_cast<size_t>(n_rows));
  for (int i = 0; i < n_rows; ++i) visible_[static_cast<size_t>(i)] = pos0 + i + 1;
  if (static_cast<int64_t>(key_pos_.size()) < n_keys) {
    key_pos_.resize(static_cast<size_t>(n_keys));
    std::iota(key_pos_.begin(), key_pos_.end(), 0);
  }
  noise_.assign(specs.size(), Noise{});
  softmax_.assign(specs.size(), cpu::MassSoftmax{});
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].kind != PromptScoreSpec::Kind::Gumbel) continue;
    noise_[i] = Noise{specs[i].seed, layer, pos0, key_pos_.data()};
    cpu::MassSoftmax& sm = softmax_[i];
    sm.inv_tau = 1.0f / specs[i].tau;
    sm.noise_ctx = &noise_[i];
    // x[t] += Gumbel noise of (layer, head, the row's position, key t): the noise a decode step's
    // observer draws for the same pair (keyformer_scores.h)
    sm.noise = [](const void* ctx, int64_t row, int head, int64_t n, float* x) {
      const auto& nz = *static_cast<const Noise*>(ctx);
      gumbel_noise_row_add(nz.seed, nz.layer, head, nz.pos0 + row, nz.key_pos, n, x);
    };
  }
  cpu::AttentionMassArgs& a = args_;
  a = cpu::AttentionMassArgs{};
  a.ld_q = m.q_dim();
  a.n_rows = n_rows;
  a.n_heads = m.n_heads;
  a.n_kv_heads = m.n_kv_heads;
  a.head_dim = m.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(m.head_dim));
  a.ld_k = m.kv_dim();
  a.k_dtype = k_dtype;
  a.bf16 = bf16;
  a.n_visible = visible_.data();
  a.softmax = softmax_;
  n_items_ = cpu::attention_mass_items(a);
  n_keys_ = n_keys;
  const size_t spec_stride = static_cast<size_t>(n_items_ * n_keys);
  items_.resize(specs.size() * spec_stride);
  mass_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) mass_[i] = items_.data() + i * spec_stride;
  return PromptMassSink{softmax_, mass_.data(), n_keys};
}

void PromptScorer::compute_chunk(ThreadPool& pool, const float* q, const float* k) {
  args_.q = q;
  args_.k = k;
  if (scratch_.size() < static_cast<size_t>(pool.size())) scratch_.resize(static_cast<size_t>(pool.size()));
  pool.parallel_for(n_items_, [&](int64_t b, int64_t e, int thread) {
    std::vector<float*> mass(mass_.size());
    for (int64_t item = b; item < e; ++item) {
      for (size_t i = 0; i < mass_.size(); ++i) mass[i] = mass_[i] + item * n_keys_;
      cpu::attention_mass(args_, item, mass.data(), scratch_[static_cast<size_t>(thread)]);
    }
  });
}

void PromptScorer::end_chunk(ThreadPool& pool, std::span<std::vector<float>> scores) {
  // The items onto the scores in item order (a kv-head's items are every n_kv-th): the same sums
  // for any thread split.
  const cpu::AttentionMassArgs& a = args_;
  const int n_kv = a.n_kv_heads;
  const int64_t n_keys = n_keys_;
  for (size_t i = 0; i < mass_.size(); ++i) {
    std::vector<float>& out = scores[i];
    const float* spec_items = mass_[i];
    out.resize(static_cast<size_t>(n_keys * n_kv), 0.0f);
    pool.parallel_for(
        n_keys,
        [&](int64_t t0, int64_t t1, int) {
          for (int64_t item = 0; item < n_items_; ++item) {
            const int g = static_cast<int>(item % n_kv);
            const int64_t keys = std::min(t1, cpu::attention_mass_keys(a, item));
            const float* src = spec_items + item * n_keys;
            for (int64_t t = t0; t < keys; ++t) out[static_cast<size_t>(t * n_kv + g)] += src[t];
          }
        },
        256);
  }
}

}  // namespace hg
