#include "engine/prefill_recorder.h"

#include <algorithm>

#include "device/device.h"
#include "engine/forward.h"
#include "hybridgen/error.h"

namespace hg {

PrefillRecorder::PrefillRecorder(PrefillState& state, const ModelSpec& spec, ThreadPool* pool)
    : state_(state), spec_(spec), pool_(pool) {
  for (const std::string& name : state_.score_names) specs_.push_back(PromptScoreSpec::parse(name));
  if (!specs_.empty() && !pool_) throw Error("prefill state: prompt scores need a thread pool to run on");
  for (PrefillState::Layer& l : state_.layers) l.scores.resize(specs_.size());
}

void PrefillRecorder::record(Device& d, const Scratch& s, int layer, const std::vector<TokenRow>& rows) {
  PrefillState::Layer& l = state_.layers[static_cast<size_t>(layer)];
  const size_t n = rows.size(), kv = static_cast<size_t>(spec_.kv_dim()), qd = static_cast<size_t>(spec_.q_dim());
  const size_t k0 = l.k.size();
  l.k.resize(k0 + n * kv);
  l.v.resize(k0 + n * kv);
  d.copy_to_host(l.k.data() + k0, s.k, sizeof(float) * n * kv);
  d.copy_to_host(l.v.data() + k0, s.v, sizeof(float) * n * kv);
  const int pos0 = rows.front().pos;
  const size_t q_rows = static_cast<size_t>(std::clamp(PrefillState::kQueryRows - pos0, 0, static_cast<int>(n)));
  if (q_rows > 0) {
    const size_t q0 = l.q.size();
    l.q.resize(q0 + q_rows * qd);
    d.copy_to_host(l.q.data() + q0, s.q, sizeof(float) * q_rows * qd);
  }
  if (specs_.empty()) return;
  q_.resize(n * qd);
  d.copy_to_host(q_.data(), s.q, sizeof(float) * q_.size());
  scorer_.add_chunk(*pool_, specs_, spec_, layer, q_.data(), static_cast<int>(n), pos0, l.k.data(), l.scores);
}

}  // namespace hg
