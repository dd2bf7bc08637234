// The pool runs every index exactly once, in chunks aligned to the grain, across many
// back-to-back jobs (the decode loop's pattern); built under TSan by `make test-tsan`.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "util/thread_pool.h"

namespace hg {
namespace {

TEST(ThreadPool, EveryIndexOnceAcrossManyJobs) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  for (int job = 0; job < 2000; ++job) {
    const int64_t n = 1 + job % 997;
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    });
  }
  int64_t total = 0;
  for (auto& h : hits) total += h.load();
  int64_t expected = 0;
  for (int job = 0; job < 2000; ++job) expected += 1 + job % 997;
  EXPECT_EQ(total, expected);
}

TEST(ThreadPool, ChunksAreGrainAligned) {
  ThreadPool pool(2);
  std::atomic<int> misaligned{0};
  pool.parallel_for(1000, [&](int64_t b, int64_t e, int) {
    if (b % 16 != 0 || (e % 16 != 0 && e != 1000)) misaligned++;
  }, 16);
  EXPECT_EQ(misaligned.load(), 0);
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.parallel_for(10, [&](int64_t b, int64_t e, int t) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    EXPECT_EQ(t, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, IdleWorkersSleepAndWake) {
  ThreadPool pool(2);
  std::atomic<int> sum{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e, int) { sum += static_cast<int>(e - b); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers fall asleep
  pool.parallel_for(100, [&](int64_t b, int64_t e, int) { sum += static_cast<int>(e - b); });
  EXPECT_EQ(sum.load(), 200);
}

}  // namespace
}  // namespace hg
