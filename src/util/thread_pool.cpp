#include "util/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

#include "hybridgen/error.h"
#include "util/signals.h"

namespace hg {

namespace {
void pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
}
// How long a thread spins for its next job (a worker) or for the job's end (the caller) before it
// sleeps on a futex. Time, not iterations: a pause takes 10-140 cycles depending on the core.
// 5 ms outlasts the gaps between a decode step's jobs even when the hypervisor takes a vCPU away
// for a while: on a 2-vCPU VM with heavy steal, a 100 us spin put the workers to sleep in those
// gaps, and every wake-up went through the hypervisor: SmolLM2's decode ran at 33-46 tok/s with
// it and 86-100 with the 5 ms spin, in alternating runs (docs/performance.md, 3 Dec 2026).
constexpr auto kSpinTime = std::chrono::microseconds(5000);
// Chunks per active thread: enough that the threads end a job within a quarter of a share of each
// other, few enough that each chunk still streams a long run of rows.
constexpr int64_t kChunksPerThread = 4;

// The claim word (thread_pool.h).
constexpr uint64_t claim_word(uint32_t job, int chunks, int next) {
  return uint64_t{job} << 32 | static_cast<uint64_t>(chunks) << 16 | static_cast<uint64_t>(next);
}
constexpr uint32_t claim_job(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
constexpr int claim_chunks(uint64_t w) { return static_cast<int>(w >> 16 & 0xffff); }
constexpr int claim_next(uint64_t w) { return static_cast<int>(w & 0xffff); }

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// Spins until ready() or kSpinTime has passed (the clock is read every 256 pauses); returns ready().
template <class Ready>
bool spin_until(Ready&& ready) {
  const auto end = std::chrono::steady_clock::now() + kSpinTime;
  for (uint32_t i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 256 == 0 && std::chrono::steady_clock::now() >= end) return ready();
  }
}

}  // namespace

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

ThreadPool::ThreadPool(int n_threads, std::vector<int> pin_cpus)
    : n_threads_(std::max(1, n_threads)),
      mailboxes_(std::make_unique<Mailbox[]>(static_cast<size_t>(n_threads_))) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    int cpu = pin_cpus.empty() ? -1 : pin_cpus[static_cast<size_t>(i) % pin_cpus.size()];
    try {
      workers_.emplace_back([this, i, cpu] {
        block_interrupt_signal();
        if (cpu >= 0) pin_current_thread(cpu);
        if (started_.fetch_add(1, std::memory_order_acq_rel) + 2 == n_threads_) started_.notify_one();
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
  // Every worker has blocked SIGINT before the pool is used: the caller may run a job's chunks
  // itself, so a job no longer guarantees that its workers have started, and a worker not yet
  // started would take a SIGINT meant for an InterruptScope's watcher (test_interrupt_scope).
  for (int n = started_.load(std::memory_order_acquire); n != n_threads_ - 1;
       n = started_.load(std::memory_order_acquire))
    started_.wait(n, std::memory_order_acquire);
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true, std::memory_order_release);
  for (size_t i = 1; i <= workers_.size(); ++i) {
    mailboxes_[i].posted.fetch_add(1, std::memory_order_acq_rel);
    mailboxes_[i].posted.notify_one();
  }
  for (auto& t : workers_) t.join();
  workers_.clear();
}

int ThreadPool::width() const { return std::max(1, n_threads_ - reserved_.load(std::memory_order_relaxed)); }

void ThreadPool::reserve(int n) { reserved_.fetch_add(n, std::memory_order_relaxed); }
void ThreadPool::release(int n) { reserved_.fetch_sub(n, std::memory_order_relaxed); }

void ThreadPool::run_chunks(uint32_t job, int thread) {
  uint64_t w = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (claim_job(w) != job || claim_next(w) >= claim_chunks(w)) return;
    if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    run_chunk(claim_next(w), claim_chunks(w), thread);
    w = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::run_chunk(int chunk, int chunks, int thread) {
  const int64_t units = (job_n_ + job_grain_ - 1) / job_grain_;
  const int64_t begin = std::min(job_n_, (units * chunk / chunks) * job_grain_);
  const int64_t end = std::min(job_n_, (units * (chunk + 1) / chunks) * job_grain_);
  if (begin < end) job_invoke_(job_fn_, begin, end, thread);
  // The last chunk lets the caller go on (and start the next job): nothing of this job is read
  // after it.
  if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_one();
}

void ThreadPool::worker_loop(int index) {
  std::atomic<uint32_t>& posted = mailboxes_[static_cast<size_t>(index)].posted;
  uint32_t seen = 0;
  for (;;) {
    // Spin (decode issues hundreds of short jobs per token) while this worker is within the
    // active width, then sleep in the kernel: a parked worker must leave its core to the stage it
    // was lent to at once, and an idle pool leaves its cores to other processes after kSpinTime.
    uint32_t now = posted.load(std::memory_order_acquire);
    spin_until([&] {
      now = posted.load(std::memory_order_acquire);
      return now != seen || index >= width();
    });
    while (now == seen) {
      posted.wait(seen, std::memory_order_acquire);
      now = posted.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    // Nothing left to take (the others ran the job without this worker, or a newer job is not
    // this worker's): the next post wakes it again.
    run_chunks(now, index);
  }
}

void ThreadPool::run(int64_t n, int64_t grain, Invoke invoke, const void* fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(width(), units));
  if (threads == 1) {
    invoke(fn, 0, n, 0);
    return;
  }
  const int chunks = static_cast<int>(std::min({units, threads * kChunksPerThread, int64_t{0xffff}}));
  // No worker touches the fields below now: every chunk of the previous job was claimed and done.
  job_invoke_ = invoke;
  job_fn_ = fn;
  job_n_ = n;
  job_grain_ = grain;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t job = ++job_ == 0 ? ++job_ : job_;  // 0 is a mailbox's "no job yet"
  claim_.store(claim_word(job, chunks, 1), std::memory_order_release);  // chunk 0 is the caller's
  for (int i = 1; i < threads; ++i) {
    mailboxes_[static_cast<size_t>(i)].posted.store(job, std::memory_order_release);
    mailboxes_[static_cast<size_t>(i)].posted.notify_one();
  }
  run_chunk(0, chunks, 0);
  run_chunks(job, 0);
  int finished = 0;
  spin_until([&] {
    finished = done_.load(std::memory_order_acquire);
    return finished == chunks;
  });
  while (finished != chunks) {
    done_.wait(finished, std::memory_order_acquire);
    finished = done_.load(std::memory_order_acquire);
  }
}

}  // namespace hg
