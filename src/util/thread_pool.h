// A fixed pool of worker threads, created once. parallel_for splits [0, n) into contiguous chunks,
// up to four per active thread, and the calling thread and the workers it wakes (a pool of N
// threads has N-1 workers) take them in order, each the next one left, until none is: a thread
// that runs ahead takes more chunks. Fixed shares (one chunk per thread) left the faster thread
// waiting at every barrier: at batch 8 on two cores the caller and the worker spent 7-10% of the
// decode step waiting for each other (SmolLM2, perf). Each worker has its own mailbox word: it
// spins on it for up to 5 ms, then sleeps on it (C++20 atomic wait, a futex), so decode's many
// small ops avoid syscalls and wake-ups (on a VM whose vCPUs the hypervisor takes away, a wake-up
// can cost more than the op) while an idle pool still leaves its cores within milliseconds, and a
// job wakes exactly the workers it uses.
//
// A chunk is claimed before it runs, by whoever takes it: a worker that has not started yet
// (descheduled on a busy machine, or still waking from its futex) leaves its share to the caller
// and the others instead of making them wait a scheduler time slice at every barrier — decode
// issues ~150 barriers per token on a small model. A worker takes chunks only of the job it was
// woken for, so a late one never runs on cores lent to another stage (below).
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
  // returns when all are done. thread_index < width(): the running thread's (0 for the caller),
  // so unique among the chunks running at once; a thread may run several chunks of a job, and
  // which thread runs which chunk varies from job to job. fn is called through a pointer, never
  // copied, so a call allocates nothing.
  template <typename Fn>
  void parallel_for(int64_t n, const Fn& fn, int64_t grain = 1) {
    run(
        n, grain, [](const void* f, int64_t b, int64_t e, int t) { (*static_cast<const Fn*>(f))(b, e, t); }, &fn);
  }

 private:
  using Invoke = void (*)(const void* fn, int64_t begin, int64_t end, int thread_index);
  struct alignas(64) Mailbox {
    std::atomic<uint32_t> posted{0};  // the number of the last job this worker was woken for
  };
  void run(int64_t n, int64_t grain, Invoke invoke, const void* fn);
  void worker_loop(int index);
  void stop_workers();
  // Claims and runs chunks of job `job` as thread `thread` until none is left.
  void run_chunks(uint32_t job, int thread);
  // Runs chunk `chunk` of the current job's `chunks` (claimed) and counts it done.
  void run_chunk(int chunk, int chunks, int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::unique_ptr<Mailbox[]> mailboxes_;  // [n_threads]; index 0 (the caller) unused
  // The claim word: job number (bits 32-63), chunks (16-31), next chunk to take (0-15). A claim
  // (a compare-exchange that bumps the next chunk) succeeds only for the job its taker was woken
  // for and only while chunks are left, i.e. while the caller is still inside that job, so the
  // job fields below stay valid for whoever holds a claim.
  alignas(64) std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};  // chunks finished in the current job
  uint32_t job_ = 0;          // the current job's number, 1, 2, ... (the caller's alone)
  std::atomic<int> started_{0};  // workers past their start-up (SIGINT blocked, pinned)
  std::atomic<int> reserved_{0};
  std::atomic<bool> stop_{false};
  // The job, written before the claim word is published and read only under a claim.
  Invoke job_invoke_ = nullptr;
  const void* job_fn_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
};

}  // namespace hg
