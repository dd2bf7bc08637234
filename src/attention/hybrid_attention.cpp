#include "attention/hybrid_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <thread>

#include "attention/host_ops.h"
#include "attention/selectors/h2o_prune.h"
#include "attention/selectors/selector.h"
#include "attention/step_timer.h"
#include "hybridgen/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_packed.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kv/memory_plan.h"
#include "mem/report.h"

namespace hg {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Grows device buffers that share one capacity (floats) to hold `floats` each; amortized
// (doubles), so that no step allocates once warm.
void grow_device_buffers(Device& device, std::initializer_list<float**> buffers, size_t& capacity, size_t floats) {
  if (capacity >= floats) return;
  capacity = std::max(floats, capacity * 2);
  for (float** p : buffers) {
    if (*p) device.free(*p);
    *p = static_cast<float*>(device.alloc(sizeof(float) * capacity));
  }
}

std::vector<float> to_f32(const TensorView& t) {
  if (!t.present()) return {};
  std::vector<float> out(static_cast<size_t>(t.numel()));
  cpu::dequantize_row(t.dtype, t.data, t.numel(), 0, out.data());
  return out;
}

}  // namespace

HybridAttention::HybridAttention(const AttentionContext& c, const Policy& policy,
                                 const mem::PlacementOptions& placement)
    : device_(c.device),
      model_(c.model),
      spec_(c.model.spec),
      policy_(policy),
      topology_(mem::Topology::discover()),
      placement_(mem::resolve_placement(topology_, placement)),
      scale_(1.0f / std::sqrt(static_cast<float>(c.model.spec.head_dim))),
      n_seqs_(c.n_seqs) {
  validate_policy(policy_, c.ctx);
  if (policy_.query != QuerySource::Exact && policy_.window < 1)
    throw Error("--query speculative|refine needs --window >= 1: the current token must be on the device");
  // The host K+V per NUMA node must fit: said before any allocation.
  plan_host_kv(spec_, policy_, c.kv_dtype, c.ctx, c.n_seqs, topology_, placement_).require_fits();
  // h2o / keyformer: the selector that scores the device's tokens decides which stay
  pruner_ = make_heavy_hitter_pruner(SelectorContext{spec_, policy_, c.ctx, c.n_seqs});
  const HybridKvLayout layout{policy_.window, policy_.n_sinks, policy_.keep_evicted, policy_.evict_block,
                              pruner_ ? policy_.heavy : 0};
  kv_ = std::make_unique<HybridKv>(device_, spec_, layout, c.kv_dtype, c.ctx, c.n_seqs, topology_, placement_);
  if (pruner_)
    kv_->set_retainer([this](int seq, int layer, int g, std::span<const int32_t> candidates, int keep,
                             std::vector<int32_t>& kept) { pruner_->retain(seq, layer, g, candidates, keep, kept); });
  std::vector<int> pin;
  try {
    pin = mem::node_cpus(topology_, placement_.worker_node);
  } catch (const Error&) {
    pin.clear();  // no usable CPU list (containers): leave the workers unpinned
  }
  stage_ = std::make_unique<HostStage>(policy_.host_threads, spec_.n_layers + 1, pin, device_.cpu_pool());
  for (const auto& l : model_.weights.layers) {
    std::unique_ptr<cpu::PackedWeight> packed;
    if (cpu::packing_pays(l.wq.dtype)) packed = cpu::pack_weight(l.wq.dtype, l.wq.data, spec_.q_dim(), spec_.d_model);
    host_layers_.push_back({l.wq, std::move(packed), to_f32(l.bq), to_f32(l.attn_norm), to_f32(l.attn_norm_bias)});
  }
  inv_freq_.resize(static_cast<size_t>(spec_.head_dim / 2));
  cpu::rope_inv_freq(spec_.head_dim, spec_.rope_theta, spec_.rope_scaling.llama3, spec_.rope_scaling.factor,
                     spec_.rope_scaling.low_freq_factor, spec_.rope_scaling.high_freq_factor,
                     spec_.rope_scaling.original_max_position,
                     spec_.rope_freq_factors.empty() ? nullptr : spec_.rope_freq_factors.data(), inv_freq_.data());
  places_.resize(static_cast<size_t>(c.n_seqs));
  plans_.assign(static_cast<size_t>(c.n_seqs), initial_plan(policy_));
  results_.assign(2, std::vector<SeqResult>());
  x_host_.resize(2);
  scratch_.resize(static_cast<size_t>(policy_.host_threads));
  // Post-QKᵀ top-K always (it also serves "every host token"); the policy's Pre-QKᵀ predictor
  // when the policy starts with Pre-QKᵀ selection, others when a step plan first asks for them.
  ctx_ = c.ctx;
  post_ = make_selector(Selection::Post, policy_.predictor, SelectorContext{spec_, policy_, ctx_, n_seqs_});
  if (policy_.select == Selection::Pre) set_up_predictor(policy_.predictor);
  fetched_.resize(static_cast<size_t>(spec_.n_layers) * n_seqs_);
  stats_.resize(static_cast<size_t>(spec_.n_layers));
  marks_.resize(static_cast<size_t>(spec_.n_layers));
  step_timing_.layers.resize(static_cast<size_t>(spec_.n_layers));
  if (const char* d = std::getenv("HG_TEST_HOST_DELAY"); d && *d) {
    double ms = 0;
    long long from = 0, to = 0;
    char tail = 0;
    if (std::sscanf(d, "%lf@%lld:%lld%c", &ms, &from, &to, &tail) != 3 || ms < 0 || from < 0 || to < from)
      throw Error("HG_TEST_HOST_DELAY: '" + std::string(d) + "' is not MS@FROM:TO (test only)");
    test_delay_ = {ms, from, to};
  }
}

