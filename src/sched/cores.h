// How the cores are shared between the device stage and the host stage. On the CPU device both
// stages are CPU threads: `-t N` is the TOTAL of the run (0: every CPU this process may use).
// The CPU device's pool spans all N; a policy with a host stage runs `--host-threads H` workers
// besides, and while they compute (from a layer's submit until their queue is empty) they
// reserve H of the pool's cores: its parallel_for then runs on N - H threads and the parked
// ones sleep, so the two stages never run more threads than there are cores and the host work
// really overlaps the device work instead of stealing its cores. The split is elastic: the
// moment the host stage is idle the device has all N cores again, and prefill, whose host
// attention nothing overlaps (the device waits for it), runs both its device ops and that host
// attention on all N. T_dev (the device stage's time, waits excluded) is what the device takes
// on the cores the host leaves it, which is the figure the feedback scheduler must balance the
// host against. With too few cores to split (N <= H, which the default --host-threads 0 gives)
// a split would leave the device one thread beside N host threads and nothing would overlap: the
// host stage runs inline instead (HostStage: the device thread runs each layer's host job on the
// device's pool, all N cores, when the layer waits for it), and the plan says so (the engine
// logs it once).
//
// On a CUDA device the device stage runs on the GPU: the host workers are H threads and -t does
// not limit them.
#pragma once
#include <string>

#include "hybridgen/policy.h"

namespace hg {

struct CorePlan {
  int device_threads = 1;  // CPU device thread pool (unused by a CUDA device): every core of the run
  int host_threads = 0;    // host-stage workers (0: the policy has no host stage)
  int device_width = 1;    // CPU device threads while the host workers compute
  bool shared = false;     // too few cores to partition (N <= H): the host stage runs inline
  std::string describe() const;
  // The share of the CPU device's throughput the host workers take while they compute:
  // (device_threads - device_width) / device_threads, 1 when the stages share every core; 0
  // without a host stage or on a CUDA device.
  double host_share() const;
};

// threads: -t (0: all); available: CPUs this process may run on; host_threads: 0 when the policy
// has no host stage.
CorePlan plan_cores(int threads, int available, int host_threads, bool cpu_device);
// Too few cores to split between the CPU device's pool and the host workers (N <= H): the host
// stage runs inline on the pool. The one test of it, for plan_cores and HostStage alike.
inline bool shares_every_core(int device_threads, int host_threads) { return device_threads <= host_threads; }
// CPUs this process may run on (sched_getaffinity; hardware_concurrency when that fails).
int available_cpus();
// The host workers of --host-threads H: H, or for 0 every core of the run: `threads` (-t) when it
// is set, else every CPU this process may use.
int resolve_host_threads(int host_threads, int threads);

// The knobs a split policy leaves to the device (--host-threads auto, --query auto, the presets'
// defaults), set to the device's choice; a knob given explicitly is kept. Returns what was
// chosen and why, one line for the logs, --stats, bench rows and `info` ("" when nothing was
// left to choose):
//   * The CPU device: the host stage inline on every core of the run (--host-threads 0) with the
//     exact query. The device stage and the host stage would run on the same cores and the same
//     memory bus, so host work overlapped with the device's only takes from it; inline, each
//     layer's host part runs on every core when the layer needs it, with the layer's own query
//     (the speculative query of an overlapped host stage would only cost accuracy). Measured on
//     2 vCPUs: 1.25-1.6x the decode speed of the earlier defaults, one overlapped worker with
//     refine (docs/performance.md, "hybrid's defaults chosen by the device").
//   * A CUDA device: one host worker beside the GPU, the refine query: the host selects with the
//     next layer's query predicted from this layer's input while the GPU computes this layer,
//     then scores the chosen tokens with the true query (the paper's overlap).
// --query auto follows the host stage that results: exact where it runs inline (an explicit
// --host-threads not below -t on the CPU device included), refine where workers overlap.
std::string resolve_device_defaults(Policy& p, bool cpu_device, int threads, int available);

}  // namespace hg
