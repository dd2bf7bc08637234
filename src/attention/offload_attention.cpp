// The `offload` policy (FlexGen, attention on the device): every token's K and V live in the
// host stores; for each layer the device attends over the whole prefix after it was copied
// host -> device into one of two staging buffers. The copy of layer ℓ+1 is queued on the copy
// stream when layer ℓ starts, so it runs while layer ℓ computes (FlexGen's
// generation_loop_overlap_single_batch: load_cache(j+1) ‖ compute_layer(j), then sync):
//
//   layer_input(ℓ):  load(ℓ+1) -> staging[(ℓ+1) % 2]   (after the compute that used it, ℓ-1)
//   attend(ℓ):       wait load(ℓ); new k, v -> staging[ℓ % 2] and the host store (store_cache);
//                    the device's causal attention over staging[ℓ % 2]
//
// The attention op and the cache dtype are those of `full`, so the logits are the same.
// Moves 2·N·d bytes per layer and sequence per step (N tokens, d = kv_dim × dtype size).
#include <algorithm>
#include <cmath>

#include "attention/layer_attention.h"
#include "attention/kv_fill.h"
#include "attention/step_timer.h"
#include "hybridgen/error.h"
#include "kernels/cpu/attention.h"
#include "kv/host_store.h"
#include "mem/topology.h"

namespace hg {

namespace {

class OffloadAttention final : public LayerAttention {
 public:
  OffloadAttention(const AttentionContext& c, const mem::PlacementOptions& placement)
      : device_(c.device),
        spec_(c.model.spec),
        dtype_(c.kv_dtype),
        ctx_(c.ctx),
        topology_(mem::Topology::discover()),
        placement_(mem::resolve_placement(topology_, placement)),
        scale_(1.0f / std::sqrt(static_cast<float>(c.model.spec.head_dim))),
        lengths_(static_cast<size_t>(c.n_seqs), 0),
        clock_(c.device, c.model.spec.n_layers) {
    const size_t bytes = static_cast<size_t>(spec_.kv_dim()) * ctx_ * dtype_block_bytes(dtype_);
    for (int s = 0; s < c.n_seqs; ++s) {
      host_.push_back(std::make_unique<HostStore>(spec_, dtype_, ctx_, topology_, placement_,
                                                   HostStore::kDefaultBlockTokens, device_.dma_registrar()));
      for (auto& buf : staging_) {
        KvView v;
        v.dtype = dtype_;
        v.capacity = ctx_;
        v.n_kv_heads = spec_.n_kv_heads;
        v.head_dim = spec_.head_dim;
        v.k = device_.alloc(bytes);
        v.v = device_.alloc(bytes);
        buf.views.push_back(v);
      }
    }
  }

  ~OffloadAttention() override {
    device_.synchronize();  // no copy may still write into a buffer freed here
    for (auto& buf : staging_)
      for (auto& v : buf.views) {
        device_.free(v.k);
        device_.free(v.v);
      }
  }

  int length(int seq) const override { return lengths_[static_cast<size_t>(seq)]; }
  int64_t device_tokens(int /*seq*/) const override { return 0; }  // every token lives on the host
  void reset(int seq) override {
    lengths_[static_cast<size_t>(seq)] = 0;
    host_[static_cast<size_t>(seq)]->clear();
  }

  void begin_step(const std::vector<TokenRow>& rows, bool prefill, std::span<const StepPlan>) override {
    prefill_ = prefill;
    seqs_.clear();
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i + 1 < rows.size() && rows[i + 1].seq == rows[i].seq) continue;  // last row of a sequence
      const int seq = rows[i].seq, end = rows[i].pos + 1;
      if (end > ctx_)
        throw Error("sequence " + std::to_string(seq) + ": " + std::to_string(end) + " tokens exceed the context of " +
                    std::to_string(ctx_));
      HostStore& h = *host_[static_cast<size_t>(seq)];
      h.append_tokens(end - static_cast<int>(h.n_tokens()));
      seqs_.push_back(seq);
    }
    for (auto& buf : staging_) buf.layer = -1;
    load(0);
  }