HybridAttention::~HybridAttention() {
  for (auto& b : dev_bufs_)
    for (float* p : {b.logits, b.v, b.out, b.lse})
      if (p) device_.free(p);
  for (auto& f : fetched_)
    for (float* p : {f.k, f.v})
      if (p) device_.free(p);
  if (probs_dev_) device_.free(probs_dev_);
}

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

void HybridAttention::set_up_predictor(const std::string& p) {
  auto& pre = pre_[p];
  if (pre) return;
  pre = make_selector(Selection::Pre, p, SelectorContext{spec_, policy_, ctx_, n_seqs_});
  if (pre->observes()) observers_.push_back(pre.get());
}

void HybridAttention::reset(int seq) {
  kv_->reset(seq);
  post_->reset(seq);
  if (pruner_) pruner_->reset(seq);
  for (auto& [name, s] : pre_) s->reset(seq);
}

int HybridAttention::effective_k(const StepPlan& plan, int64_t n_host) {
  if (plan.select == Selection::All || plan.K < 0 || plan.K >= n_host) return static_cast<int>(n_host);
  return plan.K;
}

void HybridAttention::begin_step(const std::vector<TokenRow>& rows, bool prefill, std::span<const StepPlan> plans) {
  prefill_ = prefill;
  fetch_ordered_ = false;
  if (plans.size() != plans_.size())
    throw Error("hybrid attention: " + std::to_string(plans.size()) + " step plans for a batch of " +
                std::to_string(plans_.size()));
  std::copy(plans.begin(), plans.end(), plans_.begin());
  for (const StepPlan& plan : plans_)
    if (plan.select == Selection::Pre) set_up_predictor(plan.predictor);  // no host job runs now
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i + 1 < rows.size() && rows[i + 1].seq == rows[i].seq) continue;  // last row of a sequence
    const int seq = rows[i].seq;
    const int64_t before = kv_->host(seq).n_tokens();
    kv_->make_room(seq, rows[i].pos + 1, places_[static_cast<size_t>(seq)]);
    const int64_t after = kv_->host(seq).n_tokens();
    for (Selector* s : observers_) s->on_host_append(seq, before, after);
  }
  const size_t n = rows.size();
  for (auto& r : results_) r.resize(n);
  if (dev_bufs_.size() < n) dev_bufs_.resize(n);
  if (parts_.size() < n) parts_.resize(n);
}

