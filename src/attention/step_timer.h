// The step clock of an attention stage: the per-layer times of each decode step from Device
// timing marks (CUDA events; the steady clock on the CPU device) and the run's per-layer
// statistics. A mark when each layer starts and around its host -> device transfer; the host's
// time and the device's wait as the stage measured them; the step's end is one more mark. The
// marks become that step's StepTiming (what the feedback scheduler reads) and go to the run's
// LayerStats (what --stats prints) when either is first read, or when the next step starts: by
// then the step's logits have been copied back, so a CUDA device reads its events without
// waiting for them. Prefill steps are not clocked.
// The hybrid policies' asynchronous pipeline (hybrid_attention.h) stamps its steps from its host
// callbacks instead, since a timing event would end a CUDA graph's capture: the steady clock
// when the step starts, when each layer's host callback lets the device go on, and when the last
// layer ends. A layer spans from the previous release (or the start) to its own (the last layer's
// to the end); its t_dev is that span less the wait host() recorded, so it runs to the callback's
// arrival; the transfer (t_tx) is not measured apart from t_dev.
#pragma once
#include <chrono>
#include <vector>

#include "attention/layer_attention.h"

namespace hg {

// The steady clock in seconds: the host's own timings (host jobs, waits, the pipeline's stamps).
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class StepClock {
 public:
  StepClock(Device& device, int n_layers);

  // The decode step being clocked (0-based): the number of steps ended so far.
  int64_t step() const { return ended_; }
  void layer_start(int layer) {
    resolve();
    marks_[static_cast<size_t>(layer)].start = device_.timing_mark(false);
  }
  void transfer_begin(int layer) { marks_[static_cast<size_t>(layer)].tx_begin = device_.timing_mark(false); }
  // The transfer is done: `bytes` crossed host -> device for this layer in this step.
  void transfer_end(int layer, int64_t bytes);
  // The layer's host job ran t_host seconds, of which the device waited t_wait.
  void host(int layer, double t_host, double t_wait);
  // The last layer's end (marked before the logits' copy, which then waits for it).
  void layers_done() { end_mark_ = device_.timing_mark(false); }
  // The step's end (marked now if layers_done was not called): the step counts.
  void end_step();
  // The asynchronous pipeline's stamps (steady clock, seconds), from host callbacks; a step that
  // calls stamp_start is timed by its stamps alone.
  void stamp_start(double t);
  // Before the device thread issues a stamped step: the previous step goes to timing and stats.
  void settle() const { resolve(); }
  void stamp_release(int layer, double t) { released_[static_cast<size_t>(layer)] = t; }
  void stamp_end(double t) { stamps_end_ = t; }
  // A stamped step's transfer: `bytes` cross host -> device for this layer.
  void shipped(int layer, int64_t bytes) { timing_.layers[static_cast<size_t>(layer)].bytes_h2d = bytes; }

  const StepTiming* last() const {
    resolve();
    return timing_.step >= 0 ? &timing_ : nullptr;
  }
  LayerStats& stats(int layer) { return stats_[static_cast<size_t>(layer)]; }
  // What transfer_end recorded for the layer in the current step.
  int64_t bytes_h2d(int layer) const { return timing_.layers[static_cast<size_t>(layer)].bytes_h2d; }
  std::vector<LayerStats>* all_stats() {
    resolve();
    return &stats_;
  }

 private:
  struct Marks {
    int start = -1;     // the layer's first op
    int tx_begin = -1;  // around its host -> device transfer (-1: none)
    int tx_end = -1;
  };
  // The ended step's marks into timing_ and stats_: t_tx from the transfer marks, t_dev = the
  // layer's span less t_wait and t_tx; span and t_tx go to the run's statistics.
  void resolve() const;

  // resolve() of a stamped step
  void resolve_stamps() const;

  Device& device_;
  std::vector<Marks> marks_;  // this step's, per layer
  mutable bool stamped_ = false;  // this step is timed by its stamps
  double stamps_start_ = 0, stamps_end_ = 0;
  std::vector<double> released_;  // per layer
  int64_t ended_ = 0;         // steps ended
  mutable int end_mark_ = -1;  // the step's last mark, until the step is resolved
  mutable bool pending_ = false;
  mutable StepTiming timing_;
  mutable std::vector<LayerStats> stats_;
};

}  // namespace hg