  void layer_input(int layer, const float*, const std::vector<TokenRow>&) override {
    if (!prefill_) clock_.layer_start(layer);
    if (layer + 1 < spec_.n_layers) load(layer + 1);
  }

  void attend(int layer, const float* q, const float* k, const float* v, const std::vector<TokenRow>& rows,
              float* out) override {
    Staging& buf = staging_[static_cast<size_t>(layer % 2)];
    if (buf.layer != layer) throw Error("offload: layer " + std::to_string(layer) + " was not loaded");
    // the layer's prefix must be on the device: T_tx is the part of the transfer not hidden
    if (!prefill_) clock_.transfer_begin(layer);
    device_.wait_copy_fence(buf.fence);
    if (!prefill_) clock_.transfer_end(layer, buf.bytes);

    const int n = static_cast<int>(rows.size());
    const int kv_dim = spec_.kv_dim();
    // attn = softmax(q·Kᵀ/√d)·V over the staged prefix and the new rows, per sequence
    for (int begin = 0; begin < n;) {
      int end = begin + 1;
      while (end < n && rows[static_cast<size_t>(end)].seq == rows[static_cast<size_t>(begin)].seq) ++end;
      const TokenRow& first = rows[static_cast<size_t>(begin)];
      const KvView& view = buf.views[static_cast<size_t>(first.seq)];
      device_.kv_store(view, k + static_cast<int64_t>(begin) * kv_dim, v + static_cast<int64_t>(begin) * kv_dim,
                       end - begin, first.pos);
      write_back(layer, first.seq, view, first.pos, end - begin);
      device_.attention(q + static_cast<int64_t>(begin) * spec_.q_dim(), end - begin, spec_.n_heads, view, first.pos,
                        scale_, out + static_cast<int64_t>(begin) * spec_.q_dim());
      begin = end;
    }
  }

  void layers_done() override {
    if (!prefill_) clock_.layers_done();
  }

  void end_step(const std::vector<TokenRow>& rows) override {
    for (size_t i = 0; i < rows.size(); ++i)
      if (i + 1 == rows.size() || rows[i + 1].seq != rows[i].seq)
        lengths_[static_cast<size_t>(rows[i].seq)] = rows[i].pos + 1;
    if (prefill_) return;
    clock_.end_step();
    for (int l = 0; l < spec_.n_layers; ++l) {
      LayerStats& st = clock_.stats(l);
      st.steps += 1;
      st.bytes_h2d += clock_.bytes_h2d(l);
      for (int seq : seqs_) st.host_tokens += lengths_[static_cast<size_t>(seq)] * spec_.n_kv_heads;
    }
  }

  // The host stores as a prefill of n_tokens would leave them (the same begin/end bookkeeping),
  // with the source's rows and no attention computed.
  void fill(int seq, int n_tokens, const KvRowSource& source) override {
    KvFill fill(device_, spec_.kv_dim());
    const std::vector<TokenRow>* chunk = nullptr;
    fill.run(
        seq, n_tokens, source, spec_.n_layers,
        [&](const std::vector<TokenRow>& rows) {
          chunk = &rows;
          begin_step(rows, true, {});
        },
        [&](int layer, int, const float*, const float*, const float* k_host, const float* v_host) {
          store_host(layer, *chunk, k_host, v_host);
        },
        [&](const std::vector<TokenRow>& rows) { end_step(rows); });
  }

  std::vector<LayerStats>* layer_stats() override { return clock_.all_stats(); }
  const StepTiming* last_step_timing() const override { return clock_.last(); }
  std::string describe() const override {
    return describe_policy(policy_preset("offload")) + "; " + placement_.describe();
  }

 private:
  struct Staging {
    std::vector<KvView> views;  // per sequence: [n_kv_heads][ctx][head_dim]
    int layer = -1;             // the layer it holds (or is being loaded with)
    int64_t fence = 0;          // copy fence behind its load
    int64_t bytes = 0;          // what its load copies host -> device
  };

