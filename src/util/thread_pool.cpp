#include "util/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <string>
#include <system_error>

#include "hybridgen/error.h"

namespace hg {

namespace {
void pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
}
constexpr int kSpinIterations = 4000;

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

ThreadPool::ThreadPool(int n_threads, std::vector<int> pin_cpus) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    int cpu = pin_cpus.empty() ? -1 : pin_cpus[static_cast<size_t>(i) % pin_cpus.size()];
    try {
      workers_.emplace_back([this, i, cpu] {
        if (cpu >= 0) pin_current_thread(cpu);
        worker_loop(i);
      });
    } catch (const std::system_error& e) {
      // A destructor never runs for a half-built object: stop the workers started so far here,
      // or their joinable std::threads would call std::terminate.
      stop_workers();
      throw Error("cannot start thread " + std::to_string(i + 1) + " of " + std::to_string(n_threads_) + ": " +
                  e.what() + " (use fewer threads)");
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::run_chunk(int index) {
  const int64_t n_chunks = n_threads_;
  const int64_t units = (job_n_ + job_grain_ - 1) / job_grain_;
  const int64_t begin = std::min(job_n_, (units * index / n_chunks) * job_grain_);
  const int64_t end = std::min(job_n_, (units * (index + 1) / n_chunks) * job_grain_);
  if (begin < end) (*job_)(begin, end, index);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little (decode issues hundreds of short jobs per token), then sleep in the kernel
    // so an oversubscribed machine (ctest -j, other processes) is not starved by spinning.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    while (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = std::max<int64_t>(1, grain);
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_chunk(0);
  int left = pending_.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations; ++spin) {
    cpu_relax();
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    pending_.wait(left, std::memory_order_acquire);
    left = pending_.load(std::memory_order_acquire);
  }
  job_ = nullptr;
}

}  // namespace hg