void HybridAttention::compute_query(int layer, const float* x, int pos, float* q_out, ThreadPool& pool) {
  // q̃ = RoPE(Wq · norm(x) + bq)  [n_heads, head_dim]
  const HostLayer& hl = host_layers_[static_cast<size_t>(layer)];
  query_norm_.resize(static_cast<size_t>(spec_.d_model));  // sized once
  float* h = query_norm_.data();
  if (!hl.norm_b.empty())
    cpu::layernorm_rows(x, hl.norm_w.data(), hl.norm_b.data(), spec_.norm_eps, spec_.d_model, h, 0, 1);
  else
    cpu::rmsnorm_rows(x, hl.norm_w.data(), spec_.norm_eps, spec_.d_model, h, 0, 1);
  const cpu::MatmulTarget wq{hl.wq.dtype, hl.wq.data, spec_.q_dim(), q_out, spec_.q_dim(), false, hl.wq_packed.get()};
  cpu::matmul_group(pool, query_workspace_, &wq, 1, spec_.d_model, h, 1);
  if (!hl.bq.empty())
    for (int i = 0; i < spec_.q_dim(); ++i) q_out[i] += hl.bq[static_cast<size_t>(i)];
  if (!spec_.is_opt())
    cpu::rope_rows(q_out, &pos, spec_.n_heads, spec_.head_dim, spec_.head_dim, inv_freq_.data(),
                   spec_.rope_layout == RopeLayout::Interleaved, 0, 1);
}

Selector& HybridAttention::selector_for(const StepPlan& plan, bool all) {
  if (all || plan.select != Selection::Pre) return *post_;
  return *pre_.at(plan.predictor);  // set up by begin_step
}

void HybridAttention::select_and_score(ThreadPool& pool, int layer, int seq, SeqResult& r) {
  const HostStore& host = kv_->host(seq);
  SelectionRequest req;
  req.seq = seq;
  req.layer = layer;
  req.k = host.k_layout(layer);
  req.q = r.q.data();
  req.n_heads = spec_.n_heads;
  req.scale = scale_;
  req.n_tokens = r.n_host = host.n_tokens();
  const StepPlan& plan = plans_[static_cast<size_t>(seq)];
  req.K = effective_k(plan, r.n_host);
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
  const bool observe = K > 0 && !observers_.empty();
  if (observe) r.p.resize(static_cast<size_t>(spec_.n_heads) * K);
  const SelectedTokens out{r.idx.data(), r.fetch && !observe ? nullptr : r.logits.data()};
  const HostKvLayout kl = host.k_layout(layer), vl = host.v_layout(layer);
  pool.parallel_for(spec_.n_kv_heads, [&](int64_t gb, int64_t ge, int t) {
    const int g0 = static_cast<int>(gb), g1 = static_cast<int>(ge);
    SelectorScratch& scratch = scratch_[static_cast<size_t>(t)];
    selector.select(req, g0, g1, out, scratch);
    if (observe) observe_selection(seq, layer, r, g0, g1);
    if (gather) gather_rows(vl, r.idx.data(), K, g0, g1, r.v.data());
    if (r.fetch) gather_rows(kl, r.idx.data(), K, g0, g1, r.k.data());
  });
  if (lse) host_partial(pool, layer, seq, r);
}

ObservedAttention HybridAttention::observation(int seq, int layer, TokenSpace space, int count,
                                               const int32_t* tokens) const {
  ObservedAttention o;
  o.seq = seq;
  o.layer = layer;
  o.space = space;
  o.n_heads = spec_.n_heads;
  o.n_kv_heads = spec_.n_kv_heads;
  o.count = count;
  o.tokens = tokens;
  return o;
}

void HybridAttention::observe_selection(int seq, int layer, SeqResult& r, int g_begin, int g_end) {
  // The selection's attention probabilities: a softmax over the selected logits of each head.
  const int group = spec_.n_heads / spec_.n_kv_heads, K = r.K;
  for (int h = g_begin * group; h < g_end * group; ++h) {
    const float* lh = r.logits.data() + static_cast<size_t>(h) * K;
    float* ph = r.p.data() + static_cast<size_t>(h) * K;
    std::copy(lh, lh + K, ph);
    cpu::softmax_inplace(ph, K);
  }
  ObservedAttention o = observation(seq, layer, TokenSpace::Host, K, r.idx.data());
  o.p = r.p.data();
  for (Selector* s : observers_) s->observe(o, g_begin, g_end);
}

