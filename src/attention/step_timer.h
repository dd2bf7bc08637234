// Per-step timings of an attention stage from Device timing marks (CUDA events; the steady clock
// on the CPU device): a mark when each layer starts and around its host -> device transfer,
// turned into that step's StepTiming at the step's end (one wait for the device, then reads).
#pragma once
#include <vector>

#include "attention/layer_attention.h"

namespace hg {

struct LayerMarks {
  int start = -1;     // the layer's first op
  int tx_begin = -1;  // around its host -> device transfer (-1: none)
  int tx_end = -1;
};

// For every layer: t_tx from (tx_begin, tx_end), t_dev = the layer's span less t_wait and t_tx
// (t_wait, t_host and bytes_h2d are the caller's, set before); adds span and t_tx to the run's
// LayerStats and counts the step.
void close_step_timing(Device& device, const std::vector<LayerMarks>& marks, StepTiming& timing,
                       std::vector<LayerStats>& stats);

}  // namespace hg
