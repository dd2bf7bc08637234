#include "attention/host_stage.h"

#include <pthread.h>

#include <chrono>
#include <string>

#include "hybridgen/error.h"
#include "sched/cores.h"
#include "util/signals.h"

namespace hg {

HostStage::HostStage(int n_threads, int n_slots, std::vector<int> pin_cpus, ThreadPool* shared_cores)
    : pin_cpus_(std::move(pin_cpus)),
      n_threads_(std::max(1, n_threads)),
      shared_cores_(shared_cores),
      inline_(shared_cores && shares_every_core(shared_cores->size(), n_threads_)),
      ring_(static_cast<size_t>(n_slots)),
      slots_(static_cast<size_t>(n_slots)) {
  if (inline_) return;
  pool_ = std::make_unique<ThreadPool>(n_threads_, pin_cpus_);
  coordinator_ = std::thread([this] {
    block_interrupt_signal();
    loop();
  });
}

HostStage::~HostStage() {
  if (inline_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  coordinator_.join();
}

void HostStage::loop() {
  if (!pin_cpus_.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin_cpus_[0], &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  ThreadPool& pool = *pool_;  // parallel_for is only ever called from this thread
  for (;;) {
    int slot;
    Slot* job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || count_ > 0; });
      if (stop_ && count_ == 0) return;
      slot = ring_[head_];
      head_ = (head_ + 1) % ring_.size();
      --count_;
      job = &slots_[static_cast<size_t>(slot)];
    }
    // The slot's storage is not written again before wait(slot) has seen `done`.
    run_job(*job, pool);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job->done = true;
      if (lent_ && count_ == 0) {
        // Idle: every core serves the device again, before the waiter sees `done`.
        shared_cores_->release(n_threads_);
        lent_ = false;
      }
    }
    done_cv_.notify_all();
  }
}

void HostStage::run_job(Slot& job, ThreadPool& pool) {
  const auto t0 = std::chrono::steady_clock::now();
  std::exception_ptr error;
  try {
    job.invoke(job.storage, pool);
  } catch (...) {
    error = std::current_exception();
  }
  job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  job.error = error;
}

void HostStage::submit_raw(int slot, Invoke invoke, const void* job, size_t bytes) {
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size())
    throw Error("host stage: slot " + std::to_string(slot) + " is outside [0, " + std::to_string(slots_.size()) + ")");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.queued) throw Error("host stage: slot " + std::to_string(slot) + " already has a job");
    std::memcpy(s.storage, job, bytes);
    s.invoke = invoke;
    s.queued = true;
    s.done = false;
    s.seconds = 0;
    s.error = nullptr;
    ring_[(head_ + count_) % ring_.size()] = slot;
    ++count_;
    if (inline_) return;  // wait() runs it
    if (shared_cores_ && !lent_) {
      // Reserved by the submitter, so that the device's next op already leaves the host's cores.
      shared_cores_->reserve(n_threads_);
      lent_ = true;
    }
  }
  work_cv_.notify_one();
}

bool HostStage::pending(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_[static_cast<size_t>(slot)].queued;
}

double HostStage::wait(int slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!s.queued) throw Error("host stage: nothing submitted for slot " + std::to_string(slot));
  while (inline_ && !s.done) {  // the jobs queued before slot's first, as the coordinator would
    Slot& job = slots_[static_cast<size_t>(ring_[head_])];
    head_ = (head_ + 1) % ring_.size();
    --count_;
    lock.unlock();
    run_job(job, *shared_cores_);
    lock.lock();
    job.done = true;
  }
  done_cv_.wait(lock, [&] { return s.done; });
  s.queued = false;
  if (s.error) std::rethrow_exception(s.error);
  return s.seconds;
}

}  // namespace hg
