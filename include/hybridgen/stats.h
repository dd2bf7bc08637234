// Timing counters the engine fills and the CLI prints.
#pragma once
#include <cstdint>
#include <vector>

namespace hg {

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
