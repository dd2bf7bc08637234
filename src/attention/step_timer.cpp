#include "attention/step_timer.h"

#include <algorithm>

namespace hg {

void close_step_timing(Device& device, const std::vector<LayerMarks>& marks, StepTiming& timing,
                       std::vector<LayerStats>& stats) {
  const int end = device.timing_mark(false);
  const auto seconds = [&](int a, int b) {
    return a < 0 || b < 0 ? 0.0 : std::max(0.0, device.timing_elapsed_ms(a, b)) * 1e-3;
  };
  const size_t n_layers = marks.size();
  for (size_t l = 0; l < n_layers; ++l) {
    const LayerMarks& m = marks[l];
    const int next = l + 1 < n_layers ? marks[l + 1].start : end;
    LayerStepTiming& lt = timing.layers[l];
    const double span = seconds(m.start, next);
    lt.t_tx = seconds(m.tx_begin, m.tx_end);
    lt.t_dev = std::max(0.0, span - lt.t_wait - lt.t_tx);
    stats[l].t_layer += span;
    stats[l].t_tx += lt.t_tx;
  }
  ++timing.step;
}

}  // namespace hg
