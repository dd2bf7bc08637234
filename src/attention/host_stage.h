// The host stage: one coordinator thread driving a pool of host worker threads, fed by a job
// queue. The device thread submits a layer's host work (logits, selection, gathers) and later
// waits for it on that layer's completion event; waits block on a condition variable, so the
// device stage keeps the cores it needs. Exceptions thrown by a job resurface in wait().
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "util/thread_pool.h"

namespace hg {

class HostStage {
 public:
  using Job = std::function<void(ThreadPool&)>;

  // n_threads host threads in all (the coordinator is one of them), pinned to pin_cpus if given.
  HostStage(int n_threads, int n_slots, std::vector<int> pin_cpus = {});
  ~HostStage();
  HostStage(const HostStage&) = delete;
  HostStage& operator=(const HostStage&) = delete;

  // Queues a job for completion slot `slot` (e.g. a layer); the slot must not have a job pending.
  void submit(int slot, Job job);
  // Blocks until slot's job finished; returns how long it ran (s). Rethrows its exception.
  double wait(int slot);
  bool pending(int slot);
  // submit + wait
  double run(int slot, Job job);

 private:
  struct Slot {
    bool queued = false;
    bool done = false;
    double seconds = 0;
    std::exception_ptr error;
  };
  void loop();

  std::vector<int> pin_cpus_;
  int n_threads_;
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::pair<int, Job>> queue_;
  std::vector<Slot> slots_;
  bool stop_ = false;
  // Made by the constructor, so that a thread the system refuses is an hg::Error for the caller
  // (inside the coordinator it would be std::terminate); only the coordinator calls parallel_for.
  std::unique_ptr<ThreadPool> pool_;
  std::thread coordinator_;
};

}  // namespace hg
