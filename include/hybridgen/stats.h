// Timing counters the engine fills and the CLI prints.
#pragma once
#include <cstdint>
#include <vector>

namespace hg {

// One layer's attention-stage times of ONE step (seconds), measured through Device timing marks
// (CUDA events on the CUDA device, the steady clock on the CPU device).
struct LayerStepTiming {
  double t_dev = 0;   // device work of the layer: its span on the device less t_wait and t_tx
  double t_host = 0;  // the host stage's job for this layer (logits, selection, gathers)
  double t_tx = 0;    // host -> device copies of the layer (selected logits/V rows, streamed KV)
  double t_wait = 0;  // the device thread waiting for the host stage
  int64_t bytes_h2d = 0;
};

// The figures of the latest decode step, per layer: what a feedback scheduler reads after each
// step (Engine::last_step_timing). `step` counts decode steps since the engine was built; -1
// before the first one.
struct StepTiming {
  int64_t step = -1;
  std::vector<LayerStepTiming> layers;  // [n_layers]

  double t_dev() const { return sum(&LayerStepTiming::t_dev); }
  double t_host() const { return sum(&LayerStepTiming::t_host); }
  double t_tx() const { return sum(&LayerStepTiming::t_tx); }
  double t_wait() const { return sum(&LayerStepTiming::t_wait); }

 private:
  double sum(double LayerStepTiming::*field) const {
    double s = 0;
    for (const auto& l : layers) s += l.*field;
    return s;
  }
};

struct RunStats {
  int64_t prefill_tokens = 0;
  double prefill_seconds = 0.0;
  int64_t decode_tokens = 0;     // tokens produced by decode steps (all sequences)
  int64_t decode_steps = 0;
  double decode_seconds = 0.0;
  std::vector<double> step_ms;   // wall time of every decode step

  double prefill_tps() const { return prefill_seconds > 0 ? prefill_tokens / prefill_seconds : 0.0; }
  double decode_tps() const { return decode_seconds > 0 ? decode_tokens / decode_seconds : 0.0; }
  void reset() { *this = RunStats{}; }
};

}  // namespace hg