void HybridAttention::host_partial(ThreadPool& pool, int layer, int seq, SeqResult& r) {
  // --merge lse: the host's own softmax-weighted V sum and log-sum-exp per head
  const HostStore& host = kv_->host(seq);
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

void HybridAttention::decode_job(ThreadPool& pool, int layer, const float* x_host, const float* q_host,
                                 const std::vector<TokenRow>& rows) {
  auto& results = results_[static_cast<size_t>(layer % 2)];
  const int64_t step = step_timing_.step + 1;  // this decode step (end_step counts it)
  if (test_delay_.ms > 0 && step >= test_delay_.from && step < test_delay_.to)
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(test_delay_.ms / spec_.n_layers));
  for (size_t i = 0; i < rows.size(); ++i) {
    SeqResult& r = results[i];
    r.q.resize(static_cast<size_t>(spec_.q_dim()));
    if (q_host)
      std::copy(q_host + i * spec_.q_dim(), q_host + (i + 1) * spec_.q_dim(), r.q.begin());
    else
      compute_query(layer, x_host + i * spec_.d_model, rows[i].pos, r.q.data(), pool);
    select_and_score(pool, layer, rows[i].seq, r);
  }
}

void HybridAttention::submit_decode_job(int layer, const float* x_host, const float* q_host,
                                        const std::vector<TokenRow>& rows) {
  stage_->submit(
      layer, [this, layer, x_host, q_host, &rows](ThreadPool& pool) { decode_job(pool, layer, x_host, q_host, rows); });
}

void HybridAttention::layer_input(int layer, const float* x, const std::vector<TokenRow>& rows) {
  if (prefill_) return;
  marks_[static_cast<size_t>(layer)].start = device_.timing_mark(false);
  // Speculation: the host predicts layer+1 from this layer's input while the device runs this
  // layer. Layer 0's own input is x itself, so its host part is exact and starts now too.
  const bool next = layer + 1 < spec_.n_layers && speculates(layer + 1);
  const bool self = layer == 0 && speculates(0);
  if (!next && !self) return;
  const int n = static_cast<int>(rows.size());
  auto& xh = x_host_[static_cast<size_t>(layer % 2)];
  xh.resize(static_cast<size_t>(n) * spec_.d_model);
  device_.copy_to_host(xh.data(), x, sizeof(float) * xh.size());
  if (self) submit_decode_job(0, xh.data(), nullptr, rows);
  if (next) submit_decode_job(layer + 1, xh.data(), nullptr, rows);
}

double HybridAttention::refine(int layer, const float* q_host, const std::vector<TokenRow>& rows) {
  // Selected with q̃; now recompute the selected tokens' logits with the true q (cost K·head_dim).
  auto& results = results_[static_cast<size_t>(layer % 2)];
  return stage_->run(spec_.n_layers, [&](ThreadPool& pool) {
    for (size_t i = 0; i < rows.size(); ++i) {
      SeqResult& r = results[i];
      // How close the speculation was: cos(q̃, q) per head (reported by --stats).
      LayerStats& st = stats_[static_cast<size_t>(layer)];
      const float* q_true = q_host + i * spec_.q_dim();
      for (int h = 0; h < spec_.n_heads; ++h) {
        double dot = 0, a2 = 0, b2 = 0;
        for (int d = 0; d < spec_.head_dim; ++d) {
          const double a = r.q[static_cast<size_t>(h * spec_.head_dim + d)], b = q_true[h * spec_.head_dim + d];
          dot += a * b;
          a2 += a * a;
          b2 += b * b;
        }
        st.q_cos_sum += dot / std::sqrt(std::max(a2 * b2, 1e-30));
        ++st.q_cos_n;
      }
      std::copy(q_true, q_true + spec_.q_dim(), r.q.begin());
      const HostStore& host = kv_->host(rows[i].seq);
      const HostKvLayout kl = host.k_layout(layer);
      pool.parallel_for(spec_.n_kv_heads, [&](int64_t gb, int64_t ge, int) {
        host_logits_selected(kl, r.q.data(), spec_.n_heads, scale_, r.idx.data(), r.K, static_cast<int>(gb),
                             static_cast<int>(ge), r.logits.data());
      });
      if (policy_.merge == MergeMode::Lse && !r.fetch) host_partial(pool, layer, rows[i].seq, r);
    }
  });
}

