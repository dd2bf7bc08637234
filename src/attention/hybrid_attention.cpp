#include "attention/hybrid_attention.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "hybridgen/error.h"
#include "kv/memory_plan.h"
#include "mem/report.h"

namespace hg {

namespace {

// Calls f(first, end) for each run of rows of one sequence (rows of a sequence are contiguous).
template <typename F>
void for_each_sequence(const std::vector<TokenRow>& rows, F&& f) {
  const int n = static_cast<int>(rows.size());
  for (int i = 0; i < n;) {
    int j = i + 1;
    while (j < n && rows[static_cast<size_t>(j)].seq == rows[static_cast<size_t>(i)].seq) ++j;
    f(i, j);
    i = j;
  }
}

}  // namespace

HybridAttention::HybridAttention(const AttentionContext& c, const Policy& policy,
                                 const mem::PlacementOptions& placement)
    : device_(c.device),
      model_(c.model),
      spec_(c.model.spec),
      kv_dtype_(c.kv_dtype),
      policy_((validate_policy(policy, c.ctx), policy)),
      topology_(mem::Topology::discover()),
      placement_(mem::resolve_placement(topology_, placement)),
      scale_(1.0f / std::sqrt(static_cast<float>(c.model.spec.head_dim))),
      n_seqs_(c.n_seqs),
      host_job_hook_(c.host_job_hook),
      query_(c.model, policy_),
      selection_(SelectorContext{spec_, policy_, c.ctx, c.n_seqs}, policy_.host_threads),
      shipment_(c.device, spec_, c.n_seqs, c.kv_dtype),
      clock_(c.device, spec_.n_layers),
      x_pinned_{PinnedBuffer(c.device.dma_registrar()), PinnedBuffer(c.device.dma_registrar())},
      q_pinned_(c.device.dma_registrar()) {
  // --host-threads 0 (every core of the run) is resolved once, by the engine (sched/cores.h), from -t
  if (policy_.host_threads < 1)
    throw Error("attention stage: --host-threads " + std::to_string(policy_.host_threads) + " was not resolved");
  // --query auto is the device's choice, made by the engine too (resolve_device_defaults)
  if (policy_.query == QuerySource::Auto) throw Error("attention stage: --query auto was not resolved");
  if (query_.source() != QuerySource::Exact && policy_.window < 1)
    throw Error(
        "--query speculative|refine needs --window >= 1 (the current token must be on the device); "
        "give --query exact");
  // The host K+V per NUMA node must fit: said before any allocation.
  plan_host_kv(spec_, policy_, c.kv_dtype, c.ctx, c.n_seqs, topology_, placement_).require_fits();
  pruner_ = make_pruner(SelectorContext{spec_, policy_, c.ctx, c.n_seqs});
  const HybridKvLayout layout{policy_.window, policy_.n_sinks, policy_.keep_evicted, policy_.evict_block,
                              pruner_ ? policy_.heavy_hitters.heavy : 0};
  kv_ = std::make_unique<HybridKv>(device_, spec_, layout, c.kv_dtype, c.ctx, c.n_seqs, topology_, placement_);
  if (pruner_) {
    observer_ = std::make_unique<DeviceObserver>(device_, spec_, *pruner_);
    kv_->set_retainer([this](int seq, int layer, int g, std::span<const int32_t> candidates, int keep,
                             std::vector<int32_t>& kept) { pruner_->retain(seq, layer, g, candidates, keep, kept); });
  }
  std::vector<int> pin;
  try {
    pin = mem::node_cpus(topology_, placement_.worker_node);
  } catch (const Error&) {
    pin.clear();  // no usable CPU list (containers): leave the workers unpinned
  }
  stage_ = std::make_unique<HostStage>(policy_.host_threads, spec_.n_layers + 1, pin, device_.cpu_pool());
  places_.resize(static_cast<size_t>(c.n_seqs));
  plans_.assign(static_cast<size_t>(c.n_seqs), initial_plan(policy_));
  results_.assign(2, std::vector<HostResult>());
  x_host_.resize(2);
  planned_.resize(static_cast<size_t>(spec_.n_layers));
  for (int l = 0; l <= spec_.n_layers; ++l) callbacks_.push_back({this, l});
}

HybridAttention::~HybridAttention() = default;

std::string HybridAttention::describe() const { return describe_policy(policy_) + "; " + placement_.describe(); }

nlohmann::json HybridAttention::memory_report() const {
  std::vector<const mem::Arena*> arenas;
  for (int s = 0; s < n_seqs_; ++s) {
    arenas.push_back(&kv_->host(s).k_arena());
    arenas.push_back(&kv_->host(s).v_arena());
  }
  const auto report = mem::verify_placement(arenas, mem::NumaSupport::probe(placement_.worker_node));
  nlohmann::json j = report.to_json();
  j["placement"] = placement_.to_json();
  j["matched"] = report.matched();
  j["spilled_k_blocks"] = kv_->spilled_k_blocks();
  j["evicted_bytes"] = kv_->evicted_bytes();
  return j;
}

void HybridAttention::reset(int seq) {
  kv_->reset(seq);
  selection_.reset(seq);
  if (pruner_) pruner_->reset(seq);
}

// ---- the step ----

void HybridAttention::begin_step(const std::vector<TokenRow>& rows, bool prefill, std::span<const StepPlan> plans) {
  prefill_ = prefill;
  if (plans.size() != plans_.size())
    throw Error("hybrid attention: " + std::to_string(plans.size()) + " step plans for a batch of " +
                std::to_string(plans_.size()));
  std::copy(plans.begin(), plans.end(), plans_.begin());
  selection_.prepare(plans_);  // no host job runs now
  for_each_sequence(rows, [&](int, int end) {
    const TokenRow& last = rows[static_cast<size_t>(end - 1)];
    const int64_t before = kv_->host(last.seq).n_tokens();
    kv_->make_room(last.seq, last.pos + 1, places_[static_cast<size_t>(last.seq)]);
    selection_.on_host_append(last.seq, before, kv_->host(last.seq).n_tokens());
  });
  for (auto& r : results_) r.resize(rows.size());
  shipment_.begin_step(rows.size());
  recall_mass_.assign(static_cast<size_t>(n_seqs_), 0.0);
  recall_heads_.assign(static_cast<size_t>(n_seqs_), 0);
  async_ = !prefill && plan_async_step(rows);
}

void HybridAttention::layer_input(int layer, const float* x, const std::vector<TokenRow>& rows) {
  if (prefill_) return;
  if (async_) return async_layer_input(layer, x, rows);
  clock_.layer_start(layer);
  // Speculation: the host predicts layer+1 from this layer's input while the device runs this
  // layer. Layer 0's own input is x itself, so its host part is exact and starts now too.
  const bool next = layer + 1 < spec_.n_layers && query_.speculates(layer + 1);
  const bool self = layer == 0 && query_.speculates(0);
  if (!next && !self) return;
  auto& xh = x_host_[static_cast<size_t>(layer % 2)];
  xh.resize(rows.size() * spec_.d_model);
  device_.copy_to_host(xh.data(), x, sizeof(float) * xh.size());
  if (self) start_host_part(0, xh.data(), nullptr, rows);
  if (next) start_host_part(layer + 1, xh.data(), nullptr, rows);
}

void HybridAttention::attend(int layer, const float* q, const float* k, const float* v,
                             const std::vector<TokenRow>& rows, float* out) {
  store_kv(layer, k, v, rows);
  if (async_) return async_attend(layer, q, rows, out);
  const bool needs_q = prefill_ || query_.needs_true_query(layer);
  if (needs_q) copy_queries(q, static_cast<int>(rows.size()));
  if (prefill_)
    prefill_host_part(layer, rows);
  else
    finish_host_part(layer, rows);
  learn_queries(layer, q, rows, needs_q);
  ship_and_attend(layer, q, rows, out);
}

void HybridAttention::layers_done() {
  if (prefill_) return;
  if (async_) return async_layers_done();
  clock_.layers_done();
}

void HybridAttention::end_step(const std::vector<TokenRow>& rows) {
  if (async_error_) std::rethrow_exception(std::exchange(async_error_, nullptr));
  if (!prefill_) clock_.end_step();
  for_each_sequence(rows, [&](int, int end) {
    const TokenRow& last = rows[static_cast<size_t>(end - 1)];
    kv_->commit(last.seq, last.pos + 1);
  });
}

// ---- the host part ----

void HybridAttention::start_host_part(int layer, const float* x, const float* q, const std::vector<TokenRow>& rows) {
  stage_->submit(layer, [this, layer, x, q, &rows](ThreadPool& pool) { host_part(pool, layer, x, q, rows); });
}

void HybridAttention::host_part(ThreadPool& pool, int layer, const float* x, const float* q,
                                const std::vector<TokenRow>& rows) {
  if (host_job_hook_) host_job_hook_(clock_.step(), layer);
  auto& results = results_[static_cast<size_t>(layer % 2)];
  for (size_t i = 0; i < rows.size(); ++i) {
    HostResult& r = results[i];
    r.q.resize(static_cast<size_t>(spec_.q_dim()));
    if (q)
      std::copy(q + i * spec_.q_dim(), q + (i + 1) * spec_.q_dim(), r.q.begin());
    else
      query_.speculate(layer, x + i * spec_.d_model, rows[i].pos, r.q.data(), pool);
    const int seq = rows[i].seq;
    selection_.select(pool, layer, seq, plans_[static_cast<size_t>(seq)], kv_->host(seq), r);
  }
}

void HybridAttention::finish_host_part(int layer, const std::vector<TokenRow>& rows) {
  const double t0 = steady_seconds();
  const double t_host = complete_host_part(layer, q_host_.data(), rows);
  clock_.host(layer, t_host, steady_seconds() - t0);
}

double HybridAttention::complete_host_part(int layer, const float* q, const std::vector<TokenRow>& rows) {
  if (!query_.speculates(layer)) start_host_part(layer, nullptr, q, rows);
  double t_host = stage_->wait(layer);
  if (query_.refines(layer)) {
    // Selected with q̃; now the selected tokens' logits with the true q (cost K·head_dim).
    LayerStats& st = clock_.stats(layer);
    auto& results = results_[static_cast<size_t>(layer % 2)];
    t_host += stage_->run(spec_.n_layers, [&](ThreadPool& pool) {
      for (size_t i = 0; i < rows.size(); ++i) {
        HostResult& r = results[i];
        const float* q_true = q + i * spec_.q_dim();
        query_.compare(r.q.data(), q_true, st);
        std::copy(q_true, q_true + spec_.q_dim(), r.q.begin());
        selection_.rescore(pool, layer, kv_->host(rows[i].seq), r);
      }
    });
  }
  return t_host;
}

void HybridAttention::prefill_host_part(int layer, const std::vector<TokenRow>& rows) {
  // Exact causal attention over the host tokens each row sees, as a partial result + LSE.
  const int n = static_cast<int>(rows.size());
  HostResult& r = results_[static_cast<size_t>(layer % 2)][0];
  r.out.resize(static_cast<size_t>(n) * spec_.q_dim());
  r.lse.resize(static_cast<size_t>(n) * spec_.n_heads);
  const HostStore& host = kv_->host(rows[0].seq);
  const KvLayout kl = host.k_layout(layer), vl = host.v_layout(layer);
  const int sinks = kv_->sink_slots();
  prefill_visible_.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    prefill_visible_[static_cast<size_t>(i)] =
        policy_.keep_evicted ? std::clamp<int64_t>(rows[static_cast<size_t>(i)].pos + 1 - sinks, 0, host.n_tokens())
                             : 0;
  auto job = [&](ThreadPool& pool) {
    prefill_attention_.run(pool, kl, vl, q_host_.data(), n, spec_.n_heads, scale_, prefill_visible_.data(),
                           r.out.data(), r.lse.data(), device_.bf16_compute());
  };
  // Nothing overlaps it (the device waits for the result): on a CPU device it runs on the
  // device's pool, every core, rather than on the host workers' share.
  if (ThreadPool* cores = device_.cpu_pool())
    job(*cores);
  else
    stage_->run(spec_.n_layers, job);
}

void HybridAttention::store_kv(int layer, const float* k, const float* v, const std::vector<TokenRow>& rows) {
  // k, v of the new rows go where make_room placed them (host-bound rows need a host copy)
  const int n = static_cast<int>(rows.size());
  const int kv_dim = spec_.kv_dim();
  bool any_host = prefill_;
  for (const TokenRow& row : rows) any_host |= places_[static_cast<size_t>(row.seq)][0].place == TokenPlace::Host;
  if (any_host) {
    k_host_.resize(static_cast<size_t>(n) * kv_dim);
    v_host_.resize(static_cast<size_t>(n) * kv_dim);
    device_.copy_to_host(k_host_.data(), k, sizeof(float) * k_host_.size());
    device_.copy_to_host(v_host_.data(), v, sizeof(float) * v_host_.size());
  }
  for_each_sequence(rows, [&](int i, int j) {
    const int seq = rows[static_cast<size_t>(i)].seq;
    const size_t at = static_cast<size_t>(i) * kv_dim;
    kv_->store(seq, layer, j - i, places_[static_cast<size_t>(seq)], k + at, v + at,
               any_host ? k_host_.data() + at : nullptr, any_host ? v_host_.data() + at : nullptr);
  });
}

void HybridAttention::copy_queries(const float* q, int n) {
  q_host_.resize(static_cast<size_t>(n) * spec_.q_dim());
  device_.copy_to_host(q_host_.data(), q, sizeof(float) * q_host_.size());
}

void HybridAttention::learn_queries(int layer, const float* q, const std::vector<TokenRow>& rows, bool copied) {
  // Called once this layer's host part is done: the job may have been reading the selector's
  // state (InfiniGen makes its skew there), and speculating layers copy their queries only now.
  for_each_sequence(rows, [&](int i, int j) {
    const int seq = rows[static_cast<size_t>(i)].seq;
    if (!selection_.wants_queries(seq, layer)) return;
    if (!copied) copy_queries(q, static_cast<int>(rows.size()));
    copied = true;
    selection_.learn_queries(seq, layer, q_host_.data() + static_cast<size_t>(i) * spec_.q_dim(), j - i);
  });
}

// ---- the shipment and the device's attention ----

void HybridAttention::ship_and_attend(int layer, const float* q, const std::vector<TokenRow>& rows, float* out) {
  LayerStats& st = clock_.stats(layer);
  const auto& results = results_[static_cast<size_t>(layer % 2)];
  const int n = static_cast<int>(rows.size());
  // Every row's host part crosses first (one timed transfer per layer), then the device merges.
  if (!prefill_) clock_.transfer_begin(layer);
  const int64_t bytes = shipment_.ship(layer, results, n, prefill_, policy_.merge == MergeMode::Lse);
  st.bytes_h2d += bytes;
  if (!prefill_) {
    clock_.transfer_end(layer, bytes);
    count_host_part(layer, results, rows);
  }
  device_attention(layer, q, rows, out);
}

void HybridAttention::count_host_part(int layer, const std::vector<HostResult>& results,
                                      const std::vector<TokenRow>& rows) {
  LayerStats& st = clock_.stats(layer);
  for (size_t i = 0; i < rows.size(); ++i) {
    const HostResult& r = results[i];
    st.selected += static_cast<int64_t>(r.K) * spec_.n_kv_heads;
    st.host_tokens += r.n_host * spec_.n_kv_heads;
    const auto seq = static_cast<size_t>(rows[i].seq);
    recall_mass_[seq] += r.recall_mass;
    recall_heads_[seq] += r.recall_heads;
  }
  st.steps += 1;
}

void HybridAttention::device_attention(int layer, const float* q, const std::vector<TokenRow>& rows, float* out) {
  const int n = static_cast<int>(rows.size());
  const int rows_per_call = prefill_ ? n : 1;
  for (int i = 0; i < n; i += rows_per_call) {
    const TokenRow& row = rows[static_cast<size_t>(i)];
    const KvView& cache = kv_->window(row.seq, layer);
    HybridAttentionArgs a;
    a.q = q + static_cast<int64_t>(i) * spec_.q_dim();
    a.out = out + static_cast<int64_t>(i) * spec_.q_dim();
    a.k_cache = cache.k;
    a.v_cache = cache.v;
    a.kv_dtype = cache.dtype;
    a.capacity = cache.capacity;
    a.n = rows_per_call;
    a.n_heads = spec_.n_heads;
    a.n_kv_heads = spec_.n_kv_heads;
    a.head_dim = spec_.head_dim;
    a.pos0 = row.pos;
    a.tokens = kv_->tokens(row.seq, layer);
    a.host = shipment_.part(i);
    a.scale = scale_;
    if (observer_) a.probs = observer_->probs(rows_per_call, a.tokens.count);
    device_.hybrid_attention(a);
    if (observer_)
      observer_->observe(layer, std::span(rows).subspan(static_cast<size_t>(i), static_cast<size_t>(rows_per_call)),
                         kv_->token_positions(row.seq, layer), a.tokens.count, prefill_);
  }
}

double HybridAttention::last_recall(int seq) const {
  const auto s = static_cast<size_t>(seq);
  if (s >= recall_heads_.size() || recall_heads_[s] == 0) return -1;
  return recall_mass_[s] / static_cast<double>(recall_heads_[s]);
}

std::unique_ptr<LayerAttention> make_hybrid_attention(const AttentionContext& c, const Policy& policy,
                                                      const mem::PlacementOptions& placement) {
  return std::make_unique<HybridAttention>(c, policy, placement);
}

}  // namespace hg
