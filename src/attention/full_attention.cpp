// The `full` policy: every token's K and V in one contiguous device cache per sequence and
// layer; the device's fused causal attention over it.
#include <cmath>

#include "attention/kv_fill.h"
#include "attention/layer_attention.h"
#include "attention/prompt_state.h"
#include "device/cpu_attention.h"
#include "kv/kv_cache.h"

namespace hg {

namespace {

class FullAttention final : public LayerAttention, public PromptState {
 public:
  explicit FullAttention(const AttentionContext& c)
      : device_(c.device), spec_(c.model.spec), kv_(c.device, c.model.spec, c.kv_dtype, c.ctx, c.n_seqs) {}

  int length(int seq) const override { return kv_.length(seq); }
  void reset(int seq) override { kv_.set_length(seq, 0); }
  void begin_step(const std::vector<TokenRow>&, bool, std::span<const StepPlan>) override {}
  void layer_input(int, const float*, const std::vector<TokenRow>&) override {}

  void attend(int layer, const float* q, const float* k, const float* v, const std::vector<TokenRow>& rows,
              float* out) override {
    attend_runs(layer, q, k, v, rows, out, nullptr);
  }
  // A recorded prefill's rows are one sequence. On the CPU device (its caches are host memory) the
  // rows the device would give the tiled kernel run it here, on the device's pool, keeping the
  // scores' sums from its own score tiles: the same bits as the device's attention.
  bool attend_scored(int layer, const float* q, const float* k, const float* v, const std::vector<TokenRow>& rows,
                     float* out, const PromptMassSink& sink) override {
    return attend_runs(layer, q, k, v, rows, out, &sink);
  }
  PromptState* prompt_state() override { return this; }

  void end_step(const std::vector<TokenRow>& rows) override {
    for (size_t i = 0; i < rows.size(); ++i)
      if (i + 1 == rows.size() || rows[i + 1].seq != rows[i].seq) kv_.set_length(rows[i].seq, rows[i].pos + 1);
  }

  void fill(int seq, int n_tokens, const KvRowSource& source) override {
    KvFill fill(device_, spec_.kv_dim());
    fill.run(
        seq, n_tokens, source, spec_.n_layers, [](const std::vector<TokenRow>&) {},
        [&](int layer, int n, const float* k, const float* v, const float*, const float*) {
          device_.kv_store(kv_.view(seq, layer), k, v, n, kv_.length(seq));
        },
        [&](const std::vector<TokenRow>& rows) { end_step(rows); });
  }

  std::string describe() const override { return "full (all tokens on the device)"; }

 private:
  // Each run of one sequence's rows: its K and V into the cache, then the device's attention. With
  // a sink and one run on the CPU device, the prompt scores too: true when it kept them.
  bool attend_runs(int layer, const float* q, const float* k, const float* v, const std::vector<TokenRow>& rows,
                   float* out, const PromptMassSink* sink) {
    const int n = static_cast<int>(rows.size());
    const float scale = 1.0f / std::sqrt(static_cast<float>(spec_.head_dim));
    bool scored = false;
    for (int begin = 0; begin < n;) {
      int end = begin + 1;
      while (end < n && rows[static_cast<size_t>(end)].seq == rows[static_cast<size_t>(begin)].seq) ++end;
      const TokenRow& first = rows[static_cast<size_t>(begin)];
      const KvView& view = kv_.view(first.seq, layer);
      device_.kv_store(view, k + static_cast<int64_t>(begin) * spec_.kv_dim(),
                       v + static_cast<int64_t>(begin) * spec_.kv_dim(), end - begin, first.pos);
      const float* q_run = q + static_cast<int64_t>(begin) * spec_.q_dim();
      float* out_run = out + static_cast<int64_t>(begin) * spec_.q_dim();
      ThreadPool* pool = device_.cpu_pool();
      if (sink && pool && begin == 0 && end == n && n > kCpuSplitMaxRows) {
        tiled_.causal(*pool, q_run, n, spec_.n_heads, view, first.pos, scale, out_run, device_.bf16_compute(),
                      sink->softmax, sink->mass, sink->ld_mass);
        scored = true;
      } else {
        device_.attention(q_run, end - begin, spec_.n_heads, view, first.pos, scale, out_run);
      }
      begin = end;
    }
    return scored;
  }

  Device& device_;
  const ModelSpec& spec_;
  KvCache kv_;
  CpuTiledAttention tiled_;  // a recorded prefill's scored attention on the CPU device
};

}  // namespace

std::unique_ptr<LayerAttention> make_full_attention(const AttentionContext& c) {
  return std::make_unique<FullAttention>(c);
}

}  // namespace hg