  // k_host, v_host: [rows][kv_dim] fp32, each row's into its sequence's host store at its position
  // (fill's rows, which come from the host).
  void store_host(int layer, const std::vector<TokenRow>& rows, const float* k_host, const float* v_host) {
    const int kv_dim = spec_.kv_dim();
    for (size_t i = 0; i < rows.size(); ++i) {
      HostStore& h = *host_[static_cast<size_t>(rows[i].seq)];
      for (int g = 0; g < spec_.n_kv_heads; ++g) {
        const size_t src = i * kv_dim + static_cast<size_t>(g) * spec_.head_dim;
        cpu::store_kv_row(dtype_, h.k_row(layer, g, rows[i].pos), k_host + src, spec_.head_dim);
        cpu::store_kv_row(dtype_, h.v_row(layer, g, rows[i].pos), v_host + src, spec_.head_dim);
      }
    }
  }

  // store_cache: the new rows, as kv_store wrote them into the staging view (the cache dtype),
  // copied device -> host into the sequence's host store, where the next steps load them from.
  // The copies are queued behind kv_store and ahead of the next load (copies_after_compute), so
  // with the store registered for DMA nothing here waits for the device.
  void write_back(int layer, int seq, const KvView& view, int64_t pos0, int n) {
    HostStore& h = *host_[static_cast<size_t>(seq)];
    const KvLayout kl = h.k_layout(layer);
    const size_t row = kl.row_bytes();
    for (int g = 0; g < spec_.n_kv_heads; ++g)
      kl.for_each_run(pos0, n, [&](int64_t t, int64_t run) {
        const size_t src = (static_cast<size_t>(g) * ctx_ + static_cast<size_t>(t)) * row;
        device_.copy_to_host_async(h.k_row(layer, g, t), static_cast<const std::byte*>(view.k) + src, run * row);
        device_.copy_to_host_async(h.v_row(layer, g, t), static_cast<const std::byte*>(view.v) + src, run * row);
      });
  }

  // load_cache(layer): the prefix each sequence of the step had before it, host -> staging.
  void load(int layer) {
    Staging& buf = staging_[static_cast<size_t>(layer % 2)];
    device_.copies_after_compute();  // the buffer's previous layer has finished with it
    int64_t bytes = 0;
    regions_.clear();
    for (int seq : seqs_) {
      const HostStore& h = *host_[static_cast<size_t>(seq)];
      const KvView& view = buf.views[static_cast<size_t>(seq)];
      const int64_t past = lengths_[static_cast<size_t>(seq)];
      const KvLayout kl = h.k_layout(layer), vl = h.v_layout(layer);
      const size_t row = kl.row_bytes();
      for (int g = 0; g < spec_.n_kv_heads; ++g)
        kl.for_each_run(0, past, [&](int64_t t, int64_t run) {
          const size_t dst = (static_cast<size_t>(g) * ctx_ + static_cast<size_t>(t)) * row;
          regions_.push_back({static_cast<std::byte*>(view.k) + dst, kl.row(g, t), run * row});
          regions_.push_back({static_cast<std::byte*>(view.v) + dst, vl.row(g, t), run * row});
        });
      bytes += 2 * past * static_cast<int64_t>(row) * spec_.n_kv_heads;
    }
    device_.copy_to_device_async_batch(regions_.data(), regions_.size());
    buf.fence = device_.copy_fence();
    buf.layer = layer;
    buf.bytes = bytes;
  }

  Device& device_;
  const ModelSpec& spec_;
  std::vector<Device::CopyRegion> regions_;  // load()'s copies of one layer (reused)
  DType dtype_;
  int ctx_;
  mem::Topology topology_;
  mem::Placement placement_;
  float scale_;
  std::vector<int> lengths_;                      // per sequence: tokens stored
  std::vector<std::unique_ptr<HostStore>> host_;  // per sequence: every token's K and V
  Staging staging_[2];                            // double buffer: layer ℓ in staging_[ℓ % 2]
  bool prefill_ = false;
  std::vector<int> seqs_;               // the step's sequences
  StepClock clock_;  // the step's timings and the run's statistics
};

}  // namespace

std::unique_ptr<LayerAttention> make_offload_attention(const AttentionContext& c,
                                                       const mem::PlacementOptions& placement) {
  return std::make_unique<OffloadAttention>(c, placement);
}

}  // namespace hg
