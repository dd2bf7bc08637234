#include "attention/host_selection.h"

#include <algorithm>
#include <cmath>

#include "attention/host_ops.h"
#include "kernels/cpu/attention.h"

namespace hg {

namespace {

// Host tokens per chunk of a Post-QKᵀ scan split over the workers.
constexpr int64_t kScanGrain = 256;

// K of a plan over n_host host tokens: every one for Selection::All, K = -1 or K >= n_host.
int plan_k(const StepPlan& plan, int64_t n_host) {
  if (plan.select == Selection::All || plan.K < 0 || plan.K >= n_host) return static_cast<int>(n_host);
  return plan.K;
}

}  // namespace

HostSelection::HostSelection(const SelectorContext& c, int n_threads)
    : spec_(c.spec),
      policy_(c.policy),
      ctx_(c.ctx),
      n_seqs_(c.n_seqs),
      scale_(1.0f / std::sqrt(static_cast<float>(c.spec.head_dim))),
      post_(make_selector(Selection::Post, c.policy.predictor, c)),
      scratch_(static_cast<size_t>(n_threads)) {
  // The policy's own predictor now, when a step may use it: the first plan is Pre-QKᵀ, or the
  // feedback scheduler may switch to it. An observing predictor (h2o) then sees the Post-QKᵀ steps
  // before the switch too, so it has scores when it starts. Others when a step plan first names
  // them.
  StepPlan plan = initial_plan(policy_);
  if (policy_.sched_switches_mode() && !policy_.takes_every_host_token()) plan.select = Selection::Pre;
  if (plan.select == Selection::Pre) prepare(std::span(&plan, 1));
}

void HostSelection::prepare(std::span<const StepPlan> plans) {
  for (const StepPlan& plan : plans) {
    if (plan.select != Selection::Pre) continue;
    auto& pre = pre_[plan.predictor];
    if (pre) continue;
    pre = make_selector(Selection::Pre, plan.predictor, SelectorContext{spec_, policy_, ctx_, n_seqs_});
    if (AttentionObserver* o = pre->observer()) observers_.push_back(o);
  }
}

void HostSelection::on_host_append(int seq, int64_t before, int64_t after) {
  for (AttentionObserver* o : observers_) o->on_host_append(seq, before, after);
}

void HostSelection::reset(int seq) {
  post_->reset(seq);
  for (auto& [name, s] : pre_) s->reset(seq);
}

Selector& HostSelection::selector_for(const StepPlan& plan, bool all) {
  if (all || plan.select != Selection::Pre) return *post_;
  return *pre_.at(plan.predictor);  // set up by prepare
}

void HostSelection::select(ThreadPool& pool, int layer, int seq, const StepPlan& plan, const HostStore& host,
                           HostResult& r) {
  SelectionRequest req;
  req.seq = seq;
  req.layer = layer;
  req.k = host.k_layout(layer);
  req.q = r.q.data();
  req.n_heads = spec_.n_heads;
  req.scale = scale_;
  req.n_tokens = r.n_host = host.n_tokens();
  req.K = plan_k(plan, r.n_host);
  // a selector may choose its own K (InfiniGen's alpha rule); the plan's otherwise
  if (plan.select == Selection::Pre && r.n_host > 0)
    req.K = std::clamp<int>(selector_for(plan, false).choose_k(req, scratch_[0]), 0, static_cast<int>(r.n_host));
  const int K = r.K = req.K;
  // A fetching selector (InfiniGen) ships K and V rows even when it takes every host token; the
  // device scores them, so the merge mode does not apply and no logits are needed but observers'.
  r.fetch = plan.select == Selection::Pre && selector_for(plan, false).ships() == Shipment::KeyValue;
  const size_t row_floats = static_cast<size_t>(spec_.n_kv_heads) * K * spec_.head_dim;
  r.idx.resize(static_cast<size_t>(spec_.n_kv_heads) * K);
  r.logits.resize(static_cast<size_t>(spec_.n_heads) * K);
  r.v.resize(row_floats);
  if (r.fetch) r.k.resize(row_floats);
  const bool all = K == r.n_host;
  Selector& selector = selector_for(plan, all && !r.fetch);
  const bool lse = policy_.merge == MergeMode::Lse && !r.fetch;
  // every host token with --merge lse: the partial attention streams the store, nothing to gather
  const bool gather = !(all && lse);
  const bool observing = K > 0 && !observers_.empty();
  if (observing) r.p.resize(static_cast<size_t>(spec_.n_heads) * K);
  const SelectedTokens out{r.idx.data(), r.fetch && !observing ? nullptr : r.logits.data()};
  const KvLayout kl = host.k_layout(layer), vl = host.v_layout(layer);
  // A Post-QKᵀ scan reads every host key: split it over the workers by token ranges (a split by
  // kv-head alone leaves cores idle: 3 kv-heads on 2 cores do 2 rounds), then rank per kv-head.
  req.logits = nullptr;
  if (selector.post_qk() && !all && K > 0 && !r.fetch) {
    const int64_t n = r.n_host;
    all_logits_.resize(static_cast<size_t>(spec_.n_heads) * n);
    pool.parallel_for(
        spec_.n_kv_heads * n,
        [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e;) {
            const int g = static_cast<int>(i / n);
            const int64_t t0 = i % n, t1 = std::min(n, t0 + (e - i));
            host_logits(kl, r.q.data(), spec_.n_heads, scale_, g, g + 1, t0, t1, all_logits_.data(), n);
            i += t1 - t0;
          }
        },
        kScanGrain);
    req.logits = all_logits_.data();
  }
  // The recall rule's measurement: the predictor beside Post-QKᵀ, on the same query and K.
  auto pre = plan.measure_recall && plan.select == Selection::Post && K > 0 && !all ? pre_.find(plan.predictor)
                                                                                    : pre_.end();
  const bool measure = pre != pre_.end();
  r.recall_mass = r.recall_heads = 0;
  if (measure) {
    r.pred_idx.resize(r.idx.size());
    r.pred_logits.resize(r.logits.size());
    r.pred_mass.assign(static_cast<size_t>(spec_.n_kv_heads), 0.0);
  }
  pool.parallel_for(spec_.n_kv_heads, [&](int64_t gb, int64_t ge, int t) {
    const int g0 = static_cast<int>(gb), g1 = static_cast<int>(ge);
    SelectorScratch& sc = scratch_[static_cast<size_t>(t)];
    selector.select(req, g0, g1, out, sc);
    if (measure) {
      pre->second->select(req, g0, g1, SelectedTokens{r.pred_idx.data(), r.pred_logits.data()}, sc);
      measure_recall(r, g0, g1, sc);
    }
    if (observing) observe(seq, layer, r, g0, g1);
    if (gather) gather_rows(vl, r.idx.data(), K, g0, g1, r.v.data());
    if (r.fetch) gather_rows(kl, r.idx.data(), K, g0, g1, r.k.data());
  });
  if (measure) {
    for (double m : r.pred_mass) r.recall_mass += m;
    r.recall_heads = spec_.n_heads;
  }
  if (lse) partial(pool, layer, host, r);
}

