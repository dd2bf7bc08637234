#include "attention/host_stage.h"

#include <pthread.h>

#include <chrono>

#include "hybridgen/error.h"

namespace hg {

HostStage::HostStage(int n_threads, int n_slots, std::vector<int> pin_cpus)
    : pin_cpus_(std::move(pin_cpus)), n_threads_(std::max(1, n_threads)), slots_(static_cast<size_t>(n_slots)) {
  pool_ = std::make_unique<ThreadPool>(n_threads_, pin_cpus_);
  coordinator_ = std::thread([this] { loop(); });
}

HostStage::~HostStage() {
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
    std::pair<int, Job> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_ && queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr error;
    try {
      item.second(pool);
    } catch (...) {
      error = std::current_exception();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Slot& s = slots_[static_cast<size_t>(item.first)];
      s.done = true;
      s.seconds = seconds;
      s.error = error;
    }
    done_cv_.notify_all();
  }
}

void HostStage::submit(int slot, Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.queued) throw Error("host stage: slot " + std::to_string(slot) + " already has a job");
    s = Slot{};
    s.queued = true;
    queue_.emplace_back(slot, std::move(job));
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
  done_cv_.wait(lock, [&] { return s.done; });
  s.queued = false;
  if (s.error) std::rethrow_exception(s.error);
  return s.seconds;
}

double HostStage::run(int slot, Job job) {
  submit(slot, std::move(job));
  return wait(slot);
}

}  // namespace hg
