#include "sched/cores.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "hybridgen/error.h"

namespace hg {

std::string CorePlan::describe() const {
  std::string s = std::to_string(device_threads) + " device threads";
  if (shared)
    s += "; the host stage runs inline on them (-t is not larger than --host-threads " + std::to_string(host_threads) +
         ")";
  else if (host_threads > 0)
    s += " (" + std::to_string(device_width) + " while the " + std::to_string(host_threads) + " host workers compute)";
  return s;
}

double CorePlan::host_share() const {
  if (host_threads == 0) return 0;
  if (shared) return 1;
  return static_cast<double>(device_threads - device_width) / device_threads;
}

CorePlan plan_cores(int threads, int available, int host_threads, bool cpu_device) {
  if (threads < 0) throw Error("-t/--threads must be >= 0 (0: all cores), got " + std::to_string(threads));
  const int total = threads > 0 ? threads : std::max(1, available);
  CorePlan plan;
  plan.host_threads = std::max(0, host_threads);
  plan.device_threads = total;
  plan.device_width = total;
  if (!cpu_device || plan.host_threads == 0) return plan;
  if (shares_every_core(total, plan.host_threads)) {
    plan.shared = true;  // the device never gives a core away: the host jobs run on its pool
    return plan;
  }
  plan.device_width = total - plan.host_threads;
  return plan;
}

int resolve_host_threads(int host_threads, int threads) {
  if (host_threads > 0) return host_threads;
  return threads > 0 ? threads : available_cpus();
}

std::string resolve_device_defaults(Policy& p, bool cpu_device, int threads, int available) {
  if (!p.splits_kv()) return "";
  std::string chosen;
  const auto say = [&](const std::string& what) { chosen += (chosen.empty() ? "" : ", ") + what; };
  if (p.host_threads == kHostThreadsAuto) {
    p.host_threads = cpu_device ? 0 : 1;
    say(cpu_device ? "host stage inline on every core (--host-threads auto: the device and host stages share "
                     "the cores, so overlapping them gains nothing)"
                   : "1 host worker overlapping the GPU (--host-threads auto)");
  }
  if (p.query == QuerySource::Auto) {
    const int total = threads > 0 ? threads : std::max(1, available);
    const bool inline_stage = cpu_device && shares_every_core(total, resolve_host_threads(p.host_threads, threads));
    p.query = inline_stage ? QuerySource::Exact : QuerySource::Refine;
    say(inline_stage ? "exact query (--query auto: an inline host stage has the layer's own query)"
                     : "refine query (--query auto: the host workers select with the query predicted from the "
                       "previous layer while the device computes, then score with the true one)");
  }
  if (chosen.empty()) return "";
  return std::string(cpu_device ? "CPU device" : "CUDA device") + " defaults: " + chosen;
}

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace hg