void HostSelection::measure_recall(HostResult& r, int g_begin, int g_end, SelectorScratch& sc) const {
  const int group = spec_.n_heads / spec_.n_kv_heads, K = r.K;
  for (int g = g_begin; g < g_end; ++g) {
    // which of Post's tokens the predictor chose too (both lists are increasing)
    const int32_t* a = r.idx.data() + static_cast<size_t>(g) * K;
    const int32_t* b = r.pred_idx.data() + static_cast<size_t>(g) * K;
    sc.dims.assign(static_cast<size_t>(K), 0);
    for (int i = 0, j = 0; i < K && j < K;) {
      if (a[i] == b[j]) {
        sc.dims[static_cast<size_t>(i)] = 1;
        ++i, ++j;
      } else if (a[i] < b[j]) {
        ++i;
      } else {
        ++j;
      }
    }
    // ... weighted by the attention each head of the group gives them among Post's K
    double mass = 0;
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const float* l = r.logits.data() + static_cast<size_t>(h) * K;
      sc.p.assign(l, l + K);
      cpu::softmax_inplace(sc.p.data(), K);
      for (int i = 0; i < K; ++i) mass += sc.dims[static_cast<size_t>(i)] ? sc.p[static_cast<size_t>(i)] : 0.0f;
    }
    r.pred_mass[static_cast<size_t>(g)] = mass;
  }
}

