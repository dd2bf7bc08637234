// A fixed pool of worker threads, created once. parallel_for splits [0, n) into one contiguous
// chunk per active thread; the calling thread runs chunk 0, so a pool of N threads has N-1 workers.
// Each worker has its own mailbox word: it spins on it for up to 5 ms, then sleeps on it (C++20
// atomic wait, a futex), so decode's many small ops avoid syscalls and wake-ups (on a VM whose
// vCPUs the hypervisor takes away, a wake-up can cost more than the op) while an idle pool still
// leaves its cores within milliseconds, and a job wakes exactly the workers it uses.
//
// A chunk is claimed before it runs, by its worker or by the caller: once the caller has run its
// own chunk it takes the chunks whose workers have not started yet. On a quiet machine the
// spinning workers have long claimed theirs; on a busy one (other processes runnable, a worker
// descheduled) the caller does the work instead of waiting a scheduler time slice at every
// barrier — decode issues ~150 barriers per token on a small model.
//
// Active width: another stage that runs threads on this pool's cores (the host stage on the CPU
// device, src/sched/cores.h) reserve()s them while it computes; parallel_for then uses only
// width() = size() - reserved threads, and the parked workers sleep (they stop spinning as soon as
// the reservation is made), so the two stages together never run more threads than there are
// cores, and every core serves this pool again once the other stage releases it.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace hg {

// Logical CPUs of this machine (std::thread::hardware_concurrency), at least 1: the bound of
// every thread-count option.
int hardware_threads();

class ThreadPool {
 public:
  // hg::Error (not std::terminate) when the system refuses a thread; the ones started are joined.
  explicit ThreadPool(int n_threads, std::vector<int> pin_cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Threads the next parallel_for runs on: size() less the reserved ones, at least 1.
  int width() const;
  // Lends n of this pool's cores to another stage until release(n); both are thread-safe and
  // take effect at the next parallel_for (a running one finishes at its width).
  void reserve(int n);
  void release(int n);

  // Runs fn(begin, end, thread_index) over [0, n) split into chunks aligned to `grain` elements;
  // returns when all are done. thread_index < size(), unique among the chunks running at once.
  // fn is called through a pointer, never copied, so a call allocates nothing.
  template <typename Fn>
  void parallel_for(int64_t n, const Fn& fn, int64_t grain = 1) {
    run(
        n, grain, [](const void* f, int64_t b, int64_t e, int t) { (*static_cast<const Fn*>(f))(b, e, t); }, &fn);
  }

 private:
  using Invoke = void (*)(const void* fn, int64_t begin, int64_t end, int thread_index);
  struct alignas(64) Mailbox {
    std::atomic<uint32_t> posted{0};  // bumped once per job this worker takes part in
  };
  void run(int64_t n, int64_t grain, Invoke invoke, const void* fn);
  void worker_loop(int index);
  void stop_workers();
  void run_chunk(int index);
  bool claim(int index, uint64_t job);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::unique_ptr<Mailbox[]> mailboxes_;  // [n_threads]; index 0 (the caller) unused
  // Per chunk index: 2 * job while chunk `index` of that job waits for a runner, 2 * job + 1 once
  // claimed. A claim of job j succeeds only while the caller is still inside job j, so the job
  // fields below stay valid for whoever holds a claim.
  std::unique_ptr<std::atomic<uint64_t>[]> claims_;
  std::atomic<uint64_t> job_{0};  // the current job's number, 1, 2, ...
  std::atomic<int> done_{0};      // chunks other than 0 finished in the current job
  std::atomic<int> started_{0};   // workers past their start-up (SIGINT blocked, pinned)
  std::atomic<int> reserved_{0};
  std::atomic<bool> stop_{false};
  // The job, written before the mailboxes are bumped and read only by the workers posted.
  Invoke job_invoke_ = nullptr;
  const void* job_fn_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  int job_chunks_ = 1;
};

}  // namespace hg
