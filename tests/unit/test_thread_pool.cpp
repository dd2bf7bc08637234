// The pool runs every index exactly once, in chunks aligned to the grain, across many
// back-to-back jobs (the decode loop's pattern); built under TSan by `make test-tsan`.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "hybridgen/error.h"
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
  pool.parallel_for(
      1000,
      [&](int64_t b, int64_t e, int) {
        if (b % 16 != 0 || (e % 16 != 0 && e != 1000)) misaligned++;
      },
      16);
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

TEST(ThreadPool, ReservedCoresParkTheHighestWorkers) {
  ThreadPool pool(4);
  auto max_index = [&] {
    std::atomic<int> top{-1};
    for (int job = 0; job < 50; ++job)
      pool.parallel_for(400, [&](int64_t, int64_t, int t) {
        for (int seen = top.load(); t > seen && !top.compare_exchange_weak(seen, t);) {
        }
      });
    return top.load();
  };
  EXPECT_EQ(pool.width(), 4);
  EXPECT_EQ(max_index(), 3);
  pool.reserve(2);
  EXPECT_EQ(pool.width(), 2);
  EXPECT_EQ(max_index(), 1);
  pool.reserve(5);  // more than it has: the caller still runs the work
  EXPECT_EQ(pool.width(), 1);
  EXPECT_EQ(max_index(), 0);
  pool.release(7);
  EXPECT_EQ(pool.width(), 4);
  std::atomic<int64_t> sum{0};  // every index once after parking and waking again
  pool.parallel_for(1000, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
  EXPECT_EQ(max_index(), 3);
}

TEST(ThreadPool, FewerUnitsThanThreadsWakeOnlyWhatTheyNeed) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(2, [&](int64_t b, int64_t e, int t) {
    EXPECT_EQ(e - b, 1);
    EXPECT_LT(t, 2);
    ++calls;
  });
  EXPECT_EQ(calls.load(), 2);
}

TEST(ThreadPool, CallerRunsTheChunksOfWorkersNotStartedYet) {
  // Workers asleep (past their spin) wake through a futex, later than the caller finishes a
  // trivial chunk 0: the caller then runs their chunks, each once, with the chunk's index.
  ThreadPool pool(3);
  const auto caller = std::this_thread::get_id();
  int by_caller = 0;
  for (int job = 0; job < 20; ++job) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::vector<std::atomic<int>> hits(3);
    std::atomic<int> stolen{0};
    pool.parallel_for(3, [&](int64_t b, int64_t e, int t) {
      ASSERT_EQ(e - b, 1);
      ASSERT_EQ(b, t);  // thread_index is the chunk's, whoever runs it
      hits[static_cast<size_t>(b)].fetch_add(1);
      if (t != 0 && std::this_thread::get_id() == caller) stolen.fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    by_caller += stolen.load();
  }
  EXPECT_GT(by_caller, 0);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // sanitizers reserve terabytes of address space
// When the system refuses a thread, the pool throws hg::Error after joining the threads it
// started; it used to end in std::terminate (exit 134: `hybridgen -t 99999`). The child process
// caps its address space so that thread stacks soon cannot be mapped.
TEST(ThreadPool, RefusedThreadIsAnErrorNotAnAbort) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (64u << 20);
    const rlimit limit{cap, cap};
    if (pages == 0 || setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
    try {
      ThreadPool pool(4096);  // 8 MiB stacks: a few fit under the cap, not 4096
      _exit(2);
    } catch (const Error& e) {
      _exit(std::string(e.what()).find("cannot start thread") != std::string::npos ? 0 : 4);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}
#endif

}  // namespace
}  // namespace hg
