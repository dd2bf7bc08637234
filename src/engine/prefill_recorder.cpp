#include "engine/prefill_recorder.h"

#include <algorithm>

#include "device/device.h"
#include "attention/prompt_state.h"
#include "hybridgen/error.h"
#include "kernels/cpu/attention.h"

namespace hg {

RecordingAttention::RecordingAttention(LayerAttention& inner, Device& device, PrefillState& state,
                                       const ModelSpec& spec, DType kv_dtype, ThreadPool* pool)
    : inner_(inner), device_(device), state_(state), spec_(spec), pool_(pool), kv_dtype_(kv_dtype) {
  for (const std::string& name : state_.score_names) specs_.push_back(PromptScoreSpec::parse(name));
  if (!specs_.empty() && !pool_) throw Error("prefill state: prompt scores need a thread pool to run on");
  for (PrefillState::Layer& l : state_.layers) l.scores.resize(specs_.size());
  k_rounded_.resize(state_.layers.size());
}

void RecordingAttention::attend(int layer, const float* q, const float* k, const float* v,
                                const std::vector<TokenRow>& rows, float* out) {
  bool scored = false;  // the stage's attention wrote the scores' sums
  PromptState* ps = inner_.prompt_state();
  if (specs_.empty()) {
    inner_.attend(layer, q, k, v, rows, out);
  } else {
    const PromptMassSink sink =
        scorer_.begin_chunk(specs_, spec_, layer, static_cast<int>(rows.size()), rows.front().pos, kv_dtype_,
                            device_.bf16_compute());
    if (ps)
      scored = ps->attend_scored(layer, q, k, v, rows, out, sink);
    else
      inner_.attend(layer, q, k, v, rows, out);
  }
  Device& d = device_;
  PrefillState::Layer& l = state_.layers[static_cast<size_t>(layer)];
  const size_t n = rows.size(), kv = static_cast<size_t>(spec_.kv_dim()), qd = static_cast<size_t>(spec_.q_dim());
  const size_t k0 = l.k.size();
  l.k.resize(k0 + n * kv);
  l.v.resize(k0 + n * kv);
  d.copy_to_host(l.k.data() + k0, k, sizeof(float) * n * kv);
  d.copy_to_host(l.v.data() + k0, v, sizeof(float) * n * kv);
  const int pos0 = rows.front().pos;
  const size_t q_rows = static_cast<size_t>(std::clamp(PrefillState::kQueryRows - pos0, 0, static_cast<int>(n)));
  if (q_rows > 0) {
    const size_t q0 = l.q.size();
    l.q.resize(q0 + q_rows * qd);
    d.copy_to_host(l.q.data() + q0, q, sizeof(float) * q_rows * qd);
  }
  if (specs_.empty()) return;
  if (!scored) {
    q_.resize(n * qd);
    d.copy_to_host(q_.data(), q, sizeof(float) * q_.size());
    // the keys as the cache holds them, as the attention's own scores see them (rounded once: the
    // rows this layer has not needed yet)
    std::vector<float>& kr = k_rounded_[static_cast<size_t>(layer)];
    for (size_t i = kr.size(); i < l.k.size(); i += kv) {
      kr.resize(i + kv);
      cpu::round_kv_row(kv_dtype_, l.k.data() + i, kr.data() + i, static_cast<int>(kv));
    }
    scorer_.compute_chunk(*pool_, q_.data(), kr.data());
  }
  scorer_.end_chunk(*pool_, l.scores);
}

}  // namespace hg