void HybridAttention::prefill_host_part(int layer, const std::vector<TokenRow>& rows) {
  // Exact causal attention over the host tokens each row sees, as a partial result + LSE.
  const int n = static_cast<int>(rows.size());
  SeqResult& r = results_[static_cast<size_t>(layer % 2)][0];
  r.out.resize(static_cast<size_t>(n) * spec_.q_dim());
  r.lse.resize(static_cast<size_t>(n) * spec_.n_heads);
  const int seq = rows[0].seq;
  const HostStore& host = kv_->host(seq);
  const HostKvLayout kl = host.k_layout(layer), vl = host.v_layout(layer);
  const int sinks = kv_->sink_slots();
  prefill_visible_.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    prefill_visible_[static_cast<size_t>(i)] =
        policy_.keep_evicted ? std::clamp<int64_t>(rows[static_cast<size_t>(i)].pos + 1 - sinks, 0, host.n_tokens())
                             : 0;
  auto job = [&](ThreadPool& pool) {
    prefill_attention_.run(pool, kl, vl, q_host_.data(), n, spec_.n_heads, scale_, prefill_visible_.data(),
                           r.out.data(), r.lse.data());
  };
  // Nothing overlaps it (the device waits for the result): on a CPU device it runs on the
  // device's pool, every core, rather than on the host workers' share.
  if (ThreadPool* cores = device_.cpu_pool())
    job(*cores);
  else
    stage_->run(spec_.n_layers, job);
}

HybridAttention::DeviceSeqBuffers& HybridAttention::device_buffers(int row, size_t floats) {
  DeviceSeqBuffers& b = dev_bufs_[static_cast<size_t>(row)];
  grow_device_buffers(device_, {&b.logits, &b.v, &b.out, &b.lse}, b.capacity, floats);  // with the host tokens
  return b;
}

