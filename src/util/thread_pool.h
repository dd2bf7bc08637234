// A fixed pool of worker threads, created once. parallel_for splits [0, n) into one contiguous
// chunk per thread; the calling thread runs chunk 0, so a pool of N threads has N-1 workers.
// Workers spin briefly on a generation counter, then sleep on it (C++20 atomic wait, a futex), so
// decode's many small ops avoid syscalls on an idle machine without starving an oversubscribed one.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace hg {

// Logical CPUs of this machine (std::thread::hardware_concurrency), at least 1: the bound of
// every thread-count option.
int hardware_threads();

class ThreadPool {
 public:
  // fn(begin, end, thread_index)
  using RangeFn = std::function<void(int64_t, int64_t, int)>;

  // hg::Error (not std::terminate) when the system refuses a thread; the ones started are joined.
  explicit ThreadPool(int n_threads, std::vector<int> pin_cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn over [0, n) split into chunks aligned to `grain` elements; returns when all are done.
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

 private:
  void worker_loop(int index);
  void stop_workers();
  void run_chunk(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
};

}  // namespace hg
