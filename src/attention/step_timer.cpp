#include "attention/step_timer.h"

#include <algorithm>

namespace hg {

StepClock::StepClock(Device& device, int n_layers)
    : device_(device),
      marks_(static_cast<size_t>(n_layers)),
      released_(static_cast<size_t>(n_layers)),
      stats_(static_cast<size_t>(n_layers)) {
  timing_.layers.resize(static_cast<size_t>(n_layers));
}

void StepClock::transfer_end(int layer, int64_t bytes) {
  marks_[static_cast<size_t>(layer)].tx_end = device_.timing_mark(false);
  timing_.layers[static_cast<size_t>(layer)].bytes_h2d = bytes;
}

void StepClock::host(int layer, double t_host, double t_wait) {
  LayerStepTiming& lt = timing_.layers[static_cast<size_t>(layer)];
  lt.t_host = t_host;
  lt.t_wait = t_wait;
  LayerStats& st = stats_[static_cast<size_t>(layer)];
  st.t_host += t_host;
  st.t_wait += t_wait;
}

void StepClock::stamp_start(double t) {
  stamped_ = true;
  stamps_start_ = stamps_end_ = t;
  std::fill(released_.begin(), released_.end(), t);
}

void StepClock::end_step() {
  if (end_mark_ < 0 && !stamped_) end_mark_ = device_.timing_mark(false);
  pending_ = true;
  ++ended_;
}

void StepClock::resolve() const {
  if (!pending_) return;
  pending_ = false;
  if (stamped_) return resolve_stamps();
  const int end = end_mark_;
  end_mark_ = -1;
  const auto seconds = [&](int a, int b) {
    return a < 0 || b < 0 ? 0.0 : std::max(0.0, device_.timing_elapsed_ms(a, b)) * 1e-3;
  };
  const size_t n_layers = marks_.size();
  // Every mark is on the compute stream: reading the step's end first waits once for all of them
  // (none at all once the step's logits were copied back).
  if (n_layers > 0) seconds(marks_[0].start, end);
  for (size_t l = 0; l < n_layers; ++l) {
    const Marks& m = marks_[l];
    const int next = l + 1 < n_layers ? marks_[l + 1].start : end;
    LayerStepTiming& lt = timing_.layers[l];
    const double span = seconds(m.start, next);
    lt.t_tx = seconds(m.tx_begin, m.tx_end);
    lt.t_dev = std::max(0.0, span - lt.t_wait - lt.t_tx);
    stats_[l].t_layer += span;
    stats_[l].t_tx += lt.t_tx;
  }
  ++timing_.step;
}

void StepClock::resolve_stamps() const {
  stamped_ = false;
  double previous = stamps_start_;
  const size_t n_layers = marks_.size();
  for (size_t l = 0; l < n_layers; ++l) {
    LayerStepTiming& lt = timing_.layers[l];
    const double next = l + 1 < n_layers ? released_[l] : std::max(released_[l], stamps_end_);
    const double span = std::max(0.0, next - previous);
    lt.t_tx = 0;
    lt.t_dev = std::max(0.0, span - lt.t_wait);
    stats_[l].t_layer += span;
    previous = released_[l];
  }
  ++timing_.step;
}

}  // namespace hg
