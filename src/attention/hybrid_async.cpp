// HybridAttention's decode step beside a GPU, issued without a host wait (hybrid_attention.h):
// the device thread queues the whole step, and the compute stream hands the host its inputs
// through host callbacks (Device::host_callback), which the stream runs in its order:
//
//   layer_input(ℓ)  x ─► pinned x[ℓ % 2] (a copy on the stream); input_ready(ℓ) starts the host
//                   job of ℓ+1 (and of layer 0) from it, and at layer 0 stamps the step's start
//   attend(ℓ)       q ─► pinned q where the layer needs its true query; the shipment laid out
//                   from each row's planned K; part_wanted(ℓ) waits for ℓ's job (starting it
//                   with q if ℓ does not speculate), refines it, writes it into the shipment's
//                   pinned buffer; then the copies and the device attention, queued behind it
//   layers_done     layers_ended stamps the step's end
//
// Every buffer is reused in stream order: x[ℓ % 2] is next written by layer ℓ+2's copy, which
// the stream runs after part_wanted(ℓ+1) returned, which waited for ℓ+1's job, its only reader;
// q and the shipment's pinned buffer likewise. A buffer grows only after a synchronize().
// The device waits in part_wanted while the host works (t_wait); the host thread never waits
// for the device before the logits' copy. The callbacks run on one host thread, one at a time,
// so the host stage sees one submitter, as in the synchronous path.
#include "attention/hybrid_attention.h"

namespace hg {

bool HybridAttention::plan_async_step(const std::vector<TokenRow>& rows) {
  if (!device_.queues_host_callbacks() || !shipment_.stages_async() || observer_) return false;
  // A new row bound for the host store (no window) is copied there synchronously by store_kv.
  for (const TokenRow& row : rows)
    if (places_[static_cast<size_t>(row.seq)][0].place == TokenPlace::Host) return false;
  for (int l = 0; l < spec_.n_layers; ++l) {
    auto& planned = planned_[static_cast<size_t>(l)];
    planned.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const int seq = rows[i].seq;
      const StepPlan& plan = plans_[static_cast<size_t>(seq)];
      const int64_t n_host = kv_->host(seq).n_tokens();
      // A learner takes a decode step's true queries only while the sequence has no host tokens
      // (QueryLearner): this path hands over none.
      if (n_host == 0 && selection_.wants_queries(seq, l)) return false;
      planned[i] = {.K = selection_.planned_k(l, plan, n_host),
                    .fetch = selection_.fetches(plan),
                    .bound = selection_.k_from_data(plan)};
    }
  }
  async_rows_ = &rows;
  async_error_ = nullptr;
  clock_.settle();  // the previous step's timings, before this step's callbacks stamp anew
  return true;
}

void HybridAttention::async_layer_input(int layer, const float* x, const std::vector<TokenRow>& rows) {
  const bool next = layer + 1 < spec_.n_layers && query_.speculates(layer + 1);
  const bool self = layer == 0 && query_.speculates(0);
  if (next || self) {
    const size_t bytes = sizeof(float) * rows.size() * spec_.d_model;
    device_.copy_to_host_async(grow_pinned(device_, x_pinned_[layer % 2], bytes), x, bytes);
  }
  if (layer == 0 || next || self) device_.host_callback(&input_ready, &callbacks_[static_cast<size_t>(layer)]);
}

void HybridAttention::async_attend(int layer, const float* q, const std::vector<TokenRow>& rows, float* out) {
  if (query_.needs_true_query(layer)) {
    const size_t bytes = sizeof(float) * rows.size() * spec_.q_dim();
    device_.copy_to_host_async(grow_pinned(device_, q_pinned_, bytes), q, bytes);
  }
  const int64_t bytes = shipment_.plan(layer, planned_[static_cast<size_t>(layer)], policy_.merge == MergeMode::Lse);
  clock_.stats(layer).bytes_h2d += bytes;
  clock_.shipped(layer, bytes);
  device_.host_callback(&part_wanted, &callbacks_[static_cast<size_t>(layer)]);
  shipment_.queue(layer);
  device_attention(layer, q, rows, out);
}

void HybridAttention::async_layers_done() {
  device_.host_callback(&layers_ended, &callbacks_[static_cast<size_t>(spec_.n_layers)]);
}

template <typename F>
void HybridAttention::guarded(F&& f) {
  if (async_error_) return;
  try {
    f();
  } catch (...) {
    async_error_ = std::current_exception();
  }
}

void HybridAttention::input_ready(void* callback) {
  const auto& c = *static_cast<const Callback*>(callback);
  HybridAttention& h = *c.self;
  h.guarded([&] {
    if (c.layer == 0) h.clock_.stamp_start(steady_seconds());
    const auto* x = reinterpret_cast<const float*>(h.x_pinned_[c.layer % 2].data());
    if (c.layer == 0 && h.query_.speculates(0)) h.start_host_part(0, x, nullptr, *h.async_rows_);
    if (c.layer + 1 < h.spec_.n_layers && h.query_.speculates(c.layer + 1))
      h.start_host_part(c.layer + 1, x, nullptr, *h.async_rows_);
  });
}

void HybridAttention::part_wanted(void* callback) {
  const auto& c = *static_cast<const Callback*>(callback);
  HybridAttention& h = *c.self;
  const double arrived = steady_seconds();
  double t_host = 0;
  if (h.async_error_) {
    // The step fails at end_step; a job already started still ends here, so that its slot is free.
    try {
      if (h.stage_->pending(c.layer)) h.stage_->wait(c.layer);
    } catch (...) {
    }
  }
  h.guarded([&] {
    const auto& rows = *h.async_rows_;
    t_host = h.complete_host_part(c.layer, reinterpret_cast<const float*>(h.q_pinned_.data()), rows);
    const auto& results = h.results_[static_cast<size_t>(c.layer % 2)];
    h.shipment_.fill(c.layer, results);
    h.count_host_part(c.layer, results, rows);
  });
  const double released = steady_seconds();
  h.clock_.host(c.layer, t_host, released - arrived);
  h.clock_.stamp_release(c.layer, released);
}

void HybridAttention::layers_ended(void* callback) {
  static_cast<const Callback*>(callback)->self->clock_.stamp_end(steady_seconds());
}

}  // namespace hg