void HybridAttention::ship_and_merge(int layer, const float* q, const std::vector<TokenRow>& rows, float* out,
                                     bool prefill) {
  LayerStats& st = stats_[static_cast<size_t>(layer)];
  LayerStepTiming& lt = step_timing_.layers[static_cast<size_t>(layer)];
  auto& results = results_[static_cast<size_t>(layer % 2)];
  const int n = static_cast<int>(rows.size());
  const int rows_per_call = prefill ? n : 1;
  // Every row's host part crosses first (one timed transfer per layer), then the device merges.
  LayerMarks& marks = marks_[static_cast<size_t>(layer)];
  if (!prefill) marks.tx_begin = device_.timing_mark(false);
  int64_t bytes = 0;
  bool fetching = false;
  for (int i = 0; i < n; i += rows_per_call) {
    SeqResult& r = results[static_cast<size_t>(prefill ? 0 : i)];
    HostPart& part = parts_[static_cast<size_t>(i)];
    part = HostPart{};
    if (prefill || (policy_.merge == MergeMode::Lse && !r.fetch)) {
      const size_t outs = static_cast<size_t>(rows_per_call) * spec_.q_dim();
      DeviceSeqBuffers& b = device_buffers(i, outs);
      device_.copy_to_device(b.out, r.out.data(), sizeof(float) * outs);
      device_.copy_to_device(b.lse, r.lse.data(), sizeof(float) * rows_per_call * spec_.n_heads);
      part = {.kind = HostPart::Kind::Partial, .out = b.out, .lse = b.lse};
      bytes += static_cast<int64_t>(sizeof(float) * (outs + static_cast<size_t>(rows_per_call) * spec_.n_heads));
    } else if (r.K > 0 && r.fetch) {
      // InfiniGen's fetch: the chosen K and V rows into this layer's staging, on the copy stream
      const size_t rows_floats = static_cast<size_t>(spec_.n_kv_heads) * r.K * spec_.head_dim;
      FetchStaging& f = fetched_[static_cast<size_t>(layer) * n_seqs_ + i];
      grow_device_buffers(device_, {&f.k, &f.v}, f.capacity, rows_floats);
      if (!fetch_ordered_) device_.copies_after_compute();  // behind the previous step's reads of every staging
      fetch_ordered_ = fetching = true;
      device_.copy_to_device_async(f.k, r.k.data(), sizeof(float) * rows_floats);
      device_.copy_to_device_async(f.v, r.v.data(), sizeof(float) * rows_floats);
      part = {.kind = HostPart::Kind::KeyValue, .K = r.K, .k = f.k, .v = f.v};
      bytes += static_cast<int64_t>(2 * sizeof(float) * rows_floats);
    } else if (r.K > 0) {
      const size_t nv = static_cast<size_t>(spec_.n_kv_heads) * r.K * spec_.head_dim;
      const size_t nl = static_cast<size_t>(spec_.n_heads) * r.K;
      DeviceSeqBuffers& b = device_buffers(i, std::max(nv, nl));
      device_.copy_to_device(b.logits, r.logits.data(), sizeof(float) * nl);
      device_.copy_to_device(b.v, r.v.data(), sizeof(float) * nv);
      part = {.kind = HostPart::Kind::Logits, .K = r.K, .logits = b.logits, .v = b.v};
      bytes += static_cast<int64_t>(sizeof(float) * (nl + nv));
    }
    if (!prefill) {
      st.selected += static_cast<int64_t>(r.K) * spec_.n_kv_heads;
      st.host_tokens += r.n_host * spec_.n_kv_heads;
    }
  }
  st.bytes_h2d += bytes;
  if (fetching) device_.wait_copy_fence(device_.copy_fence());  // the attention reads the fetched rows
  if (!prefill) {
    marks.tx_end = device_.timing_mark(false);
    lt.bytes_h2d = bytes;
  }
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
    a.host = parts_[static_cast<size_t>(i)];
    a.scale = scale_;
    if (pruner_) a.probs = device_probs(static_cast<size_t>(rows_per_call) * spec_.n_heads * a.tokens.count);
    device_.hybrid_attention(a);
    if (pruner_) observe_device(layer, rows, i, rows_per_call, a.tokens.count, prefill);
  }
}

float* HybridAttention::device_probs(size_t floats) {
  grow_device_buffers(device_, {&probs_dev_}, probs_cap_, floats);  // with the device set
  probs_host_.resize(probs_cap_);
  return probs_dev_;
}

void HybridAttention::observe_device(int layer, const std::vector<TokenRow>& rows, int first, int n_rows, int count,
                                     bool prefill) {
  // The device's probabilities over its own tokens, row by row, to the heavy-hitter scores.
  const size_t per_row = static_cast<size_t>(spec_.n_heads) * count;
  device_.copy_to_host(probs_host_.data(), probs_dev_, sizeof(float) * per_row * n_rows);
  const int seq = rows[static_cast<size_t>(first)].seq;
  ObservedAttention o = observation(seq, layer, TokenSpace::Position, count, kv_->token_positions(seq, layer));
  o.prefill = prefill;
  for (int i = 0; i < n_rows; ++i) {
    o.query_pos = rows[static_cast<size_t>(first + i)].pos;
    o.p = probs_host_.data() + per_row * i;
    pruner_->observe(o, 0, spec_.n_kv_heads);
  }
}

void HybridAttention::copy_queries(const float* q, int n) {
  q_host_.resize(static_cast<size_t>(n) * spec_.q_dim());
  device_.copy_to_host(q_host_.data(), q, sizeof(float) * q_host_.size());
}

