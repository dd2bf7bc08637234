#include "attention/host_query.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"

namespace hg {

namespace {

std::vector<float> to_f32(const TensorView& t) {
  if (!t.present()) return {};
  std::vector<float> out(static_cast<size_t>(t.numel()));
  cpu::dequantize_row(t.dtype, t.data, t.numel(), 0, out.data());
  return out;
}

// Refine over every host token (--select all, --k -1) scores them all with the true q: that is the
// exact query, without a speculative pass whose every logit would be computed again.
QuerySource resolve_source(const Policy& p) {
  return p.query == QuerySource::Refine && p.takes_every_host_token() ? QuerySource::Exact : p.query;
}

}  // namespace

HostQuery::HostQuery(const Model& model, const Policy& policy)
    : spec_(model.spec), source_(resolve_source(policy)), exact_layers_(policy.exact_layers) {
  for (const auto& l : model.weights.layers) {
    std::unique_ptr<cpu::PackedWeight> packed;
    if (cpu::packing_pays(l.wq.dtype)) packed = cpu::pack_weight(l.wq.dtype, l.wq.data, spec_.q_dim(), spec_.d_model);
    layers_.push_back({l.wq, std::move(packed), to_f32(l.bq), to_f32(l.attn_norm), to_f32(l.attn_norm_bias)});
  }
  inv_freq_.resize(static_cast<size_t>(spec_.head_dim / 2));
  cpu::rope_inv_freq(spec_.head_dim, spec_.rope_theta, spec_.rope_scaling.llama3, spec_.rope_scaling.factor,
                     spec_.rope_scaling.low_freq_factor, spec_.rope_scaling.high_freq_factor,
                     spec_.rope_scaling.original_max_position,
                     spec_.rope_freq_factors.empty() ? nullptr : spec_.rope_freq_factors.data(), inv_freq_.data());
  norm_.resize(static_cast<size_t>(spec_.d_model));
}

void HostQuery::speculate(int layer, const float* x, int pos, float* q_out, ThreadPool& pool) {
  const HostLayer& hl = layers_[static_cast<size_t>(layer)];
  float* h = norm_.data();
  if (!hl.norm_b.empty())
    cpu::layernorm_rows(x, hl.norm_w.data(), hl.norm_b.data(), spec_.norm_eps, spec_.d_model, h, 0, 1);
  else
    cpu::rmsnorm_rows(x, hl.norm_w.data(), spec_.norm_eps, spec_.d_model, h, 0, 1);
  const cpu::MatmulTarget wq{hl.wq.dtype, hl.wq.data, spec_.q_dim(), q_out, spec_.q_dim(), false, hl.wq_packed.get()};
  cpu::matmul_group(pool, workspace_, &wq, 1, spec_.d_model, h, 1);
  if (!hl.bq.empty())
    for (int i = 0; i < spec_.q_dim(); ++i) q_out[i] += hl.bq[static_cast<size_t>(i)];
  if (!spec_.is_opt())
    cpu::rope_rows(q_out, &pos, spec_.n_heads, spec_.head_dim, spec_.head_dim, inv_freq_.data(),
                   spec_.rope_layout == RopeLayout::Interleaved, 0, 1);
}

void HostQuery::compare(const float* q_spec, const float* q_true, LayerStats& stats) const {
  for (int h = 0; h < spec_.n_heads; ++h) {
    double dot = 0, a2 = 0, b2 = 0;
    for (int d = 0; d < spec_.head_dim; ++d) {
      const double a = q_spec[h * spec_.head_dim + d], b = q_true[h * spec_.head_dim + d];
      dot += a * b;
      a2 += a * a;
      b2 += b * b;
    }
    stats.q_cos_sum += dot / std::sqrt(std::max(a2 * b2, 1e-30));
    ++stats.q_cos_n;
  }
}

}  // namespace hg
