// The host stage: one coordinator thread driving a pool of host worker threads, fed by a job
// queue. The device thread submits a layer's host work (logits, selection, gathers) and later
// waits for it on that layer's completion event; waits block on a condition variable, so the
// device stage keeps the cores it needs. Exceptions thrown by a job resurface in wait().
//
// Job-slot protocol (no allocation per job): a job is a small trivially copyable callable (a
// lambda capturing pointers, sizes and references) copied into its completion slot's inline
// storage at submit(); the slot owns that copy until wait(slot) returns, so the job's arguments
// outlive the job by construction. What the captured pointers and references point to must stay
// valid until wait(slot) returns — run() waits itself; the decode pipeline waits for layer L's
// job within the step that submitted it. The queue is a ring of slot indices (each slot is
// queued at most once), so submitting never allocates either.
//
// Shared cores (the CPU device, src/sched/cores.h): given the device's pool, the stage reserves
// n_threads of its cores from the first submit until its queue runs empty, so the device runs on
// every core while the host has nothing to do, and never on the host's while it works.
//
// Inline (the CPU device with n_threads >= the pool's size, CorePlan::shared, which the default
// --host-threads 0 gives): the host could only take every core but the device thread's, so
// nothing would overlap; the stage starts no thread of its own and wait(slot) runs the queued
// jobs up to slot, in submission order, on the device's pool from the calling (device) thread.
// Same results and timings (each job's own seconds), without N + 1 threads on N cores and two
// thread hand-overs per layer: cpu-attn at depth 4096 on a 2-vCPU VM went from 34.5-37.6 to
// 43.8-47.1 tok/s (docs/performance.md).
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "util/thread_pool.h"

namespace hg {

class HostStage {
 public:
  static constexpr size_t kJobBytes = 64;  // inline storage of one job (8 pointers)

  // n_threads host threads in all (the coordinator is one of them), pinned to pin_cpus if given;
  // shared_cores: the pool whose cores they run on (nullptr: cores of their own).
  HostStage(int n_threads, int n_slots, std::vector<int> pin_cpus = {}, ThreadPool* shared_cores = nullptr);
  ~HostStage();
  HostStage(const HostStage&) = delete;
  HostStage& operator=(const HostStage&) = delete;

  // Queues job(pool) for completion slot `slot` (e.g. a layer); the slot must not have a job
  // pending. The job is copied into the slot (see the protocol above).
  template <typename Job>
  void submit(int slot, const Job& job) {
    static_assert(std::is_trivially_copyable_v<Job>, "a host job must be trivially copyable (capture pointers)");
    static_assert(sizeof(Job) <= kJobBytes && alignof(Job) <= alignof(std::max_align_t),
                  "a host job must fit HostStage::kJobBytes");
    submit_raw(
        slot, [](const void* storage, ThreadPool& pool) { (*static_cast<const Job*>(storage))(pool); }, &job,
        sizeof(Job));
  }
  // Blocks until slot's job finished; returns how long it ran (s). Rethrows its exception.
  double wait(int slot);
  bool pending(int slot);
  // submit + wait
  template <typename Job>
  double run(int slot, const Job& job) {
    submit(slot, job);
    return wait(slot);
  }

 private:
  using Invoke = void (*)(const void* storage, ThreadPool& pool);
  struct Slot {
    alignas(std::max_align_t) std::byte storage[kJobBytes];  // the job's copy
    Invoke invoke = nullptr;
    bool queued = false;
    bool done = false;
    double seconds = 0;
    std::exception_ptr error;
  };
  void submit_raw(int slot, Invoke invoke, const void* job, size_t bytes);
  void loop();
  // Runs job on pool and records its time and exception in it (not its `done`).
  static void run_job(Slot& job, ThreadPool& pool);

  std::vector<int> pin_cpus_;
  int n_threads_;
  ThreadPool* shared_cores_;
  bool inline_;  // jobs run in wait() on shared_cores_ (see above)
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<int> ring_;  // queued slot indices, FIFO: [head_, head_ + count_) mod size
  size_t head_ = 0, count_ = 0;
  std::vector<Slot> slots_;
  bool stop_ = false;
  bool lent_ = false;  // whether n_threads_ of shared_cores_ are reserved (from submit to idle)
  // Made by the constructor, so that a thread the system refuses is an hg::Error for the caller
  // (inside the coordinator it would be std::terminate); only the coordinator calls parallel_for.
  // Neither exists inline.
  std::unique_ptr<ThreadPool> pool_;
  std::thread coordinator_;
};

}  // namespace hg