void HostSelection::rescore(ThreadPool& pool, int layer, const HostStore& host, HostResult& r) {
  const KvLayout kl = host.k_layout(layer);
  pool.parallel_for(spec_.n_kv_heads, [&](int64_t gb, int64_t ge, int) {
    host_logits_selected(kl, r.q.data(), spec_.n_heads, scale_, r.idx.data(), r.K, static_cast<int>(gb),
                         static_cast<int>(ge), r.logits.data());
  });
  if (policy_.merge == MergeMode::Lse && !r.fetch) partial(pool, layer, host, r);
}

void HostSelection::observe(int seq, int layer, HostResult& r, int g_begin, int g_end) {
  // The selection's attention probabilities: a softmax over the selected logits of each head.
  const int group = spec_.n_heads / spec_.n_kv_heads, K = r.K;
  for (int h = g_begin * group; h < g_end * group; ++h) {
    const float* lh = r.logits.data() + static_cast<size_t>(h) * K;
    float* ph = r.p.data() + static_cast<size_t>(h) * K;
    std::copy(lh, lh + K, ph);
    cpu::softmax_inplace(ph, K);
  }
  const ObservedAttention o{.seq = seq,
                            .layer = layer,
                            .space = TokenSpace::Host,
                            .n_heads = spec_.n_heads,
                            .n_kv_heads = spec_.n_kv_heads,
                            .count = K,
                            .tokens = r.idx.data(),
                            .p = r.p.data()};
  for (AttentionObserver* s : observers_) s->observe(o, g_begin, g_end);
}

void HostSelection::partial(ThreadPool& pool, int layer, const HostStore& host, HostResult& r) {
  // --merge lse: the host's own softmax-weighted V sum and log-sum-exp per head
  r.out.resize(static_cast<size_t>(spec_.q_dim()));
  r.lse.resize(static_cast<size_t>(spec_.n_heads));
  pool.parallel_for(spec_.n_heads, [&](int64_t hb, int64_t he, int t) {
    if (r.K == r.n_host)  // every host token: no gathered rows, stream the store
      prefix_attention(host.k_layout(layer), host.v_layout(layer), r.q.data(), spec_.n_heads, scale_, r.n_host,
                       static_cast<int>(hb), static_cast<int>(he), r.out.data(), r.lse.data(),
                       scratch_[static_cast<size_t>(t)].scores);
    else
      partial_attention(r.logits.data(), r.v.data(), spec_.n_heads, spec_.n_kv_heads, r.K, spec_.head_dim,
                        static_cast<int>(hb), static_cast<int>(he), r.out.data(), r.lse.data(),
                        scratch_[static_cast<size_t>(t)].p);
  });
}

int HostSelection::planned_k(int layer, const StepPlan& plan, int64_t n_host) {
  const int K = plan_k(plan, n_host);
  if (plan.select != Selection::Pre || n_host <= 0) return K;
  return std::min<int>(selector_for(plan, false).planned_k(layer, K, n_host), static_cast<int>(n_host));
}

bool HostSelection::k_from_data(const StepPlan& plan) {
  return plan.select == Selection::Pre && selector_for(plan, false).k_from_data();
}

bool HostSelection::fetches(const StepPlan& plan) {
  return plan.select == Selection::Pre && selector_for(plan, false).ships() == Shipment::KeyValue;
}

bool HostSelection::wants_queries(int seq, int layer) const {
  return std::any_of(pre_.begin(), pre_.end(), [&](const auto& s) {
    const QueryLearner* learner = s.second->query_learner();
    return learner && learner->wants_queries(seq, layer);
  });
}

void HostSelection::learn_queries(int seq, int layer, const float* q, int n_rows) {
  for (auto& [name, s] : pre_)
    if (QueryLearner* learner = s->query_learner(); learner && learner->wants_queries(seq, layer))
      learner->on_queries(seq, layer, q, n_rows);
}

}  // namespace hg