void HybridAttention::learn_queries(int layer, const float* q, const std::vector<TokenRow>& rows, bool copied) {
  // Called once this layer's host part is done: the job may have been reading the selector's
  // state (InfiniGen makes its skew there), and speculating layers copy their queries only now.
  const int n = static_cast<int>(rows.size());
  for (int i = 0; i < n;) {
    int j = i + 1;
    while (j < n && rows[static_cast<size_t>(j)].seq == rows[static_cast<size_t>(i)].seq) ++j;
    const int seq = rows[static_cast<size_t>(i)].seq;
    for (auto& [name, sel] : pre_) {
      if (!sel->wants_queries(seq, layer)) continue;
      if (!copied) copy_queries(q, n);
      copied = true;
      sel->on_queries(seq, layer, q_host_.data() + static_cast<size_t>(i) * spec_.q_dim(), j - i);
    }
    i = j;
  }
}

void HybridAttention::attend(int layer, const float* q, const float* k, const float* v,
                             const std::vector<TokenRow>& rows, float* out) {
  const int n = static_cast<int>(rows.size());
  const int kv_dim = spec_.kv_dim();
  LayerStats& st = stats_[static_cast<size_t>(layer)];
  // k, v of the new rows go where make_room placed them (host-bound rows need a host copy)
  bool any_host = false;
  for (int i = 0; i < n; ++i)
    any_host |= places_[static_cast<size_t>(rows[static_cast<size_t>(i)].seq)][0].place == TokenPlace::Host || prefill_;
  if (any_host) {
    k_host_.resize(static_cast<size_t>(n) * kv_dim);
    v_host_.resize(static_cast<size_t>(n) * kv_dim);
    device_.copy_to_host(k_host_.data(), k, sizeof(float) * k_host_.size());
    device_.copy_to_host(v_host_.data(), v, sizeof(float) * v_host_.size());
  }
  for (int i = 0; i < n;) {
    int j = i + 1;
    while (j < n && rows[static_cast<size_t>(j)].seq == rows[static_cast<size_t>(i)].seq) ++j;
    const int seq = rows[static_cast<size_t>(i)].seq;
    kv_->store(seq, layer, j - i, places_[static_cast<size_t>(seq)], k + static_cast<int64_t>(i) * kv_dim,
               v + static_cast<int64_t>(i) * kv_dim,
               any_host ? k_host_.data() + static_cast<size_t>(i) * kv_dim : nullptr,
               any_host ? v_host_.data() + static_cast<size_t>(i) * kv_dim : nullptr);
    i = j;
  }

  const bool needs_q = prefill_ || policy_.query != QuerySource::Speculative || !speculates(layer);
  if (needs_q) copy_queries(q, n);
  const double t_wait0 = now_seconds();
  if (prefill_) {
    prefill_host_part(layer, rows);
  } else {
    LayerStepTiming& lt = step_timing_.layers[static_cast<size_t>(layer)];
    if (!speculates(layer)) submit_decode_job(layer, nullptr, q_host_.data(), rows);
    lt.t_host = stage_->wait(layer);
    if (policy_.query == QuerySource::Refine && speculates(layer)) lt.t_host += refine(layer, q_host_.data(), rows);
    lt.t_wait = now_seconds() - t_wait0;
    st.t_host += lt.t_host;
    st.t_wait += lt.t_wait;
  }
  learn_queries(layer, q, rows, needs_q);
  ship_and_merge(layer, q, rows, out, prefill_);
  if (!prefill_) st.steps += 1;
}

void HybridAttention::end_step(const std::vector<TokenRow>& rows) {
  if (!prefill_) {
    close_step_timing(device_, marks_, step_timing_, stats_);
  }
  for (size_t i = 0; i < rows.size(); ++i)
    if (i + 1 == rows.size() || rows[i + 1].seq != rows[i].seq) kv_->commit(rows[i].seq, rows[i].pos + 1);
}

std::unique_ptr<LayerAttention> make_hybrid_attention(const AttentionContext& c, const Policy& policy,
                                                      const mem::PlacementOptions& placement) {
  return std::make_unique<HybridAttention>(c, policy, placement);
}

}  // namespace hg
