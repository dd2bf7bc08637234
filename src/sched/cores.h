// How the cores are shared between the device stage and the host stage. On the CPU device both
// stages are CPU threads: `-t N` is the TOTAL of the run (0: every CPU this process may use), and
// a policy with a host stage carves its `--host-threads H` workers out of it, leaving N - H to
// the device, so the two stages never run more threads than there are cores and the host work
// really overlaps the device work instead of stealing its cores. T_dev (the device stage's time,
// waits excluded) is then what the device takes on its own share of the cores, which is the
// figure the feedback scheduler must balance the host against. With too few cores to split
// (N <= H) both stages share them, and the plan says so (the engine logs it once).
//
// On a CUDA device the device stage runs on the GPU: the host workers are H threads and -t does
// not limit them.
#pragma once
#include <string>

namespace hg {

struct CorePlan {
  int device_threads = 1;  // CPU device thread pool (unused by a CUDA device)
  int host_threads = 0;    // host-stage workers (0: the policy has no host stage)
  bool shared = false;     // the stages share cores (too few to partition)
  std::string describe() const;
};

// threads: -t (0: all); available: CPUs this process may run on; host_threads: 0 when the policy
// has no host stage.
CorePlan plan_cores(int threads, int available, int host_threads, bool cpu_device);
// CPUs this process may run on (sched_getaffinity; hardware_concurrency when that fails).
int available_cpus();

}  // namespace hg
